#!/usr/bin/env bash
# Type check of the Python binding: Debian's mypy (apt mypy) over
# bindings/python/hp with the configuration in bindings/python/pyproject.toml
# (every function annotated, bodies checked), against Debian's
# /usr/bin/python3 and its numpy. Appends "1 0" or "0 1" to $HP_RESULTS.
set -u
results=${HP_RESULTS:-/dev/null}
cd bindings/python
if mypy --python-executable /usr/bin/python3 --no-incremental --cache-dir /dev/null; then
  echo "45-mypy: 1 passed, 0 failed"
  echo "1 0" >> "$results"
else
  echo "45-mypy: 0 passed, 1 failed"
  echo "0 1" >> "$results"
  exit 1
fi
