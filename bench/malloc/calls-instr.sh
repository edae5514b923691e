#!/usr/bin/env bash
# bench/malloc/calls-instr.sh [BUILD_DIR]
#
# Instructions per operation of each bench_calls loop, counted by
# valgrind --tool=callgrind (deterministic, unlike time on a shared VM):
# each loop alone at N=20,000 and N=120,000 operations, one repetition,
# (Ir(120k) - Ir(20k)) / 100,000. Under libhp-malloc (default), glibc,
# jemalloc, tcmalloc and mimalloc; no root, no pool (the counts do not
# depend on the pages). Prints a Markdown table.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd) || exit 1
ninja -C "$build" bindings/malloc/libhp-malloc.so bench/malloc/bench_calls >/dev/null || exit 1
lib=/usr/lib/x86_64-linux-gnu
prog=$build/bench/malloc/bench_calls
names="malloc+free malloc+free-churn calloc+free realloc memalign+free posix_memalign+free aligned_alloc+free malloc_usable_size new+delete new+sized-delete"
configs=("libhp-malloc|$build/bindings/malloc/libhp-malloc.so" "glibc|" "jemalloc|$lib/libjemalloc.so.2"
         "tcmalloc|$lib/libtcmalloc_minimal.so.4" "mimalloc|$lib/libmimalloc.so.2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() {  # PRELOAD N NAME -> total instructions
  LD_PRELOAD=$1 HP_BACKEND_DIR=$build/backends valgrind --tool=callgrind \
    --callgrind-out-file="$tmp/out" "$prog" "$2" 1 "$3" 2>&1 >/dev/null |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
  rm -f "$tmp/out"
}
printf '| instructions per operation |'
for c in "${configs[@]}"; do printf ' %s |' "${c%%|*}"; done
printf '\n| --- |'
for c in "${configs[@]}"; do printf ' --- |'; done
printf '\n'
for n in $names; do
  printf '| %s |' "$n"
  for c in "${configs[@]}"; do
    pre=${c#*|}
    a=$(ir "$pre" 20000 "$n"); b=$(ir "$pre" 120000 "$n")
    awk -v a="$a" -v b="$b" 'BEGIN { printf " %.1f |", (b - a) / 100000 }'
  done
  printf '\n'
done
