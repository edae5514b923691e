#!/usr/bin/env python3
"""hpctl pool, thp and mthp on fabricated /sys trees (HP_SYSFS_ROOT): what
they show is what the tree says, set writes the file and reads it back,
--dry-run writes nothing, and bad values, missing sizes and unwritable
knobs get their documented exit codes. No real knob is touched.

usage: check-knobs-fake.py HPCTL   (TAP output)"""
import json
import os

from hpctltest import done, fake_tree, ok, put, read, run, run_json

P2 = "sys/kernel/mm/hugepages/hugepages-2048kB/"
P1G = "sys/kernel/mm/hugepages/hugepages-1048576kB/"
T = "sys/kernel/mm/transparent_hugepage/"

# Two sizes, two nodes: the show output is the tree.
root = fake_tree(pools={2048: (64, 60, 4, 0, 8), 1048576: (2, 1, 0, 0, 0)}, nodes=2,
                 mthp={64: "always inherit madvise [never]", 2048: "always [inherit] madvise never"})
env = {"HP_SYSFS_ROOT": root}
rc, d, err = run_json("pool", env=env)
ok(rc == 0 and d["schema"] == 1 and d["command"] == "pool", "pool --json parses", err)
pools = {p["page_size"]: p for p in d["pools"]}
ok(sorted(pools) == [2 << 20, 1 << 30], "both page sizes listed", d)
p2 = pools[2 << 20]
ok((p2["total"], p2["free"], p2["reserved"], p2["surplus"], p2["overcommit"]) == (64, 60, 4, 0, 8),
   "2M pool figures are the tree's", p2)
ok([(n["node"], n["total"], n["free"]) for n in p2["nodes"]] == [(0, 32, 30), (1, 32, 30)],
   "per-node figures", p2["nodes"])
ok(d["meminfo"]["HugePages_Total"] == 64, "meminfo read from the tree", d["meminfo"])
rc, out, err = run("pool", env=env)
ok(rc == 0 and "1G" in out and "node1=32/30" in out, "pool text", out + err)

# set: writes, reads back, reports the grant and the time.
rc, d, err = run_json("pool", "set", "2M", "100", env=env)
ch = d and d["changes"][0]
ok(rc == 0 and ch["asked"] == 100 and ch["before"] == 64 and ch["granted"] == 100 and
   ch["elapsed_ns"] is not None, "pool set 2M 100", (d, err))
ok(read(root, P2 + "nr_hugepages") == "100", "the knob holds 100")
rc, out, err = run("pool", "set", "1G", "4", "--node", "1", env=env)
ok(rc == 0 and read(root, "sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages")
   == "4" and read(root, P1G + "nr_hugepages") == "2", "--node writes the node's knob only",
   out + err)
rc, d, err = run_json("pool", "set", "2M", "--overcommit", "16", env=env)
ok(rc == 0 and read(root, P2 + "nr_overcommit_hugepages") == "16" and
   read(root, P2 + "nr_hugepages") == "100", "--overcommit alone", (d, err))

# dry run: nothing written.
rc, out, err = run("pool", "set", "2M", "7", "--dry-run", env=env)
ok(rc == 0 and "would write 7" in out and read(root, P2 + "nr_hugepages") == "100",
   "--dry-run writes nothing", out + err)
rc, out, err = run("pool", "release", "--dry-run", env=env)
ok(rc == 0 and out.count("would write 0") == 2 and read(root, P1G + "nr_hugepages") == "2",
   "release --dry-run names both pools", out + err)

# release: every size to 0.
rc, d, err = run_json("pool", "release", env=env)
ok(rc == 0 and len(d["changes"]) == 2 and read(root, P2 + "nr_hugepages") == "0" and
   read(root, P1G + "nr_hugepages") == "0", "release sets every pool to 0", (d, err))

