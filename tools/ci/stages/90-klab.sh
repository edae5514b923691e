#!/usr/bin/env bash
# The kernel lab (tools/klab/run, docs/kernel-lab.md): the tests that depend
# most on the kernel, run again on a Debian-packaged kernel booted under qemu
# (TCG here: no /dev/kvm) with two NUMA nodes and pools of 1 GiB and 2 MiB
# pages reserved at boot, which the machine's own kernel lacks. The kernel
# package is pinned in tools/klab/kernels and cached in /var/cache/libhp-klab
# (downloaded on the first run with apt-get download, about 20 s; a download
# that fails or hangs ends the stage with a failure naming it). Each guest
# appends "PASSED FAILED SKIPPED" to $HP_RESULTS.
#
# What runs, and why only that (the whole test command must stay under 30
# minutes; docs/kernel-lab.md has the measured times per test and kernel):
# the suite kernel (hugetlb, THP, mTHP, selection, pools, stacks) and
# realloc-huge (the hugetlb cache, mremap of hugetlb and THP blocks), on
#   7.3 (the newest packaged kernel) and
#   6.1 (Debian 12's own kernel: no mTHP, mremap of one VMA at a time).
# Not realloc-random and realloc-semantics: 3.5 minutes per kernel, and they
# test libhp's own logic, not the kernel's. About 80 s per kernel on a quiet
# 2-CPU machine, 2.5 min at load 9 (TCG).
#
# Hard limit: HP_KLAB_DEADLINE seconds (default 420) for both kernels,
# downloads, boots and tests together; the lab stops a guest at its share
# and counts every test it did not finish as failed; a kernel left no time
# counts as one failure. timeout(1) is the last resort if the lab hangs.
set -u
[ -e build/build.ninja ] || { echo "90-klab: no build/; the build stage must run first" >&2; echo "0 1" >> "$HP_RESULTS"; exit 1; }
deadline=${HP_KLAB_DEADLINE:-420}
start=$(date +%s)
rc=0
for kernel in 7.3 6.1; do
  left=$((deadline - ($(date +%s) - start)))
  if [ "$left" -lt 30 ]; then
    echo "90-klab: no time left for Linux $kernel (HP_KLAB_DEADLINE=$deadline s): not run" >&2
    echo "0 1" >> "$HP_RESULTS"
    rc=1
    continue
  fi
  timeout -k 10 $((left + 30)) \
    tools/klab/run --build build --deadline "$left" --suite kernel --test realloc-huge "$kernel" || rc=1
done
exit $rc
