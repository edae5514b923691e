#!/usr/bin/env bash
# bench/malloc/run.sh [BUILD_DIR] [run.py options]
#
# Root only. Builds the benchmark programs if needed; holds the heavy-job
# and knob locks for the whole run and reserves the 2 MiB hugetlb pool
# (used by glibc hugetlb=2, mimalloc large pages and libhp-malloc with
# HP_MALLOC_POOL=all alike: arenas and large blocks on the same pool pages)
# through bench/common/pool.sh, which puts it back afterwards. THP knobs are
# left as they are and printed. Report: stdout and
# BUILD_DIR/bench-malloc.md; every measurement: BUILD_DIR/bench-malloc.json.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd) || exit 1
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (hugetlb pool)" >&2; exit 1; }
ninja -C "$build" bindings/malloc/libhp-malloc.so bench/malloc/bench_umap bench/malloc/bench_mixed \
  bench/malloc/bench_calls bench/malloc/bench_warm \
  bench/malloc/bench_sizes bench/malloc/bench_threads bench/malloc/proto_jemalloc.so \
  bench/realloc/realloc_loop_libc \
  >/dev/null || exit 1
# --sizes [ROUNDS]: the threshold benchmark (sizes.py); --threads [ROUNDS]:
# 128 threads with and without HP_STACKS (threads.py); else run.py.
driver=(python3 "$here/run.py" --build "$build" --json "$build/bench-malloc.json")
case "${1:-}" in
  --sizes) shift; driver=(python3 "$here/sizes.py" "$build") ;;
  --threads) shift; driver=(python3 "$here/threads.py" "$build") ;;
esac
. "$here/../common/pool.sh"
pool_reserve run.sh
{
  echo "# bench/malloc on $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "$pool_summary"
  "${driver[@]}" "$@"
} | tee "$build/bench-malloc.md"
exit "${PIPESTATUS[0]}"
