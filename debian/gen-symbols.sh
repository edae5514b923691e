#!/bin/sh
# Prints debian/libhp1.symbols from abi/libhp.map, the version script that
# decides what libhp.so.1 exports: each symbol of node HP_X.Y with the
# version X.Y.0 (the release that added the node), and each node's own
# version symbol. dpkg-gensymbols then fails the package build on any
# difference with the library (DPKG_GENSYMBOLS_CHECK_LEVEL=4 in
# debian/rules); the meson test `debian` (tests/pkg/check-debian.sh) fails when this
# file is not regenerated after abi/libhp.map changed:
#   debian/gen-symbols.sh > debian/libhp1.symbols
# usage: gen-symbols.sh [MAP]   (default: abi/libhp.map next to debian/)
set -eu
map=${1:-$(dirname "$0")/../abi/libhp.map}
echo "libhp.so.1 libhp1 #MINVER#"
echo "* Build-Depends-Package: libhp-dev"
# Strip comments, then walk the nodes: "HP_1.1 {" opens one, "name;" inside
# "global:" is a symbol, "}" closes it.
sed -e 's,/\*.*\*/,,g' -e '/\/\*/,/\*\//d' "$map" | awk '
  /^[ \t]*HP_[0-9]+\.[0-9]+[ \t]*\{/ { node = $1; sub(/\{.*/, "", node); global = 0
    ver = substr(node, 4) ".0"; print " " node "@" node " " ver; next }
  /global:/ { global = 1; next }
  /local:/ { global = 0; next }
  /^[ \t]*\}/ { node = ""; next }
  node != "" && global && /^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ {
    name = $1; sub(/;.*/, "", name); print " " name "@" node " " ver }
' | LC_ALL=C sort -t@ -k1,1 -k2,2
