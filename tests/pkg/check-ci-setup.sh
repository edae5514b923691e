#!/usr/bin/env bash
# tools/ci/lib.sh ci_setup, which both README commands configure build/ with,
# never leaves a stale build dir: meson keeps the result of a compile check
# (a header not found) across `meson setup --reconfigure`, so when the
# Debian packages of tools/deps/build.txt change, ci_setup sets the dir up
# again from scratch, keeping the options of earlier command lines (such as
# --prefix); and an `enabled` feature whose dependency is missing fails.
# Run on a small meson project of its own (a header that appears, as a
# package's does when it is installed), with tools/deps/install.sh replaced
# by one that reports the "installed versions" this test sets.
# usage: check-ci-setup.sh SOURCE_DIR WORK_DIR
set -u
src=$1
work=$(mktemp -d "$2/ci-setup.XXXXXX")
trap 'rm -rf "$work"' EXIT
n=0 fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; sed 's/^/# /' "$work/out"; }
echo "1..5"

mkdir -p "$work/tools/ci" "$work/tools/deps" "$work/inc"
cp "$src/tools/ci/lib.sh" "$work/tools/ci/"
cat > "$work/tools/deps/install.sh" <<'EOF'
#!/bin/sh
[ "$1" = --versions ] && cat "$(dirname "$0")/versions"
EOF
chmod +x "$work/tools/deps/install.sh"
cat > "$work/meson.build" <<'EOF'
project('stale', 'c')
found = meson.get_compiler('c').has_header('hp-stale-dep.h',
  args: '-I' + meson.current_source_dir() / 'inc')
if get_option('dep').enabled() and not found
  error('dep: hp-stale-dep.h not found')
endif
message('HAS_DEP=' + found.to_string())
EOF
echo "option('dep', type: 'feature', value: 'auto')" > "$work/meson_options.txt"
cd "$work" || exit 1
setup() {   # setup OPTIONS: ci_setup b OPTIONS, its output in $work/out
  bash -c '. tools/ci/lib.sh && ci_setup b "$@"' ci_setup "$@" > "$work/out" 2>&1
}
has_dep() { grep -q "HAS_DEP=$1" "$work/out"; }

echo "libfoo-dev 1.0" > tools/deps/versions
if setup --prefix="$work/p" && has_dep false; then
  ok "first setup: the dependency is not there"
else
  bad "first setup"
fi
touch inc/hp-stale-dep.h
if setup && has_dep false; then
  ok "not blind: the header appeared, the packages did not change, meson's reconfigure still says no"
else
  bad "not blind: a reconfigure with the same packages"
fi
echo "libfoo-dev 1.1" > tools/deps/versions
if setup && has_dep true && grep -q 'changed since it was configured' "$work/out"; then
  ok "the packages changed: set up again from scratch, the dependency is found"
else
  bad "the packages changed: set up again from scratch"
fi
if [ "$(meson introspect b --buildoptions | python3 -c '
import json, sys
print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')" = "$work/p" ]; then
  ok "the --prefix of the first setup is kept"
else
  bad "the --prefix of the first setup is kept"
fi
rm inc/hp-stale-dep.h
echo "libfoo-dev removed" > tools/deps/versions
if ! setup -Ddep=enabled && grep -q 'hp-stale-dep.h not found' "$work/out"; then
  ok "an enabled feature whose dependency is gone: ci_setup fails and names it"
else
  bad "an enabled feature whose dependency is gone"
fi
exit $fail
