#!/usr/bin/env python3
"""bench/cycle driver: allocate + first write + free cycles of one size, one
process per measurement, every configuration side by side in one run.

Configurations (per size): libhp with its cache as configured by default,
the same with HP_F_NOZERO (the cache's bookkeeping without the zeroing of a
reused block), libhp with the cache off (HP_CACHE_MAX=0), the same three for
a second libhp
build (--before BUILD: the same benchmark program run against that build's
libhp.so and backends, to compare two versions of the library in one run),
mmap/munmap, and glibc malloc/free.

Rounds are interleaved: each round runs every configuration once per size,
in an order rotated from round to round. The program times its own cycles
(after untimed warm-up cycles) and reports ns and minor faults per cycle.
Reported per configuration: the median and range of ns per cycle, faults
per cycle, and the ratio to libhp (this build, default flags and cache) as the
median of the per-round ratios (paired, so a slow moment of the machine
hits both sides of a ratio).

Run it through run.sh, which reserves the hugetlb pool under the knob lock
and restores it afterwards.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

SIZES = {4096: 20000, 65536: 10000, 2 << 20: 2000, 64 << 20: 100}


def configs(build, before):
    env = {"HP_BACKEND_DIR": os.path.join(build, "backends")}
    rows = [("libhp", "hp", env), ("libhp NOZERO", "hp-nozero", env),
            ("libhp, no cache", "hp", dict(env, HP_CACHE_MAX="0"))]
    if before:
        benv = {"HP_BACKEND_DIR": os.path.join(before, "backends"),
                "LD_LIBRARY_PATH": os.path.join(before, "lib")}
        rows += [("libhp before", "hp", benv), ("libhp before NOZERO", "hp-nozero", benv),
                 ("libhp before, no cache", "hp", dict(benv, HP_CACHE_MAX="0"))]
    rows += [("mmap/munmap", "mmap", {}), ("glibc malloc/free", "malloc", {})]
    return rows


def run_once(exe, mode, size, cycles, extra_env):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "HP_CACHE_MAX", "HP_BACKENDS",
              "GLIBC_TUNABLES", "HP_BACKEND_DIR"):
        env.pop(k, None)
    env.update(extra_env)
    out = subprocess.run([exe, mode, str(size), str(cycles)], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--before", help="another build tree whose libhp to run beside this one")
    ap.add_argument("--before-label", default="",
                    help="what --before is (a commit), for the report")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the cycles per process")
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--pool", default="", help="pool summary line for the report")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    before = os.path.abspath(args.before) if args.before else None
    exe = os.path.join(build, "bench/cycle/cycle")
    rows = configs(build, before)
    sizes = [int(s) for s in args.sizes.split(",")]
    cycles = {s: max(1, int(SIZES.get(s, 1000) * args.scale)) for s in sizes}
    records = []
    for s in sizes:   # one untimed pass: pool pages and libraries warm for everyone
        for name, mode, env in rows:
            run_once(exe, mode, s, max(1, cycles[s] // 10), env)
    for rnd in range(args.rounds):
        for s in sizes:
            order = rows[rnd % len(rows):] + rows[:rnd % len(rows)]
            for name, mode, env in order:
                r = run_once(exe, mode, s, cycles[s], env)
                r.update(config=name, round=rnd)
                records.append(r)
                print("round %d %d %s: %.0f ns" % (rnd + 1, s, name, r["ns"]), file=sys.stderr)
    d = {"date": time.time(), "kernel": platform.release(), "cpus": os.cpu_count(),
         "rounds": args.rounds, "pool": args.pool, "before": args.before_label if before else "",
         "configs": [r[0] for r in rows], "sizes": sizes, "records": records}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(d, fh, indent=1)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from plots import cycle_tables
    print(cycle_tables(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
