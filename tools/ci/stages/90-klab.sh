#!/usr/bin/env bash
# The kernel lab (tools/klab/run, docs/kernel-lab.md): the tests that depend
# on the kernel, run again on a Debian-packaged kernel booted under qemu
# (TCG here: no /dev/kvm) with two NUMA nodes and pools of 1 GiB and 2 MiB
# pages reserved at boot, which the machine's own kernel lacks. The kernel
# package is pinned in tools/klab/kernels and cached in /var/cache/libhp-klab
# (downloaded on the first run, with apt-get download). Each guest appends
# "PASSED FAILED SKIPPED" to $HP_RESULTS.
#
# What runs, and why only that (the whole test command must stay under 30
# minutes; docs/kernel-lab.md has the measured times per suite and kernel):
#   7.3 (the newest packaged kernel): suites kernel, realloc and stack
#   (about 7.5 min under TCG on a loaded 2-CPU machine).
# Not yet 6.1 (Debian 12's kernel): there kernel-hugetlb
# pool_snapshot_identical fails when the kernel cannot reserve again at run
# time the 1 GiB pages the test released, and realloc-huge
# growth_of_a_carved_block_spares_its_neighbour when a block of two hugetlb
# VMAs grows (it is copied; docs/kernels.md).
set -u
[ -e build/build.ninja ] || { echo "90-klab: no build/; the build stage must run first" >&2; echo "0 1" >> "$HP_RESULTS"; exit 1; }
rc=0
tools/klab/run --build build --suite kernel --suite realloc --suite stack 7.3 || rc=1
exit $rc
