"""hp.alloc() and hp.Block: a libhp block as a zero-copy Python buffer.

See _buffer.py for how the buffer protocol is provided and why close(),
resize() and garbage collection can never leave a view on freed memory.
"""

import operator
import re
import threading
from dataclasses import dataclass

from . import _buffer
from ._errors import ClosedError, check, error_from_code, last_error
from ._lib import _free, ffi, lib, string

_SIZE_MAX = (1 << (8 * ffi.sizeof("size_t"))) - 1


@dataclass(frozen=True)
class BlockInfo:
    """What a block really is (struct hp_block_info); sizes in bytes."""

    backend: str               #: name of the backend serving the block
    requested_page_size: int   #: page size asked for, 0 if none
    page_size: int             #: page size the backend mapped the block for
    usable_size: int           #: bytes usable (len(block) rounded up to pages)
    mapped_size: int           #: bytes of address space the block holds
    huge_bytes: int            #: bytes backed by huge pages right now (measured)
    flags: int                 #: HP_F_* the block was allocated with


class Block(_buffer.Exporter):
    """A block of libhp memory. Create it with hp.alloc().

    Supports the buffer protocol: ``memoryview(block)`` and
    ``numpy.frombuffer(block, ...)`` are zero-copy and writes land in the C
    memory. ``close()`` and ``resize()`` raise BufferError while such views
    are alive (release them first, e.g. ``view.release()`` or ``del array``),
    exactly like bytearray and mmap. The memory is freed by close(), by the
    ``with`` statement, or when the block and every view of it are garbage.
    After close() every method raises ClosedError; ``memoryview(block)``
    raises ValueError (ClosedError is a ValueError too).

    Thread-safe: close(), resize() and info() are serialised per block.
    """

    __slots__ = ("_len", "_flags", "_lock", "__weakref__")

    def __new__(cls, *args, **kwargs):
        raise TypeError("hp.Block cannot be created directly; use hp.alloc()")

    def __init_subclass__(cls, **kwargs):
        raise TypeError("hp.Block cannot be subclassed")

    @classmethod
    def _adopt(cls, ptr, size, flags):
        block = object.__new__(cls)
        block._lock = threading.Lock()
        block._flags = flags
        block._attach(ptr, size)
        return block

    def _attach(self, ptr, size):
        # The cdata owns the memory (hp_free when it dies); the exporter keeps
        # the cdata alive, and every view keeps the exporter alive.
        self._owner = ffi.gc(ffi.cast("char *", ptr), _free, size)
        self._len = size
        self._view = ffi.buffer(self._owner, size)

    def _require_open(self):
        if self._owner is None:
            raise ClosedError("operation on a closed hp.Block")

    def _detach_or_raise(self, what):
        view, live = _buffer.detach(self)
        if live:
            self._view = view
            del view
            raise BufferError(
                f"cannot {what} the hp.Block: {live} buffer export(s) (memoryview, "
                "numpy array, ...) still use its memory; release them first")

    # -- queries ---------------------------------------------------------
    @property
    def closed(self):
        """True once close() has freed the memory."""
        return self._owner is None

    @property
    def address(self):
        """Address of the memory as an int (changes when resize() moves it)."""
        owner = self._owner
        if owner is None:
            raise ClosedError("operation on a closed hp.Block")
        return int(ffi.cast("uintptr_t", owner))

    def __len__(self):
        size = self._len
        if size is None:
            raise ClosedError("operation on a closed hp.Block")
        return size

    def __bool__(self):
        return True

    def info(self):
        """A BlockInfo read from libhp now (huge_bytes is measured)."""
        with self._lock:
            self._require_open()
            info = ffi.new("struct hp_block_info *")
            info.size = ffi.sizeof("struct hp_block_info")
            check(lib.hp_info(self._owner, info))
        return BlockInfo(string(info.backend), info.requested_page_size, info.page_size,
                         info.usable_size, info.mapped_size, info.huge_bytes, info.flags)

    def view(self):
        """memoryview(block), also where the buffer slot is unavailable."""
        self._require_open()
        return memoryview(self._view)

    # -- changes ---------------------------------------------------------
    def resize(self, size):
        """Resize to size bytes with hp_realloc, keeping min(old, new) bytes.

        The memory may move; views taken before would then be stale, so
        resize() raises BufferError while any is alive. On failure the block
        is unchanged and the libhp error is raised. The block keeps the
        options it was allocated with (page size, require_huge, ...).
        """
        size = _check_size(size)
        if size == 0:
            raise error_from_code(lib.HP_ESIZE, "resize(0): a block must hold at least one "
                                  "byte; use close() to free it")
        with self._lock:
            self._require_open()
            self._detach_or_raise("resize")
            owner = self._owner
            ffi.gc(owner, None)  # from here until _attach, the pointer is ours alone
            ptr = lib.hp_realloc(owner, size, self._flags)
            if ptr == ffi.NULL:
                err = last_error()
                self._attach(owner, self._len)  # hp_realloc left the block intact
                raise err
            self._attach(ptr, size)

    def close(self):
        """Free the block now (hp_free). Does nothing if already closed.

        Huge-page memory of libhp's own backends goes to the cache of freed
        huge pages for reuse, and back to the kernel after an idle bound (1 s
        for hugetlb pool pages, 10 s otherwise) or on hp.cache_trim(); any
        other memory is unmapped at once (hp._cache).

        Raises BufferError (and frees nothing) while views are alive.
        """
        with self._lock:
            if self._owner is None:
                return
            self._detach_or_raise("close")
            owner = self._owner
            self._owner = self._len = None
            ffi.gc(owner, None)
            check(lib.hp_free(owner))

    def __enter__(self):
        self._require_open()
        return self

    def __exit__(self, exc_type, exc, tb):
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
    def __reduce_ex__(self, protocol):
        # A copy would share the memory and free it twice.
        raise TypeError("hp.Block cannot be pickled or copied; copy its bytes instead")

    def __repr__(self):
        size = self._len
        if size is None:
            return "<hp.Block closed>"
        return f"<hp.Block {size} bytes at {self.address:#x}>"


