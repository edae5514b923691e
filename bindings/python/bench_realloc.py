#!/usr/bin/env python3
"""The realloc-growth loop of bench/realloc, from Python: hp.Block.resize vs bytearray.

    ptr = NULL; old = 0
    for size = 4; size < 1 GiB; size *= growth:
        ptr = realloc(ptr, size)
        memset(ptr + old, 0xff, size - old)
        old = size
    free(ptr)

hp runs it with hp.alloc() + Block.resize() (hp_realloc); the baseline with a
bytearray grown by PyByteArray_Resize (glibc realloc underneath, the same
contract). Both fill with ctypes.memset, so the loop overhead is equal and
small. Rounds alternate between the two; the medians are printed.

    HP_LIBRARY=$PWD/build/lib/libhp.so.1 HP_BACKEND_DIR=$PWD/build/backends \
    PYTHONPATH=bindings/python python3 bindings/python/bench_realloc.py --rounds 3
"""

import argparse
import ctypes
import resource
import statistics
import time

import hp

_resize_bytearray = ctypes.pythonapi.PyByteArray_Resize
_resize_bytearray.argtypes = (ctypes.py_object, ctypes.c_ssize_t)
_resize_bytearray.restype = ctypes.c_int


def sizes(growth, limit):
    size = 4
    while size < limit:
        yield size
        size = max(size + 1, int(size * growth))


def loop_hp(growth, limit, options):
    block, old = None, 0
    for size in sizes(growth, limit):
        if block is None:
            block = hp.alloc(size, **options)
        else:
            block.resize(size)
        ctypes.memset(block.address + old, 0xFF, size - old)
        old = size
    backend = block.info().backend
    block.close()
    return backend


def loop_bytearray(growth, limit, _options):
    buf, old = bytearray(), 0
    for size in sizes(growth, limit):
        _resize_bytearray(buf, size)
        anchor = ctypes.c_char.from_buffer(buf)   # an export: drop before resizing
        ctypes.memset(ctypes.addressof(anchor) + old, 0xFF, size - old)
        del anchor
        old = size
    del buf
    return "glibc"


def measure(fn, growth, limit, iterations, options):
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    for _ in range(iterations):
        label = fn(growth, limit, options)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall": wall, "user": after.ru_utime - before.ru_utime,
            "sys": after.ru_stime - before.ru_stime,
            "faults": after.ru_minflt - before.ru_minflt, "label": label}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--growth", type=float, nargs="+", default=[2.0, 1.5])
    parser.add_argument("--limit", type=int, default=1 << 30, help="stop below this size")
    parser.add_argument("--iterations", type=int, default=4, help="loops per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", help="hp.alloc(backend=...)")
    parser.add_argument("--page-size", help="hp.alloc(page_size=...), e.g. 2M")
    args = parser.parse_args()
    options = {k: v for k, v in (("backend", args.backend), ("page_size", args.page_size)) if v}

    print(f"libhp {hp.version}; {args.iterations} loops per round, median of {args.rounds} rounds")
    print(f"{'growth':>6} {'runner':<22} {'wall s':>8} {'user s':>8} {'sys s':>8} "
          f"{'faults':>9} {'time/hp':>7}")
    for growth in args.growth:
        runs = {"hp": [], "bytearray": []}
        for _ in range(args.rounds):
            for name, fn in (("hp", loop_hp), ("bytearray", loop_bytearray)):
                runs[name].append(measure(fn, growth, args.limit, args.iterations, options))
        med = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall", "user", "sys",
                                                                     "faults")}
               for name, rs in runs.items()}
        for name in ("hp", "bytearray"):
            m = med[name]
            label = f"{name} ({runs[name][-1]['label']})"
            print(f"{growth:>6} {label:<22} {m['wall']:>8.3f} {m['user']:>8.3f} {m['sys']:>8.3f} "
                  f"{int(m['faults']):>9} {m['wall'] / med['hp']['wall']:>6.2f}x")


if __name__ == "__main__":
    main()
