"""numpy's own arrays on libhp: a NEP 49 data-memory handler.

    import hp, numpy as np
    with hp.numpy_allocator(min_size=2 << 20):     # or hp.numpy.install()
        a = np.zeros(1 << 27)                      # 1 GiB from libhp
    a.resize(1 << 28, refcheck=False)              # hp_realloc, still valid

Under the handler, numpy's array buffers of at least ``min_size`` bytes come
from hp_alloc (calloc-style requests zeroed by libhp, malloc-style ones
with HP_F_NOZERO, as malloc does not clear); ``ndarray.resize`` of such an
array goes through hp_realloc, which moves page tables instead of bytes.
Smaller buffers, and any request libhp cannot serve, go to numpy's default
handler. An array keeps the handler it was allocated with, so arrays made
under it stay valid, and are freed by libhp, after uninstall().
Freed buffers go back to libhp, whose cache may hand the same range to the
next large allocation (see "Cache" in the libhp README).

numpy keeps the current handler in a context variable: install() and
``with numpy_allocator()`` apply to the calling thread (or asyncio task)
only, and a new thread starts with numpy's default.

The handler is the C extension ``_hp_numpy`` (hp/_hp_numpy.c), built by
meson when Python's headers and numpy are found. It calls the libhp this
binding loaded (``hp.status()["library"]``), never another copy.
"""

import contextlib
import contextvars
import operator
from typing import Any, Dict, Iterator, Optional, Tuple, Union

from ._block import _flags
from ._lib import ffi, lib, library_path

#: Default threshold: one x86-64 PMD, the smallest THP.
DEFAULT_MIN_SIZE = 2 << 20

#: Handlers install() replaced, per thread or task like numpy's own.
_saved: contextvars.ContextVar[Tuple[Any, ...]] = contextvars.ContextVar("hp_numpy_saved",
                                                                          default=())


def _extension() -> Any:
    try:
        from . import _hp_numpy as ext
    except ImportError:
        try:
            import _hp_numpy as ext  # type: ignore[no-redef]
        except ImportError:
            raise ImportError(
                "hp.numpy needs the _hp_numpy extension: meson builds it when python3-dev "
                "and numpy are found (build/bindings/python, put it on PYTHONPATH; "
                "`meson install` installs it)") from None
    return ext


def _configure(min_size: int, page_size: Union[int, str, None], require_huge: bool,
               populate: bool, flags: Optional[int] = None) -> Any:
    min_size = operator.index(min_size)
    if min_size < 1:
        raise ValueError(f"min_size must be at least 1 byte, not {min_size}")
    if flags is None:
        flags = _flags(page_size, require_huge, populate, False, True)
    address = int(ffi.cast("uintptr_t", ffi.addressof(lib, "hp_alloc")))
    return _extension().configure(library_path(), address, min_size, flags)


def install(min_size: int = DEFAULT_MIN_SIZE, *, page_size: Union[int, str, None] = None,
            require_huge: bool = False, populate: bool = False) -> None:
    """Make numpy allocate array buffers of min_size bytes or more from libhp,
    in the calling thread or task, until uninstall(). Calling it again only
    changes the settings (they are process-wide). page_size, require_huge and
    populate are hp.alloc's; with require_huge, buffers libhp cannot put on
    huge pages come from numpy's default allocator instead."""
    handler = _configure(min_size, page_size, require_huge, populate)
    previous = _extension().set_handler(handler)
    if previous is not handler:
        _saved.set(_saved.get() + (previous,))


def uninstall() -> None:
    """Give the calling thread or task back the handler it had before
    install(). Arrays allocated meanwhile stay valid. No-op if not installed."""
    if installed():
        saved = _saved.get()
        _extension().set_handler(saved[-1] if saved else None)
        _saved.set(saved[:-1])


def installed() -> bool:
    """True if numpy allocates through libhp in this thread or task."""
    import numpy as np

    multiarray: Any = np.core.multiarray
    return bool(multiarray.get_handler_name() == "libhp")


@contextlib.contextmanager
def allocator(min_size: int = DEFAULT_MIN_SIZE, *, page_size: Union[int, str, None] = None,
              require_huge: bool = False, populate: bool = False) -> Iterator[None]:
    """``with hp.numpy_allocator(min_size=...):`` install() for the block,
    then restore the handler (and settings) that were in force before."""
    ext = _extension()
    before = ext.stats()
    handler = _configure(min_size, page_size, require_huge, populate)
    previous = ext.set_handler(handler)
    try:
        yield
    finally:
        ext.set_handler(previous)
        if previous is handler:
            _configure(before["min_size"], None, False, False, before["flags"])


def stats() -> Dict[str, int]:
    """Counters since import: allocs/reallocs/frees served by libhp,
    fallbacks (libhp failed, numpy's default served), live libhp buffers,
    and the min_size and HP_F_* flags in force."""
    return dict(_extension().stats())
