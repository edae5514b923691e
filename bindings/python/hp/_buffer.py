"""The buffer protocol for hp.Block, zero-copy, without a C extension.

Why this module exists
----------------------
``memoryview(block)`` and ``numpy.frombuffer(block)`` need the block's *type*
to implement the C buffer protocol. Python code can only do that from 3.12
on (``__buffer__``, PEP 688); on 3.11 a pure-Python class cannot. The obvious
workaround, subclassing a ctypes array built with ``from_address``, is unsafe
here: a ctypes object's address and length are fixed, so it cannot follow
``resize()`` (hp_realloc may move the block), and it keeps exporting its
address after ``close()`` with nothing to stop a view of freed memory.

The design
----------
* Each Block keeps a private *exporter*: a cffi buffer over the C memory,
  created with ``ffi.buffer`` on a cdata that owns the block (``ffi.gc`` with
  hp_free). Only the Block refers to it; it is never handed out.
* The Block type's buffer slot forwards every request to that exporter, so
  each view's ``obj`` is the exporter and holds a reference to it. The
  forwarding function is CPython's own ``pickle.PickleBuffer`` getbuffer,
  which does exactly ``PyObject_GetBuffer(self->view.obj, ...)``; the
  exporter sits in the Block slot at the offset where PickleBuffer keeps
  ``view.obj``. ``install()`` checks every layout assumption on the running
  interpreter before writing the slot, and then tries it once; if anything
  does not match it leaves the type alone (then 3.12+ falls back to
  ``__buffer__``, and older versions only offer ``Block.view()``).
* Views and numpy arrays reference the exporter, never the Block. So the
  number of live exports is the exporter's reference count minus the Block's
  own reference: exact and deterministic on CPython, including consumers that
  hold a ``Py_buffer`` in C. (numpy keeps a memoryview as the array's base
  because the Block type has a release slot; the forwarded PickleBuffer
  release function is a no-op.)
* close() and resize() first swap the exporter out of the slot (new views
  now fail with ValueError), then count the remaining references. If any
  view is alive they put it back and raise BufferError, as bytearray and mmap
  do; otherwise the memory is freed or moved with no way left to reach it.
* The exporter owns the memory: if the Block is garbage collected while
  views are alive, the memory is freed when the last view goes, not before.

So every path either works on mapped memory or raises; none can touch freed
memory. The price is that this relies on CPython (reference counts, type
layout); install() refuses anything it cannot verify.
"""

import ctypes
import pickle
import sys
import sysconfig


class Exporter:
    """Base of types whose buffer requests go to the object in ``_view``.

    The slot order is the layout contract with PickleBuffer: CPython sorts
    slot names, and ``_view`` must land where PickleBuffer keeps view.obj
    (install() verifies it). ``_owner`` is free for the subclass to use.
    """

    __slots__ = ("_owner", "_view")


#: What ``_view`` holds once the memory is gone: exporting it fails with
#: ValueError("operation forbidden on released memoryview object").
RELEASED = memoryview(b"")
RELEASED.release()

_P = ctypes.sizeof(ctypes.c_void_p)
_OBJECT_HEAD = object.__basicsize__   # PyObject_HEAD
_TYPE_HEAD = _OBJECT_HEAD + _P        # PyVarObject header of a type object


def _word(addr):
    return ctypes.c_void_p.from_address(addr).value or 0


def _type_layout_ok(tp):
    """PyTypeObject fields sit where this module computes them."""
    base = id(tp) + _TYPE_HEAD
    return (ctypes.c_ssize_t.from_address(base + _P).value == tp.__basicsize__
            and ctypes.c_ssize_t.from_address(base + 2 * _P).value == tp.__itemsize__
            and ctypes.c_ulong.from_address(base + 18 * _P).value == tp.__flags__)


def _as_buffer(tp):
    """Address of tp's PyBufferProcs (tp_as_buffer), 0 if none."""
    return _word(id(tp) + _TYPE_HEAD + 17 * _P)


