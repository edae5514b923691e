#!/usr/bin/env python3
"""`hpctl run --pool` with a small 2 MiB hugetlb pool: programs that fork and
exec (shells, xargs pipelines, posix_spawn) must live, since --pool puts
only large blocks on the pool and a child writes its heap (the arenas)
between fork and exec; the large blocks must still come from the pool.
`--pool=all` (arenas too) warns when the pool is too small for a fork's
copies.

    pool_fork.py HPCTL

Sets the pool to 16 free pages (one 32 MiB arena's worth) under the
machine-wide knob lock and restores it on exit, as real_programs.py does.
TAP output. Skips (exit 77) when not root or without a 2 MiB pool.
"""
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from real_programs import POOL, Tap, pool_with_free, run  # noqa: E402

FREE = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
PY = "/usr/bin/python3"

# posix_spawn from a preloaded parent whose heap is written meanwhile; each
# spawned shell forks for its command substitution and pipeline.
SPAWN = r"""
import os, sys
heap = [bytearray(b"x" * 1000) for _ in range(20000)]
bad = 0
for i in range(40):
    pid = os.posix_spawn("/bin/sh", ["sh", "-c", "x=$(echo %d); echo $x | cat >/dev/null" % i],
                         os.environ)
    for b in heap[::100]:
        b[0] = i & 0xff
    _, st = os.waitpid(pid, 0)
    bad += st != 0
print(bad)
"""

# A large block (20 MiB: above HP_MALLOC_LARGE) held while the report is made.
LARGE = "b = bytearray(20 << 20); b[::4096] = b'\\1' * len(b[::4096]); print(len(b))"


def hugetlb_mib(stderr):
    """The command's own 'hugetlb NM' figure from hpctl run --report."""
    m = re.search(rb"hpctl run: pid \d+: .*process huge now: hugetlb (\d+)M", stderr)
    return int(m.group(1)) if m else None


def main():
    hpctl = sys.argv[1]
    if os.geteuid() != 0 or not os.path.exists(POOL):
        print("1..0 # SKIP needs root and a 2 MiB hugetlb pool")
        return 77
    tap = Tap()
    tmp = tempfile.mkdtemp(prefix="hp-poolfork-")
    try:
        tree = os.path.join(tmp, "tree")
        for d in range(20):
            os.makedirs(os.path.join(tree, str(d)))
            for f in range(20):
                with open(os.path.join(tree, str(d), f"f{f}"), "w") as fh:
                    fh.write("".join(f"line {(d * 7 + f * 13 + k) % 97}\n" for k in range(50)))
        xargs_cmd = f"find {tree} -type f | xargs -n 7 cat | sort | uniq -c"
        want_xargs = run(["sh", "-c", xargs_cmd]).stdout

        with pool_with_free(16):
            free = int(open(FREE).read())
            print(f"# pool: {open(POOL).read().strip()} pages, {free} free")

            r = run([hpctl, "run", "--pool", "--", "sh", "-c",
                     "seq 1 200 | xargs -n1 echo | wc -l"])
            tap.ok(r.returncode == 0 and r.stdout.strip() == b"200",
                   "--pool: sh -c 'seq 1 200 | xargs -n1 echo | wc -l' exits 0 and prints 200",
                   f"rc {r.returncode}, {r.stdout[-100:]!r}, {r.stderr[-300:]!r}")

            r = run([hpctl, "run", "--pool", "--", "sh", "-c", xargs_cmd])
            tap.ok(r.returncode == 0 and r.stdout == want_xargs and want_xargs,
                   "--pool: find | xargs cat | sort | uniq exits 0 with the plain output",
                   f"rc {r.returncode}, {r.stderr[-300:]!r}")

            r = run([hpctl, "run", "--pool", "--", PY, "-c", SPAWN])
            tap.ok(r.returncode == 0 and r.stdout.strip() == b"0",
                   "--pool: 40 posix_spawn'd shells (forking inside) all exit 0",
                   f"rc {r.returncode}, {r.stdout[-100:]!r}, {r.stderr[-300:]!r}")

            before = int(open(FREE).read())
            r = run([hpctl, "run", "--pool", "--report", "--", PY, "-c", LARGE])
            mib = hugetlb_mib(r.stderr)
            tap.ok(r.returncode == 0 and mib is not None and mib >= 20 and
                   re.search(rb"pid \d+: arenas hugetlbfs", r.stderr) is None,
                   f"--pool: a 20 MiB block is on pool pages (hugetlb {mib} MiB in its smaps, "
                   f"{before} free pages before), the arenas are not", repr(r.stderr[-300:]))
            r = run([hpctl, "run", "--report", "--", PY, "-c", LARGE])
            mib = hugetlb_mib(r.stderr)
            tap.ok(r.returncode == 0 and mib == 0,
                   f"without --pool: the same block is not (hugetlb {mib} MiB)",
                   repr(r.stderr[-300:]))

            r = run([hpctl, "run", "--pool=all", "--", "true"])
            tap.ok(r.returncode == 0 and b"warning: --pool=all" in r.stderr and
                   b"16 free pages" in r.stderr,
                   "--pool=all with 16 free pages: one warning that the pool is too small",
                   repr(r.stderr))
            r = run([hpctl, "run", "--pool=all", "--", "sh", "-c",
                     "seq 1 200 | xargs -n1 echo | wc -l"])
            print(f"# --pool=all, 16 free pages: the pipeline exits {r.returncode} "
                  "(the warned-of rule: SIGBUS is 135)")
            r = run([hpctl, "run", "--pool", "--", "true"])
            tap.ok(r.returncode == 0 and b"warning" not in r.stderr,
                   "--pool with 16 free pages: no warning", repr(r.stderr))

            r = run([hpctl, "run", "--", "true"], env={"HP_MALLOC_POOL": "all"})
            tap.ok(r.returncode == 0 and b"warning: --pool=all" in r.stderr and
                   b"libhp-malloc:" not in r.stderr,
                   "HP_MALLOC_POOL=all in the environment counts as --pool=all", repr(r.stderr))
            r = run([hpctl, "run", "--", "true"], env={"HP_MALLOC_POOL": "2"})
            tap.ok(r.returncode == 0 and b"HP_MALLOC_POOL" in r.stderr and b"all" in r.stderr,
                   "HP_MALLOC_POOL=2: one warning naming the variable and its values",
                   repr(r.stderr))
            r = run([hpctl, "run", "--pool=some", "--", "true"])
            tap.ok(r.returncode == 2, "--pool=some: a bad command line (exit 2)",
                   f"rc {r.returncode}, {r.stderr!r}")

        with pool_with_free(160):
            r = run([hpctl, "run", "--pool=all", "--", "true"])
            tap.ok(r.returncode == 0 and b"warning" not in r.stderr,
                   "--pool=all with 160 free pages (two arenas and more): no warning",
                   repr(r.stderr))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{tap.n}")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
