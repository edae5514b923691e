#!/usr/bin/env bash
# The Python bindings (bindings/python): pytest under Debian's /usr/bin/python3
# (apt python3-cffi, python3-pytest, python3-numpy) against the library and
# plugins in ./build, with build/bindings/python (the _hp_numpy extension
# meson builds) on PYTHONPATH. HP_TEST_STRICT=1 makes a missing numpy, C compiler or
# venv a failure instead of a skip; HP_TEST_PIP_INSTALL=1 adds the offline
# `pip install` check in a throwaway venv.
# Appends one line "PASSED FAILED" to $HP_RESULTS (from pytest's JUnit XML);
# exits non-zero on failure.
set -u
results=${HP_RESULTS:-/dev/null}
root=$PWD
python=/usr/bin/python3

if [ ! -e build/lib/libhp.so.1 ]; then
  echo "40-python: build/lib/libhp.so.1 missing; the build stage must run first" >&2
  echo "0 1" >> "$results"
  exit 1
fi
junit=$(mktemp /tmp/hp-pytest.XXXXXX.xml)
trap 'rm -f "$junit"' EXIT

HP_LIBRARY=$root/build/lib/libhp.so.1 \
HP_BACKEND_DIR=$root/build/backends \
PYTHONPATH=$root/bindings/python:$root/build/bindings/python \
HP_TEST_STRICT=1 HP_TEST_PIP_INSTALL=1 PYTHONDONTWRITEBYTECODE=1 \
  "$python" -m pytest -q -p no:cacheprovider --junitxml="$junit" bindings/python/tests
rc=$?

# pytest exits 5 when it collected nothing: that is a failure here too.
read -r passed failed < <("$python" - "$junit" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print(0, 1)
    sys.exit()
suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
tests = failed = skipped = 0
for s in suites:
    tests += int(s.get("tests", 0))
    failed += int(s.get("failures", 0)) + int(s.get("errors", 0))
    skipped += int(s.get("skipped", 0))
print(tests - failed - skipped, failed if tests else max(failed, 1))
import os
names = ["40-python: %s::%s" % (c.get("classname", "?"), c.get("name", "?"))
         for c in root.iter("testcase")
         if c.find("failure") is not None or c.find("error") is not None]
if names and os.environ.get("HP_FAILS"):
    with open(os.environ["HP_FAILS"], "a") as out:
        out.write("".join(n + "\n" for n in names))
PY
)
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "40-python: pytest exited $rc without a failed test (collection error or no tests?)" >&2
  failed=1
fi
echo "40-python: $passed passed, $failed failed"
echo "$passed $failed" >> "$results"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
