#!/usr/bin/env python3
"""hpctl watch PID reports what the kernel says about the process: a child
that maps 64 MiB with MADV_HUGEPAGE and 16 MiB of hugetlb pages (as root the 2 MiB pool is
grown to have them free, under the knob lock, and put back at exit) shows the same
AnonHugePages and hugetlb figures as its smaps_rollup, its fault counter moves when it touches new pages, --count
bounds the run, and a process that exits ends the watch. Per NUMA node: the
child's pages from its numa_maps add up to its RSS and hugetlb figures (on
this machine's nodes; a one-node machine puts them all on node 0), and on a
fabricated /proc and /sys with two nodes each node gets exactly the pages
and pool figures the files give it.

usage: check-watch.py HPCTL   (TAP output)"""
import json
import mmap
import os
import subprocess
import sys
import time

from hpctltest import done, fake_tree, knob_lock, knob_save, ok, put, run, skip

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


def machine_nodes():
    try:
        return [int(d[4:]) for d in os.listdir("/sys/devices/system/node")
                if d.startswith("node") and d[4:].isdigit()]
    except OSError:
        return []


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
    # Per node, from numa_maps: the hugetlb pages exactly, the rest as RSS
    # (numa_maps and smaps_rollup walk the page tables one after the other:
    # a few pages of slack for the interpreter).
    nodes = s.get("nodes") or []
    ok(nodes and [n["node"] for n in nodes] == sorted(machine_nodes())
       and sum(n["hugetlb_kb"] for n in nodes) == hugetlb,
       "per node: every node, and hugetlb %s kB in all, as smaps_rollup says"
       % [n.get("hugetlb_kb") for n in nodes], (nodes, r))
    rss = sum(n["rss_kb"] for n in nodes)
    ok(abs(rss - r["Rss"]) <= 1024, "per node: RSS %d kB in all, smaps_rollup %d kB"
       % (rss, r["Rss"]), (nodes, r))
    where = [n["node"] for n in nodes if n["rss_kb"] >= 64 * 1024]
    ok(len(where) >= 1, "per node: the 66 MiB mapping is on node(s) %s" % where, nodes)
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
    # NEW_FAULTS: '-' on the first line (no line before it, as faults_delta
    # -1 in JSON), a count on the next; never 0 for "unknown".
    lines = out.splitlines()
    col = lines[0].split().index("NEW_FAULTS") if "NEW_FAULTS" in lines[0] else -1
    rows = [l.split() for l in lines[1:]]
    ok(col >= 0 and len(rows) == 2 and rows[0][col] == "-" and rows[1][col].isdigit() and
       first["faults_delta"] == -1,
       "watch PID text: NEW_FAULTS '-' on the first line, a count on the second; JSON -1",
       (out, first))
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
ok(rc == 0 and [n["node"] for n in m.get("nodes", [])] == sorted(machine_nodes()),
   "machine view: one entry per node", out + err)

# Fabricated: two nodes, a process with base pages on both, THP-sized
# counts on node 1, a 2 MiB hugetlb mapping on node 1 and a 1 GiB one on
# node 0, and a file whose name holds " huge " and " N0" (numa_maps escapes
# '=', so a name cannot fake a count).
root = fake_tree(pools={2048: (8, 6, 0, 0, 0)}, nodes=2)
base = os.sysconf("SC_PAGESIZE") // 1024
put(root, "proc/4242/smaps_rollup", "Rss: 9999 kB\nAnonHugePages: 2048 kB\n"
    "Private_Hugetlb: 1052672 kB\n")
put(root, "proc/4242/stat", "4242 (a) b) S 1 1 1 0 -1 0 500 0 7 0\n")
put(root, "proc/4242/numa_maps", "\n".join([
    "55d000000000 default file=/usr/bin/cat mapped=2 N0=2 kernelpagesize_kB=%d" % base,
    "7f0000000000 default anon=600 dirty=600 N0=88 N1=512 kernelpagesize_kB=%d" % base,
    "7f0001000000 bind:1 file=/anon_hugepage\\040(deleted) huge anon=2 dirty=2 N1=2 "
    "kernelpagesize_kB=2048",
    "7f0040000000 default file=/anon_hugepage\\040(deleted) huge dirty=1 N0=1 "
    "kernelpagesize_kB=1048576",
    "7f0080000000 default file=/tmp/a huge N0 x mapped=3 N1=3 kernelpagesize_kB=%d" % base,
    "7f00c0000000 default stack anon=1 dirty=1 N0=1 kernelpagesize_kB=%d" % base]) + "\n")
for node, (anon, total, free) in enumerate(((0, 4, 3), (4096, 4, 3))):
    put(root, "sys/devices/system/node/node%d/meminfo" % node,
        "Node %d MemTotal: 100 kB\nNode %d AnonHugePages:  %d kB\nNode %d HugePages_Total: %d\n"
        "Node %d HugePages_Free:  %d\nNode %d HugePages_Surp: 0\n"
        % (node, node, anon, node, total, node, free, node))
env = {"HP_SYSFS_ROOT": root}
rc, out, err = run("watch", "4242", "--count", "1", "--json", env=env)
f = json.loads(out) if rc == 0 else {}
ok(f.get("nodes") == [{"node": 0, "rss_kb": (2 + 88 + 1) * base, "hugetlb_kb": 1048576},
                      {"node": 1, "rss_kb": (512 + 3) * base, "hugetlb_kb": 4096}],
   "fabricated numa_maps: base pages and hugetlb per node", out + err)
rc, out, err = run("watch", "4242", "--count", "1", env=env)
ok(rc == 0 and "node0=%d/1048576 node1=%d/4096" % (91 * base, 515 * base) in out,
   "fabricated numa_maps: the text line", out + err)
rc, out, err = run("watch", "--count", "1", "--json", env=env)
f = json.loads(out) if rc == 0 else {}
ok(f.get("nodes") == [{"node": 0, "anon_huge_kb": 0, "hugetlb_pool_total": 4,
                       "hugetlb_pool_free": 3},
                      {"node": 1, "anon_huge_kb": 4096, "hugetlb_pool_total": 4,
                       "hugetlb_pool_free": 3}],
   "fabricated node meminfo: the machine's figures per node", out + err)
os.remove(os.path.join(root, "proc/4242/numa_maps"))   # a kernel without NUMA
rc, out, err = run("watch", "4242", "--count", "1", "--json", env=env)
f = json.loads(out) if rc == 0 else {}
ok(rc == 0 and "nodes" in f and f["nodes"] is None and f.get("rss_kb") == 9999,
   "no numa_maps: nodes is null, the rest as before", out + err)
rc, out, err = run("watch", "4242", "--count", "1", env=env)
ok(rc == 0 and "PER NODE" in out.splitlines()[0] and out.splitlines()[1].split()[5] == "-",
   "no numa_maps: the text's per-node column shows -", out + err)

rc, out, err = run("watch", "--interval", "0")
ok(rc == 2 and '--interval "0" is not a number of seconds' in err,
   "interval 0 is a usage error, named", err)
rc, out, err = run("watch", "999999", "--count", "1", "--json")
doc = json.loads(out) if out.startswith("{") else None
ok(rc == 4 and doc and doc["status"] == 4 and doc["error"]["code"] == "not-found",
   "watch of no process --json: a document with status 4", (rc, out, err))
done()