BUFFER_PROTOCOL = _buffer.install(Block)
"""How memoryview(block) works here: "slot", "__buffer__", or None."""


def _check_size(size):
    size = operator.index(size)
    if size < 0 or size > _SIZE_MAX:
        raise error_from_code(lib.HP_ESIZE, f"size {size} is outside 0..{_SIZE_MAX}")
    return size


_PAGE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _page_size_flag(page_size):
    """HP_F_PAGE_* bits for page_size: bytes as int, or "4K", "2M", "1G"."""
    value = None
    if isinstance(page_size, str):
        m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", page_size, re.IGNORECASE)
        if m:
            value = int(m.group(1)) * _PAGE_UNITS[m.group(2).upper()]
    elif not isinstance(page_size, bool):
        value = operator.index(page_size)
    flag = lib.hp_page_size_flag(value) if value is not None and 0 <= value < 1 << 64 else 0
    if not flag:
        raise error_from_code(lib.HP_EFLAGS, f"page_size={page_size!r}: expected a power of "
                              "two of at least 4096 bytes, as an int or like \"2M\"")
    return flag


def _c_name(value, what):
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise error_from_code(lib.HP_EINVAL, f"{what} {value!r} contains a NUL character")
    return ffi.new("char[]", value.encode("utf-8"))


def alloc(size, *, page_size=None, backend=None, exclude=None, require_huge=False,
          populate=False, collapse=False, zero=True):
    """Allocate a Block of size bytes from the best backend (hp_alloc_ex).

    page_size   int bytes or "4K"/"2M"/"1G": ask for that page size.
    backend     name of the only backend allowed to serve (see hp.backends()).
    exclude     backend names never to use: "a,b" or an iterable of names.
    require_huge  fail with NoHugePagesError instead of using base pages.
    populate    prefault the whole block before returning.
    collapse    ask the kernel to collapse the block into huge pages now.
    zero        False allows leftover contents (HP_F_NOZERO); default zeroed.

    Raises a HugePageError subclass with libhp's detail text on failure.
    """
    size = _check_size(size)
    flags = 0
    if require_huge:
        flags |= lib.HP_F_REQUIRE_HUGE
    if populate:
        flags |= lib.HP_F_POPULATE
    if collapse:
        flags |= lib.HP_F_COLLAPSE
    if not zero:
        flags |= lib.HP_F_NOZERO
    if page_size is not None:
        flags |= _page_size_flag(page_size)
    opts = ffi.new("struct hp_alloc_opts *")
    opts.size = ffi.sizeof("struct hp_alloc_opts")
    opts.flags = flags
    if backend is not None:
        c_backend = _c_name(backend, "backend")
        opts.backend = c_backend
    if exclude is not None:
        if not isinstance(exclude, str):
            exclude = ",".join(exclude)
        c_exclude = _c_name(exclude, "exclude")
        opts.exclude = c_exclude
    ptr = lib.hp_alloc_ex(size, opts)
    if ptr == ffi.NULL:
        raise last_error()
    return Block._adopt(ptr, size, flags)
