"""hp.alloc() and hp.Block: a libhp block, its memory as zero-copy buffers.

See _buffer.py for how the memory is exported and why close(), resize() and
garbage collection can never leave a view on freed memory.
"""

import collections.abc
import operator
import os
import re
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Tuple, Union, overload

from . import _buffer
from ._args import SIZE_MAX, bounded, switch
from ._errors import ClosedError, check, error_from_code, last_error
from ._lib import _free, ffi, lib, string

if TYPE_CHECKING:
    from ._stack import Stack, StackInfo

_SIZE_MAX = SIZE_MAX
_PIN_NAMES = {lib.HP_BLOCK_PIN_NONE: "none", lib.HP_BLOCK_PIN_NAMED: "named",
              lib.HP_BLOCK_PIN_ENV: "env"}


@dataclass(frozen=True)
class BlockInfo:
    """What a block really is (struct hp_block_info); sizes in bytes."""

    backend: str               #: name of the backend serving the block
    requested_page_size: int   #: page size asked for, 0 if none
    page_size: int             #: page size the backend mapped the block for
    usable_size: int           #: bytes usable (len(block) rounded up to pages)
    mapped_size: int           #: bytes of address space the block holds
    huge_bytes: int            #: bytes backed by huge pages right now (measured)
    flags: int                 #: HP_F_* in force (those it was allocated with; a
                               #: resize keeps F_NOPOOL, F_REQUIRE_HUGE and the page size)
    numa_node: int = -1        #: NUMA node of its first page (backend's query); -1 unknown
    fd: int = -1               #: descriptor backing it (a memfd), owned by the backend; -1 none
    fd_offset: int = 0         #: offset of the block's start in fd
    pin: str = "none"          #: "named": opts.backend named its backend, "env": HP_BACKENDS
                               #: listed only it; either way resize never leaves that backend
    numa_mode: str = "default"  #: placement it was allocated with: "default" (none),
                                #: "prefer", "bind" or "interleave"
    numa_nodes: Tuple[int, ...] = ()  #: nodes (0 to 63) holding its resident pages
                                      #: now (measured); more than one: it spans nodes


