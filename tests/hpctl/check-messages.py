#!/usr/bin/env python3
"""Every message hpctl can write on standard error is in the DIAGNOSTICS
section of hpctl(1) with its exit status, and the man page lists no
message hpctl cannot write: the format strings of tools/hpctl*.c against
the man page's lines, both ways. Then each documented message is provoked
(on fabricated /sys trees and roots, never the real knobs or /etc) and
must appear on standard error with the documented exit status; the few
that need a kernel or a machine state a test cannot make are named below
with the reason.

usage: check-messages.py HPCTL HPCTL_1_SCD TOOLS_DIR   (TAP output)"""
import glob
import json
import os
import re
import shutil
import sys
import tempfile

from hpctltest import done, fake_tree, ok, put, run, skip

MAN, TOOLS = sys.argv[2], sys.argv[3]
HOLE = "\0"


def skeleton(text):
    """The fixed words of a message: each placeholder (<x> in the man page,
    a printf conversion or a macro in the source) one HOLE."""
    text = re.sub(r"<[^<>]+>", HOLE, text)
    text = re.sub(r"%[-#0-9.*]*(?:ll|l|z)?[sdu]", HOLE, text)
    return re.sub(HOLE + "+", HOLE, text.rstrip("\n"))


def man_messages():
    """[(exit codes as a set of int or "cmd", text)] of the DIAGNOSTICS block."""
    sec = open(MAN).read().split("# DIAGNOSTICS", 1)[1].split("\n# ", 1)[0]
    block = sec.split("```\n", 2)[1]
    out = []
    for line in block.splitlines():
        if line.startswith("       "):
            out[-1][1] += " " + line.strip()
            continue
        codes, text = line.split(None, 1)
        out.append([{c if c == "cmd" else int(c) for c in codes.split(",")}, text])
    return [(c, t) for c, t in out]


def literals(s, i):
    """The adjacent string literals (and macros between them) from s[i:]."""
    parts = []
    while True:
        m = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[A-Z][A-Z0-9_]+\b)').match(s, i)
        if not m:
            return "".join(parts)
        tok = m.group(1)
        parts.append(bytes(tok[1:-1], "utf-8").decode("unicode_escape")
                     if tok[0] == '"' else "%s")
        i = m.end()


def source_messages():
    """{skeleton: (file, format, whole)}: whole is False for a message that
    later calls continue (no newline at its end)."""
    calls = ((r"fprintf\(stderr,", ""), (r"hpctl_bad\([^,]+,", "hpctl %s: "),
             (r"snprintf\(msg, sizeof\(msg\),", "hpctl why: "),
             (r"\bfail\(json, [^,]+, [^,]+,", "hpctl why: "))
    found = {}
    for path in sorted(glob.glob(os.path.join(TOOLS, "hpctl*.c"))):
        s = open(path).read()
        for pat, prefix in calls:
            for m in re.finditer(pat, s):
                fmt = literals(s, m.end())
                # hpctl_bad's and why's own printing of a message made above
                if not fmt or fmt in ("hpctl %s: ", "hpctl why: %s\n"):
                    continue
                fmt = prefix + fmt
                if not fmt.startswith("hpctl"):
                    continue  # usage text (check-usage.py) or a continuation
                whole = prefix != "" or fmt.endswith("\n")
                found[skeleton(fmt)] = (os.path.basename(path), fmt.rstrip("\n"), whole)
    return found


documented = man_messages()
man_skel = {skeleton(t): (c, t) for c, t in documented}
src = source_messages()
ok(len(documented) > 50 and len(src) > 50, "found the messages on both sides",
   (len(documented), len(src)))
table = open(MAN).read().split("# EXIT STATUS", 1)[1].split("\n# ", 1)[0]
listed = {int(v) for v in re.findall(r"\*(\d+)\*", table)}
codes = set().union(*(c for c, _ in documented)) - {"cmd"}
ok(codes <= listed, "every exit status of DIAGNOSTICS is in EXIT STATUS", (codes, listed))
for sk, (f, fmt, whole) in sorted(src.items()):
    hit = sk in man_skel or (not whole and any(m.startswith(sk) for m in man_skel))
    ok(hit, "%s: %r is documented in hpctl(1) DIAGNOSTICS" % (f, fmt))
