"""The buffer protocol: zero-copy views, and no view can outlive the memory."""

import ctypes
import gc
import sys

import pytest

import hp
from hp import _buffer
from conftest import block_state


def test_buffer_protocol_is_installed():
    # The verified slot is expected on CPython 3.8-3.13; __buffer__ is the
    # 3.12+ fallback should a future layout fail the checks.
    expected = ("slot",) if sys.version_info < (3, 12) else ("slot", "__buffer__")
    assert hp.BUFFER_PROTOCOL in expected


def test_memoryview_is_zero_copy(block):
    view = memoryview(block)
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    assert address == block.address
    ctypes.memmove(block.address + 10, b"from C", 6)   # C writes, view sees
    assert view[10:16].tobytes() == b"from C"
    view[0:3] = b"abc"                                  # view writes, C sees
    assert ctypes.string_at(block.address, 3) == b"abc"
    view.release()


def test_view_method_equals_memoryview(block):
    with block.view() as v, memoryview(block) as w:
        assert v.nbytes == w.nbytes == len(block)
        v[0] = 42
        assert w[0] == 42


def test_close_with_live_view_raises_buffer_error_and_keeps_memory():
    b = hp.alloc(1 << 20, backend="fallback")
    view = memoryview(b)
    view[:4] = b"live"
    with pytest.raises(BufferError, match="1 buffer export"):
        b.close()
    assert not b.closed and block_state(b.address) == "live"
    assert view[:4].tobytes() == b"live"        # still valid memory
    view.release()
    b.close()
    assert b.closed


def test_slices_and_nested_views_count_until_all_are_gone():
    b = hp.alloc(4096, backend="fallback")
    view = memoryview(b)
    part = view[100:200]
    cast = view.cast("I")
    del view                                     # part and cast still export
    with pytest.raises(BufferError):
        b.close()
    del part
    with pytest.raises(BufferError):
        b.resize(8192)
    del cast
    b.resize(8192)
    b.close()


def test_resize_with_live_view_raises_and_keeps_everything():
    with hp.alloc(4096, backend="fallback") as b:
        view = memoryview(b)
        address = b.address
        with pytest.raises(BufferError, match="resize"):
            b.resize(64 << 20)
        assert len(b) == 4096 and b.address == address and view.nbytes == 4096
        view.release()
        b.resize(64 << 20)
        assert len(b) == 64 << 20
        with memoryview(b) as v:
            assert v.nbytes == 64 << 20


def test_export_count_is_exact():
    with hp.alloc(4096, backend="fallback") as b:
        assert _buffer.exports(b) == 0
        views = [memoryview(b) for _ in range(5)]
        assert _buffer.exports(b) == 5
        ctypes_view = (ctypes.c_char * 16).from_buffer(b)
        assert _buffer.exports(b) == 6
        del views[0], ctypes_view
        assert _buffer.exports(b) == 4
        for v in views:
            v.release()
        assert _buffer.exports(b) == 0


def test_block_collected_while_a_view_lives_keeps_memory_until_view_goes():
    b = hp.alloc(1 << 20, backend="fallback")
    address = b.address
    view = memoryview(b)
    view[:5] = b"still"
    del b
    gc.collect()
    assert block_state(address) == "live"      # the view owns the memory now
    assert view[:5].tobytes() == b"still"
    view[5:8] = b"ok!"
    view.release()
    gc.collect()
    assert block_state(address) != "live"


def test_exit_with_exception_and_live_view_does_not_mask_the_exception():
    with pytest.raises(KeyError):
        with hp.alloc(4096, backend="fallback") as b:
            view = memoryview(b)
            raise KeyError("the real error")
    assert not b.closed                 # the view keeps it, then GC frees
    address = b.address
    view.release()
    del b
    gc.collect()
    assert block_state(address) != "live"


def test_exit_without_exception_and_live_view_raises_buffer_error():
    with pytest.raises(BufferError):
        with hp.alloc(4096, backend="fallback") as b:
            view = memoryview(b)
    view.release()
    b.close()


def test_bytes_like_consumers_work(block):
    with memoryview(block) as v:
        v[:3] = b"xyz"
    assert bytes(block)[:3] == b"xyz"
    assert bytearray(block)[:3] == b"xyz"
    assert b"xyz" in bytes(block)


def test_numpy_frombuffer_is_zero_copy_both_ways(block, np):
    arr = np.frombuffer(block, dtype=np.uint8)
    assert arr.size == len(block) and arr.flags.writeable
    assert arr.ctypes.data == block.address
    arr[:4] = [1, 2, 3, 4]
    assert ctypes.string_at(block.address, 4) == b"\x01\x02\x03\x04"
    ctypes.memmove(block.address + 8, b"\xff" * 8, 8)
    assert arr[8:16].tolist() == [255] * 8
    floats = np.frombuffer(block, dtype=np.float64, count=16, offset=64)
    floats[:] = np.arange(16)
    assert np.frombuffer(memoryview(block)[64:192], dtype=np.float64).tolist() == \
        list(map(float, range(16)))
    del arr, floats
    gc.collect()


def test_numpy_array_blocks_close_and_resize(np):
    b = hp.alloc(1 << 20, backend="fallback")
    arr = np.frombuffer(b, dtype=np.int32)
    arr[:] = 7
    with pytest.raises(BufferError):
        b.close()
    with pytest.raises(BufferError):
        b.resize(2 << 20)
    assert int(arr.sum()) == 7 * arr.size         # untouched, still mapped
    view_of_view = arr[10:20]
    del arr
    with pytest.raises(BufferError):              # the slice keeps the base
        b.close()
    del view_of_view
    b.close()


def test_numpy_array_outlives_its_block(np):
    b = hp.alloc(1 << 20, backend="fallback")
    address = b.address
    arr = np.frombuffer(b, dtype=np.uint64)
    arr[:] = 0xDEADBEEF
    del b
    gc.collect()
    assert block_state(address) == "live"
    assert int(arr[-1]) == 0xDEADBEEF
    del arr
    gc.collect()
    assert block_state(address) != "live"


def test_numpy_after_close_raises(np):
    b = hp.alloc(4096, backend="fallback")
    b.close()
    with pytest.raises(ValueError):
        np.frombuffer(b, dtype=np.uint8)


def test_numpy_on_huge_pages(np):
    """The point of it all: a numpy array on whatever huge pages exist."""
    with hp.alloc(8 << 20, populate=True) as b:
        arr = np.frombuffer(b, dtype=np.float32)
        arr[:] = 1.5
        assert float(arr.sum()) == 1.5 * arr.size
        info = b.info()
        del arr
    if info.page_size > 4096:
        assert info.backend != "fallback"
