"""block.buf and item access: zero-copy, and no export can outlive the memory."""

import ctypes
import gc
import pickle
import threading
import time

import pytest

import hp
from hp import _buffer
from conftest import block_state


def test_block_itself_is_not_a_buffer(block, np):
    # numpy.ndarray(buffer=obj) releases the buffer and keeps obj: if obj
    # were the Block, close() could not see the array (see hp/_buffer.py).
    for consume in (memoryview,
                    lambda b: np.ndarray((16,), np.uint8, buffer=b),
                    lambda b: np.frombuffer(b, dtype=np.uint8),
                    lambda b: (ctypes.c_char * 16).from_buffer(b)):
        with pytest.raises(TypeError):
            consume(block)
    assert _buffer.exports(block) == 0


def test_buf_is_zero_copy(block):
    view = block.buf
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    assert address == block.address
    ctypes.memmove(block.address + 10, b"from C", 6)   # C writes, view sees
    assert view[10:16].tobytes() == b"from C"
    view[0:3] = b"abc"                                  # view writes, C sees
    assert ctypes.string_at(block.address, 3) == b"abc"
    view.release()


def test_view_method_equals_buf(block):
    with block.view() as v, block.buf as w:
        assert v.nbytes == w.nbytes == len(block)
        assert v.format == "B" and not v.readonly
        v[0] = 42
        assert w[0] == 42


def test_subscript_and_slice_like_mmap(block):
    block[0] = 65
    block[1:4] = b"BCD"
    block[-1] = 0xFF
    assert block[0] == 65 and isinstance(block[0], int)
    assert block[0:4] == b"ABCD" and isinstance(block[0:4], bytes)
    assert block[-1] == 0xFF and block[:2] == b"AB" and block[0:8:2] == b"AC\0\0"
    assert bytes(block)[:4] == b"ABCD" and len(bytes(block)) == len(block)
    with pytest.raises(IndexError):
        block[len(block)]
    with pytest.raises(ValueError):
        block[0:4] = b"too long"          # same length only, as mmap
    with pytest.raises((TypeError, ValueError)):
        block[0] = 256
    assert _buffer.exports(block) == 0     # item access leaves nothing behind


def test_close_with_live_view_raises_buffer_error_and_keeps_memory():
    b = hp.alloc(1 << 20, backend="fallback")
    view = b.buf
    view[:4] = b"live"
    with pytest.raises(BufferError, match="1 buffer export"):
        b.close()
    assert not b.closed and block_state(b.address) == "live"
    assert view[:4].tobytes() == b"live"        # still valid memory
    view.release()
    b.close()
    assert b.closed


def test_slices_casts_and_bare_obj_count_until_all_are_gone():
    b = hp.alloc(4096, backend="fallback")
    view = b.buf
    part = view[100:200]
    cast = view.cast("I")
    obj = view.obj                               # the exporter itself
    del view                                     # part and cast still export
    with pytest.raises(BufferError):
        b.close()
    del part, cast
    with pytest.raises(BufferError):             # a bare reference counts too
        b.resize(8192)
    del obj
    b.resize(8192)
    b.close()


def test_resize_with_live_view_raises_and_keeps_everything():
    with hp.alloc(4096, backend="fallback") as b:
        view = b.buf
        address = b.address
        with pytest.raises(BufferError, match="resize"):
            b.resize(64 << 20)
        assert len(b) == 4096 and b.address == address and view.nbytes == 4096
        view.release()
        b.resize(64 << 20)
        assert len(b) == 64 << 20
        with b.buf as v:
            assert v.nbytes == 64 << 20


def test_export_count_is_exact_for_every_consumer(np):
    with hp.alloc(4096, backend="fallback") as b:
        assert _buffer.exports(b) == 0
        views = [b.buf for _ in range(5)]
        assert _buffer.exports(b) == 5
        ctypes_view = (ctypes.c_char * 16).from_buffer(b.buf)
        pickled = pickle.PickleBuffer(b.buf)
        arr = np.ndarray((4096,), np.uint8, buffer=b.buf)
        arr2 = np.frombuffer(b.buf, dtype=np.uint8)
        assert _buffer.exports(b) == 9
        del views[0], ctypes_view, pickled, arr, arr2
        assert _buffer.exports(b) == 4
        for v in views:
            v.release()
        assert _buffer.exports(b) == 0