def exports(obj):
    """How many buffer exports of obj are alive right now."""
    return sys.getrefcount(obj._view) - _SLOT_BASE


def detach(obj):
    """Swap obj's exporter out for RELEASED; return (exporter, live exports).

    The caller must put the exporter back, or drop it, before raising: a
    traceback that keeps it in a frame would count as an export.
    """
    view = obj._view
    obj._view = RELEASED
    return view, sys.getrefcount(view) - _LOCAL_BASE


def _calibrate():
    """Reference-count baselines of exports() and detach() with no views."""
    global _SLOT_BASE, _LOCAL_BASE
    _SLOT_BASE = _LOCAL_BASE = 0
    probe = Exporter()
    probe._view = bytearray(1)
    _SLOT_BASE = exports(probe)
    view, _LOCAL_BASE = detach(probe)
    # One live view must count as exactly one, in both functions.
    probe._view = view
    del view
    mv = memoryview(probe._view)
    ok = exports(probe) == 1 and detach(probe)[1] == 1
    mv.release()
    return ok


_SLOT_BASE = _LOCAL_BASE = 0
if sys.implementation.name != "cpython" or not _calibrate():  # pragma: no cover
    raise ImportError("hp needs CPython: it counts buffer exports with reference counts")
if sysconfig.get_config_var("Py_GIL_DISABLED"):  # pragma: no cover
    # detach() relies on the GIL between swapping the slot and counting.
    raise ImportError("hp does not support free-threaded CPython builds yet")


def install(cls):
    """Give cls (an Exporter subclass with no buffer slot yet) the buffer
    protocol; return how: "slot", "__buffer__" or None (only cls.view())."""
    if _install_slot(cls):
        return "slot"
    if sys.version_info >= (3, 12):  # pragma: no cover - the slot works there too
        cls.__buffer__ = lambda self, flags: memoryview(self._view)
        # A release slot makes numpy keep a memoryview (which holds the
        # exporter) as the array's base instead of the bare Block.
        cls.__release_buffer__ = lambda self, view: None
        return "__buffer__"
    return None  # pragma: no cover


def _install_slot(cls):
    pb_type = pickle.PickleBuffer
    try:
        if not (_type_layout_ok(pb_type) and _type_layout_ok(cls) and _type_layout_ok(bytes)):
            return False
        src, dst = _as_buffer(pb_type), _as_buffer(cls)
        if not src or not dst or _word(dst) or _word(dst + _P):
            return False  # no slot to copy, no place to write, or already set
        getbuf, releasebuf = _word(src), _word(src + _P)
        if not getbuf or not releasebuf:
            return False
        # PickleBuffer's getbuffer forwards to the object at this offset
        # (Py_buffer.obj right after PyObject_HEAD); check it on a real one...
        target = bytearray(b"hp")
        offset = _OBJECT_HEAD + _P
        pb = pickle.PickleBuffer(target)
        if _word(id(pb) + offset) != id(target):
            return False
        pb.release()
        # ...and that cls keeps _view at the same offset.
        probe = object.__new__(cls)
        probe._view = target
        if _word(id(probe) + offset) != id(target):
            return False
    except Exception:  # pragma: no cover - unexpected interpreter
        return False
    ctypes.c_void_p.from_address(dst).value = getbuf
    ctypes.c_void_p.from_address(dst + _P).value = releasebuf
    try:
        before = sys.getrefcount(target)
        mv = memoryview(probe)
        ok = mv.obj is target and not mv.readonly and mv.nbytes == 2
        ok = ok and sys.getrefcount(target) == before + 1  # the view holds target
        mv[0] = ord("H")
        mv.release()
        ok = ok and target == b"Hp" and sys.getrefcount(target) == before
        probe._view = RELEASED
        try:
            memoryview(probe)
            ok = False
        except ValueError:
            pass
    except Exception:  # pragma: no cover
        ok = False
    if not ok:  # pragma: no cover
        ctypes.c_void_p.from_address(dst).value = None
        ctypes.c_void_p.from_address(dst + _P).value = None
    return ok
