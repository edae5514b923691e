"""One measurement in a fresh process (libhp reads HP_* once per process).

usage: worker.py CONFIG WORKLOAD SIZE_BYTES   -> one JSON line on stdout

CONFIG    numpy       numpy's default allocator (glibc malloc)
          hp-hugetlb  hp.numpy handler, HP_BACKENDS=hugetlbfs,fallback (pool
                      reserved by run.py)
          hp-thp      hp.numpy handler, HP_BACKENDS=thp-madvise,fallback
          hp-base     hp.numpy handler, HP_BACKENDS=fallback (libhp on 4 KiB
                      pages: what libhp costs without huge pages)
WORKLOAD  touch       np.ones(SIZE/8): cold (first in the process), then warm
                      (4 more alloc + touch + free, median)
          gather      np.ones(SIZE/8), then np.take of 2^24 random indexes,
                      median of 3 (indexes and result from numpy's default)
"""

import json
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 3)[0] + "/bindings/python/tests")


def backend(arr):
    import hp
    try:
        return hp.info(arr).backend
    except hp.ForeignPointerError:
        return "numpy-default"


def huge_fraction(arr):
    from conftest import smaps_huge_bytes   # the test suite's smaps reader
    return smaps_huge_bytes(arr.__array_interface__["data"][0], arr.nbytes) / arr.nbytes


def main():
    config, workload, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    n = size // 8
    if workload == "gather":
        # The indexes and the result come from numpy's default allocator in
        # every configuration: only the big array differs.
        rng = np.random.default_rng(12345)
        idx = rng.integers(0, n, 1 << 24)
        result = np.empty(idx.size)
    if config != "numpy":
        import hp.numpy
        hp.numpy.install(min_size=1 << 20)
    out = {"config": config, "workload": workload, "size": size}
    if workload == "touch":
        t = time.perf_counter()
        a = np.ones(n)
        out["cold_s"] = time.perf_counter() - t
        out["huge"] = huge_fraction(a)
        out["backend"] = backend(a)
        del a
        warm = []
        for _ in range(4):
            t = time.perf_counter()
            a = np.ones(n)
            warm.append(time.perf_counter() - t)
            del a
        out["warm_s"] = sorted(warm)[len(warm) // 2]
    else:
        t = time.perf_counter()
        a = np.ones(n)
        out["populate_s"] = time.perf_counter() - t
        out["huge"] = huge_fraction(a)
        out["backend"] = backend(a)
        times = []
        for _ in range(3):
            t = time.perf_counter()
            np.take(a, idx, out=result)
            times.append(time.perf_counter() - t)
        assert float(result.sum()) == idx.size
        out["gather_s"] = sorted(times)[1]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
