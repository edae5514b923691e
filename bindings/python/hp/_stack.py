"""hp.stack(): thread and coroutine stacks (hp/stack.h), and their cache.

Python code cannot run on such a stack itself; these are for handing to C
(pthread_attr_setstack, makecontext) through ``base``/``size``, and for
inspecting what libhp gives. The handle is destroyed by close(), the ``with``
statement or garbage collection; afterwards every method raises ClosedError.
"""

import threading
from dataclasses import dataclass
from typing import Any, Optional, Union

from ._args import U64_MAX, bounded, switch
from ._block import _check_size, _placement
from ._errors import ClosedError, check, last_error
from ._introspect import _kind
from ._lib import ffi, lib, string


@dataclass(frozen=True)
class StackInfo:
    """What a stack really is (struct hp_stack_info); sizes in bytes."""

    mode: str            #: "lean" or "huge", as obtained
    kind: int            #: hp.BackendKind: BASE (lean), THP or HUGETLB
    from_cache: bool     #: reused from the stack cache
    source: str          #: backend that mapped the stack ("fallback" for lean)
    flags: int           #: HP_STACK_* given at creation
    base_addr: int       #: lowest usable address
    usable_size: int
    guard_addr: int      #: the guard is [guard_addr, base_addr)
    guard_size: int
    page_size: int
    resident_bytes: int  #: usable bytes in memory now (measured)
    huge_bytes: int      #: usable bytes in huge pages now (measured)


@dataclass(frozen=True)
class StackCacheStats:
    """The process-wide stack cache (struct hp_stack_cache_stats)."""

    max_stacks: int      #: the configuration in force
    max_bytes: int
    keep_bytes: int
    cached_stacks: int   #: in the cache now
    cached_bytes: int    #: their usable bytes
    kept_bytes: int      #: usable bytes of those that kept their pages
    hits: int            #: creates served from the cache
    misses: int          #: creates that mapped a new stack
    released: int        #: stacks whose pages were dropped entering the cache
    evictions: int       #: cached stacks unmapped for a bound or a trim


def _destroy(handle: Any, _lib: Any = lib) -> None:
    _lib.hp_stack_destroy(handle)


class Stack:
    """A libhp stack. Create it with hp.stack()."""

    __slots__ = ("_handle", "_lock", "__weakref__")
    _handle: Any
    _lock: threading.Lock

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("hp.Stack cannot be created directly; use hp.stack()")

    @classmethod
    def _adopt(cls, handle: Any) -> "Stack":
        stack = object.__new__(cls)
        stack._lock = threading.Lock()
        stack._handle = ffi.gc(handle, _destroy)
        return stack

    def _live(self) -> Any:
        handle = self._handle
        if handle is None:
            raise ClosedError("operation on a closed hp.Stack")
        return handle

    @property
    def closed(self) -> bool:
        return self._handle is None

    @property
    def base(self) -> int:
        """Lowest usable address (the stack grows down from base + size)."""
        return int(ffi.cast("uintptr_t", lib.hp_stack_base(self._live())))

    @property
    def size(self) -> int:
        """Usable bytes from base."""
        return int(lib.hp_stack_size(self._live()))

    def info(self) -> StackInfo:
        with self._lock:
            info = ffi.new("struct hp_stack_info *")
            info.size = ffi.sizeof("struct hp_stack_info")
            check(lib.hp_stack_get_info(self._live(), info))
        mode = "huge" if info.mode == lib.HP_STACK_MODE_HUGE else "lean"
        return StackInfo(mode, _kind(info.kind), bool(info.from_cache), string(info.source),
                         info.flags, info.base_addr, info.usable_size, info.guard_addr,
                         info.guard_size, info.page_size, info.resident_bytes, info.huge_bytes)

    def close(self) -> None:
        """Release the stack (to the cache, or unmapped). Idempotent."""
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is not None:
                ffi.gc(handle, None)
                check(lib.hp_stack_destroy(handle))

    def __enter__(self) -> "Stack":
        self._live()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("hp.Stack cannot be pickled or copied")

    def __repr__(self) -> str:
        if self._handle is None:
            return "<hp.Stack closed>"
        return f"<hp.Stack {self.size} bytes at {self.base:#x}>"


