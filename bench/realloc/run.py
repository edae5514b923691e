#!/usr/bin/env python3
"""bench/realloc driver: the seed-001 realloc-growth loop, one whole process
per measurement, every allocator configuration side by side in one run.

Rounds are interleaved: each round runs every configuration once per growth
factor, in an order rotated from round to round. Wall time is measured
around fork+exec+wait; user, sys and page faults come from wait4's rusage.
Reported per configuration: the median (and range) of each figure, and the
ratio configuration/libhp as the median of the per-round ratios (paired, so
a slow moment of the machine hits both sides of a ratio).

Run it through run.sh, which reserves the hugetlb pool under the knob lock
and restores it afterwards.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LIBDIR = "/usr/lib/x86_64-linux-gnu"


def configs(build, thp_row, idle_row=False):
    libc = os.path.join(build, "bench/realloc/realloc_loop_libc")
    hp = os.path.join(build, "bench/realloc/realloc_loop_hp")
    hp_env = {"HP_BACKEND_DIR": os.path.join(build, "backends")}
    rows = [
        ("libhp", hp, [], hp_env),
        ("libhp, zero-filled", hp, ["zero"], hp_env),
    ]
    if idle_row:
        # The cache's idle bounds at 1 ms: every freed range goes back to the
        # kernel before the next iteration, as if the process had idled past
        # HP_CACHE_POOL_IDLE_MS / HP_CACHE_IDLE_MS between iterations.
        rows.append(("libhp, idle release 1 ms", hp, [],
                     dict(hp_env, HP_CACHE_POOL_IDLE_MS="1", HP_CACHE_IDLE_MS="1")))
    if thp_row:
        rows.append(("libhp, THP only", hp, [],
                     dict(hp_env, HP_BACKENDS="thp-madvise,fallback")))
    rows += [
        ("glibc", libc, [], {}),
        ("glibc hugetlb=1 (THP)", libc, [], {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}),
        ("glibc hugetlb=2 (pool)", libc, [], {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2"}),
        ("jemalloc", libc, [], {"LD_PRELOAD": LIBDIR + "/libjemalloc.so.2"}),
        ("jemalloc thp:always", libc, [],
         {"LD_PRELOAD": LIBDIR + "/libjemalloc.so.2", "MALLOC_CONF": "thp:always"}),
        ("tcmalloc", libc, [], {"LD_PRELOAD": LIBDIR + "/libtcmalloc_minimal.so.4"}),
        ("mimalloc", libc, [], {"LD_PRELOAD": LIBDIR + "/libmimalloc.so.2"}),
        ("mimalloc large pages (pool)", libc, [],
         {"LD_PRELOAD": LIBDIR + "/libmimalloc.so.2", "MIMALLOC_LARGE_OS_PAGES": "1"}),
    ]
    return rows


# --trace: each timed run also records the time to reach every size.
args_trace = False


def run_once(exe, args, extra_env):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES", "MIMALLOC_LARGE_OS_PAGES",
              "HP_BACKENDS"):
        env.pop(k, None)
    env.update(extra_env)
    trace = None
    if args_trace and args[0] != "primer":
        fd, trace = tempfile.mkstemp(prefix="realloc-trace-", suffix=".json")
        os.close(fd)
        env["REALLOC_TRACE"] = trace
    t0 = time.perf_counter()
    proc = subprocess.Popen([exe] + args, env=env)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{exe} {args} with {extra_env} exited {proc.returncode}")
    r = {"wall": wall, "user": ru.ru_utime, "sys": ru.ru_stime,
         "faults": ru.ru_minflt + ru.ru_majflt, "maxrss_kb": ru.ru_maxrss}
    if trace:
        with open(trace) as fh:
            r["trace"] = json.load(fh)   # [[size, seconds to reach it], ...]
        os.unlink(trace)
    return r


def fmt_s(values):
    med = statistics.median(values)
    return f"{med:.3f}"


def table(rows, results, factor, rounds, out):
    base = [r["wall"] for r in results[("libhp", factor)]]
    print(f"\n### growth x{factor}: {rounds} interleaved rounds, medians\n", file=out)
    print("| configuration | wall s (min-max) | user s | sys s | page faults | "
          "wall / libhp wall (paired median) |", file=out)
    print("| --- | --- | --- | --- | --- | --- |", file=out)
    best_peer = None
    for name, _, _, _ in rows:
        rs = results[(name, factor)]
        wall = [r["wall"] for r in rs]
        ratio = statistics.median(w / b for w, b in zip(wall, base))
        if not name.startswith("libhp") and (best_peer is None or ratio < best_peer[1]):
            best_peer = (name, ratio)
        print(f"| {name} | {fmt_s(wall)} ({min(wall):.3f}-{max(wall):.3f}) | "
              f"{fmt_s([r['user'] for r in rs])} | {fmt_s([r['sys'] for r in rs])} | "
              f"{int(statistics.median(r['faults'] for r in rs))} | {ratio:.2f}x |", file=out)
    print(f"\nFastest other allocator at x{factor}: **{best_peer[0]}**, "
          f"libhp is **{best_peer[1]:.2f}x** faster (paired median).", file=out)
    return best_peer


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--factors", default="2,1.5")
    ap.add_argument("--primer-mib", type=int, default=0,
                    help="touch and free this much memory (untimed) before every run")
    ap.add_argument("--thp-row", action="store_true", help="also libhp restricted to THP")
    ap.add_argument("--idle-row", action="store_true",
                    help="also libhp with the cache's idle bounds at 1 ms")
    ap.add_argument("--only", help="configuration names to run, separated by ';' (libhp always)")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--trace", action="store_true",
                    help="also record, per run, the time to reach each size (REALLOC_TRACE)")
    args = ap.parse_args()
    global args_trace
    args_trace = args.trace
    build = os.path.abspath(args.build)
    rows = configs(build, args.thp_row, args.idle_row)
    if args.only:
        keep = set(args.only.split(";")) | {"libhp"}
        rows = [r for r in rows if r[0] in keep]
    factors = args.factors.split(",")
    libc = os.path.join(build, "bench/realloc/realloc_loop_libc")
    results = {(name, f): [] for name, _, _, _ in rows for f in factors}
    # One untimed pass: pool pages and shared libraries are warm for everyone.
    for f in factors:
        for name, exe, extra, env in rows:
            run_once(exe, [f, "1"] + extra, env)
    for rnd in range(args.rounds):
        for f in factors:
            order = rows[rnd % len(rows):] + rows[:rnd % len(rows)]
            for name, exe, extra, env in order:
                if args.primer_mib:
                    run_once(libc, ["primer", str(args.primer_mib)], {})
                r = run_once(exe, [f, str(args.iters)] + extra, env)
                results[(name, f)].append(r)
                print(f"round {rnd + 1} x{f} {name}: {r['wall']:.3f} s", file=sys.stderr)
    out = sys.stdout
    print(f"## bench/realloc: {args.iters} iterations per process, "
          f"{args.rounds} rounds, primer {args.primer_mib} MiB", file=out)
    summary = {}
    for f in factors:
        summary[f] = table(rows, results, f, args.rounds, out)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({f"{k[0]}|{k[1]}": v for k, v in results.items()}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
