#!/usr/bin/env python3
"""HP_STACKS=lean|huge for an unmodified threaded program, through
`hpctl run --stacks`:

    stacks.py HPCTL THREADS_PROG

- without --stacks, libhp makes no stack (the program's threads keep
  glibc's);
- lean: every thread's stack is a libhp stack, nothing of it on huge pages,
  resident memory per thread small (64 KiB written per thread);
- huge: the stacks' resident memory is on huge pages (smaps AnonHugePages
  or hugetlb), measured while the threads are alive;
- both: joined threads and detached threads (by attribute, by their
  creator's pthread_detach and by their own) give their stacks back
  (libhp's stack cache counters);
- fork from a threaded program (from a thread on a libhp stack, and from
  the main thread) and exec in the child;
- an invalid HP_STACKS: one warning, the program runs on glibc's stacks;
- huge without THP (the program runs with PR_SET_THP_DISABLE) while the
  hugetlb pool has free pages: the stacks stay off the pool (lean) unless
  --pool=all allows it (--pool, large blocks only, does not), since a
  thread that forks writes its stack in the child at once. Reserves a small pool under the machine-wide knob lock
  and puts it back.

THP must be able to serve for the huge case (enabled = always or madvise);
otherwise that part skips and says why. TAP output.
"""
import ctypes
import os
import re
import subprocess
import sys

from real_programs import FREE, POOL, Tap, pool_with_free

THREADS = 16
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
PR_SET_THP_DISABLE = 41


def run(argv, env=None, no_thp=False):
    e = dict(os.environ)
    e.pop("HP_STACKS", None)
    if env:
        e.update(env)
    pre = None
    if no_thp:  # inherited across exec (prctl(2)): libhp sees no THP at all
        libc = ctypes.CDLL(None, use_errno=True)
        pre = lambda: libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)  # noqa: E731
    return subprocess.run(argv, env=e, capture_output=True, timeout=120, preexec_fn=pre)


def huge_without_thp(tap, hp, prog):
    """HP_STACKS=huge with THP disabled and pool pages free: lean stacks,
    or pool stacks only under --pool=all."""
    name = "huge without THP"
    if os.geteuid() != 0 or not os.path.exists(POOL):
        tap.skip(name, "needs root and a 2 MiB hugetlb pool")
        return
    with pool_with_free(64):  # room for every stack
        if int(open(FREE).read()) < THREADS:
            tap.skip(name, f"the pool did not grow: {open(FREE).read().strip()} pages free")
            return
        for pool in ([], ["--pool"], ["--pool=all"]):
            argv = hp + pool + ["--stacks", "huge", "--", prog, "stacks", str(THREADS)]
            r = run(argv, no_thp=True)
            f = fields(r.stdout)
            made = r.returncode == 0 and f.get("hp_stacks", 0) >= THREADS
            if pool == ["--pool=all"]:
                tap.ok(made and f.get("huge_kb", 0) >= 2048 * THREADS // 2,
                       f"{name}, --pool=all: {f.get('huge_kb')} kB of the stacks on pool pages",
                       repr(r.stdout + r.stderr[-300:]))
            else:
                tap.ok(made and f.get("huge_kb") == 0,
                       f"{name}, pool free{', --pool' if pool else ''}: libhp stacks, "
                       "none on pool pages", repr(r.stdout + r.stderr[-300:]))


def fields(out):
    return {k: int(v) for k, v in re.findall(r"(\w+)=(-?\d+)", out.decode(errors="replace"))}


def thp_mode():
    try:
        return re.search(r"\[(\w+)\]", open(THP).read()).group(1)
    except (OSError, AttributeError):
        return "missing"


def main():
    hpctl, prog = sys.argv[1], sys.argv[2]
    if os.environ.get("HPTEST_VALGRIND"):
        # valgrind would watch only this driver, not the programs it runs
        print("1..0 # SKIP nothing of ours runs under valgrind here")
        return 0
    tap = Tap()
    hp = [hpctl, "run"]

    r = run([hpctl, "run", "--stacks", "giant", "--", "true"])
    tap.ok(r.returncode == 2 and b"neither lean nor huge" in r.stderr,
           "hpctl run --stacks giant: exit 2, says why", repr(r.stderr))

    r = run(hp + ["--", prog, "stacks", str(THREADS)])
    f = fields(r.stdout)
    tap.ok(r.returncode == 0 and f.get("hp_stacks") == 0,
           "without --stacks: libhp makes no thread stack", repr(r.stdout + r.stderr[-300:]))

    r = run(hp + ["--", prog, "stacks", str(THREADS)], env={"HP_STACKS": "giant"})
    warn = r.stderr.count(b"HP_STACKS")
    f = fields(r.stdout)
    tap.ok(r.returncode == 0 and warn == 1 and f.get("hp_stacks") == 0,
           "HP_STACKS=giant: one warning, runs on glibc's stacks",
           f"rc {r.returncode}, {warn} warnings, {r.stdout!r}")

    for mode in ("lean", "huge"):
        if mode == "huge" and thp_mode() not in ("always", "madvise"):
            tap.skip("huge stacks", f"THP enabled is {thp_mode()}: huge stacks would be lean "
                     "(or from the hugetlb pool under --pool=all), not measured here")
            continue
        r = run(hp + ["--stacks", mode, "--", prog, "stacks", str(THREADS)])
        f = fields(r.stdout)
        tap.ok(r.returncode == 0 and f.get("hp_stacks", 0) >= THREADS,
               f"{mode}: every thread of the program runs on a libhp stack",
               repr(r.stdout + r.stderr[-300:]))
        if mode == "lean":
            per_thread = f.get("rss_kb", 1 << 30) / THREADS
            tap.ok(f.get("huge_kb") == 0 and per_thread < 256,
                   f"lean: no huge page, {per_thread:.0f} kB resident per thread (64 kB written)",
                   repr(r.stdout))
        else:
            tap.ok(f.get("huge_kb", 0) >= 2048 * THREADS // 2,
                   f"huge: {f.get('huge_kb')} kB of {THREADS} stacks on huge pages "
                   f"({f.get('rss_kb')} kB resident)", repr(r.stdout))
        tap.ok(f.get("in_use_after_join") == 0,
               f"{mode}: joined threads gave their stacks back", repr(r.stdout))
        tap.ok(f.get("hp_stacks_total", 0) >= f.get("hp_stacks", 0) + 3 * THREADS and
               f.get("in_use_after_detach") == 0,
               f"{mode}: detached threads gave their stacks back", repr(r.stdout))
        r = run(hp + ["--stacks", mode, "--", prog, "fork", "4"])
        tap.ok(r.returncode == 0 and b"forks ok=1" in r.stdout,
               f"{mode}: fork + exec from a thread and from the main thread",
               repr(r.stdout + r.stderr[-300:]))
    huge_without_thp(tap, hp, prog)
    print(f"1..{tap.n}")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
