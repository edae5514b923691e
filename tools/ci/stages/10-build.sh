#!/usr/bin/env bash
# Build the main tree (debug info is required by the ABI check), then start
# compiling the sanitizer build dirs of stages 60 and 70 in the background at
# the lowest CPU priority (nice 19): stage 20 runs its kernel tests one at a
# time, mostly single-threaded or waiting on fork and the kernel, so the
# compile takes the idle core and yields to the tests. Stages 60 and 70 wait
# for it (tools/ci/lib.sh ci_build), then run their own `meson compile`,
# which prints any error; the background log is
# build/ci-sanitizer-build.log. HP_CI_BACKGROUND_BUILD=0 builds them in
# their own stages instead.
#
# ./build is the one README command 1 (tools/quickstart.sh) configured, if
# it ran: the same options (tools/ci/lib.sh ci_setup_main: the advertised
# features enabled), reconfigured, or set up from scratch when Debian
# packages of tools/deps/build.txt changed since, so it is never stale.
set -eu
. tools/ci/lib.sh
ci_setup_main
[ "${HP_CI_BACKGROUND_BUILD:-1}" = 1 ] || exit 0
# The lock is taken here, before the job starts, so a stage can never look
# before the job holds it; the job inherits it and drops it when it ends.
exec 9> "$ci_background_lock"
flock 9
# shellcheck disable=SC2016  # expanded by the inner shell
nice -n 19 bash -c '. tools/ci/lib.sh
  ci_configure build-asan $ci_asan_options; ci_configure build-tsan $ci_tsan_options' \
  > build/ci-sanitizer-build.log 2>&1 < /dev/null &
echo "10-build: compiling build-asan and build-tsan in the background (build/ci-sanitizer-build.log)"
