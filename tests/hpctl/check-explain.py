#!/usr/bin/env python3
"""hpctl explain S names the backend and page size that hp_alloc(S) then
really uses (hp_info, through libhp.so, in the same environment): on 20
fabricated machines (HP_SYSFS_ROOT trees) and on this one, with flags,
named and excluded backends and HP_BACKENDS. The real 2 MiB pool keeps 128
free pages during the run (knob lock, restored), so that a fabricated pool
that claims free pages is backed by real ones when hp_alloc maps.

usage: check-explain.py HPCTL ALLOC_PROBE   (TAP output)"""
import json
import os
import subprocess
import sys

from hpctltest import (done, fake_tree, knob_lock, knob_save, ok, put, restore, run, run_json,
                       skip)

PROBE = sys.argv[2]
K, M, G = 1 << 10, 1 << 20, 1 << 30
REQUIRE_HUGE = 1 << 0
PAGE_2M = 21 << 56
PAGE_1G = 30 << 56
POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
MADVISE = "always [madvise] never"
NEVER = "always madvise [never]"
ON = "[always] inherit madvise never"
OFF = "always inherit madvise [never]"


def flags_args(flags):
    args = []
    if flags & REQUIRE_HUGE:
        args.append("--require-huge")
    if flags >> 56 == 21:
        args += ["--page-size", "2M"]
    if flags >> 56 == 30:
        args += ["--page-size", "1G"]
    return args


def pool_file(name):
    with open(POOL.replace("nr_hugepages", name)) as f:
        return int(f.read())


def top_up(pages=128):
    """Other programs on this machine may hold pool pages: keep `pages`
    free and unreserved in the real pool, so that a fabricated pool's free
    pages are real ones when hp_alloc maps."""
    room = pool_file("free_hugepages") - pool_file("resv_hugepages")
    if room < pages:
        with open(POOL, "w") as f:
            f.write(str(pool_file("nr_hugepages") + pages - room))


def compare(name, size, env, flags=0, backend=None, exclude=None, expect=None, tries=3):
    for attempt in range(tries):
        top_up()
        said, got, detail, good = compare_once(size, env, flags, backend, exclude, expect)
        # The real pool drained by another program between our top-up and
        # hp_alloc's map: hp_alloc rightly took the next candidate. Retry.
        if good or not (said[1] == "hugetlbfs" and got[1] != "hugetlbfs"):
            break
        print("# %s: real pool drained by another program during the map; again" % name)
    return ok(good, "%s: explain says %s %s, hp_alloc used %s %s" %
              (name, said[1], said[2], got[1], got[2]), detail)


def compare_once(size, env, flags, backend, exclude, expect):
    env = dict(env)
    args = [str(size)] + flags_args(flags)
    if backend:
        args += ["--backend", backend]
    if exclude:
        args += ["--exclude", exclude]
    rc, ex, err = run_json("explain", *args, env=env)
    if ex is None:
        return (None,) * 3, (None,) * 3, err, False
    e = dict(os.environ)
    e.pop("HP_CACHE_MAX", None)
    e.update(env)
    p = subprocess.run([PROBE, str(size), str(flags), backend or "-", exclude or "-"],
                       capture_output=True, text=True, env=e, timeout=60)
    try:
        real = json.loads(p.stdout)
    except ValueError:
        return (None,) * 3, (None,) * 3, "probe: %r %r" % (p.stdout, p.stderr), False
    said = (ex["status"], ex["result"]["backend"] if ex["result"] else None,
            ex["result"]["page_size"] if ex["result"] else None)
    got = (real["status"], real["backend"], real["page_size"])
    good = said == got and (rc == 0) == (said[0] == "HP_OK")
    if expect is not None:
        good = good and said[1:] == expect
    return said, got, "explain %s; hp_alloc %s; expected %s\n%s" % (said, got, expect,
                                                                      json.dumps(ex)), good


# Use the defaults, as a program would (the suite turns the cache off).
os.environ.pop("HP_CACHE_MAX", None)

if os.geteuid() != 0 or not os.path.exists(POOL):
    skip("explain against hp_alloc", "needs root and a 2 MiB hugetlb pool to back fabricated ones")
    done()

