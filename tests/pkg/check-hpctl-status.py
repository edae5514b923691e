#!/usr/bin/env python3
"""hpctl status --json parses, names the four backends, and each one's
availability matches what /sys says about this machine right now.

usage: check-hpctl-status.py HPCTL   (TAP output)"""
import glob
import json
import os
import re
import subprocess
import sys

THP = "/sys/kernel/mm/transparent_hugepage"


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def mode(path):
    text = read(path)
    m = re.search(r"\[(\w+)\]", text or "")
    return m.group(1) if m else None


def expected():
    top = mode(f"{THP}/enabled") or "never"
    pmd = int(read(f"{THP}/hpage_pmd_size") or 0)

    def size_mode(kb):
        m = mode(f"{THP}/hugepages-{kb}kB/enabled")
        return top if m == "inherit" else m

    thp = bool(pmd) and (size_mode(pmd >> 10) or top) != "never"
    orders = [size_mode(int(re.search(r"(\d+)kB", d).group(1)))
              for d in glob.glob(f"{THP}/hugepages-*kB")
              if int(re.search(r"(\d+)kB", d).group(1)) * 1024 < pmd]
    mthp = any(m not in (None, "never") for m in orders)
    pools = False
    for d in glob.glob("/sys/kernel/mm/hugepages/hugepages-*kB"):
        v = {k: int(read(f"{d}/{k}") or 0) for k in
             ("free_hugepages", "resv_hugepages", "surplus_hugepages", "nr_overcommit_hugepages")}
        room = max(v["free_hugepages"] - v["resv_hugepages"], 0) + \
            max(v["nr_overcommit_hugepages"] - v["surplus_hugepages"], 0)
        pools |= room > 0
    disabled = False  # PR_GET_THP_DISABLE: not set by the test runner
    return {"fallback": True, "thp-madvise": thp and not disabled,
            "anon-orders": mthp and not disabled, "hugetlbfs": pools}


def check_now(label, checks):
    out = subprocess.run([sys.argv[1], "status", "--json"], capture_output=True, text=True)
    try:
        doc = json.loads(out.stdout)
        checks.append((f"{label}: status --json parses as JSON", True, ""))
    except ValueError as e:
        doc = {"backends": []}
        checks.append((f"{label}: status --json parses as JSON", False, str(e)))
    got = {b["name"]: b for b in doc.get("backends", [])}
    want = expected()
    checks.append((f"{label}: names the four backends", set(want) <= set(got), sorted(got)))
    for name, avail in want.items():
        b = got.get(name, {})
        checks.append((f"{label}: {name} available={avail} as /sys says",
                       b.get("available") == avail, b.get("reason", "missing")))


KNOBS = {"/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages": "4",
         f"{THP}/hugepages-64kB/enabled": "always"}
checks = []
import fcntl
# The lock tests/support takes (support.c: knob_lock), same fallback: nobody
# else changes knobs or pools between our reading /sys and hpctl's.
lockdir = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
lock = open(f"{lockdir}/libhp-knobs.lock", "a")
fcntl.flock(lock, fcntl.LOCK_EX)
check_now("as found", checks)
if os.geteuid() == 0 and all(os.path.exists(k) for k in KNOBS):
    saved = {k: (mode(k) or read(k)) for k in KNOBS}
    try:
        for k, v in KNOBS.items():
            with open(k, "w") as f:
                f.write(v)
        check_now("2 MiB pool of 4 and 64 KiB mTHP on", checks)
    finally:
        for k, v in saved.items():
            with open(k, "w") as f:
                f.write(v)
else:
    print("# SKIP of the changed-knobs round: needs root and the mTHP/hugetlb knobs")
print(f"1..{len(checks)}")
bad = 0
for i, (what, ok, detail) in enumerate(checks, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
    print(f"# {detail}")
    bad |= not ok
sys.exit(bad)