class Block(_buffer.Exporter):
    """A block of libhp memory. Create it with hp.alloc().

    The memory is reached through ``block.buf`` (a new writable memoryview
    on each access; ``numpy.frombuffer(block.buf, ...)`` and
    ``numpy.ndarray(shape, dtype, buffer=block.buf)`` are zero-copy) and,
    like ``mmap``, through ``b[i]`` (an int), ``b[i:j]`` (bytes), item and
    slice assignment, and ``bytes(b)``. The Block itself is not a buffer:
    see hp/_buffer.py for why that makes every export countable.

    ``close()`` and ``resize()`` raise BufferError while anything made from
    ``.buf`` is alive (release it first: ``view.release()``, ``with
    block.buf as v:``, ``del array``), like bytearray and mmap. The memory is
    freed by close(), by the ``with`` statement, or when the block and every
    export of it are garbage; freed memory goes back to libhp, which may keep
    huge-page memory in its cache and hand the same addresses out again (see
    "Cache" in the libhp README), so nothing may hold on to it -- which is
    exactly what the BufferError enforces. After close() every method raises
    ClosedError (a ValueError).

    Thread-safe: ``.buf``, item access, close(), resize() and info() are
    serialised per block, so a reader in another thread sees the memory
    before or after a resize, never a half-done one. A thread that keeps a
    ``.buf`` view across another thread's resize() makes that resize() raise
    BufferError.
    """

    __slots__ = ("_len", "_flags", "_lock", "__weakref__")
    _owner: Any
    _len: Optional[int]
    _flags: int
    _lock: threading.Lock

    def __new__(cls, *args: Any, **kwargs: Any) -> "Block":
        raise TypeError("hp.Block cannot be created directly; use hp.alloc()")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("hp.Block cannot be subclassed")

    @classmethod
    def _adopt(cls, ptr: Any, size: int, flags: int) -> "Block":
        block = object.__new__(cls)
        block._lock = threading.Lock()
        block._flags = flags
        block._attach(ptr, size)
        return block

    def _attach(self, ptr: Any, size: int) -> None:
        # The cdata owns the memory (hp_free when it dies); the exporter keeps
        # the cdata alive, and every export keeps the exporter alive.
        self._owner = ffi.gc(ffi.cast("char *", ptr), _free, size)
        self._len = size
        self._view = ffi.buffer(self._owner, size)

    def _require_open(self) -> None:
        if self._owner is None:
            raise ClosedError("operation on a closed hp.Block")

    def _refuse_if_exported(self, what: str) -> None:
        live = _buffer.exports(self)
        if live:
            raise BufferError(
                f"cannot {what} the hp.Block: {live} buffer export(s) (memoryview, "
                "numpy array, ...) still use its memory; release them first")

    # -- queries ---------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once close() has freed the memory."""
        return self._owner is None

    @property
    def address(self) -> int:
        """Address of the memory as an int (changes when resize() moves it)."""
        owner = self._owner
        if owner is None:
            raise ClosedError("operation on a closed hp.Block")
        return int(ffi.cast("uintptr_t", owner))

    def __len__(self) -> int:
        size = self._len
        if size is None:
            raise ClosedError("operation on a closed hp.Block")
        return size

    def __bool__(self) -> bool:
        return True

    def info(self) -> BlockInfo:
        """A BlockInfo read from libhp now (huge_bytes is measured)."""
        with self._lock:
            self._require_open()
            return _info_at(self._owner)

    @property
    def buf(self) -> memoryview:
        """A new writable memoryview of the whole block (zero-copy).

        It, and everything made from it (slices, casts, numpy arrays, ctypes
        objects), keeps the memory alive and makes close() and resize()
        raise BufferError until it is released or garbage.
        """
        with self._lock:
            self._require_open()
            return memoryview(self._view)

    def view(self) -> memoryview:
        """The same as ``block.buf``."""
        return self.buf

    @overload
    def __getitem__(self, key: int) -> int: ...

    @overload
    def __getitem__(self, key: slice) -> bytes: ...

    def __getitem__(self, key: Union[int, slice]) -> Union[int, bytes]:
        with self._lock:
            self._require_open()
            with memoryview(self._view) as v:
                if isinstance(key, slice):
                    return v[key].tobytes()
                return int(v[key])

    def __setitem__(self, key: Union[int, slice], value: Any) -> None:
        with self._lock:
            self._require_open()
            with memoryview(self._view) as v:
                v[key] = value

    def __bytes__(self) -> bytes:
        with self._lock:
            self._require_open()
            return bytes(self._view)

    # -- changes ---------------------------------------------------------
    def resize(self, size: int) -> None:
        """Resize to size bytes with hp_realloc, keeping min(old, new) bytes.

        The memory may move (the old range then goes back to libhp, see
        close()), so resize() raises BufferError while any export is alive.
        On failure the block is unchanged and the libhp error is raised. The
        block keeps the options it was allocated with (page_size, backend,
        exclude, pool, require_huge, populate, zero): libhp keeps the first
        four for every resize of a block whatever the call says (hp_realloc).
        """
        size = _check_size(size)
        if size == 0:
            raise error_from_code(lib.HP_ESIZE, "resize(0): a block must hold at least one "
                                  "byte; use close() to free it")
        with self._lock:
            self._require_open()
            self._refuse_if_exported("resize")
            owner, old_size = self._owner, len(self)
            self._view = None
            ffi.gc(owner, None)  # from here until _attach, the pointer is ours alone
            ptr = lib.hp_realloc(owner, size, self._flags)
            if ptr == ffi.NULL:
                err = last_error()
                self._attach(owner, old_size)  # hp_realloc left the block intact
                raise err
            self._attach(ptr, size)

    def close(self) -> None:
        """Free the block now (hp_free). Does nothing if already closed.

        Huge-page memory of libhp's own backends goes to the cache of freed
        huge pages for reuse, and back to the kernel after an idle bound (1 s
        for hugetlb pool pages, 10 s otherwise) or on hp.cache_trim(); any
        other memory is unmapped at once (hp._cache). A later allocation that
        reuses it gets it zero-filled unless it passes zero=False, which is
        why no export may survive close().

        Raises BufferError (and frees nothing) while exports are alive.
        """
        with self._lock:
            if self._owner is None:
                return
            self._refuse_if_exported("close")
            owner = self._owner
            self._owner = self._len = self._view = None
            ffi.gc(owner, None)
            check(lib.hp_free(owner))

    def __enter__(self) -> "Block":
        self._require_open()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
            return
        # An exception is on its way out; its traceback may still hold views
        # of this block. Do not mask it: if views are alive the memory is
        # freed with the last of them instead.
        try:
            self.close()
        except BufferError:
            pass

    # -- not supported -----------------------------------------------------
    def __reduce_ex__(self, protocol: Any) -> Any:
        # A copy would share the memory and free it twice.
        raise TypeError("hp.Block cannot be pickled or copied; copy its bytes instead")

    def __repr__(self) -> str:
        size = self._len
        if size is None:
            return "<hp.Block closed>"
        return f"<hp.Block {size} bytes at {self.address:#x}>"