knob_lock()
knob_save(POOL)
try:
    top_up()
    if pool_file("free_hugepages") - pool_file("resv_hugepages") < 128:
        skip("explain against hp_alloc", "the kernel granted fewer than 128 free 2 MiB pages")
        done()

    def machine(**kw):
        return {"HP_SYSFS_ROOT": fake_tree(**kw)}

    pool64 = {2048: (64, 64, 0, 0, 0)}
    mthp_all = {kb: ON for kb in (16, 32, 64, 128, 256, 512, 1024)}
    mthp_all[2048] = "always [inherit] madvise never"
    # 1-2: a 2 MiB pool with 64 free pages; enough, then short.
    compare("m1 pool serves 64M", 64 * M, machine(pools=pool64), expect=("hugetlbfs", 2 * M))
    compare("m2 pool short for 3G", 3 * G, machine(pools=pool64), expect=("thp-madvise", 2 * M))
    # 3: THP off, no pool pages: base pages.
    compare("m3 THP never, empty pool", 64 * M, machine(pools={2048: (0, 0, 0, 0, 0)}, thp=NEVER),
            expect=("fallback", 4 * K))
    # 4-5: mTHP sizes on.
    compare("m4 mTHP 64K on, 100K block", 100 * K,
            machine(mthp={16: OFF, 64: ON, 2048: "always [inherit] madvise never"}),
            expect=("anon-orders", 64 * K))
    compare("m5 every mTHP size on, 700K block", 700 * K, machine(mthp=mthp_all),
            expect=("anon-orders", 512 * K))
    # 6: a small block.
    compare("m6 4K block", 4 * K, machine(pools=pool64), expect=("fallback", 4 * K))
    # 7: huge pages required for a block smaller than any huge page.
    compare("m7 --require-huge 4K", 4 * K, machine(pools=pool64), flags=REQUIRE_HUGE,
            expect=(None, None))
    # 8: a page size asked for.
    compare("m8 --page-size 2M for 4K", 4 * K, machine(pools=pool64), flags=PAGE_2M,
            expect=("hugetlbfs", 2 * M))
    # 9-10: HP_BACKENDS.
    env = machine(pools=pool64)
    env["HP_BACKENDS"] = "-hugetlbfs"
    compare("m9 HP_BACKENDS=-hugetlbfs", 64 * M, env, expect=("thp-madvise", 2 * M))
    env = machine(pools=pool64)
    env["HP_BACKENDS"] = "fallback,thp-madvise"
    compare("m10 HP_BACKENDS=fallback,thp-madvise", 64 * M, env, expect=("fallback", 4 * K))
    # 11: a named backend.
    compare("m11 --backend anon-orders", 8 * M, machine(mthp={64: ON}), backend="anon-orders",
            expect=("anon-orders", 64 * K))
    # 12: an excluded backend.
    compare("m12 --exclude thp-madvise", 8 * M,
            machine(pools={2048: (0, 0, 0, 0, 0)}, mthp={64: ON}), exclude="thp-madvise",
            expect=("anon-orders", 64 * K))
    # 13: no hugetlb at all.
    compare("m13 no hugetlb pools", 64 * M, machine(pools={}), expect=("thp-madvise", 2 * M))
    # 14: no THP at all.
    compare("m14 no THP", 64 * M, machine(pools={2048: (0, 0, 0, 0, 0)}, thp=None),
            expect=("fallback", 4 * K))
    # 15: pages only through overcommit (surplus).
    compare("m15 overcommit only", 32 * M, machine(pools={2048: (0, 0, 0, 0, 64)}),
            expect=("hugetlbfs", 2 * M))
    # 16: most free pages already promised to other mappings.
    compare("m16 reserved pages", 16 * M, machine(pools={2048: (64, 64, 60, 0, 0)}),
            expect=("thp-madvise", 2 * M))
    # 17: a 1 GiB page asked for, its pool empty: nothing else has that size.
    compare("m17 --page-size 1G, 1G pool empty", G + 4 * K,
            machine(pools={2048: (64, 64, 0, 0, 0), 1048576: (0, 0, 0, 0, 0)}), flags=PAGE_1G,
            expect=(None, None))
    # 18: 1 GiB pool short, 2 MiB pool serves 2 MiB + 4 KiB.
    compare("m18 2M+4K with two pools", 2 * M + 4 * K,
            machine(pools={2048: (64, 64, 0, 0, 0), 1048576: (1, 0, 0, 0, 0)}),
            expect=("hugetlbfs", 2 * M))
    # 19: a hugetlb cgroup limit of 4 pages.
    env = machine(pools=pool64)
    put(env["HP_SYSFS_ROOT"], "proc/self/cgroup", "0::/job\n")
    put(env["HP_SYSFS_ROOT"], "sys/fs/cgroup/job/hugetlb.2MB.max", "%d\n" % (8 * M))
    put(env["HP_SYSFS_ROOT"], "sys/fs/cgroup/job/hugetlb.2MB.current", "0\n")
    compare("m19 cgroup limit", 16 * M, env, expect=("thp-madvise", 2 * M))
    compare("m19b within the cgroup limit", 8 * M, env, expect=("hugetlbfs", 2 * M))
    # 20: required huge pages when only mTHP is on.
    compare("m20 --require-huge, mTHP only", 1 * M,
            machine(pools={2048: (0, 0, 0, 0, 0)}, thp=NEVER, mthp={256: ON}),
            flags=REQUIRE_HUGE, expect=("anon-orders", 256 * K))

    # This machine, as it is (with 128 free pool pages).
    for size, flags, backend in [(4 * K, 0, None), (100 * K, 0, None), (2 * M + 4 * K, 0, None),
                                 (64 * M, 0, None), (64 * M, REQUIRE_HUGE, None),
                                 (3 * G, 0, None), (8 * M, 0, "thp-madvise"),
                                 (4 * K, PAGE_2M, None)]:
        compare("this machine: %d bytes, flags %#x, backend %s" % (size, flags, backend), size, {},
                flags=flags, backend=backend)

    # The reasons are there.
    rc, ex, err = run_json("explain", str(3 * G), env=machine(pools=pool64))
    short = [p for p in ex["passed_over"] if p["why"] == "pool-short"]
    ok(short and short[0]["short_pages"] == 1536 - 64, "pool short by 1472 pages", ex)
    rc, out, err = run("explain", "64M", env=machine(pools={2048: (0, 0, 0, 0, 0)}, thp=NEVER,
                                                     mthp={64: OFF, 16: ON}))
    ok(rc == 0 and "unavailable: THP" in out and "64K   mTHP size set to never" in out,
       "text names THP off and an mTHP size set to never", out + err)
    env = machine(pools=pool64)
    env["HP_BACKENDS"] = "-hugetlbfs"
    rc, out, err = run("explain", "64M", env=env)
    ok("excluded by HP_BACKENDS" in out, "text names HP_BACKENDS", out)
    rc, out, err = run("explain", "4K", "--require-huge", env=machine(pools=pool64))
    ok(rc == 1 and "would fail: HP_ENOHUGE" in out, "a request hp_alloc refuses: exit 1", out)
    rc, out, err = run("explain", "0")
    ok(rc == 1 and "HP_ESIZE" in out, "size 0: HP_ESIZE", out)
    # hpctl alloc takes explain's options and does what it said (m12).
    rc, d, err = run_json("alloc", "8M", "--exclude", "thp-madvise",
                          env=machine(pools={2048: (0, 0, 0, 0, 0)}, mthp={64: ON}))
    ok(rc == 0 and d is not None and d["backend"] == "anon-orders" and
       d["page_size"] == 64 * K and d["error"] is None,
       "alloc 8M --exclude thp-madvise: anon-orders 64K, as explain said", (d, err))
    rc, d, err = run_json("alloc", "0")
    ok(rc == 1 and d is not None and d["status"] == 1 and d["error"]["code"] == "HP_ESIZE" and
       d["backend"] is None, "alloc 0 --json: a document with the error, exit 1", (d, err))
    rc, out, err = run("explain", "1M", "--backend", "nosuch")
    ok(rc == 1 and "HP_ENOBACKEND" in out, "unknown backend: HP_ENOBACKEND", out)
    rc, out, err = run("explain", "lots")
    ok(rc == 2 and 'SIZE "lots" is not a size' in err, "bad size: usage, naming it", err)
    # --node/--numa-mode: hp_alloc_ex's placement, checked as hp_alloc_ex checks it.
    rc, out, err = run("explain", "4M", "--node", "0", "--numa-mode", "bind")
    ok(rc == 0 and "would use" in out, "explain --node 0 --numa-mode bind: served", out + err)
    rc, out, err = run("explain", "4M", "--node", "1023")
    ok(rc == 1 and "HP_EINVAL" in out and "node 1023 has no memory" in out,
       "explain --node 1023: HP_EINVAL naming the node without memory", out + err)
    # The kernel's node list format (cpusets.rst): ranges too, as
    # /sys/devices/system/node/has_memory prints them.
    rc, out, err = run("explain", "4M", "--node", "0-0", "--numa-mode", "bind")
    ok(rc == 0 and "would use" in out, "explain --node 0-0 --numa-mode bind: a range, served",
       out + err)
    with open("/sys/devices/system/node/has_memory") as f:
        has_memory = f.read().strip()
    rc, out, err = run("explain", "4M", "--node", has_memory, "--numa-mode", "bind")
    ok(rc == 0 and "would use" in out, "explain --node %s (has_memory as the kernel prints it): "
       "served" % has_memory, out + err)
    rc, out, err = run("explain", "4M", "--node", "1022-1023")
    ok(rc == 1 and "node 1022 has no memory" in out,
       "explain --node 1022-1023: HP_EINVAL naming the first node of the range", out + err)
    for bad in ("3-1", "1-", "0,,1", "", "0-1024", " 1"):
        rc, out, err = run("explain", "4M", "--node", bad)
        ok(rc == 2 and '--node "%s" is not a node list' % bad in err,
           "explain --node %r: usage, naming it" % bad, err)
    rc, out, err = run("explain", "4M", "--numa-mode", "bind")
    ok(rc == 2 and "--numa-mode needs --node" in err, "--numa-mode alone: usage", err)
    rc, out, err = run("explain", "4M", "--node", "0", "--numa-mode", "sometimes")
    ok(rc == 2 and "prefer, bind or interleave" in err, "unknown --numa-mode: usage", err)
    rc, out, err = run("explain", "4M", "--node", "1024")
    ok(rc == 2 and "below 1024" in err, "--node 1024: usage", err)
    # A page size this kernel has no pages of: that is the reason given,
    # not a pool of another size.
    if not os.path.exists("/sys/kernel/mm/hugepages/hugepages-1048576kB"):
        rc, out, err = run("explain", "1G", "--page-size", "1G")
        rc2, d, _ = run_json("explain", "1G", "--page-size", "1G")
        ok(rc == 1 and out.splitlines()[1].startswith("because this kernel has no 1G pages") and
           d and "no 1G pages" in d["page_size_missing"],
           "explain 1G --page-size 1G without 1 GiB pages: says the kernel has none, first",
           (out, d))
    else:
        ok(True, "explain --page-size 1G without 1 GiB pages # SKIP this kernel has them")
    # The same on a fabricated kernel without 1 GiB pages (whatever this
    # one has): the short 2 MiB pool is passed over as another page size,
    # not blamed.
    no1g = fake_tree(pools={2048: (64, 64, 0, 0, 0)},
                     mthp={2048: "always [inherit] madvise never"})
    rc, out, err = run("explain", "1G", "--page-size", "1G", env={"HP_SYSFS_ROOT": no1g})
    rc2, d, _ = run_json("explain", "1G", "--page-size", "1G", env={"HP_SYSFS_ROOT": no1g})
    h2 = [n for n in (d or {}).get("passed_over", [])
          if n["backend"] == "hugetlbfs" and n["page_size"] == 2 << 20]
    ok(rc == 1 and out.splitlines()[1].startswith("because this kernel has no 1G pages") and
       "pool short" not in out and d and h2 and h2[0]["why"] == "other-size",
       "explain 1G --page-size 1G, no 1 GiB pages (fabricated): the 2M pool is another size,"
       " not short", (out, d))
    rc, d, err = run_json("explain", "1G", "--page-size", "2M")
    ok(d and d["page_size_missing"] is None, "a page size the kernel has: page_size_missing null",
       d)
finally:
    restore()
done()
