#!/usr/bin/env bash
# The ABI promise: no incompatible change against abi/libhp.abi, no export
# added without a refreshed baseline, and the released HP_1.0 node frozen.
# (The exported set vs the version script, the layout pins and the libffi
# calls run as meson tests in the 'abi' and 'pkg' suites.)
set -u
lib=build/lib/libhp.so.1
pass=0 fail=0
check() {
  local what=$1; shift
  if "$@" > /tmp/hp-abi.out 2>&1; then pass=$((pass + 1)); echo "ok - $what"
  else fail=$((fail + 1)); echo "not ok - $what"; sed 's/^/#   /' /tmp/hp-abi.out | head -40; fi
}
check "library has debug info (else abidiff compares symbols only)" \
  sh -c "readelf -S $lib | grep -q '\.debug_info'"
check "baseline has type information" grep -q '<class-decl' abi/libhp.abi
# Removed or changed symbols and types: exit 0 required (4 = change, 8 = incompatible).
check "no incompatible change vs abi/libhp.abi (abidiff --no-added-syms)" \
  abidiff --no-added-syms abi/libhp.abi "$lib"
# Additions must come with a refreshed baseline in the same commit.
check "no export missing from the baseline (abidiff)" abidiff abi/libhp.abi "$lib"
check "HP_1.0 is frozen: its symbols equal abi/symbols-HP_1.0.txt" sh -c "
  nm -D --defined-only $lib | awk '{print \$3}' | sed -n 's/@@HP_1\.0\$//p' | sort | diff -u abi/symbols-HP_1.0.txt -"
echo "$pass $fail" >> "$HP_RESULTS"
[ "$fail" -eq 0 ]
