# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by the stages
# Shared by the stages that build and run the C suite in a second
# configuration (tools/ci/stages/60-asan.sh, 70-tsan.sh, 80-valgrind.sh) and
# by the background build that 10-build.sh starts. Sourced, not run.
#
# Every stage appends "PASSED FAILED [SKIPPED]" lines to $HP_RESULTS; a
# build dir that cannot be configured or compiled counts as one failure.

results=${HP_RESULTS:-/dev/null}

# meson options of the sanitizer build dirs (debug info as in ./build).
ci_asan_options="--buildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false"
ci_tsan_options="--buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false -Dbench=false"

# The background build of the sanitizer dirs holds this lock while it runs.
ci_background_lock=build/ci-sanitizer-build.lock

# ci_configure DIR OPTIONS: set DIR up (once) and compile it.
ci_configure() {
  local dir=$1; shift
  if [ ! -e "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" || return 1
  fi
  meson compile -C "$dir"
}

# ci_build DIR OPTIONS: wait for the background build (if one runs), then
# make sure DIR is configured and up to date; on failure count one failed
# check and end the stage.
ci_build() {
  if [ -e "$ci_background_lock" ]; then
    echo "waiting for the background build of the sanitizer dirs ($(dirname "$ci_background_lock")/ci-sanitizer-build.log)"
    flock "$ci_background_lock" true
  fi
  ci_configure "$@" || { echo "0 1" >> "$results"; exit 1; }
}

# ci_tests DIR CONDITION: the names of DIR's tests for which the Python
# expression CONDITION holds (t is meson's test record: t["name"],
# t["suite"] such as "libhp:stress", ...), on one line.
ci_tests() {
  meson introspect "$1" --tests | python3 -c '
import json, sys
cond = sys.argv[1]
print(" ".join(t["name"] for t in json.load(sys.stdin) if eval(cond, {"t": t})))' "$2"
}

# ci_count TESTLOG: append the counts of one meson test run.
ci_count() {
  python3 tools/ci/count-meson.py "$1" >> "$results"
}
