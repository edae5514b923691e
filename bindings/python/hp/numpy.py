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
handler.

Fork: the handler keeps arrays out of every hugetlb pool (HP_F_NOPOOL) unless
``pool=True``. An array made before ``os.fork()`` (``multiprocessing``'s
default start method on Linux) is written by children its author never
thinks about; on private pool pages each such write needs a free pool page
and dies of SIGBUS without one (Documentation/mm/hugetlbfs_reserv.rst).
THP, mTHP and base pages have no such rule, so by default a child may write
every inherited array however empty the pool is. ``pool=True`` puts large
arrays on the pool when it has free pages: only for programs that never
write inherited arrays in a forked child, or keep enough pool pages free
for every page the children write. libhp keeps the flag through
``ndarray.resize`` (hp_realloc).

An array keeps the handler it was allocated with, so arrays made under it
stay valid, and are freed by libhp, after uninstall().
Freed buffers go back to libhp, whose cache may hand the same range to the
next large allocation (see "Cache" in the libhp README).

NUMA: ``install(node=1, mode="bind")`` (node=, nodes=, mode= as for
hp.alloc) places every buffer libhp serves on those nodes (hp_alloc_ex's
placement; ``ndarray.resize`` keeps it), and ``hp.block_nodes(arr)`` measures
where an array's pages are. install() checks the placement first, with one
page allocated and freed under it: a node without memory (node=1 on a
one-node machine) or outside the thread's cpuset raises
hp.InvalidArgumentError and leaves the settings as they were. Buffers below
min_size, and any buffer libhp fails to serve, come from numpy's default
allocator, which follows the thread's own memory policy, not the placement
(``stats()["fallbacks"]`` counts them).

numpy keeps the current handler in a context variable: install() and
``with numpy_allocator()`` apply to the calling thread (or asyncio task)
only, and a new thread starts with numpy's default.

The handler is the C extension ``_hp_numpy`` (hp/_hp_numpy.c), built by
meson when Python's headers and numpy are found. It calls the libhp this
binding loaded (``hp.status()["library"]``), never another copy.
"""

import contextlib
import contextvars
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple, Union

from ._args import SIZE_MAX, bounded
from ._block import _NUMA_NAMES, _flags, _placement
from ._errors import check, error_from_code
from ._lib import ffi, lib, library_path, string

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


def _checked_placement(node: Optional[int], nodes: Optional[Iterable[int]],
                       mode: Optional[str]) -> Tuple[int, Tuple[int, ...]]:
    """(HP_NUMA_* mode, node numbers) of node=/nodes=/mode=, as hp.alloc
    takes them; (HP_NUMA_DEFAULT, ()) for none. libhp checks the placement
    (a node with memory, inside the thread's cpuset) on one page, allocated
    and freed at once, so that a bad one raises here rather than sending
    every array to numpy's default allocator."""
    opts = ffi.new("struct hp_alloc_opts *")
    opts.size = ffi.sizeof("struct hp_alloc_opts")
    mask = _placement(opts, node, nodes, mode)
    if mask is None:
        return lib.HP_NUMA_DEFAULT, ()
    wanted = tuple(n for n in range(opts.numa_max_node) if mask[n // 64] >> (n % 64) & 1)
    opts.flags = lib.HP_F_NOPOOL
    ptr = lib.hp_alloc_ex(ffi.cast("size_t", 1), opts)
    if ptr == ffi.NULL:
        given = f"node={node!r}" if node is not None else f"nodes={list(wanted)!r}"
        raise error_from_code(lib.hp_last_error(),
                              f"{given}: {string(lib.hp_last_error_detail())}")
    check(lib.hp_free(ptr))
    return int(opts.numa_mode), wanted


def _configure(min_size: int, page_size: Union[int, str, None], require_huge: bool,
               populate: bool, pool: bool, flags: Optional[int] = None,
               placement: Tuple[int, Tuple[int, ...]] = (0, ())) -> Any:
    """The handler capsule, with the settings checked and applied (every
    argument is checked before anything changes)."""
    min_size = bounded(min_size, "min_size", 1, SIZE_MAX, lib.HP_ERANGE)
    if flags is None:
        flags = _flags(page_size, require_huge, populate, False, True, pool)
    address = int(ffi.cast("uintptr_t", ffi.addressof(lib, "hp_alloc")))
    return _extension().configure(library_path(), address, min_size, flags, *placement)


def install(min_size: int = DEFAULT_MIN_SIZE, *, page_size: Union[int, str, None] = None,
            require_huge: bool = False, populate: bool = False, pool: bool = False,
            node: Optional[int] = None, nodes: Optional[Iterable[int]] = None,
            mode: Optional[str] = None) -> None:
    """Make numpy allocate array buffers of min_size bytes or more from libhp,
    in the calling thread or task, until uninstall(). Calling it again only
    changes the settings (they are process-wide). page_size, require_huge and
    populate are hp.alloc's; with require_huge, buffers libhp cannot put on
    huge pages come from numpy's default allocator instead. pool=False (the
    default) keeps arrays off hugetlb pools, so that forked children may
    write inherited arrays (see the module's documentation); pool=True lets
    them take pool pages. node, nodes and mode place the buffers libhp serves
    on NUMA nodes, as for hp.alloc ("prefer" by default, "bind",
    "interleave"); without them, the thread's policy applies. min_size is an
    int from 1 to SIZE_MAX, the switches True or False, node an int, nodes
    an iterable of ints, mode a str: anything else raises (TypeError, or
    a ValueError naming the parameter; hp.InvalidArgumentError for a node
    without memory) before anything changes."""
    placement = _checked_placement(node, nodes, mode)
    handler = _configure(min_size, page_size, require_huge, populate, pool, None, placement)
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
    """True if numpy allocates through libhp in this thread or task (False
    when numpy is not installed at all)."""
    try:
        import numpy as np
    except ImportError:
        return False

    multiarray: Any = np.core.multiarray
    return bool(multiarray.get_handler_name() == "libhp")


@contextlib.contextmanager
def allocator(min_size: int = DEFAULT_MIN_SIZE, *, page_size: Union[int, str, None] = None,
              require_huge: bool = False, populate: bool = False,
              pool: bool = False, node: Optional[int] = None,
              nodes: Optional[Iterable[int]] = None, mode: Optional[str] = None) -> Iterator[None]:
    """``with hp.numpy_allocator(min_size=...):`` install() for the block,
    then restore the handler (and settings) that were in force before."""
    ext = _extension()
    before = ext.stats()
    placement = _checked_placement(node, nodes, mode)
    handler = _configure(min_size, page_size, require_huge, populate, pool, None, placement)
    previous = ext.set_handler(handler)
    try:
        yield
    finally:
        ext.set_handler(previous)
        if previous is handler:
            _configure(before["min_size"], None, False, False, False, before["flags"],
                       (before["numa_mode"], before["nodes"]))


def stats() -> Dict[str, Any]:
    """Counters since import: allocs/reallocs/frees served by libhp,
    fallbacks (libhp failed, numpy's default served), live libhp buffers,
    and the settings in force: min_size, the HP_F_* flags, mode (the
    placement's "prefer", "bind" or "interleave"; "default" for none) and
    nodes (a tuple of node numbers; () for none)."""
    raw = dict(_extension().stats())
    raw["mode"] = _NUMA_NAMES.get(raw.pop("numa_mode"), "default")
    return raw
