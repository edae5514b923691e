#!/usr/bin/env python3
"""hpctl pool, thp and mthp on this machine's real knobs, under the knob
lock, every knob restored on exit, on failure and on a fatal signal:
`hpctl pool set 2M 64` then `hpctl pool` shows 64 and /proc/meminfo agrees;
release gives the pages back; thp/mthp set change the real files; and a
user who is not root gets exit code 3 and a message, with nothing changed.

usage: check-knobs-real.py HPCTL   (TAP output)"""
import os
import shutil
import tempfile

from hpctltest import (HPCTL, done, knob_get, knob_lock, knob_save, meminfo, ok, restore, run,
                       run_json, skip)

POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB/"
THP = "/sys/kernel/mm/transparent_hugepage/"


def pool_total(d, size):
    return next((p["total"] for p in d["pools"] if p["page_size"] == size), None)


if os.geteuid() != 0 or not os.path.exists(POOL + "nr_hugepages"):
    skip("real knobs", "needs root and a 2 MiB hugetlb pool")
    done()

knob_lock()
try:
    knob_save(POOL + "nr_hugepages")
    # The acceptance: the command reserves, and the view and the kernel agree.
    rc, out, err = run("pool", "set", "2M", "64")
    ok(rc == 0 and "64 pages" in out and " ms" in out, "hpctl pool set 2M 64", out + err)
    rc, d, err = run_json("pool")
    ok(rc == 0 and pool_total(d, 2 << 20) == 64, "hpctl pool shows 64", (d, err))
    hugetlb_kb = sum(p["total"] * p["page_size"] // 1024 for p in d["pools"])
    ok(int(knob_get(POOL + "nr_hugepages")) == 64 and meminfo("Hugetlb") == hugetlb_kb and
       (meminfo("Hugepagesize") != 2048 or meminfo("HugePages_Total") == 64) and
       d["meminfo"]["Hugetlb_kb"] == meminfo("Hugetlb"),
       "/proc/meminfo agrees (HugePages_Total %s, Hugetlb %s kB)"
       % (meminfo("HugePages_Total"), meminfo("Hugetlb")), d)
    # JSON of a change: what was asked and granted, and the time.
    rc, d, err = run_json("pool", "set", "2M", "32")
    ch = d and d["changes"][0]
    ok(rc == 0 and ch["before"] == 64 and ch["granted"] == 32 and ch["elapsed_ns"] > 0,
       "pool set --json reports before, granted and time", (d, err))
    rc, out, err = run("pool", "set", "2M", "8", "--dry-run")
    ok(rc == 0 and int(knob_get(POOL + "nr_hugepages")) == 32, "--dry-run changes nothing",
       out + err)
    rc, out, err = run("pool", "release", "2M")
    in_use = int(knob_get(POOL + "surplus_hugepages"))
    ok(rc == 0 and int(knob_get(POOL + "nr_hugepages")) == in_use, "release empties the pool "
       "(%d pages still in use by others)" % in_use, out + err)

    # Not root: exit 3, a message, nothing written. hpctl links the core
    # statically, so a copy in a directory nobody may enter runs alone.
    tmp = tempfile.mkdtemp(prefix="hpctl-nobody-")
    try:
        os.chmod(tmp, 0o755)
        exe = os.path.join(tmp, "hpctl")
        shutil.copy(HPCTL, exe)
        os.chmod(exe, 0o755)
        before = knob_get(POOL + "nr_hugepages")
        rc, out, err = run("pool", "set", "2M", "64", user="nobody", hpctl=exe)
        ok(rc == 3 and "root" in err and knob_get(POOL + "nr_hugepages") == before,
           "as nobody: pool set exits 3 and says it needs root", (rc, out, err))
        rc, out, err = run("pool", "set", "2M", "64", "--dry-run", user="nobody", hpctl=exe)
        ok(rc == 3 and "root" in err, "as nobody: --dry-run foresees the refusal", (rc, out, err))
        rc, out, err = run("thp", "set", "defrag", "defer", user="nobody", hpctl=exe)
        ok(rc == 3 and "root" in err, "as nobody: thp set exits 3", (rc, out, err))
        rc, out, err = run("pool", user="nobody", hpctl=exe)
        ok(rc == 0 and "2M" in out, "as nobody: pool shows the pools", (rc, out, err))
    finally:
        shutil.rmtree(tmp, True)

    # A value the kernel refuses (nr_hugepages is an unsigned long).
    rc, out, err = run("pool", "set", "2M", "99999999999999999999")
    ok(rc in (1, 2) and err.strip(), "an impossible count is refused with a message", err)

    # THP and mTHP switches: changed, read back, restored.
    if os.path.exists(THP + "defrag"):
        knob_save(THP + "defrag")
        rc, d, err = run_json("thp", "set", "defrag", "defer")
        ok(rc == 0 and "[defer]" in knob_get(THP + "defrag") and d["changes"][0]["after"] == "defer",
           "thp set defrag defer", (d, err))
    m64 = THP + "hugepages-64kB/enabled"
    if os.path.exists(m64):
        knob_save(m64)
        new = "madvise" if "[madvise]" not in knob_get(m64) else "never"
        rc, out, err = run("mthp", "set", "64K", "enabled", new)
        rc2, d, _ = run_json("mthp")
        shown = next(s["enabled"] for s in d["sizes"] if s["page_size"] == 65536)
        ok(rc == 0 and "[%s]" % new in knob_get(m64) and shown == new,
           "mthp set 64K enabled %s, and mthp shows it" % new, out + err)
    else:
        skip("mthp set", "no 64 KiB mTHP size")
    # undo on the real knobs: the pool and defrag back to what they were.
    before_pool = knob_get(POOL + "nr_hugepages")
    run("pool", "set", "2M", str(int(before_pool) + 4))
    rc, d, err = run_json("undo")
    ok(rc == 0 and knob_get(POOL + "nr_hugepages") == before_pool and len(d["changes"]) == 1 and
       d["changes"][0]["asked"] == before_pool, "undo after pool set: the pool is back at %s"
       % before_pool, (d, err))
    if os.path.exists(THP + "defrag"):
        was = knob_get(THP + "defrag").split("[")[1].split("]")[0]
        run("thp", "set", "defrag", "never" if was != "never" else "madvise")
        rc, out, err = run("undo")
        ok(rc == 0 and "[%s]" % was in knob_get(THP + "defrag"),
           "undo after thp set defrag: %s again" % was, out + err)
    # "all" leaves THP itself (the PMD size) alone: thp-madvise stays available.
    pmd = THP + "hugepages-2048kB/enabled"
    sizes = [THP + n + "/enabled" for n in sorted(os.listdir(THP)) if n.startswith("hugepages-")]
    if os.path.exists(pmd) and "[never]" not in knob_get(pmd):
        for path in sizes:
            if os.path.exists(path):
                knob_save(path)
        before = knob_get(pmd)
        rc, out, err = run("mthp", "set", "all", "enabled", "never")
        rc2, st, _ = run_json("status")
        thp = next((b for b in (st or {}).get("backends", []) if b["name"] == "thp-madvise"), {})
        ok(rc == 0 and knob_get(pmd) == before and "left out" in out and
           all("[never]" in knob_get(p) for p in sizes if p != pmd and os.path.exists(p)) and
           (thp.get("available") or "[never]" in knob_get(THP + "enabled")),
           "mthp set all enabled never: every size below 2M off, 2M (THP) untouched, "
           "thp-madvise still available", (out, err, before, knob_get(pmd), thp))
    else:
        skip("mthp set all", "no 2048kB switch, or it is never")
finally:
    restore()
done()
