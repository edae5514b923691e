#!/usr/bin/env python3
"""bench/malloc driver: whole-process benchmarks of libhp-malloc.so against
every peer allocator, side by side in one run.

Rounds are interleaved: each round runs every configuration once per
benchmark, in an order rotated from round to round. Before every run (the
untimed warm-up included) the same conditioning process runs (bench_warm:
MIB of THP memory touched and given back; --condition 0 turns it off), so
that every configuration starts from the same state of the VM's memory
instead of inheriting whatever its predecessor left (README.md: the THP
first-touch cost here depends on it). Wall time is measured around
fork+exec+wait; user, sys, page faults and max RSS come from wait4's rusage
(hugetlb pages are not in RSS). Reported per configuration: medians, and
the ratio configuration/libhp-malloc as the median of the per-round ratios
(paired: a slow moment of the machine hits both sides). unordered_map also
reports its inner loop (inserts + lookups, timed inside the program) and
the CPU time of each phase; calls reports nanoseconds per call of each
entry point. Every configuration must print the same output as glibc.

Run it through run.sh, which takes the heavy-job lock and reserves the
hugetlb pool under the knob lock, and restores it afterwards.
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
SCRUB = ("LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES", "MIMALLOC_LARGE_OS_PAGES",
         "HP_BACKENDS", "HP_MALLOC_STATS", "HP_MALLOC_LARGE", "HP_MALLOC_POOL")


def configs(build, proto):
    hpm = os.path.join(build, "bindings/malloc/libhp-malloc.so")
    hp_env = {"LD_PRELOAD": hpm, "HP_BACKEND_DIR": os.path.join(build, "backends")}
    # The default (no pool pages: fork-safe) and hpctl run --pool=all (arenas and large
    # blocks on the pool: the same pool pages as the peers that use it).
    rows = [("libhp-malloc", hp_env),
            ("libhp-malloc --pool=all", dict(hp_env, HP_MALLOC_POOL="all")),
            # The same without the arena mapped ahead (for --only: what that costs or saves).
            ("libhp-malloc --pool=all HP_MALLOC_AHEAD=0",
             dict(hp_env, HP_MALLOC_POOL="all", HP_MALLOC_AHEAD="0"))]
    if proto:
        rows.append(("jemalloc + libhp extent hooks (prototype)",
                     {"LD_PRELOAD": os.path.join(build, "bench/malloc/proto_jemalloc.so") +
                      ":" + LIBDIR + "/libjemalloc.so.2",
                      "MALLOC_CONF": "oversize_threshold:0",
                      "HP_BACKEND_DIR": os.path.join(build, "backends")}))
    rows += [
        ("glibc", {}),
        ("glibc hugetlb=1 (THP)", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}),
        ("glibc hugetlb=2 (pool)", {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2"}),
        ("jemalloc", {"LD_PRELOAD": LIBDIR + "/libjemalloc.so.2"}),
        ("jemalloc thp:always", {"LD_PRELOAD": LIBDIR + "/libjemalloc.so.2",
                                 "MALLOC_CONF": "thp:always"}),
        ("tcmalloc", {"LD_PRELOAD": LIBDIR + "/libtcmalloc_minimal.so.4"}),
        ("mimalloc", {"LD_PRELOAD": LIBDIR + "/libmimalloc.so.2"}),
        ("mimalloc large pages (pool)", {"LD_PRELOAD": LIBDIR + "/libmimalloc.so.2",
                                         "MIMALLOC_LARGE_OS_PAGES": "1"}),
    ]
    return rows


def benches(build, which):
    b = os.path.join(build, "bench")
    table = {
        "umap": ("unordered_map, 10M inserts + 10M lookups",
                 [os.path.join(b, "malloc/bench_umap"), "10000000", "phases"]),
        "realloc": ("realloc loop x2 to 512 MiB, 4 iterations",
                    [os.path.join(b, "realloc/realloc_loop_libc"), "2", "4"]),
        "mixed": ("mixed small objects, 2 threads (larson-like)",
                  [os.path.join(b, "malloc/bench_mixed"), "2", "3000000"]),
        "calls": ("ns per call of each entry point (best of 7 in each process)",
                  [os.path.join(b, "malloc/bench_calls"), "2000000", "7"]),
    }
    return [(k,) + table[k] for k in which]


def run_once(argv, extra_env):
    env = dict(os.environ)
    for k in SCRUB:
        env.pop(k, None)
    env.update(extra_env)
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=err)
    out = proc.stdout.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    err.seek(0)
    text = err.read().decode(errors="replace")
    sys.stderr.write("".join(l for l in text.splitlines(True)
                             if not l.startswith(("start-up ", "wall ", "calls "))))
    if code != 0:
        raise SystemExit(f"{argv} with {extra_env} exited {code}")
    r = {"wall": wall, "user": ru.ru_utime, "sys": ru.ru_stime,
         "faults": ru.ru_minflt + ru.ru_majflt, "maxrss_kb": ru.ru_maxrss,
         "out": out.decode().strip()}
    # bench_umap N phases: "start-up U S inserts U S lookups U S destructor U S"
    # and "wall inserts W lookups W destructor W loop W"; bench_calls:
    # "calls NAME NS" per entry point.
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == "start-up" and len(f) >= 12:
            r["phases"] = {f[i]: float(f[i + 1]) + float(f[i + 2]) for i in (0, 3, 6, 9)}
        elif f and f[0] == "wall" and len(f) >= 9:
            r["walls"] = {f[i]: float(f[i + 1]) for i in (1, 3, 5, 7)}
        elif f and f[0] == "calls" and len(f) == 3:
            r.setdefault("calls", {})[f[1]] = float(f[2])
    return r


def condition(build, mib):
    """The same predecessor for every run: bench_warm MIB (see warm.c)."""
    if mib > 0:
        subprocess.run([os.path.join(build, "bench/malloc/bench_warm"), str(mib)], check=True)


def report_phases(rows, res, out):
    """CPU (user + sys) per phase of bench_umap, medians, milliseconds."""
    names = ["start-up", "inserts", "lookups", "destructor"]
    print("\n| configuration | " + " | ".join(f"{n} ms" for n in names) + " |", file=out)
    print("| --- |" + " --- |" * len(names), file=out)
    for cname, _ in rows:
        ph = [r["phases"] for r in res[cname] if "phases" in r]
        if ph:
            print(f"| {cname} | " + " | ".join(
                f"{statistics.median(p[n] for p in ph) * 1000:.1f}" for n in names) + " |",
                file=out)


def paired(mine, other):
    """Median of the per-round ratios other/mine."""
    return statistics.median(o / m for o, m in zip(other, mine))


def report_loop(rows, res, out):
    """bench_umap's inner loop (inserts + lookups, timed in the program)."""
    print("\n| configuration | inner loop s (min-max) | inserts s | lookups s | "
          "loop / libhp-malloc (paired median) | loop / libhp-malloc --pool=all (paired median) |",
          file=out)
    print("| --- | --- | --- | --- | --- | --- |", file=out)
    loops = {c: [r["walls"]["loop"] for r in res[c]] for c, _ in rows}
    # Kept runs from before HP_MALLOC_POOL=all named the same configuration "--pool".
    pool = next((m for m in ("libhp-malloc --pool=all", "libhp-malloc --pool") if m in loops),
                "libhp-malloc --pool=all")
    for cname, _ in rows:
        lw = loops[cname]
        med = lambda k: statistics.median(r["walls"][k] for r in res[cname])
        vs = [f"{paired(loops[m], lw):.2f}x" if m in loops else "-"
              for m in ("libhp-malloc", pool)]
        print(f"| {cname} | {statistics.median(lw):.3f} ({min(lw):.3f}-{max(lw):.3f}) | "
              f"{med('inserts'):.3f} | {med('lookups'):.3f} | {vs[0]} | {vs[1]} |", file=out)


