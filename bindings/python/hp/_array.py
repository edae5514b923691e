"""hp.empty() and hp.zeros(): numpy arrays that own a libhp block.

Fork: like the numpy handler (hp.numpy), these keep out of hugetlb pools
unless pool=True. An array is handed to code that forks without thinking of
it (multiprocessing's default start method on Linux), and a child that
writes an inherited array on private pool pages dies of SIGBUS once the pool
is empty (README, "Fork"); THP, mTHP and base pages have no such rule.
"""

from typing import TYPE_CHECKING, Any, Iterable, Optional, Tuple, Union

if TYPE_CHECKING:
    from typing import Literal

    _Order = Literal["C", "F"]
else:
    _Order = str

from ._args import integer, switch
from ._block import alloc

if TYPE_CHECKING:
    import numpy
    import numpy.typing

    _Array = numpy.typing.NDArray[Any]
    _DType = numpy.typing.DTypeLike
else:
    _Array = Any
    _DType = Any

_Shape = Union[int, Iterable[int]]


def _shape(shape: _Shape) -> Tuple[int, ...]:
    if isinstance(shape, (str, bytes, bytearray)):
        raise TypeError(f"shape must be an int or a sequence of ints, not "
                        f"{type(shape).__name__}")
    if hasattr(shape, "__iter__"):
        dims = tuple(integer(d, "shape") for d in shape)
    else:
        dims = (integer(shape, "shape"),)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimensions are not allowed: {dims}")
    return dims


def _array(shape: _Shape, dtype: _DType, order: _Order, zero: bool,
           page_size: Union[int, str, None], backend: Optional[str],
           exclude: Union[str, Iterable[str], None], require_huge: bool, populate: bool,
           collapse: bool, pool: bool) -> _Array:
    import numpy as np

    dims = _shape(shape)
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise TypeError(f"hp arrays hold raw memory; dtype {dt} holds Python objects")
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', not {order!r}")
    nbytes = dt.itemsize
    for d in dims:
        nbytes *= d
    block = alloc(max(nbytes, 1), page_size=page_size, backend=backend, exclude=exclude,
                  require_huge=require_huge, populate=populate, collapse=collapse, zero=zero,
                  pool=switch(pool, "pool"))
    # np.ndarray keeps the memoryview's exporter as the array's base: the
    # memory lives exactly as long as the array and its views, and no code
    # can close the block under them (the Block goes away here).
    buf = block.buf
    arr: _Array = np.ndarray(dims, dt, buffer=buf, order=order)
    buf.release()
    return arr


def empty(shape: _Shape, dtype: _DType = float, order: _Order = "C", *,
          page_size: Union[int, str, None] = None, backend: Optional[str] = None,
          exclude: Union[str, Iterable[str], None] = None, require_huge: bool = False,
          populate: bool = False, collapse: bool = False, pool: bool = False) -> _Array:
    """numpy.empty on libhp memory: an ndarray whose memory is a libhp block.

    page_size, backend, exclude, require_huge, populate and collapse are
    hp.alloc's. pool=False (the default, unlike hp.alloc) keeps the array off
    hugetlb pools, so that a forked child may write it whatever the pool
    holds; pool=True lets it take pool pages (see hp.alloc and the README's
    "Fork"). The contents are undefined (libhp may hand back a range this
    process freed before, see "Cache" in the libhp README), as with
    numpy.empty. The block is freed when the array and every view of it are
    gone; its base chain (``arr.base``) holds the memory, and nothing
    reachable from it can free the block early. hp.info(arr) tells where the
    memory came from.
    """
    return _array(shape, dtype, order, False, page_size, backend, exclude, require_huge,
                  populate, collapse, pool)


def zeros(shape: _Shape, dtype: _DType = float, order: _Order = "C", *,
          page_size: Union[int, str, None] = None, backend: Optional[str] = None,
          exclude: Union[str, Iterable[str], None] = None, require_huge: bool = False,
          populate: bool = False, collapse: bool = False, pool: bool = False) -> _Array:
    """numpy.zeros on libhp memory (libhp clears it); see hp.empty()."""
    return _array(shape, dtype, order, True, page_size, backend, exclude, require_huge,
                  populate, collapse, pool)