# errors: each names what was wrong; under --json a document with the same code.
for args, code, what, says in [
        (("pool", "set", "3M", "4"), 4, "no such pool size", "no hugetlb pool of 3M"),
        (("pool", "set", "2M", "-4"), 2, "negative count", 'COUNT "-4" is not a page count'),
        (("pool", "set", "2M", "-1"), 2, "count -1", 'COUNT "-1" is not a page count'),
        (("pool", "set", "2M", "lots"), 2, "garbage count", 'COUNT "lots"'),
        (("pool", "set", "2M"), 2, "no count", "COUNT or --overcommit N is required"),
        (("pool", "set", "2M", "4", "--node", "7"), 4, "no such node", "node 7"),
        (("pool", "set", "2M", "4", "--node", "x"), 2, "bad node", '--node "x"'),
        (("pool", "set", "2M", "4", "--node", "0", "--overcommit", "1"), 2,
         "overcommit is not per node", "not for one --node"),
        (("pool", "set", "2M", "4", "--bogus"), 2, "unknown option", 'unknown option "--bogus"'),
        (("pool", "set", "2M", "4", "--node"), 2, "option without value", "--node"),
        (("pool", "frob"), 2, "unknown verb", 'unexpected argument "frob"'),
        (("thp", "set", "khugepaged", "1"), 2, "unknown thp knob", '"khugepaged" is not a knob'),
        (("thp", "set", "enabled"), 2, "thp set without value", "needs a KNOB and a VALUE"),
        (("mthp", "set", "3X", "enabled", "always"), 2, "bad mthp size", 'SIZE "3X"'),
        (("status", "--bogus"), 2, "status option", 'unknown option "--bogus"'),
        (("explain", "-5"), 2, "explain -5", 'SIZE "-5" is not a size'),
        (("explain", "1.5G"), 2, "explain 1.5G", 'SIZE "1.5G" is not a size'),
        (("explain", "10T"), 2, "explain 10T", 'SIZE "10T" is not a size'),
        (("explain", "2M", "--page-size", "3M"), 2, "explain odd page size",
         '--page-size "3M" is not a page size'),
        (("alloc",), 2, "alloc without size", "a SIZE is required"),
        (("watch", "1", "--interval", "0"), 2, "watch --interval 0", '--interval "0"'),
        (("watch", "--count", "x"), 2, "watch --count x", '--count "x"'),
        (("watch", "999999", "--count", "1"), 4, "watch of no process", "no process 999999"),
        (("version", "x"), 2, "version extra", 'unexpected argument "x"'),
        (("frobnicate",), 2, "unknown subcommand", 'unknown command "frobnicate"')]:
    before = read(root, P2 + "nr_hugepages")
    rc, out, err = run(*args, env=env)
    ok(rc == code and says in err and read(root, P2 + "nr_hugepages") == before,
       "%s: exit %d, the message names it, nothing changed" % (what, code), (rc, out, err))
    rc, out, err = run(*args, "--json", env=env)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    cmd = None if args[0] == "frobnicate" else " ".join(args[:2]) if args[1:2] in (
        ("set",), ("release",)) else args[0]
    ok(rc == code and doc and doc["exit_code"] == code and doc["command"] == cmd and
       doc["status"] == (None if args[0] == "explain" else code) and
       says in doc["error"]["detail"] and doc["error"]["code"] ==
       {2: "usage", 4: "not-found"}[code],
       "%s --json: a document with status %d and the message" % (what, code), (rc, out, err))

# A knob that cannot be written (read-only file: what a non-root user sees).
os.chmod(os.path.join(root, P2 + "nr_hugepages"), 0o444)
if os.geteuid() != 0:
    rc, out, err = run("pool", "set", "2M", "8", env=env)
    ok(rc == 3 and "root" in err, "read-only knob: exit 3, says root", err)

# A kernel that grants fewer pages than asked: simulated by a knob that
# reads back its old value (a FIFO would block; a directory fails open).
root2 = fake_tree(pools={2048: (0, 0, 0, 0, 0)})
os.remove(os.path.join(root2, P2 + "nr_hugepages"))
os.mkdir(os.path.join(root2, P2 + "nr_hugepages"))
rc, out, err = run("pool", "set", "2M", "8", env={"HP_SYSFS_ROOT": root2})
ok(rc != 0 and err.strip(), "unreadable knob: a failure with a message", (rc, out, err))

# THP
rc, d, err = run_json("thp", env=env)
ok(rc == 0 and d["enabled"] == "madvise" and d["defrag"] == "madvise", "thp --json", (d, err))
rc, d, err = run_json("thp", "set", "enabled", "always", env=env)
ok(rc == 0 and read(root, T + "enabled") == "always" and d["changes"][0]["before"] == "madvise",
   "thp set enabled always writes the file", (d, err))
put(root, T + "enabled", "[always] madvise never\n")   # as the kernel shows it after the write
rc, out, err = run("thp", "set", "enabled", "sometimes", env=env)
ok(rc == 2 and "always, madvise, never" in err and read(root, T + "enabled") == "[always] madvise never",
   "a value the file does not list is refused, naming the choices", err)
