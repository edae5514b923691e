#!/usr/bin/env python3
"""hpctl why PID names the reason the kernel's state shows for a process's
memory not being on huge pages.

1. A fabricated /proc and /sys tree (HP_SYSFS_ROOT): one mapping per reason,
   the cgroup's hugetlb limit, THP_enabled, and every error with its exit
   code and its JSON document.
2. Real processes, none of them using libhp (why_target, python3), each set
   up one way, with the THP switches held at the Debian defaults (enabled
   madvise, 2 MiB inherit, every other size never) under the knob lock and
   put back at exit; then THP never, and 64 KiB mTHP always (measured through
   pagemap and kpageflags as root).
3. Another user: nobody asking about a root process gets exit 3 and a message;
   about its own process an answer, with mTHP marked unmeasured.

usage: check-why.py HPCTL WHY_TARGET   (TAP output)"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from hpctltest import done, fake_tree, knob_save, ok, put, run, skip

TARGET = sys.argv[2]
T = "/sys/kernel/mm/transparent_hugepage/"
M = 1 << 20

# --- 1. fabricated tree ------------------------------------------------------

FIELDS = ["Size", "KernelPageSize", "MMUPageSize", "Rss", "Pss", "Anonymous",
          "AnonHugePages", "ShmemPmdMapped", "FilePmdMapped", "Shared_Hugetlb",
          "Private_Hugetlb", "Swap", "Locked"]


def mapping(start, size, path="", perms="rw-p", rss=None, thp=0, hugetlb=0, kps=4,
            flags="rd wr mr mw me ac", eligible=1):
    rss = size if rss is None else rss
    vals = {"Size": size >> 10, "KernelPageSize": kps, "MMUPageSize": kps,
            "Rss": 0 if hugetlb else rss >> 10, "Pss": rss >> 10, "Anonymous": rss >> 10,
            "AnonHugePages": thp >> 10, "Private_Hugetlb": hugetlb >> 10}
    text = "%x-%x %s 00000000 00:00 0%s%s\n" % (start, start + size, perms,
                                                " " * 20 if path else "", path)
    for f in FIELDS:
        text += "%-16s%8d kB\n" % (f + ":", vals.get(f, 0))
    text += "THPeligible:    %d\nVmFlags: %s \n" % (eligible, flags)
    return text


def fake(pid, maps, thp_enabled=1, enabled="always [madvise] never", mthp=None, cgroup=None):
    root = fake_tree(pools={2048: (4, 0, 0, 0, 0)}, thp=enabled,
                     mthp=mthp if mthp is not None else
                     {64: "always inherit madvise [never]", 2048: "always [inherit] madvise never"})
    put(root, "sys/kernel/mm/transparent_hugepage/shmem_enabled",
        "always within_size advise [never] deny force\n")
    for k, v in (("defrag", "1"), ("max_ptes_none", "511"), ("pages_to_scan", "4096"),
                 ("scan_sleep_millisecs", "10000")):
        put(root, T[1:] + "khugepaged/" + k, v + "\n")
    put(root, "proc/%d/smaps" % pid, "".join(maps))
    status = "Name:\tfakeproc\nUid:\t0\t0\t0\t0\n"
    if thp_enabled is not None:
        status += "THP_enabled:\t%d\n" % thp_enabled
    put(root, "proc/%d/status" % pid, status)
    put(root, "proc/%d/cgroup" % pid, "0::/jobs/db\n")
    for size, limit in (cgroup or {}).items():
        put(root, "sys/fs/cgroup/jobs/db/hugetlb.%s.max" % size, limit + "\n")
    return {"HP_SYSFS_ROOT": root}


def why(pid, env, *extra):
    rc, out, err = run("why", str(pid), "--mappings", "--json", *extra, env=env)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, "not JSON: %r %r" % (out, err)


def by_start(doc, start):
    for m in (doc or {}).get("mappings") or []:
        if m["start"] <= start < m["end"]:
            return m
    return None


B = 0x7f0000000000  # 2 MiB aligned
maps = [
    mapping(B, 8 * M, thp=8 * M, flags="rd wr mr mw me ac hg"),                  # huge
    mapping(B + 16 * M, 12 * M),                                                 # not advised
    mapping(B + 32 * M, 8 * M, flags="rd wr mr mw me ac nh"),                    # nohugepage
    mapping(B + 48 * M, M, flags="rd wr mr mw me ac hg"),                        # too small
    mapping(B + 50 * M + M, 2 * M, flags="rd wr mr mw me ac hg"),                # not aligned
    mapping(B + 64 * M + M, 5 * M, thp=4 * M, flags="rd wr mr mw me ac hg"),     # edges
    mapping(B + 80 * M, 8 * M, rss=0, flags="rd wr mr mw me ac hg"),             # untouched
    mapping(B + 96 * M, 8 * M, rss=8 * M, flags="rd wr mr mw me ac hg"),         # fell back
    mapping(B + 112 * M, 4 * M, hugetlb=4 * M, kps=2048, path="/anon_hugepage (deleted)",
            flags="rd wr mr mw me de ht"),                                       # hugetlb
    mapping(B + 128 * M, 2 * M, path="/usr/lib/libfoo.so", perms="r-xp",
            flags="rd ex mr mw me"),                                             # file
    mapping(B + 132 * M, 2 * M, path="/dev/shm/seg", perms="rw-s",
            flags="rd wr sh mr mw me ms"),                                       # shmem
    mapping(B + 136 * M, 8 * 1024, path="[vdso]", perms="r-xp", flags="rd ex mr mw me de"),
]
expect = [(B, "huge"), (B + 16 * M, "madvise-not-advised"), (B + 32 * M, "nohugepage"),
          (B + 48 * M, "too-small"), (B + 51 * M, "too-small"), (B + 65 * M, "unaligned-edges"),
          (B + 80 * M, "not-resident"), (B + 96 * M, "fallback"), (B + 112 * M, "hugetlb"),
          (B + 128 * M, "file"), (B + 132 * M, "shmem-never"), (B + 136 * M, "special")]
env = fake(4242, maps, cgroup={"2MB": "0", "1GB": "max"})
rc, d, err = why(4242, env)
ok(rc == 0 and d and d["status"] == 0 and d["name"] == "fakeproc" and d["thp_enabled"] is True,
   "fabricated process: a document, exit 0", (rc, d, err))
for start, reason in expect:
    m = by_start(d, start)
    ok(m is not None and m["why"] == reason and m["text"],
       "fabricated mapping at +%dM: %s" % ((start - B) >> 20, reason), m)
t = d["totals"] if d else {}
ok(t.get("thp") == 12 * M and t.get("hugetlb") == 4 * M and t.get("mthp") is None and
   t.get("mthp_unmeasured"), "totals: THP and hugetlb bytes summed, mTHP unmeasured without "
   "pagemap", t)
reasons = [r["why"] for r in d["reasons"]] if d else []
rss = [r["rss"] for r in d["reasons"]] if d else []
ok(reasons[:1] == ["madvise-not-advised"] and rss == sorted(rss, reverse=True),
   "reasons sorted by base-page bytes", reasons)
ok(d and "no MADV_HUGEPAGE" in d["verdict"] and d["verdict"].startswith("16M of 52"),
   "verdict: huge of resident, and the largest reason", d and d["verdict"])

# The same process with its page frames (what root reads): a 64K folio in
# the anonymous mapping is mTHP; a 2-page large folio of libfoo.so's page
# cache is the file system's, not mTHP, and not huge.
def frames(root, pid, folios):
    """folios: [(va, pages, first_pfn)]; writes pagemap and kpageflags."""
    import struct
    pm = os.path.join(root, "proc/%d/pagemap" % pid)
    kf = os.path.join(root, "proc/kpageflags")
    with open(pm, "wb") as f:
        f.truncate((B + 140 * M) // 4096 * 8)
        for va, pages, pfn in folios:
            f.seek(va // 4096 * 8)
            f.write(b"".join(struct.pack("<Q", 1 << 63 | (pfn + i)) for i in range(pages)))
    with open(kf, "wb") as f:
        for va, pages, pfn in folios:
            f.seek(pfn * 8)
            f.write(b"".join(struct.pack("<Q", 1 << 22 | 1 << (15 if i == 0 else 16))
                             for i in range(pages)))


env2 = fake(4243, maps, cgroup={"2MB": "0", "1GB": "max"})
frames(env2["HP_SYSFS_ROOT"], 4243, [(B + 16 * M, 16, 4096), (B + 128 * M, 2, 8192)])
rc, d2, err = why(4243, env2)
anon, lib = by_start(d2, B + 16 * M), by_start(d2, B + 128 * M)
ok(rc == 0 and anon and anon["mthp"] == 64 << 10 and
   [x for x in anon["mthp_sizes"] if x["bytes"]] == [{"page_size": 64 << 10, "bytes": 64 << 10}],
   "fabricated frames: a 64K anonymous folio is mTHP", (rc, err, anon))
ok(lib and lib["mthp"] == 0 and d2["totals"]["mthp"] == 64 << 10,
   "fabricated frames: a file's 8K page-cache folio is not mTHP", (lib, d2 and d2["totals"]))
cg = d["system"] and d.get("cgroup") if d else None
ok(cg and cg["path"] == "/jobs/db" and {(x["size"], x["limit"]) for x in cg["hugetlb_limits"]}
   == {("2MB", 0), ("1GB", None)}, "cgroup v2 hugetlb limits read (max is null)", cg)
rc, out, err = run("why", "4242", env=env)
ok(rc == 0 and "hugetlb.2MB limit 0B" in out and "verdict:" in out and
   "madvise-not-advised" in out, "text: limits, reasons and a verdict", out + err)
rc, out, err = run("why", "4242", "--mappings", env=env)
ok(rc == 0 and "%012x" % (B + 32 * M) in out and "nohugepage" in out,
   "text --mappings lists each mapping", out)

# The process has THP disabled by prctl: every THP-able mapping says so.
env = fake(4243, maps, thp_enabled=0)
rc, d, err = why(4243, env)
ok(by_start(d, B + 16 * M)["why"] == "process-thp-disabled" and
   by_start(d, B + 112 * M)["why"] == "hugetlb" and d["thp_enabled"] is False,
   "THP_enabled: 0: process-thp-disabled, hugetlb unaffected", d and d["reasons"])
rc, out, err = run("why", "4243", env=env)
ok("DISABLED" in out and "PR_SET_THP_DISABLE" in out, "text says THP is disabled by prctl", out)

# THP never everywhere.
env = fake(4244, maps, enabled="always madvise [never]")
rc, d, err = why(4244, env)
ok(by_start(d, B)["why"] == "huge" and by_start(d, B + 16 * M)["why"] == "system-never" and
   by_start(d, B + 96 * M)["why"] == "system-never", "enabled=never: system-never",
   d and d["reasons"])

# 64K always: the 1 MiB mapping fits 64K pages, so it is not too small.
env = fake(4245, maps, mthp={64: "[always] inherit madvise never",
                             2048: "always [inherit] madvise never"})
rc, d, err = why(4245, env)
ok(by_start(d, B + 48 * M)["why"] == "fallback" and
   by_start(d, B + 16 * M)["why"] == "fallback" and "not measured" in by_start(d, B + 16 * M)["text"],
   "64K always: small and unadvised mappings could have mTHP, unmeasured here",
   d and [(m["why"], m["text"]) for m in d["mappings"][:5]])

# A kernel without per-size switches: enabled governs the PMD size.
env = fake(4246, maps, mthp={})
rc, d, err = why(4246, env)
ok(by_start(d, B + 16 * M)["why"] == "madvise-not-advised" and by_start(d, B)["why"] == "huge",
   "no hugepages-<size>kB directories: enabled alone decides", d and d["system"])

# Errors: message, exit code, and a document under --json.
env = fake(4247, maps)
for args, code, what in [(("why", "999999"), 4, "no process 999999"),
                         (("why", "-5"), 2, "not a process ID"),
                         (("why", "1.5"), 2, "not a process ID"),
                         (("why", "0"), 2, "not a process ID"),
                         (("why",), 2, "a PID is required"),
                         (("why", "4247", "--bogus"), 2, "unknown option \"--bogus\""),
                         (("why", "4247", "4248"), 2, "one PID only")]:
    rc, out, err = run(*args, env=env)
    ok(rc == code and what in err and out == "", "%s: exit %d, says %r" % (" ".join(args), code,
                                                                          what), (rc, out, err))
    rc, out, err = run(*args, "--json", env=env)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    ok(rc == code and doc and doc["status"] == code and what in doc["error"] and
       doc["command"] == "why", "%s --json: the document with status %d" % (" ".join(args), code),
       (rc, out, err))
# A kernel thread has no user memory.
put(env["HP_SYSFS_ROOT"], "proc/2/smaps", "")
put(env["HP_SYSFS_ROOT"], "proc/2/status", "Name:\tkthreadd\n")
rc, d, err = why(2, env)
ok(rc == 0 and d["mappings"] == [] and "no user memory" in d["verdict"],
   "kernel thread: no user memory", (rc, d, err))

# --- 2. real processes ----------------------------------------------------------


def start(cmd, user=None):
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    return p, line


def stop(p):
    p.stdin.close()
    p.wait(timeout=30)


def real(mode, expect_why, check=None):
    p, line = start([TARGET, mode])
    if len(line) != 3:
        ok(False, "why_target %s started" % mode, line)
        stop(p)
        return None
    addr = int(line[0], 16)
    rc, d, err = why(int(line[2]), None)
    m = by_start(d, addr)
    cond = rc == 0 and m is not None and m["why"] == expect_why
    if cond and check:
        cond = check(m, d)
    ok(cond, "real process, %s: %s" % (mode, expect_why),
       (rc, err, m, d and d["reasons"]))
    stop(p)
    return d


PMD = T + "hugepages-2048kB/enabled"
if os.geteuid() != 0 or not os.path.exists(T + "enabled"):
    skip("real processes", "needs root and THP to hold the THP switches at known values")
else:
    sizes = sorted(int(n[10:-2]) for n in os.listdir(T) if n.startswith("hugepages-"))
    switches = [T + "enabled"] + [T + "hugepages-%dkB/enabled" % kb for kb in sizes
                                  if os.path.exists(T + "hugepages-%dkB/enabled" % kb)]
    for path in switches:
        knob_save(path)

    def setk(path, value):
        with open(path, "w") as f:
            f.write(value)

    def defaults():
        setk(T + "enabled", "madvise")
        for path in switches[1:]:
            setk(path, "inherit" if path == PMD else "never")

    defaults()
    huge = lambda m, d: m["thp"] == m["rss"] == 8 * M and d["totals"]["huge"] >= 8 * M
    real("thp", "huge", huge)
    real("plain", "madvise-not-advised", lambda m, d: m["thp"] == 0 and m["advice"] is None)
    real("nohuge", "nohugepage", lambda m, d: m["advice"] == "nohugepage")
    real("prctl", "process-thp-disabled", lambda m, d: d["thp_enabled"] is False)
    real("small", "too-small")
    real("unaligned", "too-small", lambda m, d: m["size"] == 2 * M)
    real("edges", "unaligned-edges", lambda m, d: m["thp"] == 4 * M)
    if tuple(int(x) for x in os.uname().release.split(".")[:2]) >= (6, 7):
        real("stack", "nohugepage", lambda m, d: m["thp"] == 0)
    else:
        skip("real process, stack: nohugepage", "MAP_STACK implies VM_NOHUGEPAGE since 6.7")
    real("untouched", "not-resident", lambda m, d: m["rss"] == 0)
    # 8 TiB with 128 pages in it: the page walk visits only what is there
    # (PAGEMAP_SCAN; read entry by entry, this took 14 s, and the shadow of
    # a sanitizer build took longer than the test's timeout).
    real("sparse", "madvise-not-advised", lambda m, d: m["rss"] == 128 * 4096 and
         m["size"] == 8 << 40 and d["totals"]["mthp"] == 0)
    free_path = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
    nr_path = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
    if os.path.exists(nr_path):
        knob_save(nr_path)
        with open(free_path) as f:
            free = int(f.read())
        if free < 2:
            with open(nr_path) as f:
                total = int(f.read())
            setk(nr_path, str(total + 2 - free))
        real("hugetlb", "hugetlb", lambda m, d: m["hugetlb"] == 4 * M and
             m["kernel_page_size"] == 2 * M and d["totals"]["hugetlb"] >= 4 * M)
    else:
        skip("real process, hugetlb", "no 2 MiB hugetlb pool on this kernel")

    # A python3 process: glibc's malloc, no advice; then glibc's own THP tunable.
    PY = ("import sys; x = bytearray(64 << 20); x[::4096] = b'\\1' * (16384); "
          "print(hex(id(x)), 0, flush=True); sys.stdin.readline()")
    p, _ = start(["python3", "-c", PY])
    rc, d, err = why(p.pid, None)
    ok(rc == 0 and d["name"].startswith("python") and d["totals"]["huge"] == 0 and
       any(r["why"] == "madvise-not-advised" and r["rss"] >= 60 * M for r in d["reasons"]) and
       "MADV_HUGEPAGE" in d["verdict"], "python3: 64M on base pages, madvise mode named",
       (rc, err, d and d["reasons"], d and d["verdict"]))
    stop(p)
    env = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.hugetlb=1")
    p = subprocess.Popen(["python3", "-c", PY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env)
    p.stdout.readline()
    rc, d, err = why(p.pid, None)
    ok(rc == 0 and d["totals"]["thp"] >= 32 * M and any(m["advice"] == "hugepage" and
       m["thp"] > 0 for m in d["mappings"]),
       "python3 with glibc.malloc.hugetlb=1: THP measured on its advised chunk",
       (rc, err, d and d["totals"], d and d["reasons"]))
    stop(p)

    # THP never: the advised mapping is refused system-wide.
    setk(T + "enabled", "never")
    for path in switches[1:]:
        setk(path, "inherit" if path == PMD else "never")
    real("thp", "system-never", lambda m, d: m["thp"] == 0)

    # 64K always: the 1 MiB mapping is on 64K folios, measured as root.
    defaults()
    K64 = T + "hugepages-64kB/enabled"
    if K64 in switches and os.path.exists("/proc/kpageflags"):
        setk(K64, "always")
        real("small", "huge", lambda m, d: m["mthp"] == M and [x for x in m["mthp_sizes"]
             if x["bytes"]] == [{"page_size": 64 << 10, "bytes": M}] and d["totals"]["mthp"] >= M)
        real("plain", "huge",
             lambda m, d: m["mthp"] == 8 * M and m["thp"] == 0)
        defaults()
    else:
        skip("real process, 64K mTHP", "no 64 KiB mTHP size or no /proc/kpageflags")

# --- 3. another user -------------------------------------------------------------
if os.geteuid() != 0:
    skip("as nobody", "needs root to run as nobody")
else:
    tmp = tempfile.mkdtemp(prefix="hpctl-why-")
    try:
        os.chmod(tmp, 0o755)
        exe = os.path.join(tmp, "hpctl")
        target = os.path.join(tmp, "why_target")
        shutil.copy(sys.argv[1], exe)
        shutil.copy(TARGET, target)
        os.chmod(exe, 0o755)
        os.chmod(target, 0o755)
        p, line = start([TARGET, "plain"])
        rc, out, err = run("why", line[2], user="nobody", hpctl=exe)
        ok(rc == 3 and "Permission denied" in err and "same user" in err and out == "",
           "as nobody about a root process: exit 3, says why", (rc, out, err))
        rc, out, err = run("why", line[2], "--json", user="nobody", hpctl=exe)
        doc = json.loads(out) if out.startswith("{") else None
        ok(rc == 3 and doc and doc["status"] == 3 and doc["mappings"] is None,
           "as nobody --json: the document with status 3", (rc, out, err))
        stop(p)
        p, line = start([target, "thp"], user="nobody")
        rc, out, err = run("why", line[2], "--json", "--mappings", user="nobody", hpctl=exe)
        doc = json.loads(out) if out.startswith("{") else None
        m = by_start(doc, int(line[0], 16)) if doc and line else None
        ok(rc == 0 and m and m["why"] in ("huge", "fallback") and doc["totals"]["mthp"] is None
           and "root" in doc["totals"]["mthp_unmeasured"],
           "as nobody about its own process: an answer, mTHP unmeasured (needs root)",
           (rc, err, m, doc and doc["totals"]))
        stop(p)
    finally:
        shutil.rmtree(tmp, True)
done()
