"""Huge pages, measured: smaps and hp.info() agree that blocks are huge, for
THP and for a hugetlb pool reserved for the test (under the knob lock,
restored afterwards); a drained pool gives a clear error or a fallback; and
the fork rule for private hugetlb pages holds as documented."""

import ctypes
import faulthandler
import os
import signal

import pytest

import hp
from conftest import hugetlb_pool_2m, run_python, need, set_free_2m, smaps_huge_bytes, thp_madvise_available

MiB = 1 << 20


def test_thp_block_is_huge_in_smaps_and_info():
    ok, why = thp_madvise_available()
    need(ok, f"thp-madvise unavailable: {why}")
    with hp.alloc(64 * MiB, backend="thp-madvise", populate=True) as b:
        info = b.info()
        assert info.backend == "thp-madvise" and info.page_size == 2 * MiB
        huge = smaps_huge_bytes(b.address, len(b))
        # Compaction on fault (defrag=madvise) may miss a few ranges on a
        # fragmented machine: at least three quarters.
        assert huge >= 48 * MiB, f"only {huge >> 20} MiB of 64 MiB on THP"
        assert abs(b.info().huge_bytes - huge) <= 8 * MiB


def test_hugetlb_block_from_a_reserved_pool(knob_lock):
    with hugetlb_pool_2m(64, lock=False) as free:
        if free < 32:
            pytest.skip(f"the kernel gave only {free} free 2 MiB pages")
        with hp.alloc(64 * MiB, backend="hugetlbfs") as b:
            info = b.info()
            assert info.backend == "hugetlbfs" and info.page_size == 2 * MiB
            assert smaps_huge_bytes(b.address, len(b)) == 64 * MiB
            assert info.huge_bytes == 64 * MiB
            b[0] = 1
            b[len(b) - 1] = 2
        # Without a backend named, the selection prefers the reserved pool.
        with hp.alloc(16 * MiB) as b:
            assert b.info().backend == "hugetlbfs"
            assert smaps_huge_bytes(b.address, len(b)) == 16 * MiB
        # ...unless the block must stay out of every pool.
        with hp.alloc(16 * MiB, pool=False) as b:
            assert b.info().backend != "hugetlbfs"
            assert b.info().flags & hp.F_NOPOOL
            b[len(b) - 1] = 3


SHORT_POOL_CHILD = """
import hp
MiB = 1 << 20
def message(**kw):
    try:
        hp.alloc(8 * MiB, **kw).close()
    except hp.HugePageError as exc:
        return type(exc).__name__ + ": " + str(exc)
    return "served"
print(message(backend="hugetlbfs"))
print(message(page_size="2M", require_huge=True, exclude="thp-madvise"))
with hp.alloc(8 * MiB) as b:
    b[0] = 1
    print(b.info().backend)
"""


def _read_free_2m():
    with open("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") as f:
        return int(f.read())


@pytest.mark.parametrize("free_pages", [1, 0])
def test_short_and_drained_pool_are_named_and_default_falls_back(knob_lock, free_pages):
    # A fresh process: this one's libhp cache may hold pool pages.
    with hugetlb_pool_2m(free_pages, lock=False) as free:
        if free != free_pages:
            pytest.skip(f"could not set the 2 MiB pool to {free_pages} free ({free})")
        # Other programs on the machine may free pool pages while the child
        # runs (the knob lock does not cover using the pool): set the pool
        # again and rerun until it still had free_pages afterwards.
        for _ in range(5):
            proc = run_python(SHORT_POOL_CHILD)
            if _read_free_2m() == free_pages:
                break
            set_free_2m(free_pages)
    assert proc.returncode == 0, proc.stderr
    named, required, default = proc.stdout.splitlines()
    # The selection may turn the pool down from its probe (no backend) or
    # fail to reserve at map time (out of memory): either way it is named.
    assert named.split(":")[0] in ("NoBackendError", "OutOfMemoryError"), named
    assert required.split(":")[0] in ("NoHugePagesError", "OutOfMemoryError"), required
    if free_pages:
        assert "hugetlbfs: 2M pool has 1 free page(s), 4 needed" in named
        assert "2M pool has 1 free page(s), 4 needed" in required
    else:
        assert "no free pool pages: 2048K 0/" in named
        assert "no free pool pages: 2048K 0/" in required
    assert default != "hugetlbfs"                   # the default never fails for it


def _fork_and(address, write):
    """Fork; the child reads or writes one byte at address and exits 0.
    Returns the child's wait status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        faulthandler.disable()      # an expected SIGBUS needs no traceback
        try:
            if write:
                ctypes.memset(address, 0x5A, 1)
            else:
                ctypes.c_char.from_address(address).value
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def test_fork_child_write_to_hugetlb_needs_a_free_pool_page(knob_lock):
    """The kernel rule the README documents: a private hugetlb page is
    copied on the child's first write, which takes a page from the pool;
    with the pool empty the child gets SIGBUS. Reading is free."""
    # Pool pages cached by this process's earlier tests go back to the pool
    # when the cache's release thread gets to them, which would refill the
    # drained pool under the child: hand them back first.
    hp.cache_trim()
    with hugetlb_pool_2m(8, lock=False) as free:
        if free < 4:
            pytest.skip(f"the kernel gave only {free} free 2 MiB pages")
        with hp.alloc(4 * MiB, backend="hugetlbfs") as b:
            b[0] = 1
            # Room in the pool: the child's copy-on-write succeeds.
            status = _fork_and(b.address, write=True)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            if set_free_2m(0) != 0:
                pytest.skip("could not drain the 2 MiB pool")
            status = _fork_and(b.address, write=False)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            status = _fork_and(b.address, write=True)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGBUS
            assert b[0] == 1                     # the parent is unaffected


def test_fork_child_write_to_thp_block_is_fine():
    ok, why = thp_madvise_available()
    need(ok, f"thp-madvise unavailable: {why}")
    with hp.alloc(8 * MiB, backend="thp-madvise", populate=True) as b:
        b[0] = 1
        status = _fork_and(b.address, write=True)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert b[0] == 1
