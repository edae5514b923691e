"""hp.empty() and hp.zeros(): numpy arrays that own a libhp block."""

import operator
from typing import Any, Dict, Iterable, Tuple, Union

from ._block import alloc


def _shape(shape: Union[int, Iterable[int]]) -> Tuple[int, ...]:
    if isinstance(shape, (tuple, list)):
        dims = tuple(operator.index(d) for d in shape)
    else:
        dims = (operator.index(shape),)  # type: ignore[arg-type]
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimensions are not allowed: {dims}")
    return dims


def _array(shape: Any, dtype: Any, order: Any, zero: bool, alloc_opts: Dict[str, Any]) -> Any:
    import numpy as np

    dims = _shape(shape)
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise TypeError(f"hp arrays hold raw memory; dtype {dt} holds Python objects")
    nbytes = dt.itemsize
    for d in dims:
        nbytes *= d
    alloc_opts.setdefault("zero", zero)
    block = alloc(max(nbytes, 1), **alloc_opts)
    # np.ndarray keeps the memoryview's exporter as the array's base: the
    # memory lives exactly as long as the array and its views, and no code
    # can close the block under them (the Block goes away here).
    buf = block.buf
    arr: Any = np.ndarray(dims, dt, buffer=buf, order=order)
    buf.release()
    return arr


def empty(shape: Any, dtype: Any = float, order: str = "C", **alloc_opts: Any) -> Any:
    """numpy.empty on libhp memory: an ndarray whose memory is a libhp block.

    alloc_opts are hp.alloc's (page_size, backend, exclude, require_huge,
    populate, collapse). The contents are undefined (libhp may hand back a
    range this process freed before, see "Cache" in the libhp README), as
    with numpy.empty. The block is freed when the array and every view of
    it are gone; its base chain (``arr.base``) holds the memory, and nothing
    reachable from it can free the block early. hp.info(arr) tells where the
    memory came from.
    """
    return _array(shape, dtype, order, False, alloc_opts)


def zeros(shape: Any, dtype: Any = float, order: str = "C", **alloc_opts: Any) -> Any:
    """numpy.zeros on libhp memory (libhp clears it); see hp.empty()."""
    return _array(shape, dtype, order, True, alloc_opts)
