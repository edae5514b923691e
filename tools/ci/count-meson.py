#!/usr/bin/env python3
"""Print "PASSED FAILED SKIPPED" for a meson testlog.json.

TAP output counts one per subtest ("ok N", "not ok N"; "# SKIP" counts as
neither); other tests count one each. A test that failed outside its
subtests (crash, timeout) adds one failure.

With $HP_FAILS set, also appends one line per failed test to that file:
"LOG: suite/name RESULT Ns [not ok subtests]" (tools/ci/test.sh prints them
last, where a truncated CI log still shows them)."""
import json
import os
import re
import sys

TAP = re.compile(r"^(not ok|ok)\b(.*)$")
passed = failed = skipped = 0
fails = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = f = 0
    subs = []
    for out in (r.get("stdout") or "").splitlines():
        m = TAP.match(out)
        if not m:
            continue
        if "# SKIP" in m.group(2).upper():
            skipped += 1
            continue
        if m.group(1) == "ok":
            p += 1
        else:
            f += 1
            subs.append(m.group(2).strip())
    bad = r["result"] in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS")
    if p == 0 and f == 0:
        p, f = (0, 1) if bad else ((1, 0) if r["result"] == "OK" else (0, 0))
    elif bad and f == 0:
        f = 1
    passed += p
    failed += f
    if f:
        fails.append("%s: %s %s %.0fs %s" % (os.path.basename(sys.argv[1]), r["name"],
                                             r["result"], r["duration"], "; ".join(subs)))
print(passed, failed, skipped)
if fails and os.environ.get("HP_FAILS"):
    with open(os.environ["HP_FAILS"], "a") as out:
        out.write("".join(x.rstrip() + "\n" for x in fails))
