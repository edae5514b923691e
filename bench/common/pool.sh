# shellcheck shell=bash
# bench/common/pool.sh: sourced (not run) by the root-only bench scripts
# that share one 2 MiB hugetlb pool between libhp and its peers.
#
# pool_reserve NAME
#   Takes, for the rest of the script, the machine-wide heavy-job lock
#   (/run/lock/libhp-heavy.lock: one benchmark at a time) and the knob lock
#   (/run/lock/libhp-knobs.lock: no knob-changing test meanwhile), on file
#   descriptors 8 and 9; reserves HP_BENCH_POOL_PAGES 2 MiB pages (default
#   1024 = 2 GiB) and puts the pool back the way it was when the script
#   exits, also on error or Ctrl-C. THP knobs are left as they are.
#   Sets pool_summary: one line with what was reserved and the THP knobs,
#   for the report.
pool_reserve() {
  local name=$1 pages=${HP_BENCH_POOL_PAGES:-1024}
  local heavy=/run/lock/libhp-heavy.lock knobs=/run/lock/libhp-knobs.lock
  [ -w /run/lock ] || { heavy=/tmp/libhp-heavy.lock; knobs=/tmp/libhp-knobs.lock; }
  exec 8>>"$heavy" 9>>"$knobs"
  echo "$name: waiting for $heavy and $knobs" >&2
  flock 8
  flock 9
  pool_file=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
  pool_saved=$(cat "$pool_file")
  trap 'echo "$pool_saved" > "$pool_file"' EXIT
  trap 'exit 130' INT TERM
  echo "$pages" > "$pool_file"
  local thp=/sys/kernel/mm/transparent_hugepage
  pool_summary="2 MiB pool: $(cat "$pool_file") pages reserved (asked $pages, was $pool_saved);\
 THP enabled: $(cat $thp/enabled); defrag: $(cat $thp/defrag)"
}