def report_calls(rows, res, out):
    """bench_calls: ns per call, medians over the rounds, and paired ratios."""
    names = list(res[rows[0][0]][0]["calls"])
    print("\n| call | " + " | ".join(c for c, _ in rows) + " |", file=out)
    print("| --- |" + " --- |" * len(rows), file=out)
    for n in names:
        base = [r["calls"][n] for r in res[rows[0][0]]]
        cells = []
        for cname, _ in rows:
            v = [r["calls"][n] for r in res[cname]]
            cells.append(f"{statistics.median(v):.1f} ({paired(base, v):.2f}x)")
        print(f"| {n} | " + " | ".join(cells) + " |", file=out)
    print(f"\nns per operation, median over the rounds (in parentheses: "
          f"configuration/{rows[0][0]}, median of the per-round ratios).", file=out)


def report(name, title, rows, res, rounds, out):
    if name == "calls":
        print(f"\n### {title}: {rounds} interleaved rounds", file=out)
        report_calls(rows, res, out)
        return
    base = [r["wall"] for r in res[rows[0][0]]]
    print(f"\n### {title}: {rounds} interleaved rounds, medians\n", file=out)
    print("| configuration | wall s (min-max) | user s | sys s | page faults | max RSS MiB | "
          "wall / libhp-malloc (paired median) |", file=out)
    print("| --- | --- | --- | --- | --- | --- | --- |", file=out)
    for cname, _ in rows:
        rr = res[cname]
        w = [r["wall"] for r in rr]
        ratio = statistics.median(x / y for x, y in zip(w, base))
        med = lambda k: statistics.median(r[k] for r in rr)
        print(f"| {cname} | {statistics.median(w):.3f} ({min(w):.3f}-{max(w):.3f}) | "
              f"{med('user'):.3f} | {med('sys'):.3f} | {med('faults'):.0f} | "
              f"{med('maxrss_kb') / 1024:.0f} | {ratio:.2f}x |", file=out)
    # Each libhp-malloc configuration against the fastest peer, paired.
    ours = [c for c, _ in rows if c.startswith("libhp-malloc")]
    peers = [c for c, _ in rows if not c.startswith("libhp-malloc") and "prototype" not in c]
    for mine in ours:
        mw = [r["wall"] for r in res[mine]]
        best = min(((statistics.median(r["wall"] / m for r, m in zip(res[c], mw)), c)
                    for c in peers), default=None)
        if best:
            verdict = "faster" if best[0] > 1 else "NOT faster"
            print(f"\n{mine} is {verdict} than the fastest peer ({best[1]}): "
                  f"peer/{mine} = {best[0]:.2f}x (paired median).", file=out)
    if any("walls" in r for r in res[rows[0][0]]):
        report_loop(rows, res, out)
    if any("phases" in r for r in res[rows[0][0]]):
        report_phases(rows, res, out)


