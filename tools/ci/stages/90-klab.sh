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
#   7.3 (the newest packaged kernel): the suite kernel (hugetlb, THP, mTHP,
#   selection, pools, stacks) and realloc-huge (the hugetlb cache, mremap
#   of hugetlb and THP blocks). Not realloc-random and realloc-semantics:
#   3.5 of the suite realloc's 4 minutes, and they test libhp's own logic,
#   not the kernel's.
# Not yet 6.1 (Debian 12's kernel): there kernel-hugetlb
# pool_snapshot_identical fails when the kernel cannot reserve again at run
# time the 1 GiB pages the test released, and realloc-huge
# growth_of_a_carved_block_spares_its_neighbour when a block of two hugetlb
# VMAs grows (it is copied; docs/kernels.md).
#
# Hard limit: HP_KLAB_DEADLINE seconds (default 420) for download, boot and
# tests together; the lab then stops the guest and counts every test it did
# not finish as failed. timeout(1) is the last resort if the lab itself hangs.
set -u
[ -e build/build.ninja ] || { echo "90-klab: no build/; the build stage must run first" >&2; echo "0 1" >> "$HP_RESULTS"; exit 1; }
deadline=${HP_KLAB_DEADLINE:-420}
rc=0
timeout -k 10 $((deadline + 30)) \
  tools/klab/run --build build --deadline "$deadline" --suite kernel --test realloc-huge 7.3 || rc=1
exit $rc
