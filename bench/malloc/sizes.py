#!/usr/bin/env python3
"""bench/malloc sizes: where HP_MALLOC_LARGE should be. For each threshold
T, libhp-malloc runs bench_sizes (one malloc + touch + free cycle per size,
a live neighbour of the same size kept; ns per cycle) and the realloc loop
(bench/realloc/realloc_loop_libc 2 4: growth x2 to 512 MiB through plain
realloc). Interleaved rounds, medians.

    sizes.py BUILD_DIR [ROUNDS]

run.sh BUILD_DIR --sizes [ROUNDS] runs it with the hugetlb pool reserved
under the knob lock and the heavy-job lock held."""
import os
import statistics
import subprocess
import sys
import time

build = os.path.abspath(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
sizes_prog = os.path.join(build, "bench/malloc/bench_sizes")
loop = [os.path.join(build, "bench/realloc/realloc_loop_libc"), "2", "4"]
thresholds = ["256K", "1M", "2M", "4M", "8M", "16M"]
# The pool serves arenas and large blocks alike (hpctl run --pool=all), as
# when the threshold table in README.md was measured.
base = {"LD_PRELOAD": os.path.join(build, "bindings/malloc/libhp-malloc.so"),
        "HP_BACKEND_PATH": os.path.join(build, "backends"), "HP_MALLOC_POOL": "all"}


def env_for(t):
    e = {k: v for k, v in os.environ.items() if not k.startswith("HP_") and k != "LD_PRELOAD"}
    e.update(base)
    e["HP_MALLOC_LARGE"] = t
    return e


def sizes_once(t):
    out = subprocess.run([sizes_prog, "100"], env=env_for(t), capture_output=True, text=True,
                         check=True).stdout
    return {int(a): float(b) for a, b in (line.split() for line in out.splitlines())}


def loop_once(t):
    t0 = time.perf_counter()
    subprocess.run(loop, env=env_for(t), stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


res = {t: [] for t in thresholds}
lres = {t: [] for t in thresholds}
for t in thresholds:
    sizes_once(t)
    loop_once(t)
for r in range(rounds):
    k = r % len(thresholds)
    for t in thresholds[k:] + thresholds[:k]:
        res[t].append(sizes_once(t))
        lres[t].append(loop_once(t))
kibs = sorted(res[thresholds[0]][0])
print(f"{rounds} interleaved rounds, medians. ns per malloc + touch (one byte per 4 KiB) + "
      "free cycle; the block is served by hp_alloc where size >= HP_MALLOC_LARGE "
      "(marked *)\n")
print("| size | " + " | ".join(f"LARGE={t}" for t in thresholds) + " |")
print("| --- |" + " --- |" * len(thresholds))


def kib_of(t):
    return int(t[:-1]) * (1024 if t.endswith("M") else 1)


for s in kibs:
    cells = []
    for t in thresholds:
        ns = statistics.median(x[s] for x in res[t])
        cells.append(f"{ns / 1000:.1f} µs" + (" *" if s >= kib_of(t) else ""))
    print(f"| {s} KiB | " + " | ".join(cells) + " |")
print("| realloc loop (s) | " +
      " | ".join(f"{statistics.median(lres[t]):.3f}" for t in thresholds) + " |")