for sk, (codes, text) in sorted(man_skel.items()):
    hit = sk in src or any(not w and sk.startswith(k) for k, (_, _, w) in src.items())
    ok(hit, "hpctl(1) %r is a message hpctl has" % text)


def pattern(text):
    """The documented message as a regex over one line of stderr."""
    parts = re.split(r"<[^<>]+>", text)
    return re.compile("^" + ".+".join(re.escape(p) for p in parts) + "$", re.M)


# --- provoking each one ----------------------------------------------------
tree = fake_tree(pools={2048: (64, 60, 0, 0, 0), 1048576: (0, 0, 0, 0, 0)},
                 mthp={64: "always inherit madvise [never]",
                       2048: "always [inherit] madvise never"})
env = {"HP_SYSFS_ROOT": tree}
no_pools = {"HP_SYSFS_ROOT": fake_tree(pools={})}
no_thp = {"HP_SYSFS_ROOT": fake_tree(thp=None)}
# A pool whose overcommit knob is missing; a knob that is a directory
# (a write fails with EISDIR: what a kernel that rejects a value returns).
odd = fake_tree(pools={2048: (64, 60, 0, 0, 0)},
                mthp={64: "always inherit madvise [never]"})
os.remove(os.path.join(odd, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_overcommit_hugepages"))
K64 = "/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled"
os.remove(odd + K64)
os.mkdir(odd + K64)
put(odd, "run/hpctl/undo", "1.1\t/sys/nothing/here\t1\n")
rejects = fake_tree(mthp={64: "always inherit madvise [never]"})
os.remove(rejects + K64)
os.mkdir(rejects + K64)
put(rejects, "run/hpctl/undo", "1.1\t%s\tnever\n" % K64)
undo_dir = fake_tree()
os.makedirs(os.path.join(undo_dir, "run/hpctl/undo"))   # the record cannot be read
work = tempfile.mkdtemp(prefix="hpctl-messages-")
etc = os.path.join(work, "root")
os.makedirs(os.path.join(etc, "etc/tmpfiles.d"))
os.symlink("/nonexistent/hpctl", os.path.join(etc, "etc/sysctl.d"))   # cannot be written
unreadable = os.path.join(work, "root2")
os.makedirs(os.path.join(unreadable, "etc/sysctl.d/80-hpctl.conf"))   # nor read
full = os.path.join(work, "root3")
put(full, "etc/tmpfiles.d/80-hpctl.conf", "".join(
    "w /sys/kernel/mm/hugepages/hugepages-%dkB/nr_hugepages - - - - 1\n" % (4 << i)
    for i in range(128)))
gone = os.path.join(work, "gone")
os.makedirs(gone)

# (documented text, argv, env, exit status): the message must be on stderr.
T = [
    ('hpctl: unknown command "<name>"', ("frobnicate",), None, 2),
    ('hpctl <command>: unknown option "<option>"', ("status", "--bogus"), None, 2),
    ("hpctl <command>: <option> needs a value", ("pool", "set", "2M", "4", "--node"), env, 2),
    ('hpctl <command>: unexpected argument "<argument>"', ("version", "x"), None, 2),
    ("hpctl <command>: a SIZE is required first", ("alloc",), None, 2),
    ('hpctl <command>: <SIZE or --page-size> "<argument>" is not a size',
     ("explain", "1.5G"), None, 2),
    ('hpctl <command>: --page-size "<argument>" is not a page size libhp has a flag',
     ("explain", "2M", "--page-size", "3M"), None, 2),
    ('hpctl <command>: --node "<argument>" is not a node list',
     ("explain", "4M", "--node", "x"), None, 2),
    ("hpctl <command>: --numa-mode: expected prefer, bind or interleave",
     ("explain", "4M", "--node", "0", "--numa-mode", "sometimes"), None, 2),
    ("hpctl <command>: --numa-mode needs --node", ("explain", "4M", "--numa-mode", "bind"),
     None, 2),
    ("hpctl: <hp_alloc, hp_info or hp_free> failed: <error name>: <detail>",
     ("alloc", "64M", "--backend", "nosuch"), None, 1),
    ('hpctl: SIZE "<argument>" is not a page size (such as 2M or 1G)',
     ("pool", "set", "x", "1"), env, 2),
    ('hpctl <command>: --node "<argument>" is not a NUMA node number',
     ("pool", "set", "2M", "4", "--node", "x"), env, 2),
    ('hpctl <command>: --overcommit "<argument>" is not a page count',
     ("pool", "set", "2M", "--overcommit", "x"), env, 2),
    ("hpctl <command>: a pool SIZE is required (such as 2M or 1G)", ("pool", "set"), env, 2),
    ("hpctl <command>: a page COUNT or --overcommit N is required", ("pool", "set", "2M"), env, 2),
    ("hpctl <command>: --overcommit is for the whole pool, not for one --node",
     ("pool", "set", "2M", "4", "--node", "0", "--overcommit", "1"), env, 2),
    ("hpctl <command>: --root is the root of /etc for --persist, which is missing",
     ("pool", "set", "2M", "4", "--root", work), env, 2),
    ('hpctl <command>: COUNT "<argument>" is not a page count', ("pool", "set", "2M", "-1"),
     env, 2),
    ("hpctl: no hugetlb pools on this machine (<directory> is missing)", ("pool",), no_pools, 4),
    ("hpctl: this machine has no hugetlb pool of <size> pages; it has: <sizes>",
     ("pool", "set", "3M", "1"), env, 4),
    ("hpctl: NUMA node <node> has no hugetlb pool (<directory> is missing)",
     ("pool", "set", "2M", "4", "--node", "7"), env, 4),
    ("hpctl: cannot read <knob>", ("pool", "set", "2M", "--overcommit", "1"),
     {"HP_SYSFS_ROOT": odd}, 4),
    ('hpctl <command>: "<argument>" is not a knob hpctl sets (enabled or defrag)',
     ("thp", "set", "khugepaged", "1"), env, 2),
    ('hpctl <command>: "<argument>" is not a knob hpctl sets (enabled or shmem_enabled)',
     ("mthp", "set", "64K", "frob", "always"), env, 2),
    ("hpctl <command>: needs a KNOB and a VALUE", ("thp", "set", "enabled"), env, 2),
    ("hpctl <command>: needs a SIZE (or all), a KNOB and a VALUE", ("mthp", "set", "64K"), env, 2),
    ('hpctl <command>: SIZE "<argument>" is not a size (such as 64K) or all',
     ("mthp", "set", "3X", "enabled", "always"), env, 2),
    ('hpctl: "<value>" is not a value of <knob>; it accepts: <choices>',
     ("mthp", "set", "64K", "enabled", "on"), env, 2),
    ("hpctl: this kernel has no mTHP size <size>", ("mthp", "set", "128K", "enabled", "always"),
     env, 4),
    ("hpctl: <knob> does not exist on this machine", ("thp", "set", "enabled", "always"),
     no_thp, 4),
    ('hpctl: the kernel rejected "<value>" for <knob>: <error>',
     ("undo",), {"HP_SYSFS_ROOT": rejects}, 1),
    ("hpctl undo: <knob> does not exist on this machine", ("undo",), {"HP_SYSFS_ROOT": odd}, 4),
    ("hpctl undo: cannot read <file>: <error>", ("undo",), {"HP_SYSFS_ROOT": undo_dir}, 1),
    ('hpctl: --root "<argument>": not an absolute path to a directory',
     ("status", "--root", "relative"), None, 2),
    ('hpctl: persist: unexpected "<argument>"', ("persist", "frob"), None, 2),
    ('hpctl: persist remove: name a KNOB (as "hpctl persist" lists it) or all',
     ("persist", "remove", "--root", work), None, 2),
    ("hpctl: persist: --dry-run is for remove", ("persist", "--dry-run"), None, 2),
    ("hpctl: cannot write <file>: <error>",
     ("pool", "set", "2M", "8", "--persist", "--root", etc), env, 1),
    ("hpctl: cannot read <file>: <error>", ("persist", "--root", unreadable), None, 1),
    ("hpctl: <knob> is not made persistent: hpctl's files hold <n> lines already",
     ("mthp", "set", "64K", "enabled", "always", "--persist", "--root", full), env, 1),
    ('hpctl: "<argument>" is not made persistent by hpctl; "hpctl persist" lists what is',
     ("persist", "remove", "/sys/nothing", "--root", work), None, 4),
    ('hpctl why: unknown option "<option>"', ("why", "1", "--bogus"), None, 2),
    ('hpctl why: one PID only ("<argument>" is extra)', ("why", "1", "2"), None, 2),
    ("hpctl why: a PID is required", ("why",), None, 2),
    ('hpctl why: "<argument>" is not a process ID (a number from 1 to 4194304)',
     ("why", "-5"), None, 2),
    ("hpctl why: no process <pid>", ("why", "999999"), None, 4),
    ('hpctl <command>: --count "<argument>" is not a whole number of lines (0: no limit)',
     ("watch", "--count", "x"), None, 2),
    ('hpctl <command>: --interval "<argument>" is not a number of seconds above 0',
     ("watch", "1", "--interval", "0"), None, 2),
    ('hpctl <command>: "<argument>" is not a process ID (a number from 1)', ("watch", "0"),
     None, 2),
    ("hpctl: no process <pid> (or its /proc files cannot be read)",
     ("watch", "999999", "--count", "1"), None, 4),
    ("hpctl <command>: a command to run is required", ("run",), None, 2),
    ('hpctl run: unknown backend "<name>" (hpctl status lists them)',
     ("run", "--backend", "nosuch", "true"), None, 2),
    ('hpctl run: --page-size "<argument>" is not a power of two from 4K (K/M/G suffix)',
     ("run", "--page-size", "3M", "true"), None, 2),
    ('hpctl run: --stacks "<argument>" is neither lean nor huge',
     ("run", "--stacks", "x", "true"), None, 2),
    ('hpctl run: backend "<name>" serves only from a hugetlb pool: add --pool',
     ("run", "--backend", "hugetlbfs", "true"), None, 2),
    ("hpctl run: no backend offers <size> pages outside a hugetlb pool, and the arenas",
     ("run", "--page-size", "1G", "true"), None, 2),
    ("hpctl run: libhp-malloc.so not found in the build tree or in <libdir>",
     ("run", "true"), {"HP_MALLOC_LIBRARY": "/nonexistent/libhp-malloc.so"}, 125),
]
# Those that need libhp-malloc.so to be preloadable.
RUN = [
    ("hpctl run: cannot write --report-json <file>: <error>",
     ("run", "--report-json", "/nonexistent/dir/r.json", "true"), None, 125),
    ("hpctl run: <command>: <error>", ("run", "--", "/nonexistent/cmd"), None, 127),
    ("hpctl run: cannot write <file>: <error>",
     ("run", "--report-json", gone + "/r.json", "--", "sh", "-c", "rm -rf " + gone + "; exit 3"),
     None, 3),
    ("hpctl run: pid <pid>: ran libhp-malloc, and ended without running exit handlers",
     ("run", "--report", "--", "sh", "-c", "exit 7"), None, 7),
    ("hpctl run: pid <pid>: <figures>", ("run", "--report", "--", "sh", "-c", "true"), None, 0),
    ("hpctl run: and <n> more processes (--report-json FILE lists every one)",
     ("run", "--report", "--", "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 "
      "18; do /bin/true; done"), None, 0),
    ("hpctl run: <n> processes ran libhp-malloc (one line each above",
     ("run", "--report", "--", "sh", "-c", "/bin/true; /bin/true"), None, 0),
]
# As another user (root runs a copy of hpctl as nobody).
NOBODY = [
    ("hpctl: cannot write <knob>: <error>; changing kernel knobs needs root",
     ("mthp", "set", "64K", "enabled", "always"), env, 3),
    ("hpctl: cannot write <file>: <error>; --persist needs root and a writable /etc",
     ("pool", "set", "2M", "8", "--persist", "--root", os.path.join(work, "nobody-root")),
     env, 3),
    ("hpctl why: cannot read /proc/<pid>/smaps: <error>; reading another user's",
     ("why", "1"), None, 3),
]
# What no test can provoke on a healthy machine, and why.
UNPROVOKED = {
    "hpctl: out of memory": "calloc failing",
    "hpctl: cannot read <knob> back": "a knob that vanishes between its write and its read",
    'hpctl: wrote "<value>" to <knob> but it reads back "<value read>"':
        "a knob that takes a write and reads back another value: only a kernel does that",
    'hpctl undo: wrote "<value>" to <knob> but it reads back "<value read>"':
        "a knob that takes a write and reads back another value: only a kernel does that",
    "hpctl undo: cannot update the record: <error>":
        "a /run/hpctl that root may not write",
    "hpctl why: no process <pid> (it has exited)":
        "a process that exits between two reads of its /proc files",
    "hpctl why: cannot read /proc/<pid>/smaps: <error>":
        "an smaps read that fails for another reason than permission",
    "hpctl run: cannot set LD_PRELOAD: <error>": "malloc or setenv failing",
    "hpctl run: cannot create the report file: <error>": "a /tmp that cannot be written",
    "hpctl run: fork: <error>": "fork failing",
    "hpctl run: warning: --pool=all: the <size> MiB hugetlb pool has <n> free pages, fewer than "
    "two <size> MiB arenas (<n>): a child that writes its heap before exec may die of SIGBUS "
    "(--pool keeps arenas off the pool)": "a hugetlb pool with fewer free pages than two "
    "arenas: tests/malloc/pool_fork.py sets one (16 pages) and checks the warning",
    "hpctl run: pid <pid> (<command>) did not load libhp-malloc (statically linked, or setuid): "
    "nothing to report for it": "a static program: check-run.py runs one where the machine "
                                "has it (ldconfig)",
}


def find(prefix):
    """The documented message that is prefix, else the first that starts with it."""
    hits = [(c, t) for c, t in documented if t == prefix] or \
        [(c, t) for c, t in documented if t.startswith(prefix)]
    return hits[0] if hits else (None, None)


covered = set()


def provoke(prefix, argv, e, code, user=None, hpctl=None):
    codes, text = find(prefix)
    if not text:
        ok(False, "%r is in hpctl(1)" % prefix)
        return
    covered.add(text)
    rc, out, err = run(*argv, env=e, user=user, hpctl=hpctl)
    ok(rc == code and code in codes | ({rc} if "cmd" in codes else set()) and
       pattern(text).search(err),
       "hpctl %s: exit %d and %r" % (" ".join(argv), code, text), (rc, err))


for prefix, argv, e, code in T:
    provoke(prefix, argv, e, code)
# --json: the same exit status, and one JSON document on stdout that
# carries it (watch: one per line; run has no --json).
for prefix, argv, e, code in T:
    if argv[0] == "run":
        continue
    rc, out, err = run(*argv, "--json", env=e)
    try:
        doc = json.loads(out)
    except ValueError:
        doc = None
    ok(rc == code and isinstance(doc, dict) and code in (doc.get("exit_code"), doc.get("status")),
       "hpctl %s --json: exit %d and a document that says so" % (" ".join(argv), code),
       (rc, out, err))
rc, _, err = run("run", "--report", "--", "true")
if rc == 0:
    for prefix, argv, e, code in RUN:
        provoke(prefix, argv, e, code)
else:
    for prefix, *_ in RUN:
        covered.add(find(prefix)[1])
        skip(prefix, "libhp-malloc.so cannot be preloaded here: %s" % err.strip()[:100])
if os.geteuid() == 0:
    os.chmod(work, 0o755)
    os.makedirs(os.path.join(work, "nobody-root/etc/sysctl.d"))
    os.chmod(os.path.join(work, "nobody-root"), 0o755)
    exe = os.path.join(work, "hpctl")
    shutil.copy(sys.argv[1], exe)
    os.chmod(exe, 0o755)
    for d, dirs, files in os.walk(tree):
        os.chmod(d, 0o755)
        for name in files:
            os.chmod(os.path.join(d, name), 0o644)
    nobody_tree = dict(env)
    for prefix, argv, e, code in NOBODY:
        if argv[0] == "pool":   # the knob may be written, the root not
            os.chmod(os.path.join(tree, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
                     0o666)
        provoke(prefix, argv, e, code, user="nobody", hpctl=exe)
else:
    for prefix, *_ in NOBODY:
        covered.add(find(prefix)[1])
        skip(prefix, "needs root, to run hpctl as nobody")
shutil.rmtree(work, True)
for text, why in UNPROVOKED.items():
    covered.add(text)
missing = [t for _, t in documented if t not in covered]
ok(not missing, "every documented message is provoked above or named as not provokable",
   missing)
ok(not [t for t in UNPROVOKED if t not in {x for _, x in documented}],
   "every message named as not provokable is documented",
   [t for t in UNPROVOKED if t not in {x for _, x in documented}])
done()
