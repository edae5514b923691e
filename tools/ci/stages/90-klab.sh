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
#   7.3 (the newest packaged kernel): suites kernel and stack.
set -u
[ -e build/build.ninja ] || { echo "90-klab: no build/; the build stage must run first" >&2; echo "0 1" >> "$HP_RESULTS"; exit 1; }
rc=0
tools/klab/run --build build --suite kernel --suite stack 7.3 || rc=1
exit $rc
