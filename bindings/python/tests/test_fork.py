"""Fork-safe by default: containers (hp.zeros, hp.empty, numpy's own arrays
under hp.numpy) keep out of hugetlb pools unless pool=True, and their
options hold through every resize. With a free 2 MiB pool present (so that a
lost rule shows as hugetlb pages in /proc/self/smaps) and then drained,
HPTEST_FORKS (default 1000) multiprocessing children (fork start method)
write every page of arrays they inherited: none may die of SIGBUS. The
control, an hp.alloc block on the pool (the C default, kept by hp.alloc),
kills its child, which shows the pool really was empty."""

import faulthandler
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import hp
from conftest import (hugetlb_pool_2m, need, set_free_2m, smaps_huge_bytes, smaps_hugetlb_bytes,
                      thp_madvise_available)

MiB = 1 << 20
FORKS = int(os.environ.get("HPTEST_FORKS", "1000"))


@pytest.fixture(scope="module")
def hpnumpy(np):
    try:
        import hp.numpy as hpn
        hpn._extension()
    except ImportError as exc:
        need(False, str(exc))
    return hpn


def address_of(arr):
    return arr.__array_interface__["data"][0]


def hugetlb_of(arr):
    return smaps_hugetlb_bytes(address_of(arr), arr.nbytes)


@pytest.fixture
def free_pool(knob_lock):
    """A 2 MiB pool with 16 free pages (under the knob lock, restored after),
    and nothing of it in this process's cache."""
    hp.cache_trim()
    with hugetlb_pool_2m(16, lock=False) as free:
        if free < 12:
            pytest.skip(f"the kernel gave only {free} free 2 MiB pages")
        yield free
        hp.cache_trim()


