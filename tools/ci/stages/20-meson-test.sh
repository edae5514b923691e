#!/usr/bin/env bash
# The C suite: cmocka unit tests, kernel-backed tests (not parallel), tools.
set -u
meson test -C build --print-errorlogs --num-processes 2
rc=$?
python3 tools/ci/count-meson.py build/meson-logs/testlog.json >> "$HP_RESULTS"
exit $rc
