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
