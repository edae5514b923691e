"""The cache of freed huge pages (hp/cache.h): trim it, read it, configure it.

What Block.close() (hp_free) does with the memory: a block that libhp's own
hugetlbfs, thp-madvise or anon-orders backend served with huge pages goes to
this cache, pages still faulted in, for the next hp.alloc() or resize() of the
same backend and page size. The cache gives it back to the kernel by itself,
with no further call: hugetlb pool pages after pool_idle_ms idle (default
1 s), other memory after idle_ms (default 10 s), from a background thread
that exists only while the cache holds memory; at once when it would hold
more than max_bytes; and at once on cache_trim(). Every other block is
unmapped by close() itself. Hugetlb memory from before a fork is never
reused (README, "Fork").
"""

import threading
from dataclasses import dataclass
from typing import Optional, Tuple

from ._args import U64_MAX, bounded
from ._errors import check
from ._lib import ffi, lib, string

#: Serialises cache_configure's read-modify-write among Python threads.
_configure_lock = threading.Lock()


@dataclass(frozen=True)
class CacheEntry:
    """Bytes cached for one backend and page size."""

    backend: str
    page_size: int       #: bytes
    bytes: int           #: usable bytes cached now
    ranges: int          #: separate ranges they form


@dataclass(frozen=True)
class CacheStats:
    """The block cache now (struct hp_cache_stats); sizes in bytes."""

    bytes: int           #: usable bytes cached now, every backend
    ranges: int
    hits: int            #: allocations served from the cache
    misses: int          #: allocations that mapped fresh memory
    releases: int        #: ranges given back to the kernel
    released_bytes: int
    adopted_bytes: int   #: bytes taken over by resize() growing in place
    max_bytes: int       #: the limits in force
    idle_ms: int
    pool_idle_ms: int
    reaper_running: bool  #: the background release thread exists now
    entries: Tuple[CacheEntry, ...]  #: per backend and page size


def cache_stats() -> CacheStats:
    """Contents, limits and counters of the block cache."""
    st = ffi.new("struct hp_cache_stats *")
    st.size = ffi.sizeof("struct hp_cache_stats")
    check(lib.hp_cache_get_stats(st))
    entries = tuple(CacheEntry(string(e.backend), e.page_size, e.bytes, e.ranges)
                    for e in st.entries[0:st.n_entries])
    return CacheStats(st.bytes, st.ranges, st.hits, st.misses, st.releases, st.released_bytes,
                      st.adopted_bytes, st.max_bytes, st.idle_ms, st.pool_idle_ms,
                      bool(st.reaper_running), entries)


def cache_trim() -> None:
    """Give every cached range (and every cached stack) back to the kernel now."""
    check(lib.hp_cache_trim())


def cache_configure(*, max_bytes: Optional[int] = None, idle_ms: Optional[int] = None,
                    pool_idle_ms: Optional[int] = None) -> None:
    """Change the cache limits that are passed, keep the others, and apply
    them at once (hp_cache_configure).

    max_bytes   bytes the cache may hold, 0 to 2**46 (0 turns it off)
    idle_ms     non-hugetlb memory idle this long is released, 0 (never for
                being idle) to 86400000 (one day)
    pool_idle_ms  the same for hugetlb pool pages

    Each is an int (not a bool, float or str: TypeError); a value out of its
    range raises OutOfRangeError (a ValueError), and nothing changes.
    """
    new = {
        "max_bytes": None if max_bytes is None else bounded(
            max_bytes, "max_bytes", 0, min(lib.HP_CACHE_MAX_BYTES, U64_MAX), lib.HP_ERANGE),
        "idle_ms": None if idle_ms is None else bounded(
            idle_ms, "idle_ms", 0, lib.HP_CACHE_MAX_IDLE_MS, lib.HP_ERANGE),
        "pool_idle_ms": None if pool_idle_ms is None else bounded(
            pool_idle_ms, "pool_idle_ms", 0, lib.HP_CACHE_MAX_IDLE_MS, lib.HP_ERANGE),
    }
    with _configure_lock:
        now = cache_stats()
        cfg = ffi.new("struct hp_cache_config *")
        cfg.size = ffi.sizeof("struct hp_cache_config")
        for field, value in new.items():
            setattr(cfg, field, getattr(now, field) if value is None else value)
        check(lib.hp_cache_configure(cfg))
