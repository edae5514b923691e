#!/usr/bin/env bash
# The concurrency tests under ThreadSanitizer (gcc), in their own build dir
# (compiled in the background since stage 10): the stress suite (8 threads x
# HPTEST_OPS random operations, fork while threads allocate, 16 simultaneous
# first calls, racing double frees) and the threaded unit tests (api,
# stack-api). A data race or a lock-order inversion fails the test. Appends
# "PASSED FAILED SKIPPED" to $HP_RESULTS (one line per meson run).
set -u
. tools/ci/lib.sh
dir=build-tsan
# shellcheck disable=SC2086
ci_build $dir $ci_tsan_options
# halt_on_error: the first race fails the test with its report. TSan makes
# the stress run ~8x slower: 8 threads x 5,000 operations here (the plain
# stage runs 20,000).
# abort_on_error: end in SIGABRT, which the tests' knob restorers catch.
export TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1
export HPTEST_OPS=5000
tests=$(ci_tests $dir 't["name"] in {"api", "stack-api", "stress", "stress-first-use"}')
rc=0
meson test -C $dir --print-errorlogs --num-processes 1 --timeout-multiplier 3 $tests || rc=1
ci_count $dir/meson-logs/testlog.json
# fork takes every registry, probe and cache lock in its atfork handlers:
# more than the 64 locks per thread TSan's deadlock detector can track
# (it dies with a CHECK in sanitizer_deadlock_detector.h), so this one runs
# with lock-order checking off; data races are still reported. cache-api
# forks too (a child with its own release thread: die_after_fork=0, since a
# child of a threaded parent starting a thread is what it checks), and runs
# hp_info against in-place resizes in another thread.
TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_deadlocks=0:die_after_fork=0 \
  meson test -C $dir --print-errorlogs --timeout-multiplier 3 stress-fork cache-api || rc=1
ci_count $dir/meson-logs/testlog.json
exit $rc
