#!/usr/bin/env python3
"""bench/malloc threads: bench_threads (128 threads, default attributes)
with glibc's stacks, under libhp-malloc without HP_STACKS, and with
HP_STACKS=lean and huge; for a small touch (16 KiB, RSS) and a large one
(1 MiB, start-up time). Interleaved rounds, medians.

    threads.py BUILD_DIR [ROUNDS]

Run it under the heavy-job lock (bench/malloc/README.md has the command).
THP settings are left as they are and printed."""
import os
import re
import statistics
import subprocess
import sys

build = os.path.abspath(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 11
prog = os.path.join(build, "bench/malloc/bench_threads")
hpm = {"LD_PRELOAD": os.path.join(build, "bindings/malloc/libhp-malloc.so"),
       "HP_BACKEND_PATH": os.path.join(build, "backends")}
configs = [("glibc stacks (no preload)", {}),
           ("libhp-malloc, HP_STACKS unset", dict(hpm)),
           ("libhp-malloc, HP_STACKS=lean", dict(hpm, HP_STACKS="lean")),
           ("libhp-malloc, HP_STACKS=huge", dict(hpm, HP_STACKS="huge"))]


def once(env, kib):
    e = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "HP_STACKS")}
    e.update(env)
    out = subprocess.run([prog, str(kib)], env=e, capture_output=True, text=True,
                         check=True).stdout
    return {k: float(v) for k, v in re.findall(r"(\w+)=(-?[\d.]+)", out)}


thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
print(f"THP enabled: {thp}; {rounds} interleaved rounds, medians\n")
for kib in (16, 1024):
    res = {c: [] for c, _ in configs}
    for c, env in configs:
        once(env, kib)  # warm-up
    for r in range(rounds):
        k = r % len(configs)
        for c, env in configs[k:] + configs[:k]:
            res[c].append(once(env, kib))
    print(f"128 threads, {kib} KiB of stack written each\n")
    print("| stacks | start ms | RSS growth MiB | huge MiB |")
    print("| --- | --- | --- | --- |")
    for c, _ in configs:
        med = lambda key: statistics.median(x[key] for x in res[c])
        print(f"| {c} | {med('start_ms'):.1f} | {med('rss_growth_kb') / 1024:.1f} | "
              f"{med('huge_kb') / 1024:.0f} |")
    print()