rc, out, err = run("thp", "set", "defrag", "defer", "--dry-run", env=env)
ok(rc == 0 and "would write defer" in out and "madvise" in read(root, T + "defrag"),
   "thp set --dry-run", out + err)
rc, out, err = run("thp", "set", "khugepaged", "1", env=env)
ok(rc == 2, "thp set of an unknown knob is a usage error", err)

# mTHP
rc, d, err = run_json("mthp", env=env)
sizes = {s["page_size"]: s for s in d["sizes"]} if d else {}
ok(rc == 0 and sizes[65536]["enabled"] == "never" and sizes[2 << 20]["enabled"] == "inherit" and
   sizes[65536]["stats"] == {"nr_anon": 3, "anon_fault_alloc": 17} and
   sizes[65536]["shmem_enabled"] == "never", "mthp --json: switches and counters", (d, err))
rc, out, err = run("mthp", "set", "64K", "enabled", "always", env=env)
ok(rc == 0 and read(root, T + "hugepages-64kB/enabled") == "always", "mthp set 64K enabled always",
   out + err)
rc, out, err = run("mthp", "set", "all", "shmem_enabled", "advise", env=env)
ok(rc == 0 and read(root, T + "hugepages-64kB/shmem_enabled") == "advise" and
   "[never]" in read(root, T + "hugepages-2048kB/shmem_enabled") and
   '2M (the PMD size: THP itself) is left out of "all"' in out,
   "mthp set all shmem_enabled: every size below the PMD size; 2M left, and said", out + err)
# "all" never switches THP itself off: 2048kB keeps inherit, and says so.
put(root, T + "hugepages-64kB/enabled", "always inherit madvise [never]\n")
rc, d, err = run_json("mthp", "set", "all", "enabled", "never", env=env)
ok(rc == 0 and read(root, T + "hugepages-64kB/enabled") == "never" and
   "[inherit]" in read(root, T + "hugepages-2048kB/enabled") and
   [c["path"].rsplit("/", 2)[-2] for c in d["changes"]] == ["hugepages-64kB"] and
   [x["page_size"] for x in d["left_out"]] == [2 << 20],
   "mthp set all enabled never leaves 2048kB (THP) on; left_out names it", (d, err))
rc, d, err = run_json("mthp", "set", "2M", "enabled", "never", env=env)
ok(rc == 0 and read(root, T + "hugepages-2048kB/enabled") == "never" and d["left_out"] == [],
   "mthp set 2M enabled never: named, it changes", (d, err))
put(root, T + "hugepages-2048kB/enabled", "always [inherit] madvise never\n")
put(root, T + "hugepages-64kB/enabled", "always\n")
rc, out, err = run("mthp", "set", "128K", "enabled", "always", env=env)
ok(rc == 4 and "128K" in err, "mthp set of a size the kernel lacks: exit 4", err)
rc, out, err = run("mthp", "set", "64K", "enabled", "on", env=env)
ok(rc == 2 and read(root, T + "hugepages-64kB/enabled") == "always", "mthp bad value refused", err)

# undo: each set recorded what it replaced (below HP_SYSFS_ROOT); undo
# writes back the last command's values, --all everything, oldest last.
root4 = fake_tree(pools={2048: (64, 60, 0, 0, 0)},
                  mthp={64: "always inherit madvise [never]", 32: "always inherit madvise [never]",
                        2048: "always [inherit] madvise never"})
env4 = {"HP_SYSFS_ROOT": root4}
rc, out, err = run("undo", env=env4)
ok(rc == 0 and "nothing to undo" in out, "undo with nothing recorded: says so, exit 0", out + err)
for args in (("pool", "set", "2M", "100"), ("pool", "set", "2M", "120"),
             ("mthp", "set", "all", "enabled", "always"), ("thp", "set", "defrag", "defer")):
    run(*args, env=env4)
put(root4, T + "defrag", "always [defer] defer+madvise madvise never\n")
rc, out, err = run("pool", "set", "2M", "7", "--dry-run", env=env4)
rc, d, err = run_json("undo", "--dry-run", env=env4)
ok(rc == 0 and [c["asked"] for c in d["changes"]] == ["madvise"] and d["changes"][0]["after"]
   is None and "[defer]" in read(root4, T + "defrag"), "undo --dry-run: names the last set only,"
   " writes nothing (a dry-run set records nothing)", (d, err))
