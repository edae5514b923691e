#!/usr/bin/env bash
# bench/realloc/run.sh [BUILD_DIR] [run.py options]
#
# Root only. Builds the two loop programs if needed, then, holding the
# machine-wide knob lock (/run/lock/libhp-knobs.lock, so no other libhp
# benchmark or knob-changing test overlaps), reserves a 2 MiB hugetlb pool
# (HP_BENCH_POOL_PAGES, default 1024 = 2 GiB: glibc hugetlb=2, mimalloc
# large pages and libhp use it), runs run.py and puts the pool back the way
# it was, also on error or Ctrl-C. THP knobs are left as they are and
# printed. The report goes to stdout and BUILD_DIR/bench-realloc.md; every
# measurement to BUILD_DIR/bench-realloc.json.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd) || exit 1
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (hugetlb pool)" >&2; exit 1; }
ninja -C "$build" bench/realloc/realloc_loop_libc bench/realloc/realloc_loop_hp >/dev/null || exit 1
pages=${HP_BENCH_POOL_PAGES:-1024}
lock=/run/lock/libhp-knobs.lock
[ -w /run/lock ] || lock=/tmp/libhp-knobs.lock

exec 9>>"$lock"
echo "run.sh: waiting for $lock" >&2
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
  echo "# bench/realloc on $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "2 MiB pool: $got pages reserved (asked $pages); THP enabled: $(cat $thp/enabled);" \
       "defrag: $(cat $thp/defrag)"
  echo
  python3 "$here/run.py" --build "$build" --json "$build/bench-realloc.json" "$@"
} | tee "$build/bench-realloc.md"
exit "${PIPESTATUS[0]}"
