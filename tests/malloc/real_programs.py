#!/usr/bin/env python3
"""Real, unmodified programs under `hpctl run --report` (libhp-malloc.so):
each must print exactly what it prints without the preload, and its report
line (measured by libhp-malloc in the process's /proc/self/smaps at exit)
must show huge pages.

    real_programs.py HPCTL MT_CXX_PROGRAM

Reserves a small 2 MiB hugetlb pool under the machine-wide knob lock and
restores it on exit: by default the programs must leave it alone (their
huge pages are THP), and under `hpctl run --pool=all` their arenas come from it;
then also checks that invalid HP_* values leave the program running with
one warning.
TAP output. Skips (exit 77) when not root or without a 2 MiB pool.
"""
import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
FREE = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
POOL_PAGES = 192  # 384 MiB: more than any program below keeps in arenas
LOCK = "/run/lock/libhp-knobs.lock" if os.access("/run/lock", os.W_OK) else "/tmp/libhp-knobs.lock"
PY = "/usr/bin/python3"

NUMPY = r"""
import numpy as np
rng = np.random.default_rng(7)
a = rng.random((1200, 1200))
b = (a @ a.T).round(6)
s = np.sort(rng.integers(0, 1 << 40, 3_000_000))
d = {i: str(i) * 3 for i in range(300_000)}
print(f"{b.trace():.3f} {int(s[::100000].sum())} {len(d)} {sum(map(len, d.values()))}")
"""

SQL = """
create table t(id integer primary key, k text, v integer);
with recursive c(x) as (select 1 union all select x + 1 from c where x < 300000)
insert into t(k, v) select printf('key%07d', (x * 7919) % 300000), x % 1000 from c;
create index tk on t(k);
select count(*), sum(v), min(k), max(k) from t;
select v % 10, count(*), sum(length(k)) from t group by v % 10 order by 1;
select k from t where k between 'key0100000' and 'key0100005' order by k;
"""


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, why=""):
        self.n += 1
        if not cond:
            self.failed += 1
        print(f"{'ok' if cond else 'not ok'} {self.n} - {name}" + (f"  # {why}" if why and not cond else ""))
        sys.stdout.flush()

    def skip(self, name, why):
        self.n += 1
        print(f"ok {self.n} - {name} # SKIP {why}")


