#!/usr/bin/env python3
"""hpctl's --json documents against the pinned schema 1 (abi/hpctl-json.txt):
within schema 1 a field is only ever added, never removed, renamed or given
another type (docs/hpctl-json.md). Every subcommand that only reads runs on
a fabricated /sys tree (HP_SYSFS_ROOT) that has something in every list;
each field is named by its path (`backends[].page_sizes[]` for the elements
of a list) and typed (int, float, str, bool, object, list). A pinned field
missing from the output, or of another type, fails; so does a field the
file does not pin yet (pin it when it is added). null is accepted for any
field: it is what a value that could not be read is.

usage: check-json-schema.py HPCTL PINS [DOC]   (TAP output; DOC: docs/hpctl-json.md,
       which must name every command's document and every pinned field)
       check-json-schema.py HPCTL --dump (the pins of this build)"""
import json
import os
import sys

from hpctltest import done, fake_tree, ok, put, run


def kind(v):
    for t, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"),
                    (dict, "object"), (list, "list")):
        if isinstance(v, t):
            return name
    return "null"


def fields(doc, path, out):
    """Every field of doc as path -> set of kinds."""
    k = kind(doc)
    if path:
        out.setdefault(path, set()).add(k)
    if k == "object":
        for key, v in doc.items():
            fields(v, f"{path}.{key}" if path else key, out)
    elif k == "list":
        for v in doc:
            fields(v, path + "[]", out)
    return out


def documents():
    """(command line, exit code, documents, stderr) for every subcommand, on
    the fabricated tree: pools of two sizes on two nodes, mTHP sizes, every
    THP file. Each value that is null in one run (a dry run's grant, no
    --backend, no error) is printed for real in another."""
    root = fake_tree(pools={2048: (64, 60, 4, 0, 8), 1048576: (2, 1, 0, 0, 0)}, nodes=2,
                     mthp={64: "always inherit madvise [never]",
                           2048: "always [inherit] madvise never"})
    put(root, "sys/kernel/mm/transparent_hugepage/shmem_enabled",
        "always within_size advise [never] deny force\n")
    put(root, "sys/kernel/mm/transparent_hugepage/khugepaged/defrag", "1\n")
    # A process for why: an advised mapping with THP, a hugetlb one, and
    # the limit of its cgroup.
    smaps = ""
    for start, flags, extra in ((0x7f0000000000, "rd wr mr mw me ac hg", "AnonHugePages: 8192 kB\n"),
                                (0x7f0001000000, "rd wr mr mw me de ht",
                                 "KernelPageSize: 2048 kB\nPrivate_Hugetlb: 4096 kB\n")):
        smaps += ("%x-%x rw-p 00000000 00:00 0\nSize: 8192 kB\nRss: 8192 kB\n%s"
                  "THPeligible: 1\nVmFlags: %s\n" % (start, start + (8 << 20), extra, flags))
    put(root, "proc/4242/smaps", smaps)
    put(root, "proc/4242/status", "Name:\tfake\nTHP_enabled:\t1\n")
    put(root, "proc/4242/cgroup", "0::/job\n")
    put(root, "sys/fs/cgroup/job/hugetlb.2MB.max", "4194304\n")
    env = {"HP_SYSFS_ROOT": root}
    etc = os.path.join(root, "fake-root")
    os.mkdir(etc)
    put(etc, "usr/lib/sysctl.d/99-late.conf", "vm.nr_hugepages = 4\n")  # overrides hpctl's
    runs = [("status",), ("status", {"HP_DEBUG": "banana"}), ("version",), ("pool",),
            ("thp",), ("mthp",), ("alloc", "64K"), ("alloc", "0"), ("explain", "64K"), ("explain", "2M"),
            ("explain", "64K", "--backend", "fallback"), ("explain", "3G", "--require-huge"),
            ("pool", "set", "2M", "70", "--dry-run"), ("pool", "set", "2M", "70"),
            ("pool", "set", "1G", "1", "--node", "1"), ("pool", "release", "--dry-run"),
            ("pool", "release", "1G", "--node", "1"),
            ("thp", "set", "enabled", "always", "--dry-run"), ("thp", "set", "enabled", "never"),
            ("mthp", "set", "64K", "enabled", "always", "--dry-run"),
            ("mthp", "set", "64K", "enabled", "always"),
            ("watch", "--count", "2", "--interval", "0.05"),
            ("why", "4242", "--mappings"), ("why", "4242"), ("why", "999999"),
            # measured mTHP (pagemap) needs the real /proc
            ("why", str(os.getpid()), "--mappings", None),
            # a process's own figures are read from the real /proc
            ("watch", str(os.getpid()), "--count", "2", "--interval", "0.05", None),
            # --persist into a fabricated root; persist lists and removes
            ("pool", "set", "2M", "70", "--persist", "--root", etc),
            ("pool", "set", "1G", "1", "--persist", "--root", etc),
            ("thp", "set", "enabled", "always", "--persist", "--root", etc),
            ("mthp", "set", "all", "shmem_enabled", "advise", "--persist", "--root", etc),
            ("pool", "release", "1G", "--persist", "--root", etc),
            ("status", "--root", etc), ("persist", "--root", etc),
            ("persist", "remove", "all", "--root", etc),
            ("explain", "64K", "--page-size", "32M"),
            ("undo", "--dry-run"), ("undo",), ("undo", "--all"),
            # failures before a command's own document: the error document
            ("pool", "set", "3M", "1"), ("watch", "999999", "--count", "1"),
            ("explain", "-5"), ("persist", "remove", "/sys/nothing", "--root", etc)]
    for argv in runs:
        extra = argv[-1] if isinstance(argv[-1], dict) or argv[-1] is None else {}
        argv = argv[:-1] if extra != {} else argv
        rc, out, err = run(*argv, "--json", env=None if extra is None else dict(env, **extra))
        docs = []
        for line in out.splitlines() if argv[0] == "watch" else [out]:
            try:
                docs.append(json.loads(line))
            except ValueError:
                docs.append(None)
        yield " ".join(argv), rc, docs, err


