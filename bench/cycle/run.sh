#!/usr/bin/env bash
# bench/cycle/run.sh [BUILD_DIR] [run.py options, e.g. --before OTHER_BUILD]
#
# Root only. Builds the cycle program if needed, then, holding the heavy-job
# and knob locks, reserves the 2 MiB hugetlb pool through
# bench/common/pool.sh (HP_BENCH_POOL_PAGES, default 1024), which puts it
# back afterwards; runs run.py. The report goes to stdout and
# BUILD_DIR/bench-cycle.md; every measurement to BUILD_DIR/bench-cycle.json
# unless --json says otherwise.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-$src/build}
[ $# -gt 0 ] && shift
build=$(cd "$build" && pwd) || exit 1
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (hugetlb pool)" >&2; exit 1; }
ninja -C "$build" bench/cycle/cycle >/dev/null || exit 1
. "$here/../common/pool.sh"
pool_reserve run.sh
json=()
case " $* " in *" --json "*) ;; *) json=(--json "$build/bench-cycle.json") ;; esac
{
  echo "# bench/cycle on $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  python3 "$here/run.py" --build "$build" --pool "$pool_summary" "${json[@]}" "$@"
} | tee "$build/bench-cycle.md"
exit "${PIPESTATUS[0]}"
