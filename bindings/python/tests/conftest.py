"""Shared fixtures. Run from the repository root:

    HP_LIBRARY=$PWD/build/lib/libhp.so.1 HP_BACKEND_DIR=$PWD/build/backends \
    PYTHONPATH=bindings/python /usr/bin/python3 -m pytest -q bindings/python/tests

HP_TEST_STRICT=1 (set by CI) turns every "tool missing" skip (numpy, a C
compiler, the repository headers, venv/pip) into a failure, so CI cannot pass
by skipping.
"""

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hp
from hp._lib import ffi, lib

STRICT = os.environ.get("HP_TEST_STRICT") == "1"
BINDING_DIR = Path(__file__).resolve().parent.parent      # bindings/python
REPO = BINDING_DIR.parent.parent


def nodes_with_memory():
    """The NUMA nodes with memory (/sys/devices/system/node/has_memory), [0] without NUMA."""
    try:
        with open("/sys/devices/system/node/has_memory") as f:
            text = f.read().strip()
    except OSError:
        return [0]
    nodes = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        nodes.extend(range(int(lo), int(hi or lo) + 1))
    return nodes


def need(condition, why):
    """Skip (fail under HP_TEST_STRICT=1) unless condition holds."""
    if not condition:
        if STRICT:
            pytest.fail(f"HP_TEST_STRICT=1: {why}")
        pytest.skip(why)


@pytest.fixture(scope="session")
def np():
    try:
        import numpy
    except ImportError:
        need(False, "numpy is not installed (apt install python3-numpy)")
    return numpy


@pytest.fixture(scope="session")
def cc():
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    need(compiler, "no C compiler (cc) to preprocess the headers")
    return compiler


@pytest.fixture(scope="session")
def include_dir():
    """The public headers: the source tree's, or $HP_INCLUDE_DIR (to try the
    drift check against a modified copy)."""
    inc = Path(os.environ.get("HP_INCLUDE_DIR") or REPO / "include")
    need((inc / "hp.h").is_file(), f"{inc}/hp.h not found: not run from the libhp source tree")
    return inc


def block_state(address):
    """libhp's view of a block start: "live", or the error name (freed)."""
    info = ffi.new("struct hp_block_info *")
    info.size = ffi.sizeof("struct hp_block_info")
    rc = lib.hp_info(ffi.cast("void *", address), info)
    return "live" if rc == lib.HP_OK else ffi.string(lib.hp_error_name(rc)).decode()


def mapped(address):
    """True if address lies in a mapping of this process (/proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split(None, 1)[0].split("-"))
            if lo <= address < hi:
                return True
    return False


def run_python(code, **env):
    """Run code in a fresh interpreter (libhp reads HP_* once per process)."""
    path = os.pathsep.join([str(BINDING_DIR)] + [p for p in os.environ.get(
        "PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != BINDING_DIR])
    full = dict(os.environ, PYTHONPATH=path)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def block():
    with hp.alloc(1 << 20, backend="fallback") as b:
        yield b


def smaps_huge_bytes(address, length):
    """Bytes of [address, address + length) on huge pages, from
    /proc/self/smaps: AnonHugePages (THP) plus Private_ and Shared_Hugetlb
    (1 GiB private pages sometimes show up as shared) of every mapping that
    overlaps the range, each capped at its overlap."""
    return smaps_bytes(address, length, ("AnonHugePages", "Private_Hugetlb", "Shared_Hugetlb"))


def smaps_hugetlb_bytes(address, length):
    """Bytes of [address, address + length) on hugetlb (pool) pages, from
    /proc/self/smaps (Private_ and Shared_Hugetlb)."""
    return smaps_bytes(address, length, ("Private_Hugetlb", "Shared_Hugetlb"))


def smaps_bytes(address, length, names):
    """The sum of the smaps fields names (kB lines, as bytes) over every
    mapping that overlaps [address, address + length), each mapping's sum
    capped at its overlap."""
    total = 0
    lo = hi = 0
    fields = {}

    def flush():
        nonlocal total
        if hi > address and lo < address + length:
            overlap = min(hi, address + length) - max(lo, address)
            total += min(sum(fields.get(name, 0) for name in names), overlap)

    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                flush()
                lo, hi = (int(x, 16) for x in head.split("-"))
                fields = {}
            elif head.endswith(":") and line.rstrip().endswith("kB"):
                fields[head[:-1]] = int(line.split()[1]) * 1024
    flush()
    return total


def thp_madvise_available():
    """(ok, why): can thp-madvise serve a block on huge pages here?"""
    for b in hp.backends():
        if b.name == "thp-madvise":
            return b.available, b.reason
    return False, "thp-madvise backend not loaded (HP_BACKEND_DIR?)"


@contextlib.contextmanager
def flocked(path):
    """Hold an exclusive flock on path (the machine-wide test locks)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


KNOBS_LOCK = "/run/lock/libhp-knobs.lock"
HEAVY_LOCK = "/run/lock/libhp-heavy.lock"
POOL_2M = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"


@pytest.fixture
def heavy():
    """For tests that map 1 GiB or more: one heavy job on the machine at once."""
    with flocked(HEAVY_LOCK):
        yield


def _write_knob(path, value):
    with open(path, "w") as f:
        f.write(f"{value}\n")


def _read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


@contextlib.contextmanager
def hugetlb_pool_2m(free_pages, lock=True):
    """Make the 2 MiB hugetlb pool have (about) free_pages free pages, under
    the knob lock (lock=False: the caller holds it), and put nr_hugepages
    back afterwards, whatever happens. Yields the number of free pages
    really obtained. Skips without root."""
    free_path = POOL_2M.replace("nr_hugepages", "free_hugepages")
    need(os.path.exists(POOL_2M), "no 2 MiB hugetlb pool on this kernel")
    need(os.access(POOL_2M, os.W_OK), "needs root to resize the hugetlb pool")
    with flocked(KNOBS_LOCK) if lock else contextlib.nullcontext():
        # The persistent pool: nr_hugepages also counts surplus pages, such
        # as pages an earlier test's blocks still hold (libhp's cache) after
        # it shrank the pool under them; writing those back would keep them.
        before = _read_int(POOL_2M) - _read_int(POOL_2M.replace("nr_hugepages",
                                                                "surplus_hugepages"))
        try:
            set_free_2m(free_pages)
            yield _read_int(free_path)
        finally:
            _write_knob(POOL_2M, before)
            hp.reprobe()


def set_free_2m(free_pages):
    """Resize the 2 MiB pool to have free_pages free pages (knob lock held);
    returns the free pages obtained."""
    free_path = POOL_2M.replace("nr_hugepages", "free_hugepages")
    in_use = _read_int(POOL_2M) - _read_int(free_path)
    _write_knob(POOL_2M, in_use + free_pages)
    hp.reprobe()
    return _read_int(free_path)


@pytest.fixture(scope="module")
def knob_lock():
    """Hold the knob lock for a whole module of pool tests (one wait)."""
    with flocked(KNOBS_LOCK):
        yield
