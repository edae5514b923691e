"""numpy on libhp against numpy's default allocator, in the same run.

Interleaved rounds: every round runs every configuration once, each in a
fresh process, in a rotated order; the table gives medians over rounds and
the median of the per-round ratios to numpy's default (paired ratios).
Run it alone on the machine (run.sh takes /run/lock/libhp-heavy.lock):

    bench/numpy/run.sh [--rounds 3] [--touch-gib 1] [--gather-gib 4]

The hp-hugetlb configuration needs a 2 MiB hugetlb pool: run.py adds what
the largest array needs, taking /run/lock/libhp-knobs.lock only while it
writes nr_hugepages, and takes the pages back afterwards (also on failure);
without root it leaves hp-hugetlb out. The "huge" column is measured in
smaps for every run.
"""

import argparse
import contextlib
import fcntl
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
POOL = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
FREE = POOL.replace("nr_hugepages", "free_hugepages")
CONFIGS = ["numpy", "hp-hugetlb", "hp-thp", "hp-base"]
BACKENDS = {"hp-hugetlb": "hugetlbfs,fallback", "hp-thp": "thp-madvise,fallback",
            "hp-base": "fallback"}


def read_int(path):
    with open(path) as f:
        return int(f.read())


@contextlib.contextmanager
def knob_lock():
    fd = os.open("/run/lock/libhp-knobs.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def grow_pool(pages):
    """Add pages to the 2 MiB pool (held briefly under the knob lock);
    returns how many were added, or None if the pool cannot serve them."""
    if not os.access(POOL, os.W_OK):
        print("# not root: no hp-hugetlb", file=sys.stderr)
        return None
    with knob_lock():
        before = read_int(POOL)
        with open(POOL, "w") as f:
            f.write(f"{before + pages}\n")
        added = read_int(POOL) - before
        if read_int(FREE) >= pages:
            return added
        with open(POOL, "w") as f:
            f.write(f"{before}\n")
    print(f"# the pool gave {added} of {pages} pages: no hp-hugetlb", file=sys.stderr)
    return None


def run(config, workload, size):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "bindings/python"), str(REPO / "build/bindings/python"),
         env.get("PYTHONPATH", "")])
    env.setdefault("HP_LIBRARY", str(REPO / "build/lib/libhp.so.1"))
    env.setdefault("HP_BACKEND_DIR", str(REPO / "build/backends"))
    if config in BACKENDS:
        env["HP_BACKENDS"] = BACKENDS[config]
    proc = subprocess.run([sys.executable, str(HERE / "worker.py"), config, workload, str(size)],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{config} {workload}: {proc.stderr}")
    return json.loads(proc.stdout)


def table(rows, workload, metric, label):
    base = [r[metric] for r in rows if r["config"] == "numpy"]
    lines = [f"| {label} | config | median s | ratio to numpy (paired median) | huge "
             "| served by |", "|---|---|---:|---:|---:|---|"]
    for config in CONFIGS:
        mine = [r for r in rows if r["config"] == config]
        if not mine:
            continue
        values = [r[metric] for r in mine]
        ratios = [r[metric] / b for r, b in zip(mine, base)]
        huge = statistics.median(r["huge"] for r in mine)
        served = ",".join(sorted({r.get("backend", "?") for r in mine}))
        lines.append(f"| {workload} | {config} | {statistics.median(values):.3f} | "
                     f"{statistics.median(ratios):.2f}x | {huge:.0%} | {served} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--touch-gib", type=float, default=1)
    ap.add_argument("--gather-gib", type=float, default=4)
    args = ap.parse_args()
    touch = int(args.touch_gib * (1 << 30))
    gather = int(args.gather_gib * (1 << 30))
    configs = list(CONFIGS)
    added = grow_pool((max(touch, gather) >> 21) + 16)
    if added is None:
        configs.remove("hp-hugetlb")
    try:
        rows = {"touch": [], "gather": []}
        for r in range(args.rounds):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for config in order:
                rows["touch"].append(run(config, "touch", touch))
                rows["gather"].append(run(config, "gather", gather))
                print(f"# round {r + 1}: {config} done", file=sys.stderr)
    finally:
        if added:
            with knob_lock():
                with open(POOL, "w") as f:
                    f.write(f"{max(read_int(POOL) - added, 0)}\n")
    def ordered(rs):
        return sorted(rs, key=lambda r: configs.index(r["config"]))
    print(f"rounds: {args.rounds}; alloc + first touch: np.ones of {args.touch_gib:g} GiB; "
          f"gather: np.take of 2^24 random float64 from {args.gather_gib:g} GiB\n")
    print(table(ordered(rows["touch"]), "np.ones cold", "cold_s", "workload"))
    print(table(ordered(rows["touch"]), "np.ones warm", "warm_s", "workload").split("\n", 2)[2])
    print(table(ordered(rows["gather"]), f"np.ones {args.gather_gib:g} GiB", "populate_s",
                "workload")
          .split("\n", 2)[2])
    print(table(ordered(rows["gather"]), "gather", "gather_s", "workload").split("\n", 2)[2])


if __name__ == "__main__":
    main()