def test_memoryview_cannot_be_pickled(block):
    with block.buf as v, pytest.raises(TypeError):
        pickle.dumps(v)


def test_block_collected_while_a_view_lives_keeps_memory_until_view_goes():
    b = hp.alloc(1 << 20, backend="fallback")
    address = b.address
    view = b.buf
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
            view = b.buf
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
            view = b.buf
    view.release()
    b.close()


def test_bytes_like_consumers_work(block):
    with block.buf as v:
        v[:3] = b"xyz"
    assert bytes(block)[:3] == b"xyz"
    assert bytearray(block.buf)[:3] == b"xyz"
    assert b"xyz" in bytes(block)


def test_numpy_frombuffer_is_zero_copy_both_ways(block, np):
    arr = np.frombuffer(block.buf, dtype=np.uint8)
    assert arr.size == len(block) and arr.flags.writeable
    assert arr.ctypes.data == block.address
    arr[:4] = [1, 2, 3, 4]
    assert ctypes.string_at(block.address, 4) == b"\x01\x02\x03\x04"
    ctypes.memmove(block.address + 8, b"\xff" * 8, 8)
    assert arr[8:16].tolist() == [255] * 8
    floats = np.frombuffer(block.buf, dtype=np.float64, count=16, offset=64)
    floats[:] = np.arange(16)
    assert np.frombuffer(block.buf[64:192], dtype=np.float64).tolist() == \
        list(map(float, range(16)))
    del arr, floats
    gc.collect()


@pytest.mark.parametrize("make", ["frombuffer", "ndarray"])
def test_numpy_array_blocks_close_and_resize(np, make):
    b = hp.alloc(1 << 20, backend="fallback")
    if make == "frombuffer":
        arr = np.frombuffer(b.buf, dtype=np.int32)
    else:
        arr = np.ndarray((1 << 18,), np.int32, buffer=b.buf)
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
    arr = np.ndarray((1 << 17,), np.uint64, buffer=b.buf)
    arr[:] = 0xDEADBEEF
    del b
    gc.collect()
    assert block_state(address) == "live"
    assert int(arr[-1]) == 0xDEADBEEF
    del arr
    gc.collect()
    assert block_state(address) != "live"


def test_after_close_every_route_raises(np):
    b = hp.alloc(4096, backend="fallback")
    b.close()
    for use in (lambda: b.buf, lambda: b[0], lambda: b[0:1], lambda: bytes(b),
                lambda: b.__setitem__(0, 1), lambda: np.frombuffer(b.buf, dtype=np.uint8)):
        with pytest.raises(hp.ClosedError):
            use()


def test_readers_during_resize_never_see_a_released_view():
    # Item access and .buf take the block lock, as resize() does: a reader
    # sees the block before or after a resize, and never a released view.
    b = hp.alloc(1 << 16, backend="fallback")
    b[0] = 9
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            try:
                assert b[0] == 9
                with b.buf as v:
                    assert v[0] == 9
            except BufferError:
                pass                       # impossible: readers never resize
            except Exception as exc:       # pragma: no cover - the failure
                errors.append(repr(exc))
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    resized = refused = 0
    for i in range(300):
        try:
            b.resize((1 << 16) + 4096 * (i % 7))
            resized += 1
        except BufferError:
            refused += 1                   # a reader held a view just then
            # A refusal calls nothing that drops the GIL: without a pause the
            # reader that was switched out holding its view would see every
            # remaining attempt refused within one switch interval.
            time.sleep(0.001)
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert resized + refused == 300 and resized > 0
    b.close()


def test_numpy_on_huge_pages(np):
    """A numpy array on whatever huge pages exist."""
    with hp.alloc(8 << 20, populate=True) as b:
        arr = np.frombuffer(b.buf, dtype=np.float32)
        arr[:] = 1.5
        assert float(arr.sum()) == 1.5 * arr.size
        info = b.info()
        del arr
    if info.page_size > 4096:
        assert info.backend != "fallback"