def run(argv, env=None, stdin=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run(argv, env=e, stdin=stdin, capture_output=True, timeout=240)


def report_huge(stderr):
    """(arena huge MiB, process hugetlb MiB, process thp MiB) from the line."""
    m = re.search(rb"hpctl run: pid \d+: arenas(.*?); .*process huge now: hugetlb (\d+)M, "
                  rb"thp (\d+)M", stderr)
    if not m:
        return None
    arena_huge = sum(int(x) for x in re.findall(rb"\((\d+)M huge\)", m.group(1)))
    return arena_huge, int(m.group(2)), int(m.group(3))


def thp_on():
    """THP can serve madvised memory (enabled = always or madvise)."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            mode = f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return False
    return mode in ("always", "madvise")


def compare(tap, name, argv, hpctl, stdin_path=None, need_huge=True, pool=False):
    def go(prefix):
        fin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
        try:
            return run(prefix + argv, stdin=fin)
        finally:
            if stdin_path:
                fin.close()
    plain = go([])
    hp = go([hpctl, "run", "--report"] + (["--pool=all"] if pool else []) + ["--"])
    name += " (--pool=all)" if pool else ""
    tap.ok(plain.returncode == 0 and hp.returncode == 0, f"{name}: exits 0 with and without",
           f"rc {plain.returncode}/{hp.returncode}: {hp.stderr[-300:]!r}")
    tap.ok(plain.stdout == hp.stdout and len(plain.stdout) > 0, f"{name}: same output",
           f"{plain.stdout[:200]!r} vs {hp.stdout[:200]!r}")
    huge = report_huge(hp.stderr)
    tap.ok(huge is not None, f"{name}: hpctl run --report printed its line", repr(hp.stderr[-300:]))
    if huge is not None and need_huge and not pool and not thp_on():
        tap.skip(f"{name}: huge pages in smaps", "THP is off and the default uses no pool")
    elif huge is not None and need_huge:
        tap.ok(huge[0] > 0 and huge[1] + huge[2] > 0,
               f"{name}: huge pages in smaps (arenas {huge[0]} MiB, hugetlb {huge[1]} MiB, "
               f"thp {huge[2]} MiB)", repr(hp.stderr[-300:]))
        # Pool pages only when asked: a fork child could not write them.
        tap.ok(huge[1] > 0 if pool else huge[1] == 0,
               f"{name}: {'hugetlb pool pages' if pool else 'no hugetlb pool page'} "
               f"(hugetlb {huge[1]} MiB)", repr(hp.stderr[-300:]))
    return hp


@contextlib.contextmanager
def pool_with_free(pages):
    """The 2 MiB hugetlb pool grown to have `pages` free pages, under the
    machine-wide knob lock, and put back as it was on leaving, also on
    SIGTERM and SIGINT. Yields the pool size it found."""
    with open(LOCK, "a") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        saved = open(POOL).read().strip()

        def restore(*_):
            with open(POOL, "w") as f:
                f.write(saved)
            if _:
                sys.exit(1)
        old = [signal.signal(sig, restore) for sig in (signal.SIGTERM, signal.SIGINT)]
        try:
            with open(FREE) as f:
                free_now = int(f.read())
            with open(POOL, "w") as f:
                f.write(str(int(saved) - free_now + pages))
            yield saved
        finally:
            restore()
            for sig, h in zip((signal.SIGTERM, signal.SIGINT), old):
                signal.signal(sig, h)


def main():
    hpctl, mt_cxx = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0 or not os.path.exists(POOL):
        print("1..0 # SKIP needs root and a 2 MiB hugetlb pool")
        return 77
    tap = Tap()
    tmp = tempfile.mkdtemp(prefix="hp-real-")
    try:
        with pool_with_free(POOL_PAGES) as saved:
            print("# pool:", open(POOL).read().strip(), "pages (was", saved + ")")

            # hpctl run itself: bad input refused, the command's status passed on,
            # --backend reaches the arenas.
            r = run([hpctl, "run", "--backend", "no-such", "--", "true"])
            tap.ok(r.returncode == 2 and b"unknown backend" in r.stderr,
                   "hpctl run --backend with an unknown name: exit 2, says why", repr(r.stderr))
            r = run([hpctl, "run", "--page-size", "3K", "--", "true"])
            tap.ok(r.returncode == 2 and b"power of two" in r.stderr,
                   "hpctl run --page-size 3K: exit 2, says why", repr(r.stderr))
            r = run([hpctl, "run", "--report", "--", "sh", "-c", "exit 3"])
            tap.ok(r.returncode == 3, "hpctl run passes the command's exit status on",
                   f"rc {r.returncode}")
            r = run([hpctl, "run", "--backend", "thp-madvise", "--report", "--", mt_cxx, "2", "1000"])
            tap.ok(r.returncode == 0 and b"arenas thp-madvise/2M" in r.stderr,
                   "hpctl run --backend thp-madvise: the arenas come from it", repr(r.stderr[-300:]))
            r = run([hpctl, "run", "--backend", "hugetlbfs", "--", "true"])
            tap.ok(r.returncode == 2 and b"--pool" in r.stderr,
                   "hpctl run --backend hugetlbfs without --pool: exit 2, says why", repr(r.stderr))
            r = run([hpctl, "run", "--backend", "hugetlbfs", "--pool=all", "--report", "--",
                     mt_cxx, "2", "1000"])
            tap.ok(r.returncode == 0 and b"arenas hugetlbfs/2M" in r.stderr,
                   "hpctl run --backend hugetlbfs --pool=all: the arenas come from the pool",
                   repr(r.stderr[-300:]))
            r = run([hpctl, "run", "--backend", "hugetlbfs", "--pool", "--report", "--",
                     mt_cxx, "2", "1000"])
            tap.ok(r.returncode == 0 and b"arenas fallback/4K" in r.stderr,
                   "hpctl run --backend hugetlbfs --pool: the arenas stay off the pool "
                   "(base pages: the backend list is hugetlbfs,fallback)", repr(r.stderr[-300:]))

            have_numpy = run([PY, "-c", "import numpy"]).returncode == 0
            if have_numpy:
                compare(tap, "python3 + numpy", [PY, "-c", NUMPY], hpctl)
            else:
                tap.skip("python3 + numpy", "python3-numpy is not installed")

            if shutil.which("sqlite3"):
                sql = os.path.join(tmp, "q.sql")
                with open(sql, "w") as f:
                    f.write(SQL)
                compare(tap, "sqlite3 :memory:", ["sqlite3", ":memory:"], hpctl, stdin_path=sql)
            else:
                tap.skip("sqlite3 :memory:", "sqlite3 is not installed")

            data = os.path.join(tmp, "lines.txt")
            with open(data, "w") as f:  # 1.5M lines, about 25 MB, deterministic
                x = 12345
                for i in range(1_500_000):
                    x = (x * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
                    f.write(f"{x >> 20:x} {i}\n")
            compare(tap, "sort", ["sort", "-S", "64M", data], hpctl)

            compare(tap, "multi-threaded C++", [mt_cxx, "8", "200000"], hpctl)
            compare(tap, "multi-threaded C++", [mt_cxx, "8", "200000"], hpctl, pool=True)
            compare(tap, "C++ operator new failure semantics", [mt_cxx, "new-fails"], hpctl,
                    need_huge=False)

            # Invalid values: the program runs on, same output, one warning.
            for var, val in (("HP_MALLOC_LARGE", "lots"), ("HP_MALLOC_STATS", "maybe"),
                             ("HP_CACHE_MAX", "-3"), ("HP_BACKENDS", "no-such-backend"),
                             ("HP_MALLOC_POOL", "yes")):
                env = {var: val}
                plain = run([mt_cxx, "4", "50000"])
                hp = run([hpctl, "run", "--", mt_cxx, "4", "50000"], env=env)
                warnings = [l for l in hp.stderr.decode(errors="replace").splitlines()
                            if l.startswith("libhp-malloc:")]
                tap.ok(hp.returncode == 0 and hp.stdout == plain.stdout,
                       f"{var}={val}: the program runs on with the same output",
                       f"rc {hp.returncode}, {hp.stderr[-300:]!r}")
                tap.ok(len(warnings) == 1 and var in warnings[0],
                       f"{var}={val}: exactly one warning naming it", repr(warnings))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"1..{tap.n}")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
