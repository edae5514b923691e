#!/usr/bin/env bash
# bench/malloc/run.sh [BUILD_DIR] [run.py options]
#
# Root only. Builds the benchmark programs if needed; holds the machine-wide
# heavy-job lock (/run/lock/libhp-heavy.lock) for the whole run and the knob
# lock (/run/lock/libhp-knobs.lock) while the 2 MiB hugetlb pool is changed:
# it reserves HP_BENCH_POOL_PAGES (default 1024 = 2 GiB, used by glibc
# hugetlb=2, mimalloc large pages and libhp-malloc alike) and puts the pool
# back the way it was, also on error or Ctrl-C. THP knobs are left as they
# are and printed. Report: stdout and BUILD_DIR/bench-malloc.md; every
# measurement: BUILD_DIR/bench-malloc.json.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd) || exit 1
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (hugetlb pool)" >&2; exit 1; }
ninja -C "$build" lib/malloc/libhp-malloc.so bench/malloc/bench_umap bench/malloc/bench_mixed \
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
pages=${HP_BENCH_POOL_PAGES:-1024}
heavy=/run/lock/libhp-heavy.lock knobs=/run/lock/libhp-knobs.lock
[ -w /run/lock ] || { heavy=/tmp/libhp-heavy.lock; knobs=/tmp/libhp-knobs.lock; }

exec 8>>"$heavy" 9>>"$knobs"
echo "run.sh: waiting for $heavy and $knobs" >&2
flock 8
flock 9
pool=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
saved=$(cat "$pool")
restore() { echo "$saved" > "$pool"; }
trap restore EXIT
trap 'exit 130' INT TERM
echo "$pages" > "$pool"
got=$(cat "$pool")
thp=/sys/kernel/mm/transparent_hugepage
{
  echo "# bench/malloc on $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "2 MiB pool: $got pages reserved (asked $pages, was $saved); THP enabled:" \
       "$(cat $thp/enabled); defrag: $(cat $thp/defrag)"
  "${driver[@]}" "$@"
} | tee "$build/bench-malloc.md"
exit "${PIPESTATUS[0]}"