def test_containers_stay_off_a_free_pool_unless_pool_true(np, hpnumpy, free_pool):
    with hpnumpy.allocator(min_size=MiB):
        default = np.zeros(MiB // 2)                     # 4 MiB
        assert hpnumpy.stats()["flags"] & hp.F_NOPOOL
    with hpnumpy.allocator(min_size=MiB, pool=True):
        pooled = np.zeros(MiB // 2)
        assert not hpnumpy.stats()["flags"] & hp.F_NOPOOL
    z, e = hp.zeros(MiB // 2), hp.empty(MiB // 2)
    zp = hp.zeros(MiB // 2, pool=True)
    with hp.alloc(4 * MiB) as block:                     # hp.alloc keeps the C default
        for arr in (default, z, e):
            arr[:] = 1.0
            assert hugetlb_of(arr) == 0
            assert hp.info(arr).flags & hp.F_NOPOOL
        assert hugetlb_of(pooled) == 4 * MiB and hugetlb_of(zp) == 4 * MiB
        assert smaps_hugetlb_bytes(block.address, len(block)) == 4 * MiB


def test_options_hold_through_resize(np, hpnumpy, free_pool):
    ok, why = thp_madvise_available()
    need(ok, f"thp-madvise unavailable: {why}")
    # The fork recipe of earlier docs: exclude the pool, and THP too.
    with hp.alloc(65536, exclude=["hugetlbfs", "thp-madvise"]) as b:
        b.resize(8 * MiB)
        assert b.info().backend not in ("hugetlbfs", "thp-madvise"), b.info()
        assert smaps_huge_bytes(b.address, len(b)) == 0
    with hp.alloc(65536, exclude="hugetlbfs") as b:
        for size in (1 * MiB, 4 * MiB, 16 * MiB):
            b.resize(size)
            b[size - 1] = 1
            assert smaps_hugetlb_bytes(b.address, len(b)) == 0, (size, b.info())
    with hp.alloc(65536, pool=False) as b:
        b.resize(16 * MiB)
        b[len(b) - 1] = 1
        assert smaps_hugetlb_bytes(b.address, len(b)) == 0 and b.info().flags & hp.F_NOPOOL
    # numpy arrays grown by ndarray.resize (hp_realloc) under the handler.
    with hpnumpy.allocator(min_size=64 << 10):
        arr = np.zeros(1 << 14)                          # 128 KiB
    arr.resize(1 << 21, refcheck=False)                  # 16 MiB
    arr[:] = 2.0
    assert hugetlb_of(arr) == 0 and hp.info(arr).flags & hp.F_NOPOOL


def _write_every_page(arrays):
    """A child: write every 4 KiB page of every array, read one back."""
    faulthandler.disable()          # a SIGBUS needs no traceback: the exit code tells
    for arr in arrays:
        flat = arr.reshape(-1).view("u1")
        flat[::4096] = 0x5A
        if int(flat[0]) != 0x5A:
            os._exit(3)
    os._exit(0)


def _write_block(block):
    """A child: write the first byte of block (a pool block: SIGBUS)."""
    faulthandler.disable()
    block[0] = 2
    os._exit(0)


def _run_children(ctx, arrays, count):
    """Start count fork children (two at a time) writing arrays; their exit
    codes."""
    codes = []
    running = []
    for _ in range(count):
        p = ctx.Process(target=_write_every_page, args=(arrays,))
        p.start()
        running.append(p)
        if len(running) >= 2:
            running[0].join()
            codes.append(running.pop(0).exitcode)
    for p in running:
        p.join()
        codes.append(p.exitcode)
    return codes


def test_forked_children_write_inherited_arrays_with_the_pool_drained(np, hpnumpy, free_pool):
    ctx = multiprocessing.get_context("fork")
    with hpnumpy.allocator(min_size=MiB):
        numpy_own = [np.zeros(MiB // 2), np.ones(MiB // 2)]      # 4 MiB each
    arrays = numpy_own + [hp.zeros(MiB // 2), hp.empty(MiB // 2)]
    for arr in arrays:
        arr[:] = 1.0
    control = hp.alloc(4 * MiB)
    try:
        control[0] = 1
        pooled = smaps_hugetlb_bytes(control.address, len(control))
        assert pooled == 4 * MiB, "the control should be on the free pool"
        assert [hugetlb_of(a) for a in arrays] == [0] * len(arrays)
        if set_free_2m(0) != 0:
            pytest.skip("could not drain the 2 MiB pool")
        # The control first, while the pool is surely empty: other programs
        # on the machine may free pool pages during the children's run.
        ctrl = ctx.Process(target=_write_block, args=(control,))
        ctrl.start()
        ctrl.join()
        started = time.monotonic()
        codes = _run_children(ctx, arrays, FORKS)
        elapsed = time.monotonic() - started
    finally:
        control.close()
    sigbus = codes.count(-signal.SIGBUS)
    other = len(codes) - codes.count(0) - sigbus
    print(f"{FORKS} fork children wrote {len(arrays)} inherited 4 MiB arrays with the pool "
          f"drained in {elapsed:.1f} s: {sigbus} SIGBUS, {other} other failures; the "
          f"pool block's child: exit code {ctrl.exitcode}")
    assert sigbus == 0 and other == 0, codes[:20]
    assert ctrl.exitcode == -signal.SIGBUS       # the pool really was empty
    assert all(float(a.reshape(-1)[1]) == 1.0 for a in arrays)   # the parent's own copy


# -- attacks: the pool drained by another process, a threaded parent, the cache --

#: Run by a separate process: take every free 2 MiB pool page (a shared
#: hugetlb memfd, every page touched), say how many, and hold them until
#: stdin closes -- another program using the pool, as on a database host.
DRAINER = r"""
import mmap, os, sys
page = 2 << 20
free = int(open(sys.argv[1]).read())
fd = os.memfd_create("hp-test-drain", os.MFD_HUGETLB)
held = None
while free > 0 and held is None:
    try:
        os.ftruncate(fd, free * page)
        held = mmap.mmap(fd, free * page, mmap.MAP_SHARED)
    except OSError:
        free -= 1          # the pool shrank meanwhile: ask for one page less
for off in range(0, free * page, page):
    held[off] = 1
print(free, flush=True)
sys.stdin.read()
"""

FREE_2M = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"


def _free_2m():
    with open(FREE_2M) as f:
        return int(f.read())


@pytest.fixture
def drain_from_outside(free_pool):
    """A callable that has another process take every free 2 MiB pool page
    (and hold them until the test ends); returns the pages it took."""
    procs = []

    def drain():
        # Other programs on the machine may free pool pages meanwhile: one
        # more holder takes what they gave back.
        taken = 0
        for _ in range(5):
            proc = subprocess.Popen([sys.executable, "-c", DRAINER, FREE_2M],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            procs.append(proc)
            taken += int(proc.stdout.readline() or "0")
            if _free_2m() == 0:
                return taken
        raise AssertionError(f"other processes took {taken} pool pages but "
                             f"{_free_2m()} are still free")

    yield drain
    for proc in procs:
        proc.stdin.close()
        proc.wait(timeout=60)


def _child_writes_and_allocates(arrays):
    """A child of a threaded parent: write every page of the inherited
    arrays, then allocate, grow and free arrays under the handler (inherited
    from the forking thread) -- libhp's locks must not be held by a thread
    that does not exist here."""
    faulthandler.disable()
    import numpy as np
    for arr in arrays:
        flat = arr.reshape(-1).view("u1")
        flat[::4096] = 0x5A
    a = np.zeros(MiB // 2)                     # 4 MiB: the handler's
    a[:] = 3.0
    a.resize(MiB, refcheck=False)              # 8 MiB: hp_realloc
    a[-1] = 4.0
    ok = float(a[0]) == 3.0 and float(a[-1]) == 4.0
    del a
    os._exit(0 if ok else 3)


def test_threaded_parent_forks_while_threads_allocate_under_the_handler(np, hpnumpy,
                                                                        drain_from_outside):
    """Three threads allocate, grow and free arrays under the handler (default
    settings) while the pool has free pages, and go on while the main thread
    forks children, with the pool drained by another process meanwhile. Each
    child writes every inherited array and allocates under the handler: no
    SIGBUS, no hang."""
    ctx = multiprocessing.get_context("fork")
    kept, stop, errors = [], threading.Event(), []
    made = threading.Barrier(4)

    def work(seed):
        try:
            with hpnumpy.allocator(min_size=MiB):
                for i in range(2):                       # kept: made while the pool is free
                    arr = np.full(MiB // 4 * (seed + 1), i, dtype=np.float64)
                    kept.append(arr)
                made.wait()
                i = 0
                while not stop.is_set():
                    arr = np.ones(MiB // 8 * (1 + (seed + i) % 4))
                    arr.resize(arr.size * 2, refcheck=False)
                    kept.append(arr)
                    if len(kept) > 12:
                        kept.pop(6)                  # churn: free some, keep the first six
                    i += 1
        except Exception as exc:  # pragma: no cover - the failure
            errors.append(repr(exc))
            if not made.broken:
                made.abort()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    codes = []
    try:
        made.wait(timeout=120)
        assert [hugetlb_of(a) for a in kept[:6]] == [0] * 6
        drain_from_outside()
        with hpnumpy.allocator(min_size=MiB):
            for _ in range(max(FORKS // 5, 20)):
                p = ctx.Process(target=_child_writes_and_allocates, args=(list(kept),))
                p.start()
                p.join(timeout=60)
                if p.exitcode is None:                   # a deadlocked child
                    p.kill()
                    p.join()
                    codes.append("hung")
                else:
                    codes.append(p.exitcode)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    print(f"{len(codes)} fork children of a 4-thread parent under the handler, pool drained by "
          f"another process: {codes.count(-signal.SIGBUS)} SIGBUS, "
          f"{len(codes) - codes.count(0)} failed")
    assert codes == [0] * len(codes), [c for c in codes if c != 0][:20]


def test_pool_drained_by_another_process_then_children_write(np, hpnumpy, drain_from_outside):
    """The acceptance program, in small: arrays under hp.numpy.install() (and
    hp.zeros) made while the pool has free pages, the pool then taken by
    another process, HPTEST_FORKS multiprocessing (fork) children each write
    every page: zero SIGBUS. The child of a pool=True array dies of it (the
    opt-in keeps the kernel's rule, and shows the pool really was empty)."""
    ctx = multiprocessing.get_context("fork")
    hpnumpy.install(min_size=MiB)
    try:
        arrays = [np.zeros(MiB // 2), np.ones(MiB // 4)]
    finally:
        hpnumpy.uninstall()
    arrays.append(hp.zeros(MiB // 2))
    pooled = hp.zeros(MiB // 4, pool=True)
    pooled[:] = 1.0
    assert [hugetlb_of(a) for a in arrays] == [0] * len(arrays)
    assert hugetlb_of(pooled) == 2 * MiB
    taken = drain_from_outside()
    ctrl = ctx.Process(target=_write_every_page, args=([pooled],))   # first: see above
    ctrl.start()
    ctrl.join()
    codes = _run_children(ctx, arrays, FORKS)
    print(f"pool drained by another process ({taken} pages): {FORKS} children, "
          f"{codes.count(-signal.SIGBUS)} SIGBUS; the pool=True array's child: {ctrl.exitcode}")
    assert codes == [0] * len(codes), [c for c in codes if c != 0][:20]
    assert ctrl.exitcode == -signal.SIGBUS


def test_cached_pool_memory_never_serves_a_container(np, hpnumpy, free_pool):
    """Pool blocks freed into libhp's cache are not handed to an array made
    with the default settings (the cache honours HP_F_NOPOOL too)."""
    blocks = [hp.alloc(4 * MiB) for _ in range(3)]
    for b in blocks:
        b[0] = 1
        assert smaps_hugetlb_bytes(b.address, len(b)) == 4 * MiB
        b.close()
    cached = sum(e.bytes for e in hp.cache_stats().entries if e.backend == "hugetlbfs")
    need(cached >= 4 * MiB, f"the cache kept no hugetlb range ({hp.cache_stats()})")
    with hpnumpy.allocator(min_size=MiB):
        own = [np.zeros(MiB // 2), np.empty(MiB // 2)]
    arrays = own + [hp.zeros(MiB // 2), hp.empty(MiB // 2)]
    for arr in arrays:
        arr[:] = 1.0
    assert [hugetlb_of(a) for a in arrays] == [0] * len(arrays)
    again = hp.alloc(4 * MiB)                         # the control: hp.alloc takes it
    try:
        again[0] = 1
        assert smaps_hugetlb_bytes(again.address, len(again)) == 4 * MiB
    finally:
        again.close()