def _info_at(ptr: Any) -> BlockInfo:
    info = ffi.new("struct hp_block_info *")
    info.size = ffi.sizeof("struct hp_block_info")
    check(lib.hp_info(ptr, info))
    nodes = tuple(n for n in range(64) if info.numa_mask >> n & 1)
    return BlockInfo(string(info.backend), info.requested_page_size, info.page_size,
                     info.usable_size, info.mapped_size, info.huge_bytes, info.flags,
                     info.numa_node, info.fd, info.fd_offset, _PIN_NAMES.get(info.pin, "none"),
                     _NUMA_NAMES.get(info.numa_mode, "default"), nodes)


_NUMA_MODES = {"prefer": lib.HP_NUMA_PREFER, "bind": lib.HP_NUMA_BIND,
               "interleave": lib.HP_NUMA_INTERLEAVE}
_NUMA_NAMES = {v: k for k, v in _NUMA_MODES.items()}


def _placement(opts: Any, node: Optional[int], nodes: Optional[Iterable[int]],
               mode: Optional[str]) -> Any:
    """Fill opts' numa_* fields from node=/nodes=/mode=; returns the node
    mask buffer, which must live as long as opts is used."""
    if node is None and nodes is None:
        if mode is not None:
            raise ValueError("mode= needs node= or nodes=")
        return None
    if node is not None and nodes is not None:
        raise ValueError("give node= or nodes=, not both")
    if node is None and (isinstance(nodes, (str, bytes))
                         or not isinstance(nodes, collections.abc.Iterable)):
        raise TypeError(f"nodes must be an iterable of ints, not {type(nodes).__name__}")
    wanted = ([bounded(node, "node", 0, 1023)] if node is not None
              else [bounded(n, "nodes", 0, 1023) for n in nodes])  # type: ignore[union-attr]
    if mode is None:
        mode = "prefer"
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a str, not {type(mode).__name__} ({mode!r})")
    if mode not in _NUMA_MODES:
        raise error_from_code(lib.HP_EINVAL, f"mode={mode!r}: expected one of "
                              f"{', '.join(_NUMA_MODES)}")
    mask = ffi.new("uint64_t[16]")
    for n in wanted:
        mask[n // 64] |= 1 << (n % 64)
    opts.numa_mode = _NUMA_MODES[mode]
    opts.numa_max_node = 1024
    opts.numa_nodes = mask
    return mask


def block_nodes(obj: Any) -> Dict[int, int]:
    """{node: resident bytes} of the libhp block obj is or starts at
    (hp_block_nodes: measured now, nothing faulted in); {} when nothing is
    resident or the kernel has no NUMA support."""
    if isinstance(obj, Block):
        with obj._lock:
            obj._require_open()
            ptr = obj._owner
            return _nodes_at(ptr)
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        address = iface["data"][0]
    else:
        with memoryview(obj) as v:
            address = int(ffi.cast("uintptr_t", ffi.from_buffer(v)))
    return _nodes_at(ffi.cast("void *", address))


def _nodes_at(ptr: Any) -> Dict[int, int]:
    counts = ffi.new("uint64_t[1024]")
    n = lib.hp_block_nodes(ptr, counts, 1024)
    if n < 0:
        check(n)
    return {i: counts[i] for i in range(1024) if counts[i]}


@overload
def info(obj: "Stack") -> "StackInfo": ...  # type: ignore[misc]  # a Stack is also Any


@overload
def info(obj: Any) -> BlockInfo: ...


def info(obj: Any) -> Union[BlockInfo, "StackInfo"]:
    """BlockInfo of the libhp block that obj's memory starts at.

    obj is a Block, a numpy array (hp.empty/hp.zeros, or an array numpy
    allocated under hp.numpy_allocator), or any buffer whose first byte is
    the start of a libhp block; for an hp.Stack it is stack.info() (a
    StackInfo). Raises ForeignPointerError for memory libhp did not
    allocate, InteriorPointerError for a view that starts inside one, and
    TypeError for an object that is none of these.
    """
    from ._stack import Stack

    if isinstance(obj, (Block, Stack)):
        return obj.info()
    iface = getattr(obj, "__array_interface__", None)
    if iface is not None:
        address = iface["data"][0]
    else:
        try:
            view = memoryview(obj)
        except TypeError:
            raise TypeError("hp.info() takes an hp.Block, an hp.Stack, a numpy array or a "
                            f"buffer (bytes-like object), not {type(obj).__name__}") from None
        with view as v:
            if v.nbytes == 0:
                raise error_from_code(lib.HP_EFOREIGN, "hp.info(): an empty buffer starts "
                                      "at no libhp block")
            address = int(ffi.cast("uintptr_t", ffi.from_buffer(v)))
    return _info_at(ffi.cast("void *", address))


def _check_size(size: Any, name: str = "size") -> int:
    """size as an int of 0..SIZE_MAX (SizeError past it, TypeError for a
    bool, float, str, ...)."""
    return bounded(size, name, 0, _SIZE_MAX, lib.HP_ESIZE)


_PAGE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _page_bytes(page_size: Union[int, str]) -> Optional[int]:
    """page_size as bytes: an int, or a string like "4K", "2M", "1GiB"."""
    if isinstance(page_size, str):
        m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", page_size, re.IGNORECASE)
        return int(m.group(1)) * _PAGE_UNITS[m.group(2).upper()] if m else None
    if isinstance(page_size, bool):
        return None
    return operator.index(page_size)


def _page_size_flag(page_size: Union[int, str]) -> int:
    """HP_F_PAGE_* bits for page_size: bytes as int, or "4K", "2M", "1G"."""
    value = _page_bytes(page_size)
    flag = lib.hp_page_size_flag(value) if value is not None and 0 <= value < 1 << 64 else 0
    if not flag:
        raise error_from_code(lib.HP_EFLAGS, f"page_size={page_size!r}: expected a power of "
                              "two of at least 4096 bytes, as an int or like \"2M\"")
    return int(flag)


def _flags(page_size: Union[int, str, None], require_huge: bool, populate: bool,
           collapse: bool, zero: bool, pool: bool = True) -> int:
    """HP_F_* bits for alloc()'s keyword arguments (each switch True or
    False, else TypeError)."""
    flags: int = 0 if switch(pool, "pool") else int(lib.HP_F_NOPOOL)
    if switch(require_huge, "require_huge"):
        flags |= lib.HP_F_REQUIRE_HUGE
    if switch(populate, "populate"):
        flags |= lib.HP_F_POPULATE
    if switch(collapse, "collapse"):
        flags |= lib.HP_F_COLLAPSE
    if not switch(zero, "zero"):
        flags |= lib.HP_F_NOZERO
    if page_size is not None:
        flags |= _page_size_flag(page_size)
    return flags


def _exclude_names(exclude: Union[str, Iterable[str]]) -> List[str]:
    """exclude as a list of names: "a,b", or an iterable of str."""
    if isinstance(exclude, str):
        return exclude.split(",")
    if isinstance(exclude, (bytes, bytearray)) or not hasattr(exclude, "__iter__"):
        raise TypeError("exclude must be a str like \"a,b\" or an iterable of str, not "
                        f"{type(exclude).__name__}")
    names = list(exclude)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"exclude: every name must be a str, not {type(name).__name__} "
                            f"({name!r})")
    return names


