"""How an hp.Block hands out its memory, and why nothing can outlive it.

The rule
--------
A Block is *not* a buffer itself (``memoryview(block)`` raises TypeError).
Its memory is reachable only through ``block.buf`` (a new memoryview on every
access, as ``multiprocessing.shared_memory.SharedMemory.buf`` gives one),
``block.view()`` (the same), and the Block's own methods (``b[i]``,
``b[i:j]``, ``bytes(b)``), which check under the block's lock that it is
open.

Why not a buffer
----------------
``numpy.ndarray(shape, dtype, buffer=obj)`` takes a buffer from ``obj``,
*releases it at once*, and keeps ``obj`` itself as the array's base (numpy's
``PyArray_BufferConverter``). If ``obj`` were the Block, nothing would record
that an array still points at the memory, and ``close()`` or ``resize()``
would free or move it under the array. Counting references to the Block
cannot tell an array from the caller's own variables. So the Block exports
nothing, and that idiom fails with TypeError instead of crashing later.

The exporter
------------
Each Block keeps a private *exporter*: a cffi buffer over the C memory,
created with ``ffi.buffer`` on a cdata that owns the block (``ffi.gc`` with
hp_free). Every memoryview from ``block.buf`` has the exporter as its ``obj``,
and so does everything derived from one: slices and casts share the
memoryview's managed buffer, which holds the exporter; ``numpy.frombuffer``
keeps such a memoryview as its base; and ``numpy.ndarray(buffer=block.buf)``
keeps the memoryview's ``obj`` -- the exporter -- as its base. ctypes
``from_buffer`` and ``pickle.PickleBuffer`` hold a memoryview too. The
number of live exports is therefore the exporter's reference count minus the
Block's own reference: exact on CPython, whatever holds the export, because
even a bare ``view.obj`` kept by the caller counts.

The Block itself holds no reference to its exporter: the exporter lives in a
module-level table under the Block's id, and the entry goes when the Block
does (``__del__``). So nothing reachable from the Block --
``gc.get_referents(block)``, its slots -- can be mistaken for an export;
only the table's own reference is subtracted.

close() and resize() take the block's lock (which ``.buf`` takes too, so no
new export can start meanwhile), count, and raise BufferError if anything is
left, changing nothing; otherwise the memory is freed or moved with no way
left to reach it. If the Block is garbage collected while exports live, the
exporter still owns the memory and it is freed when the last export goes.
"""

import sys
from typing import Any, Dict

#: id(exporting object) -> its exporter. Entries are only set and removed
#: under the object's lock or by its __del__; dict operations are atomic.
_EXPORTERS: Dict[int, Any] = {}


class Exporter:
    """Base of types whose memory is exported through ``_view``."""

    __slots__ = ("_owner",)
    _owner: Any

    @property
    def _view(self) -> Any:
        return _EXPORTERS.get(id(self))

    @_view.setter
    def _view(self, view: Any) -> None:
        if view is None:
            _EXPORTERS.pop(id(self), None)
        else:
            _EXPORTERS[id(self)] = view

    def __del__(self) -> None:
        # A dead object's id may be reused at once: its entry goes first.
        # (At interpreter shutdown the table may already be gone.)
        table = _EXPORTERS
        if table is not None:
            table.pop(id(self), None)


def exports(obj: Exporter) -> int:
    """How many buffer exports of obj's memory are alive right now."""
    view = _EXPORTERS.get(id(obj))
    if view is None:
        return 0
    return sys.getrefcount(view) - _BASE


def _calibrate() -> bool:
    """Reference-count baseline of exports() with no views; True if exact."""
    global _BASE
    _BASE = 0
    probe = Exporter()
    probe._view = bytearray(1)
    _BASE = exports(probe)
    mv = memoryview(probe._view)
    part = mv[0:1]
    ok = exports(probe) == 1      # one managed buffer, whatever shares it
    mv.release()
    ok = ok and exports(probe) == 1
    part.release()
    ok = ok and exports(probe) == 0
    del probe
    return ok and not _EXPORTERS


_BASE = 0
if sys.implementation.name != "cpython" or not _calibrate():  # pragma: no cover
    raise ImportError("hp needs CPython: it counts buffer exports with reference counts")
_GIL_DISABLED: Any = __import__("sysconfig").get_config_var("Py_GIL_DISABLED")
if _GIL_DISABLED:  # pragma: no cover
    # exports() relies on reference counts being exact under the block lock.
    raise ImportError("hp does not support free-threaded CPython builds yet")
