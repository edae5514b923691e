#!/usr/bin/env bash
# Type check of the Python binding with Debian's mypy (apt mypy), against
# Debian's /usr/bin/python3 and its numpy:
#   1. bindings/python/hp with the configuration in bindings/python/pyproject.toml
#      (every function annotated, bodies checked);
#   2. a user's script, bindings/python/tests/typing/user_script.py, under
#      `mypy --strict` (which also checks the hp modules it imports, as strictly):
#      correct code using b[0], b[:5], hp.zeros, hp.info(stack), partial
#      configuration and the numpy handler's pool switch must pass.
# Appends "PASSED FAILED" (out of 2) to $HP_RESULTS.
set -u
results=${HP_RESULTS:-/dev/null}
cd bindings/python
passed=0 failed=0
check() {   # check NAME CMD...
  local name=$1; shift
  if "$@"; then
    echo "45-mypy: $name ok"; passed=$((passed + 1))
  else
    echo "45-mypy: $name FAILED" >&2; failed=$((failed + 1))
  fi
}
check "package" mypy --python-executable /usr/bin/python3 --no-incremental --cache-dir /dev/null
check "user script (--strict)" mypy --strict --python-executable /usr/bin/python3 \
  --no-incremental --cache-dir /dev/null tests/typing/user_script.py
echo "45-mypy: $passed passed, $failed failed"
echo "$passed $failed" >> "$results"
[ "$failed" -eq 0 ]
