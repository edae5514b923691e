#!/bin/sh
# The exported symbol set equals the version script, every symbol is hp_*
# at a HP_ version node, and the SONAME is libhp.so.1.
# usage: check-symbols.sh LIBRARY VERSION_SCRIPT
set -u
lib=$1 map=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "1..4"
fail=0
nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^HP_[0-9.]*$' | sort > "$tmp/exported"
sed -n 's/^ *\(hp_[a-z0-9_]*\);.*/\1/p' "$map" | sort > "$tmp/script"
sed 's/@.*//' "$tmp/exported" | sort > "$tmp/names"
if diff -u "$tmp/script" "$tmp/names" > "$tmp/diff"; then
  echo "ok 1 - exported set equals $(basename "$map") ($(wc -l < "$tmp/names") symbols)"
else
  fail=1; echo "not ok 1 - exported set differs from the version script"; sed 's/^/# /' "$tmp/diff"
fi
if grep -qv '^hp_[a-z0-9_]*@@HP_[0-9]\+\.[0-9]\+$' "$tmp/exported"; then
  fail=1; echo "not ok 2 - symbols outside hp_*@@HP_x.y:"; grep -v '^hp_[a-z0-9_]*@@HP_' "$tmp/exported" | sed 's/^/# /'
else
  echo "ok 2 - every symbol is hp_* at a HP_ node"
fi
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
if [ "$soname" = "libhp.so.1" ]; then echo "ok 3 - SONAME $soname"; else fail=1; echo "not ok 3 - SONAME '$soname'"; fi
if readelf -S "$lib" | grep -q '\.debug_info'; then
  echo "ok 4 - debug info present (abidiff needs it)"
else
  fail=1; echo "not ok 4 - no .debug_info: abidiff would compare symbols only"
fi
exit $fail
