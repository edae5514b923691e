#!/bin/sh
# debian/ against the tree: the symbols file of libhp1 is what
# debian/gen-symbols.sh makes of abi/libhp.map and lists exactly what the
# built library exports (name and version node), and debian/changelog's
# version is the project's. dpkg-buildpackage checks the symbols file
# against the library too (tools/ci/stages/90-deb.sh); this test says it in
# the plain suite, without building packages.
# usage: check-debian.sh SOURCE_DIR LIBRARY PROJECT_VERSION
set -u
src=$1 lib=$2 version=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "1..7"
fail=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); echo "not ok $n - $1"; fail=1; sed 's/^/# /' "$tmp/out"; }

if sh "$src/debian/gen-symbols.sh" "$src/abi/libhp.map" > "$tmp/gen" 2> "$tmp/out" &&
   diff -u "$src/debian/libhp1.symbols" "$tmp/gen" > "$tmp/out"; then
  ok "debian/libhp1.symbols is debian/gen-symbols.sh's output for abi/libhp.map"
else
  bad "debian/libhp1.symbols is stale: debian/gen-symbols.sh > debian/libhp1.symbols"
fi

# name@NODE of every exported symbol and version node, as dpkg-gensymbols
# writes them (it strips the default-version '@@').
nm -D --defined-only "$lib" | awk '{ s = $3; sub(/@@/, "@", s); if (s ~ /^HP_[0-9.]+$/) s = s "@" s; print s }' |
  LC_ALL=C sort > "$tmp/exported"
sed -n 's/^ \([^ ]*\) .*/\1/p' "$src/debian/libhp1.symbols" | LC_ALL=C sort > "$tmp/listed"
if diff -u "$tmp/listed" "$tmp/exported" > "$tmp/out"; then
  ok "debian/libhp1.symbols lists exactly what $(basename "$lib") exports ($(wc -l < "$tmp/exported"))"
else
  bad "debian/libhp1.symbols and $(basename "$lib") differ (- listed, + exported)"
fi

# Not blind: a map with a symbol removed gives another file.
grep -v '^ *hp_free;' "$src/abi/libhp.map" > "$tmp/map"
sh "$src/debian/gen-symbols.sh" "$tmp/map" > "$tmp/gen2" 2> "$tmp/out"
if ! grep -q '^ hp_free@' "$tmp/gen2" && grep -q '^ hp_alloc@HP_1.0 1.0.0$' "$tmp/gen2"; then
  ok "gen-symbols.sh follows the map (hp_free removed from a copy: gone from its output)"
else
  bad "gen-symbols.sh does not follow the map"
fi

changelog=$(sed -n '1s/^libhp (\([^)]*\)).*/\1/p' "$src/debian/changelog")
echo "debian/changelog: '$changelog', meson.build: '$version'" > "$tmp/out"
if [ "$changelog" = "$version" ]; then
  ok "debian/changelog's version is the project's ($version)"
else
  bad "debian/changelog's version is not the project's"
fi
# One list: every build dependency of the packages is in tools/deps (what
# README command 2 installs), by its own name or by the package that
# provides it (debhelper-compat, dh-sequence-*).
provider() {
  case $1 in
    debhelper-compat) echo debhelper ;;
    dh-sequence-python3) echo dh-python ;;
    dh-sequence-numpy3) echo python3-numpy ;;
    *) echo "$1" ;;
  esac
}
"$src/tools/deps/install.sh" --list test > "$tmp/listed" 2> "$tmp/out"
sed -n '/^Build-Depends:/,/^[^ ]/p' "$src/debian/control" | sed -e 's/^Build-Depends://' -e '/^[A-Z]/d' |
  tr ',' '\n' | sed -e 's/([^)]*)//g' -e 's/\[[^]]*\]//g' | tr -d ' \t' | sed '/^$/d' > "$tmp/bdeps"
missing=$(while read -r d; do
  grep -qx "$(provider "$d")" "$tmp/listed" || echo "$d (package $(provider "$d"))"
done < "$tmp/bdeps")
echo "not in tools/deps/build.txt or test.txt: $missing" >> "$tmp/out"
if [ -s "$tmp/bdeps" ] && [ -z "$missing" ]; then
  ok "every Build-Depends of debian/control is in tools/deps ($(wc -l < "$tmp/bdeps"))"
else
  bad "debian/control has Build-Depends that tools/deps does not install"
fi
# What the package build does with the symbols file (debian/rules:
# DPKG_GENSYMBOLS_CHECK_LEVEL=4), run here on the built library, attacked:
# a symbols file listing a symbol the library lacks (as after a removal)
# and one missing an exported symbol (an addition without a new node) both
# make dpkg-gensymbols fail; the real file passes.
gensymbols() {   # gensymbols SYMBOLS_FILE: dpkg-gensymbols as dh_makeshlibs runs it
  (cd "$tmp/pkg" && DPKG_GENSYMBOLS_CHECK_LEVEL=4 dpkg-gensymbols -plibhp1 -v"$version" \
     -e"$lib" -I"$1" -O"$tmp/pkg/out.symbols") > "$tmp/out" 2>&1
}
if command -v dpkg-gensymbols > /dev/null 2>&1; then
  mkdir -p "$tmp/pkg/debian" && cp "$src/debian/control" "$src/debian/changelog" "$tmp/pkg/debian/"
  if gensymbols "$src/debian/libhp1.symbols"; then
    ok "dpkg-gensymbols (check level 4) accepts debian/libhp1.symbols for $(basename "$lib")"
  else
    bad "dpkg-gensymbols rejects debian/libhp1.symbols"
  fi
  sed 's/^ hp_free@HP_1.0 1.0.0$/&\n hp_removed_for_the_test@HP_1.0 1.0.0/' "$src/debian/libhp1.symbols" > "$tmp/removed"
  grep -v '^ hp_version_string@' "$src/debian/libhp1.symbols" > "$tmp/added"
  if ! gensymbols "$tmp/removed" && grep -q 'MISSING.*hp_removed_for_the_test' "$tmp/out" &&
     ! gensymbols "$tmp/added" && grep -q '^+ hp_version_string@HP_1.0' "$tmp/out"; then
    ok "not blind: dpkg-gensymbols fails on a symbol removed from the library and on one added"
  else
    bad "dpkg-gensymbols let a removed or an added symbol pass"
  fi
else
  for what in "dpkg-gensymbols accepts debian/libhp1.symbols" "dpkg-gensymbols fails on a removed symbol"; do
    n=$((n + 1)); echo "ok $n - $what # SKIP dpkg-gensymbols missing (Debian package dpkg-dev)"
  done
fi
exit $fail