rc, d, err = run_json("undo", env=env4)
ok(rc == 0 and read(root4, T + "defrag") == "madvise" and len(d["changes"]) == 1,
   "undo: the last command (thp set defrag) is reverted", (d, err))
k32 = os.path.join(root4, T + "hugepages-32kB/enabled")
os.remove(k32)
os.mkdir(k32)   # a knob that cannot be written (root ignores file modes)
rc, d, err = run_json("undo", env=env4)
ok(rc == 1 and read(root4, T + "hugepages-64kB/enabled") == "never" and
   d["changes"][-1]["status"] == 1 and d["changes"][0]["status"] == 0,
   "undo that cannot write one knob: reverts the newer ones, stops there with its status",
   (d, err))
os.rmdir(k32)
put(root4, T + "hugepages-32kB/enabled", "always\n")
rc, d, err = run_json("undo", env=env4)
ok(rc == 0 and read(root4, T + "hugepages-32kB/enabled") == "never" and len(d["changes"]) == 1,
   "undo again: the knob that failed is still recorded, and now reverted", (d, err))
rc, d, err = run_json("undo", "--all", env=env4)
ok(rc == 0 and [c["asked"] for c in d["changes"]] == ["100", "64"] and
   read(root4, P2 + "nr_hugepages") == "64", "undo --all: the pool back to 64, newest first",
   (d, err))
rc, out, err = run("undo", env=env4)
ok(rc == 0 and "nothing to undo" in out, "then nothing is left to undo", out + err)
rc, out, err = run("undo", "--frob", env=env4)
ok(rc == 2 and 'unknown option "--frob"' in err, "undo --frob: usage, naming it", err)

# A long record: undo reverts the newest command however many sets came
# before it, and keeps every older record. The record is written in the
# format hpctl undo reads (GROUP\tKNOB\tVALUE), 1500 commands of one knob.
root5 = fake_tree(pools={2048: (0, 0, 0, 0, 0)})
env5 = {"HP_SYSFS_ROOT": root5}
knob = "/" + P2 + "nr_hugepages"
put(root5, "run/hpctl/undo", "".join("%d.1\t%s\t%d\n" % (i, knob, i) for i in range(1500)))
put(root5, P2 + "nr_hugepages", "1500\n")
rc, out, err = run("pool", "set", "2M", "2000", env=env5)
rc, d, err = run_json("undo", env=env5)
ok(rc == 0 and [c["asked"] for c in d["changes"]] == ["1500"] and
   read(root5, P2 + "nr_hugepages") == "1500",
   "undo after 1501 recorded sets: the newest is reverted", (d, err))
rc, d, err = run_json("undo", env=env5)
ok(rc == 0 and [c["asked"] for c in d["changes"]] == ["1499"] and
   len(read(root5, "run/hpctl/undo").splitlines()) == 1499,
   "and again: the one before it, every older record kept", (d, err))

# No THP at all.
root3 = fake_tree(thp=None)
rc, d, err = run_json("thp", env={"HP_SYSFS_ROOT": root3})
ok(rc == 0 and d["present"] is False, "thp --json on a kernel without THP", (d, err))
rc, out, err = run("mthp", env={"HP_SYSFS_ROOT": root3})
ok(rc == 4, "mthp on a kernel without mTHP: exit 4", (rc, out, err))

# watch, machine view, from the tree.
rc, out, err = run("watch", "--count", "2", "--interval", "0.05", "--json", env=env)
lines = [json.loads(x) for x in out.splitlines()] if rc == 0 else []
ok(len(lines) == 2 and lines[0]["anon_huge_kb"] == 4096 and lines[0]["faults"] == 1000 and
   lines[1]["faults_delta"] == 0 and {m["page_size"]: m["nr_anon"] for m in lines[0]["mthp"]}
   == {65536: 3, 2 << 20: 3}, "watch --json reads the tree", (out, err))
rc, out, err = run("watch", "--count", "2", "--interval", "0.05", env=env)
rows = [l.split() for l in out.splitlines()[1:]]
ok(rc == 0 and "NEW_FAULTS" in out.splitlines()[0] and len(rows) == 2 and rows[0][4] == "-" and
   rows[1][4] == "0", "watch text: no fault count on the first line ('-'), as faults_delta -1",
   out + err)
done()