def json_rounds(d):
    """JSON with one line per measurement (the raw rounds, kept in results/)."""
    return "{\n" + ",\n".join(
        json.dumps(k) + ": [\n  " + ",\n  ".join(json.dumps(r) for r in v) + "\n ]"
        for k, v in d.items()) + "\n}\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bench", default="umap,realloc,mixed")
    ap.add_argument("--proto", action="store_true", help="add the jemalloc prototype")
    ap.add_argument("--only", default="", help="comma-separated configuration names")
    ap.add_argument("--condition", type=int, default=1024, metavar="MIB",
                    help="run bench_warm MIB before every run (0: no conditioning)")
    ap.add_argument("--json")
    ap.add_argument("--report", metavar="JSON",
                    help="run nothing: print the report of a saved run (results/*.json)")
    a = ap.parse_args()
    if a.report:
        with open(a.report) as f:
            saved = json.load(f)
        for bname in dict.fromkeys(k.split("/", 1)[0] for k in saved):
            rows = [(k.split("/", 1)[1], None) for k in saved if k.split("/", 1)[0] == bname]
            res = {c: saved[f"{bname}/{c}"] for c, _ in rows}
            title = dict((b[0], b[1]) for b in benches("", [bname]))[bname]
            report(bname, title, rows, res, len(res[rows[0][0]]), sys.stdout)
        return
    if not a.build:
        ap.error("--build is required (or --report JSON)")
    rows = configs(a.build, a.proto)
    if a.only:
        keep = a.only.split(",")
        rows = [r for r in rows if r[0] in keep or r[0].startswith("libhp-malloc")]
    bl = benches(a.build, a.bench.split(","))
    res = {(b[0], c[0]): [] for b in bl for c in rows}
    for b in bl:  # warm-up, untimed: libraries and pool pages warm for all
        for cname, env in rows:
            condition(a.build, a.condition)
            run_once(b[2], env)
    for rnd in range(a.rounds):
        for b in bl:
            k = rnd % len(rows)
            for cname, env in rows[k:] + rows[:k]:
                condition(a.build, a.condition)
                res[(b[0], cname)].append(run_once(b[2], env))
    for b in bl:
        outs = {c: {r["out"] for r in res[(b[0], c)]} for c, _ in rows}
        ref = outs.get("glibc", outs[rows[0][0]])
        bad = [c for c, o in outs.items() if o != ref]
        print(f"\n{b[0]}: output identical across configurations: "
              f"{'yes' if not bad else 'NO: ' + ', '.join(bad)}")
        report(b[0], b[1], rows, {c: res[(b[0], c)] for c, _ in rows}, a.rounds, sys.stdout)
    if a.json:
        # One line per measurement: {"BENCH/CONFIG": [round 1, round 2, ...]}.
        with open(a.json, "w") as f:
            f.write(json_rounds({f"{k[0]}/{k[1]}": v for k, v in res.items()}))


if __name__ == "__main__":
    main()
