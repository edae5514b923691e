#!/usr/bin/env bash
# bench/realloc/run.sh [BUILD_DIR] [run.py options]
#
# Root only. Builds the two loop programs if needed, then, holding the
# heavy-job and knob locks, reserves the 2 MiB hugetlb pool (glibc
# hugetlb=2, mimalloc large pages and libhp use it) through
# bench/common/pool.sh, which puts it back afterwards; runs run.py. THP
# knobs are left as they are and printed. The report goes to stdout and
# BUILD_DIR/bench-realloc.md; every measurement to
# BUILD_DIR/bench-realloc.json.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd) || exit 1
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (hugetlb pool)" >&2; exit 1; }
ninja -C "$build" bench/realloc/realloc_loop_libc bench/realloc/realloc_loop_hp >/dev/null || exit 1
. "$here/../common/pool.sh"
pool_reserve run.sh
{
  echo "# bench/realloc on $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "$pool_summary"
  echo
  python3 "$here/run.py" --build "$build" --json "$build/bench-realloc.json" "$@"
} | tee "$build/bench-realloc.md"
exit "${PIPESTATUS[0]}"