def stack(size: int, *, huge: bool = False, hugetlb: bool = False, thp: bool = False,
          allow_lean: bool = False, populate: bool = False, cache: bool = True,
          guard_size: int = 0, node: Optional[int] = None, nodes: Optional[Any] = None,
          mode: Optional[str] = None) -> Stack:
    """Make a stack of at least size usable bytes (hp_stack_create_ex).

    Lean (base pages, never huge) unless huge/hugetlb/thp is set; allow_lean
    falls back to lean instead of NoHugePagesError; cache=False neither reuses
    nor caches it; guard_size is the PROT_NONE guard below it (0: one page);
    node/nodes/mode place its memory on NUMA nodes, as for hp.alloc().
    """
    size = _check_size(size)
    guard = _check_size(guard_size, "guard_size")
    flags = 0
    for wanted, name, bit in ((huge, "huge", lib.HP_STACK_HUGE),
                              (hugetlb, "hugetlb", lib.HP_STACK_HUGETLB),
                              (thp, "thp", lib.HP_STACK_THP),
                              (allow_lean, "allow_lean", lib.HP_STACK_ALLOW_LEAN),
                              (populate, "populate", lib.HP_STACK_POPULATE)):
        if switch(wanted, name):
            flags |= bit
    if not switch(cache, "cache"):
        flags |= lib.HP_STACK_NOCACHE
    opts = ffi.new("struct hp_stack_opts *")
    opts.size = ffi.sizeof("struct hp_stack_opts")
    opts.flags = flags
    opts.guard_size = guard
    keep_mask = _placement(opts, node, nodes, mode)  # noqa: F841 - lives until the call returns
    handle = lib.hp_stack_create_ex(size, opts)
    if handle == ffi.NULL:
        raise last_error()
    return Stack._adopt(handle)


#: Serialises stack_cache_configure's read-modify-write among Python threads.
_configure_lock = threading.Lock()


def stack_cache_configure(*, max_stacks: Optional[int] = None, max_bytes: Optional[int] = None,
                          keep_bytes: Optional[int] = None) -> None:
    """Change the stack cache settings that are passed, keep the others, and
    trim the cache to them at once (hp_stack_cache_configure).

    max_stacks  cached stacks at most, 0 to 16384 (0 turns the cache off)
    max_bytes   bound on the usable bytes of cached stacks, 0 to 2**64 - 1
    keep_bytes  of those, bytes that keep their pages (0: give all back)

    Each is an int (TypeError otherwise); out of range raises OutOfRangeError
    (a ValueError), and nothing changes.
    """
    new = {
        "max_stacks": None if max_stacks is None else bounded(
            max_stacks, "max_stacks", 0, lib.HP_STACK_CACHE_MAX_STACKS, lib.HP_ERANGE),
        "max_bytes": None if max_bytes is None else bounded(
            max_bytes, "max_bytes", 0, U64_MAX, lib.HP_ERANGE),
        "keep_bytes": None if keep_bytes is None else bounded(
            keep_bytes, "keep_bytes", 0, U64_MAX, lib.HP_ERANGE),
    }
    with _configure_lock:
        now = stack_cache_stats()
        cfg = ffi.new("struct hp_stack_cache_config *")
        cfg.size = ffi.sizeof("struct hp_stack_cache_config")
        for field, value in new.items():
            setattr(cfg, field, getattr(now, field) if value is None else value)
        check(lib.hp_stack_cache_configure(cfg))


def stack_cache_stats() -> StackCacheStats:
    """Settings, contents and counters of the stack cache."""
    st = ffi.new("struct hp_stack_cache_stats *")
    st.size = ffi.sizeof("struct hp_stack_cache_stats")
    check(lib.hp_stack_cache_get_stats(st))
    return StackCacheStats(st.max_stacks, st.max_bytes, st.keep_bytes, st.cached_stacks,
                           st.cached_bytes, st.kept_bytes, st.hits, st.misses, st.released,
                           st.evictions)


def stack_cache_trim() -> None:
    """Unmap every cached stack now."""
    check(lib.hp_stack_cache_trim())
