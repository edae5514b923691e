#!/bin/busybox sh
# /init of a kernel-lab guest (tools/klab/run puts it into the initramfs with
# busybox, the test programs at their build paths, their libraries and
# /klab/plan, the list of tests). Runs every test of the plan once, writes
# the results to the second serial port (the host's results file) and powers
# off. The console (first serial port) gets the kernel's messages and one
# progress line per test.
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/shm /dev/pts /tmp /run
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t tmpfs -o mode=755 run /run
mkdir -p /run/lock
hostname klab
ifconfig lo 127.0.0.1 up 2>/dev/null

out=/dev/ttyS1
stty -F $out raw -echo 2>/dev/null

uptime_s() { cut -d' ' -f1 /proc/uptime; }

# What the tests run on, in the results for the host's summary.
info() { echo "KLAB-INFO $*" > $out; }
info "uname $(uname -r)"
info "nodes $(ls -d /sys/devices/system/node/node[0-9]* | wc -l)"
for d in /sys/kernel/mm/hugepages/hugepages-*; do
    per_node=
    for n in /sys/devices/system/node/node[0-9]*; do
        per_node="$per_node ${n##*/}=$(cat $n/hugepages/${d##*/}/nr_hugepages)"
    done
    info "pool ${d##*-} nr=$(cat $d/nr_hugepages) free=$(cat $d/free_hugepages):$per_node"
done
info "thp $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
info "mthp $(ls -d /sys/kernel/mm/transparent_hugepage/hugepages-*kB 2>/dev/null | wc -l) sizes"
[ -r /proc/sys/kernel/numa_balancing ] && info "numa_balancing $(cat /proc/sys/kernel/numa_balancing)"

# Kill what a test left behind (a child that outlived a timeout would keep
# its pool pages and the knob lock). Kernel threads have no exe link.
reap() {
    n=0
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        [ "$p" = 1 ] && continue
        readlink "$d/exe" >/dev/null 2>&1 || continue
        # busybox timeout's watcher, which exits within a second of its child
        [ "$(cat "$d/comm" 2>/dev/null)" = timeout ] && continue
        kill -9 "$p" 2>/dev/null && n=$((n + 1))
    done
    [ $n -gt 0 ] && echo "KLAB-STRAY $1 $n" > $out
}

# run_test NAME TIMEOUT_S WORKDIR CMD...: stdout lines prefixed "O ",
# stderr "E ", then the exit status and the guest's uptime at both ends.
run_test() {
    name=$1 limit=$2 wd=$3
    shift 3
    echo "klab: $(uptime_s) s: $name" > /dev/console
    start=$(uptime_s)
    ( cd "$wd" && exec timeout -s TERM "$limit" "$@" ) > /tmp/klab.out 2> /tmp/klab.err < /dev/null
    rc=$?
    end=$(uptime_s)
    {
        echo "KLAB-BEGIN $name"
        sed 's/^/O /' /tmp/klab.out
        sed 's/^/E /' /tmp/klab.err
        echo "KLAB-END $name rc=$rc start=$start end=$end limit=$limit"
    } > $out
    reap "$name"
}

. /klab/plan
echo "KLAB-DONE" > $out
sync
poweroff -f
echo o > /proc/sysrq-trigger