def collect():
    """{command: {path: kinds}} and the failures to report."""
    seen, bad = {}, []
    for line, rc, docs, err in documents():
        if not docs or None in docs:
            bad.append((line, f"not JSON (exit {rc}): {err[-300:]}"))
            continue
        for d in docs:
            cmd = d.get("command") if isinstance(d, dict) else None
            if not cmd:
                bad.append((line, f"no command field: {d!r}"[:300]))
                continue
            fields(d, "", seen.setdefault(cmd, {}))
    return seen, bad


def main():
    seen, bad = collect()
    if sys.argv[2:] == ["--dump"]:
        for cmd in sorted(seen):
            for path in sorted(seen[cmd]):
                kinds = sorted(seen[cmd][path] - {"null"}) or ["null"]
                print(f"{cmd}: {path} = {'|'.join(kinds)}")
        return 0
    for line, why in bad:
        ok(False, f"hpctl {line} --json", why)
    pins = {}
    with open(sys.argv[2]) as f:
        for text in f:
            if text.startswith("#") or " = " not in text:
                continue
            left, kinds = text.rstrip("\n").split(" = ")
            cmd, path = left.split(": ", 1)
            pins.setdefault(cmd, {})[path] = set(kinds.split("|"))
    for cmd in sorted(pins):
        got = seen.get(cmd)
        if got is None:
            ok(False, f"{cmd}: no document of this command was printed")
            continue
        missing = sorted(p for p in pins[cmd] if p not in got)
        ok(not missing, f"{cmd}: every pinned field is printed ({len(pins[cmd])})",
           "missing (removed or renamed): " + ", ".join(missing))
        retyped = sorted(f"{p}: pinned {'|'.join(sorted(pins[cmd][p]))}, printed "
                         f"{'|'.join(sorted(got[p]))}" for p in pins[cmd] if p in got and
                         not (got[p] - {"null"}) <= pins[cmd][p] | {"null"})
        ok(not retyped, f"{cmd}: every pinned field keeps its type", "\n".join(retyped))
        new = sorted(p for p in got if p not in pins[cmd])
        ok(not new, f"{cmd}: every printed field is pinned",
           "not in abi/hpctl-json.txt yet: " + ", ".join(new))
    extra = sorted(set(seen) - set(pins))
    ok(not extra, "every command printed is pinned", ", ".join(extra))
    # The documentation names every command's document and every field.
    if len(sys.argv) > 3:
        doc = open(sys.argv[3]).read()
        for cmd in sorted(pins):
            ok(f'"command": "{cmd}"' in doc or f"`{cmd}`" in doc or f"`{cmd} " in doc,
               f"{cmd}: its document is in {os.path.basename(sys.argv[3])}")
            leaves = {p.split(".")[-1].replace("[]", "") for p in pins[cmd]}
            undocumented = sorted(f for f in leaves
                                  if f'"{f}"' not in doc and f"`{f}`" not in doc)
            ok(not undocumented, f"{cmd}: every pinned field is named in "
               f"{os.path.basename(sys.argv[3])}", "not documented: " + ", ".join(undocumented))
    done()


if __name__ == "__main__":
    sys.exit(main())
