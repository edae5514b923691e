# shellcheck shell=bash disable=SC2034  # sourced: the variables are used by the stages
# Shared by README command 1 (tools/quickstart.sh) and the stages of
# command 2 that build: 10-build.sh (./build, and the background build),
# 60-asan.sh, 70-tsan.sh, 80-valgrind.sh. Sourced from the repository root,
# not run.
#
# Every stage appends "PASSED FAILED [SKIPPED]" lines to $HP_RESULTS; a
# build dir that cannot be configured or compiled counts as one failure.

results=${HP_RESULTS:-/dev/null}

# meson options of the sanitizer build dirs (debug info as in ./build).
ci_asan_options="--buildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false"
ci_tsan_options="--buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false -Dbench=false"

# The background build of the sanitizer dirs holds this lock while it runs.
ci_background_lock=build/ci-sanitizer-build.lock

# The options of ./build, the one build both README commands use: every
# feature README.md advertises is `enabled`, not `auto`, so a missing
# dependency stops `meson setup` with its name instead of leaving the
# feature out of the install (tools/deps/build.txt lists the packages).
ci_main_options="--buildtype=debugoptimized -Dtests=enabled -Dmalloc=enabled -Dman=enabled -Dpython=enabled -Dpython_numpy=enabled"

# ci_setup DIR OPTIONS: configure DIR so that it matches the Debian packages
# installed now. meson keeps the results of its compile checks (a header or
# library not found, e.g. mimalloc.h) in the build dir, even across
# `meson setup --reconfigure`; so when the installed versions of
# tools/deps/build.txt differ from those DIR was configured with (recorded
# in DIR/hp-deps.stamp), DIR is set up again from scratch (--wipe: the
# options given on earlier command lines are kept, a full rebuild follows).
# Otherwise an existing DIR is reconfigured with OPTIONS (cheap), and a
# failed reconfigure is retried once from scratch. Fails when meson does.
ci_setup() {
  local dir=$1; shift
  local stamp
  stamp=$(tools/deps/install.sh --versions build)
  if [ ! -e "$dir/meson-private/coredata.dat" ]; then
    meson setup "$dir" "$@" || return 1
  elif [ "$stamp" != "$(cat "$dir/hp-deps.stamp" 2> /dev/null)" ]; then
    echo "$dir: the Debian packages of tools/deps/build.txt changed since it was configured: meson setup --wipe"
    meson setup --wipe "$dir" "$@" || return 1
  elif ! meson setup --reconfigure "$dir" "$@"; then
    echo "$dir: meson setup --reconfigure failed; setting it up from scratch (--wipe)"
    meson setup --wipe "$dir" "$@" || return 1
  fi
  printf '%s\n' "$stamp" > "$dir/hp-deps.stamp"
}

# ci_setup_main: ./build with $ci_main_options, configured (ci_setup) and
# compiled; what `tools/quickstart.sh` installs and stage 20 tests. Keeps
# options given to an earlier `meson setup build` (such as --prefix).
ci_setup_main() {
  # shellcheck disable=SC2086
  ci_setup build $ci_main_options || return 1
  meson compile -C build
}

# ci_configure DIR OPTIONS: set DIR up (once; again from scratch when the
# build packages changed: ci_setup) and compile it.
ci_configure() {
  local dir=$1; shift
  if [ ! -e "$dir/build.ninja" ] ||
     [ "$(tools/deps/install.sh --versions build)" != "$(cat "$dir/hp-deps.stamp" 2> /dev/null)" ]; then
    ci_setup "$dir" "$@" || return 1
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
