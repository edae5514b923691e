#!/usr/bin/env python3
"""hpctl watch PID reports what the kernel says about the process: a child
that maps 64 MiB with MADV_HUGEPAGE and 16 MiB of hugetlb pages (as root the 2 MiB pool is
grown to have them free, under the knob lock, and put back at exit) shows the same
AnonHugePages and hugetlb figures as its smaps_rollup, its fault counter moves when it touches new pages, --count
bounds the run, and a process that exits ends the watch.

usage: check-watch.py HPCTL   (TAP output)"""
import json
import mmap
import os
import subprocess
import sys
import time

from hpctltest import done, knob_lock, knob_save, ok, run, skip

CHILD = r"""
import mmap, sys, time
M = 1 << 20
a = mmap.mmap(-1, 66 * M, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
a.madvise(mmap.MADV_HUGEPAGE)
for off in range(0, 66 * M, 4096):
    a[off] = 1
h = None
if sys.argv[1] == "1":
    try:
        h = mmap.mmap(-1, 16 * M, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)
        for off in range(0, 16 * M, 2 * M):
            h[off] = 1
    except OSError:
        h = None
print("hugetlb" if h else "no-hugetlb", flush=True)
sys.stdin.readline()                       # touch more pages on request
b = mmap.mmap(-1, 8 * M, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for off in range(0, 8 * M, 4096):
    b[off] = 1
print("touched", flush=True)
sys.stdin.readline()
"""


def rollup(pid):
    vals = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":"):
                vals[parts[0][:-1]] = int(parts[1])
    return vals


def free_2m():
    try:
        with open("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") as f:
            return int(f.read())
    except OSError:
        return 0


knob_lock()   # the child takes pool pages: nobody resizes the pool meanwhile
POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
if os.geteuid() == 0 and os.path.exists(POOL) and free_2m() < 16:
    knob_save(POOL)   # put back at exit (hpctltest)
    with open(POOL) as f:
        total = int(f.read())
    with open(POOL, "w") as f:
        f.write(str(total + 16 - free_2m()))
child = subprocess.Popen([sys.executable, "-c", CHILD, "1" if free_2m() >= 16 else "0"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
try:
    mode = child.stdout.readline().strip()
    r = rollup(child.pid)
    rc, out, err = run("watch", str(child.pid), "--count", "1", "--json")
    s = json.loads(out) if rc == 0 else {}
    ok(rc == 0 and s["pid"] == child.pid and s["schema"] == 1, "watch PID --count 1 --json: one line",
       out + err)
    ok(s.get("anon_huge_kb") == r["AnonHugePages"],
       "AnonHugePages %s kB, as smaps_rollup says" % s.get("anon_huge_kb"), (s, r))
    hugetlb = r.get("Shared_Hugetlb", 0) + r.get("Private_Hugetlb", 0)
    ok(s.get("hugetlb_kb") == hugetlb, "hugetlb %s kB as smaps_rollup says (%s)"
       % (s.get("hugetlb_kb"), mode), (s, r))
    if mode == "hugetlb":
        ok(hugetlb == 16 * 1024, "the 16 MiB hugetlb mapping is counted", r)
    else:
        skip("hugetlb counted", "fewer than 16 free 2 MiB pool pages")
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        thp = f.read()
    if "[never]" not in thp:
        ok(s.get("anon_huge_kb", 0) >= 32 * 1024, "the MADV_HUGEPAGE mapping holds huge pages", s)
    else:
        skip("THP counted", "THP is off on this machine")
    ok(len(s.get("mthp", [])) == len([d for d in os.listdir("/sys/kernel/mm/transparent_hugepage")
                                      if d.startswith("hugepages-")]),
       "one mTHP entry per size", s.get("mthp"))
    # Faults: the second sample sees the child's new pages.
    w = subprocess.Popen([sys.argv[1], "watch", str(child.pid), "--count",
                          "2", "--interval", "1", "--json"], stdout=subprocess.PIPE, text=True)
    first = json.loads(w.stdout.readline())
    child.stdin.write("\n")
    child.stdin.flush()
    child.stdout.readline()
    second = json.loads(w.stdout.readline())
    w.wait(timeout=30)
    ok(second["faults_delta"] >= 4 and second["faults"] - first["faults"] ==
       second["faults_delta"], "faults move when the child touches 8 MiB (%d)"
       % second["faults_delta"], (first, second))
    ok(w.returncode == 0 and w.stdout.read() == "", "--count 2 gives two lines and stops")
    rc, out, err = run("watch", str(child.pid), "--count", "2", "--interval", "0.1")
    ok(rc == 0 and len(out.splitlines()) == 3 and "ANONHUGE_KB" in out, "text: header and two lines",
       out + err)
    child.stdin.write("\n")
    child.stdin.flush()
    child.wait(timeout=30)
    rc, out, err = run("watch", str(child.pid), "--count", "1")
    ok(rc == 4 and "no process" in err, "a process that is gone: exit 4", (rc, out, err))
finally:
    if child.poll() is None:
        child.kill()
rc, out, err = run("watch", "--count", "1", "--json")
m = json.loads(out) if rc == 0 else {}
ok(rc == 0 and m["pid"] is None and "hugetlb_pool_total" in m, "machine view", out + err)
rc, out, err = run("watch", "--interval", "0")
ok(rc == 2 and '--interval "0" is not a number of seconds' in err,
   "interval 0 is a usage error, named", err)
rc, out, err = run("watch", "999999", "--count", "1", "--json")
doc = json.loads(out) if out.startswith("{") else None
ok(rc == 4 and doc and doc["status"] == 4 and doc["error"]["code"] == "not-found",
   "watch of no process --json: a document with status 4", (rc, out, err))
done()
