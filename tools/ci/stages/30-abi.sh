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
# abi/suppressions.ini leaves out opaque types only (their layout is not
# ABI): each one it names must be declared without a body in include/hp.
supp="--suppressions abi/suppressions.ini"
check "suppressed types are opaque in the public headers" sh -c '
  for t in $(sed -n "s/^ *name = //p" abi/suppressions.ini); do
    grep -rqE "^struct $t;" include/hp || { echo "$t: no opaque declaration"; exit 1; }
    ! grep -rqE "^struct $t \{" include/hp || { echo "$t: defined in include/hp"; exit 1; }
  done'
check "no incompatible change vs abi/libhp.abi (abidiff --no-added-syms)" \
  abidiff --no-added-syms $supp abi/libhp.abi "$lib"
# Additions must come with a refreshed baseline in the same commit.
check "no export missing from the baseline (abidiff)" abidiff $supp abi/libhp.abi "$lib"
check "HP_1.0 is frozen: its symbols equal abi/symbols-HP_1.0.txt" sh -c "
  nm -D --defined-only $lib | awk '{print \$3}' | sed -n 's/@@HP_1\.0\$//p' | sort | diff -u abi/symbols-HP_1.0.txt -"
# The plugin ABI (include/hp/backend.h), through a minimal plugin that uses
# every type of it (tests/abi/backend_anchor.c): any change to a struct, an
# op's signature or the entry symbol needs a refreshed abi/backend.abi (and
# abi/backend-layout.txt, checked by the meson test abi-backend-layout).
anchor=build/tests/abi/backend-abi-anchor.so
check "plugin ABI baseline has the descriptor's type" grep -q "<class-decl name='hp_backend_ops'" abi/backend.abi
check "plugin ABI: no change vs abi/backend.abi (abidiff)" abidiff abi/backend.abi "$anchor"
# ... and the gate is not blind: the anchor built against a copy of the
# header with a member inserted into struct hp_mapping must differ.
mut=$(mktemp -d /tmp/hp-abi-mut.XXXXXX)
cp -r include "$mut/include"
sed -i 's/^\(struct hp_mapping {\)$/\1\n    uint64_t inserted_by_the_abi_check;/' "$mut/include/hp/backend.h"
check "plugin ABI: abidiff catches a member inserted into struct hp_mapping" sh -c "
  grep -q inserted_by_the_abi_check '$mut/include/hp/backend.h' &&
  cc -g -shared -fPIC -I'$mut/include' tests/abi/backend_anchor.c -o '$mut/anchor.so' &&
  ! abidiff abi/backend.abi '$mut/anchor.so' > /dev/null"
rm -rf "$mut"
echo "$pass $fail" >> "$HP_RESULTS"
[ "$fail" -eq 0 ]
