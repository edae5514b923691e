#!/usr/bin/env bash
# bench/backends/run.sh [BUILD_DIR] [bench_backends options]
#
# Root only. Builds bench_backends if needed, then runs:
#   1. THP "very first touch" in fresh processes, 3 x raw and 3 x libhp,
#      alternating (each process's first THP map + touch of 2 GiB);
#   2. the interleaved comparison of every backend with its raw syscall
#      sequence, and random access over 4 GiB (options pass through, e.g.
#      --rounds 8 --ra-rounds 3 --skip-ra).
# The benchmark sets the knobs it needs itself (THP madvise, 64 KiB mTHP
# madvise, the 2 MiB and 1 GiB pools) through tests/support, under the
# machine-wide knob lock, and restores them at exit and on fatal signals.
# This script snapshots every knob first; if the benchmark dies by a signal
# that cannot be caught (SIGKILL), it writes back whatever still differs.
# The report goes to stdout and to BUILD_DIR/bench-backends.md.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd) || exit 1
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (hugetlb pools, THP knobs)" >&2; exit 1; }
exe=$build/bench/backends/bench_backends
ninja -C "$build" bench/backends/bench_backends >/dev/null || exit 1
export HP_BACKEND_DIR=$build/backends

knobs() {
  ls /sys/kernel/mm/hugepages/hugepages-*/nr_hugepages \
     /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag \
     /sys/kernel/mm/transparent_hugepage/hugepages-*/enabled 2>/dev/null
}
value() { sed -e 's/.*\[\(.*\)\].*/\1/' "$1"; }
declare -A saved
for k in $(knobs); do saved[$k]=$(value "$k"); done
restore() {
  for k in "${!saved[@]}"; do
    if [ "$(value "$k")" != "${saved[$k]}" ]; then
      echo "run.sh: restoring $k to ${saved[$k]}" >&2
      echo "${saved[$k]}" > "$k"
    fi
  done
}

out=$build/bench-backends.md
rc=0
{
  echo "# bench/backends on $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '## THP very first touch in a fresh process (2 GiB, map + touch)'
  echo
  for i in 1 2 3; do
    "$exe" --first-touch thp-raw || rc=$?
    "$exe" --first-touch thp-libhp || rc=$?
  done
  echo
  "$exe" "$@" || rc=$?
  exit "$rc"
} | tee "$out"
rc=${PIPESTATUS[0]}
[ "$rc" -ge 128 ] && restore
exit "$rc"