def _c_name(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise error_from_code(lib.HP_EINVAL, f"{what} {value!r} contains a NUL character")
    return ffi.new("char[]", value.encode("utf-8"))


def alloc(size: int, *, page_size: Union[int, str, None] = None, backend: Optional[str] = None,
          exclude: Union[str, Iterable[str], None] = None, require_huge: bool = False,
          populate: bool = False, collapse: bool = False, zero: bool = True,
          pool: bool = True, node: Optional[int] = None, nodes: Optional[Iterable[int]] = None,
          mode: Optional[str] = None) -> Block:
    """Allocate a Block of size bytes from the best backend (hp_alloc_ex).

    page_size   int bytes or "4K"/"2M"/"1G": ask for that page size.
    backend     name of the only backend allowed to serve (see hp.backends()).
    exclude     backend names never to use: "a,b" or an iterable of names;
                an unknown name is a NoBackendError, as for backend.
    require_huge  fail with NoHugePagesError instead of using base pages.
    populate    prefault the whole block before returning.
    collapse    ask the kernel to collapse the block into huge pages now.
    zero        False allows leftover contents (HP_F_NOZERO): libhp may hand
                back a range this process freed before, bytes and all (see
                "Cache" in the libhp README); default zero-filled.
    pool        False keeps the block out of every hugetlb pool (HP_F_NOPOOL):
                THP, mTHP or base pages serve it, and after os.fork() either
                process may write it however empty the pool is (a private
                pool page needs a free pool page for that, or gets SIGBUS).
    node, nodes NUMA placement (libhp 1.4): a node number, or several; mode
                "prefer" (default: those nodes first, then others, then another
                page kind), "bind" (only those nodes) or "interleave". Every
                resize keeps it; block_nodes() measures where the pages are.

    Raises a HugePageError subclass with libhp's detail text on failure;
    when no backend could serve (NoBackendError, NoHugePagesError, or
    OutOfMemoryError when a pool could not reserve), the message adds the
    page size asked for and what each candidate backend reported (free pool
    pages, or why it is unavailable).
    """
    size = _check_size(size)
    flags = _flags(page_size, require_huge, populate, collapse, zero, pool)
    opts = ffi.new("struct hp_alloc_opts *")
    opts.size = ffi.sizeof("struct hp_alloc_opts")
    opts.flags = flags
    keep_mask = _placement(opts, node, nodes, mode)  # noqa: F841 - lives until the call returns
    if backend is not None:
        c_backend = _c_name(backend, "backend")
        opts.backend = c_backend
    if exclude is not None:
        names = _exclude_names(exclude)
        for name in names:
            _c_name(name, "exclude")
        _check_known(name.strip() for name in names if name.strip())
        c_exclude = _c_name(",".join(names), "exclude")
        opts.exclude = c_exclude
    ptr = lib.hp_alloc_ex(size, opts)
    if ptr != ffi.NULL and size >= _HUGE_HINT_SIZE and not _warned:
        _warn_if_no_huge_backend()
    if ptr == ffi.NULL:
        code = lib.hp_last_error()
        detail = string(lib.hp_last_error_detail())
        if code in (lib.HP_ENOBACKEND, lib.HP_ENOHUGE, lib.HP_ENOMEM) and not (
                backend is not None and backend not in _backend_names()):
            detail += _why_no_backend(detail, size, page_size, backend)
        if code == lib.HP_OK:  # pragma: no cover - a failing call always sets a code
            raise last_error()
        raise error_from_code(code, detail)
    return Block._adopt(ptr, size, flags)


#: Blocks this large would normally get huge pages (one x86-64 PMD).
_HUGE_HINT_SIZE = 2 << 20
_warned = False


class NoHugePagesWarning(RuntimeWarning):
    """Issued once per process: no huge-page backend is available, so large
    blocks get base pages (see hp.status()["warnings"])."""


def _warn_if_no_huge_backend() -> None:
    global _warned
    _warned = True
    from ._introspect import status

    for text in status()["warnings"]:
        warnings.warn(f"hp: {text}; python3 -m hp shows what libhp found",
                      NoHugePagesWarning, stacklevel=3)


def _backend_names() -> List[str]:
    from ._introspect import backends

    return [b.name for b in backends()]


def _check_known(names: Iterable[str]) -> None:
    known = _backend_names()
    for name in names:
        if name not in known:
            raise error_from_code(lib.HP_ENOBACKEND, f"exclude: no loaded backend named "
                                  f"\"{name}\" (loaded: {', '.join(known)})")


def _size_text(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _why_no_backend(detail: str, size: int, page_size: Union[int, str, None],
                    backend: Optional[str]) -> str:
    """What the candidates said, for a request no backend could serve."""
    from ._introspect import backends

    wanted = _page_bytes(page_size) if page_size is not None else None
    found = [b for b in backends() if backend is None or b.name == backend]
    parts = []
    base = os.sysconf("SC_PAGESIZE")
    huge = sorted({ps for b in found if b.available for ps in b.page_sizes if ps > base})
    if wanted is None and huge and huge[0] > size:
        # The selection takes a page larger than the block only when asked
        # (README "Selection"): that, not a pool, is why nothing fits.
        parts.append(f"the smallest huge page offered, {_size_text(huge[0])}, is larger than "
                     f"the {size}-byte block, and a page larger than the block is used only "
                     "when page_size asks for it")
    if wanted is not None:
        offered = sorted({ps for b in found if b.available for ps in b.page_sizes})
        text = f"page size {_size_text(wanted)} was requested for {size} bytes"
        if wanted not in offered:
            text += (f", and no available backend offers {_size_text(wanted)} pages (sizes "
                     f"offered: {', '.join(map(_size_text, offered)) or 'none'})")
        parts.append(text)
    for b in found:
        if not b.available:
            if b.reason not in detail:
                parts.append(f"{b.name}: unavailable ({b.reason})")
            continue
        # Only pools that are short: a pool with the pages is not the reason,
        # nor one of pages larger than the block, which the selection passes
        # over for their size first (unless page_size asks for them).
        pools = [f"{_size_text(ps)} pool has {free} free page(s), {-(-size // ps)} needed"
                 for ps, free in zip(b.page_sizes, b.pool_free)
                 if free is not None and (wanted is None or ps == wanted)
                 and (wanted is not None or ps <= size or ps <= base)
                 and free < -(-size // ps)]
        if pools:
            parts.append(f"{b.name}: " + "; ".join(pools))
    return "; " + "; ".join(parts) if parts else ""
