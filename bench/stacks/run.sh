#!/usr/bin/env bash
# Run the stack benchmark of one build tree and print its markdown tables.
# usage: bench/stacks/run.sh [builddir] [reps] [json]   (root: it sets THP
# and the hugetlb pool under the machine-wide knob lock and restores them;
# json: also write every measurement there, for bench/plots.py)
set -eu
build=${1:-build}
reps=${2:-5}
exec "$build/bench/stacks/bench_stacks" all "$reps" ${3:+"$3"}
