#!/usr/bin/env bash
# The C suite under AddressSanitizer + UndefinedBehaviorSanitizer (gcc), in
# its own build dir (compiled in the background since stage 10). A sanitizer
# report fails the test it comes from (UBSan halts on its first error;
# LeakSanitizer checks every exit). Appends "PASSED FAILED SKIPPED" to
# $HP_RESULTS.
#
# What runs here and what the plain stage (20) already proves: every test
# runs, every code path of the fault matrix and of the stress, fork and
# random-resize tests included, but the repetition loops that exist to
# catch rare interleavings run a slice. ASan looks for memory errors on a
# path, which the first pass over it finds; the plain stage keeps the full
# counts (they are what catch races and the SIGBUS-across-fork bug):
#   HPTEST_OPS=1000       stress 8 threads x 1,000 operations (plain 20,000),
#                         stress-fork 10 forks (plain 200), realloc-random
#                         1,000 steps per backend (plain 2,000-3,000)
#   HPTEST_FORKS=60       cache-fork's fork storm: 60 forks (plain 300)
#   HPTEST_FAULT_WAYS=1   faults, faults-numa-local: every call of every
#                         scenario fails once, the error rotating with the
#                         call (plain: each call 4 ways)
# (The trust race runs 200 rounds here, 1,000 in the plain build: the
# RACE_ROUNDS of tests/unit/test_trust.c.)
#
# Left out:
#   install    (suite pkg) installs libhp and runs programs built against
#              it with plain cc: an ASan libhp.so in an uninstrumented
#              program aborts with "ASan runtime does not come first". Not
#              fixable by the test; the plain build runs it.
#   man-pages, headers
#              `man` over the pages and a compile of the public headers:
#              nothing of the ASan build runs in them, they would repeat
#              stage 20 to the byte.
#
# abi-ffi dlcloses libhp and runs with leak detection like the rest:
# unloading frees what libhp allocated (lib/registry.c, lib/cache.c
# destructors).
set -u
. tools/ci/lib.sh
dir=build-asan
# shellcheck disable=SC2086
ci_build $dir $ci_asan_options
# abort_on_error: a report ends in abort(), i.e. SIGABRT, which the tests'
# knob restorers catch (tests/support); a plain sanitizer exit skips atexit
# and would leave a hugetlb pool or an mTHP switch changed.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:abort_on_error=1
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export HPTEST_OPS=1000 HPTEST_FORKS=60 HPTEST_FAULT_WAYS=1
tests=$(ci_tests $dir 't["name"] not in {"install", "man-pages", "headers"}')
rc=0
meson test -C $dir --print-errorlogs --num-processes 2 --timeout-multiplier 2 $tests || rc=1
ci_count $dir/meson-logs/testlog.json
exit $rc
