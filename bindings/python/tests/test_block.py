"""hp.alloc() and hp.Block: sizes, info, resize, close, GC, use after close."""

import copy
import gc
import pickle
import threading

import pytest

import hp
from conftest import block_state, mapped


def test_alloc_len_info(block):
    assert len(block) == 1 << 20
    info = block.info()
    assert isinstance(info, hp.BlockInfo)
    assert info.backend == "fallback"
    assert info.usable_size >= len(block)
    assert info.mapped_size >= info.usable_size
    assert info.page_size == 4096
    assert info.flags == 0
    assert block_state(block.address) == "live"
    assert not block.closed and bool(block)
    assert repr(block).startswith("<hp.Block 1048576 bytes at 0x")


def test_memory_is_zeroed_and_writable(block):
    view = block.buf
    assert view.nbytes == len(block) and view.format == "B" and not view.readonly
    assert view.tobytes() == bytes(len(block))
    view[:5] = b"hello"
    view[-1] = 0x7F
    assert bytes(view[:5]) == b"hello" and view[-1] == 0x7F
    view.release()


def test_default_selection_serves_any_backend():
    with hp.alloc(3 << 20) as b:
        assert len(b) == 3 << 20
        assert b.info().backend in {x.name for x in hp.backends()}


def test_flags_are_recorded():
    with hp.alloc(8192, backend="fallback", populate=True, zero=False) as b:
        assert b.info().flags == hp.F_POPULATE | hp.F_NOZERO
    with hp.alloc(8192, page_size="4K", backend="fallback") as b:
        assert b.info().requested_page_size == 4096


def test_exclude_list_and_iterable():
    with hp.alloc(4096, exclude="thp-madvise,anon-orders,hugetlbfs") as b:
        assert b.info().backend == "fallback"
    with hp.alloc(4096, exclude=["thp-madvise", "anon-orders", "hugetlbfs"]) as b:
        assert b.info().backend == "fallback"


@pytest.mark.parametrize("backend", ["fallback", None])
def test_resize_keeps_contents(backend):
    b = hp.alloc(4096, backend=backend)
    pattern = bytes(range(256)) * 16
    view = b.buf
    view[:] = pattern
    view.release()
    for size in (1 << 16, 5 << 20, 12345, 64 << 20, 4096):
        b.resize(size)
        assert len(b) == size
        assert b.info().usable_size >= size
        with b.buf as v:
            assert v[:4096].tobytes() == pattern
            v[4096:] = b"\x5a" * (size - 4096)   # the new part is usable
    b.close()


def test_resize_shrink_then_grow_zero_fills_or_keeps():
    with hp.alloc(1 << 20, backend="fallback") as b:
        with b.buf as v:
            v[:3] = b"abc"
        b.resize(3)
        assert len(b) == 3
        with b.buf as v:
            assert v.tobytes() == b"abc"
        b.resize(1 << 20)
        with b.buf as v:
            assert v[:3].tobytes() == b"abc"


def test_resize_may_move_and_address_follows():
    with hp.alloc(4096, backend="fallback") as b:
        before = b.address
        b.resize(256 << 20)
        assert block_state(b.address) == "live"
        if b.address != before:
            assert block_state(before) != "live"


def test_close_frees_and_is_idempotent():
    b = hp.alloc(1 << 20, backend="fallback")
    address = b.address
    b.close()
    assert b.closed
    assert block_state(address) in ("HP_EDOUBLEFREE", "HP_EFOREIGN")
    b.close()  # no-op, like a file
    assert repr(b) == "<hp.Block closed>"


def test_context_manager_frees():
    with hp.alloc(1 << 20, backend="fallback") as b:
        address = b.address
        assert block_state(address) == "live"
    assert b.closed
    assert block_state(address) != "live"


def test_garbage_collection_frees():
    b = hp.alloc(64 << 20, backend="fallback")
    address = b.address
    assert mapped(address)
    del b
    gc.collect()
    assert block_state(address) != "live"
    assert not mapped(address)


def test_garbage_in_a_cycle_frees():
    b = hp.alloc(1 << 20, backend="fallback")
    address = b.address
    cycle = [b]
    cycle.append(cycle)
    del b, cycle
    gc.collect()
    assert block_state(address) != "live"


@pytest.mark.parametrize("use", [
    len,
    lambda b: b.info(),
    lambda b: b.resize(8192),
    lambda b: b.view(),
    lambda b: b.address,
    lambda b: b.__enter__(),
])
def test_use_after_close_raises_closed_error(use):
    b = hp.alloc(4096, backend="fallback")
    b.close()
    with pytest.raises(hp.ClosedError) as err:
        use(b)
    assert isinstance(err.value, ValueError) and isinstance(err.value, hp.HugePageError)


def test_memoryview_after_close_raises_value_error():
    b = hp.alloc(4096, backend="fallback")
    b.close()
    with pytest.raises(ValueError):
        b.buf
    with pytest.raises(ValueError):
        bytes(b)


def test_block_cannot_be_copied_pickled_made_or_subclassed(block):
    with pytest.raises(TypeError):
        copy.copy(block)
    with pytest.raises(TypeError):
        copy.deepcopy(block)
    with pytest.raises(TypeError):
        pickle.dumps(block)
    with pytest.raises(TypeError):
        hp.Block()
    with pytest.raises(TypeError):
        type("Sub", (hp.Block,), {})


def test_alloc_zero_size_raises_size_error():
    with pytest.raises(hp.SizeError) as err:
        hp.alloc(0)
    assert isinstance(err.value, ValueError)
    assert err.value.code == -3 and err.value.name == "HP_ESIZE"
    assert "size 0" in err.value.detail and err.value.detail in str(err.value)


def test_alloc_too_large_raises_size_error():
    with pytest.raises(hp.SizeError, match="exceeds the limit"):
        hp.alloc(1 << 50)


def test_alloc_negative_or_non_int_size():
    with pytest.raises(hp.SizeError, match="out of range"):
        hp.alloc(-1)
    with pytest.raises(TypeError):
        hp.alloc("4096")
    with pytest.raises(TypeError):
        hp.alloc(4096.0)


def test_unknown_backend_raises_no_backend_error():
    with pytest.raises(hp.NoBackendError) as err:
        hp.alloc(4096, backend="no-such-backend")
    assert "no-such-backend" in err.value.detail
    assert err.value.code == -9


def test_malformed_backend_names_raise_invalid_argument():
    with pytest.raises(hp.InvalidArgumentError, match="not a backend name"):
        hp.alloc(4096, backend="Bad Name!")
    with pytest.raises(hp.InvalidArgumentError, match="exclude"):
        hp.alloc(4096, exclude="fallback,,thp-madvise")
    with pytest.raises(hp.InvalidArgumentError, match="NUL"):
        hp.alloc(4096, backend="fall\0back")
    with pytest.raises(TypeError):
        hp.alloc(4096, backend=b"fallback")


@pytest.mark.parametrize("page_size", [3000, 0, -4096, "2X", "", True, 1 << 70])
def test_bad_page_size_raises_flags_error(page_size):
    with pytest.raises(hp.FlagsError) as err:
        hp.alloc(4096, page_size=page_size)
    assert "page_size" in err.value.detail


def test_page_size_out_of_libhp_range_raises_flags_error_from_c():
    with pytest.raises(hp.FlagsError, match="out of range"):
        hp.alloc(4096, page_size=1 << 41)


def test_require_huge_from_base_pages_only_raises():
    with pytest.raises(hp.NoHugePagesError) as err:
        hp.alloc(1 << 21, backend="fallback", require_huge=True)
    assert isinstance(err.value, MemoryError)
    assert "huge pages" in err.value.detail and "fallback" in err.value.detail


def test_require_huge_without_a_pool_raises():
    """1 GiB pages: no THP serves them, so only a reserved hugetlb pool could."""
    pools = [free for b in hp.backends() if b.kind == hp.BackendKind.HUGETLB
             for size, free in zip(b.page_sizes, b.pool_free) if size == 1 << 30]
    if any(pools):
        pytest.skip("a 1 GiB hugetlb pool is reserved on this machine")
    with pytest.raises(hp.NoHugePagesError) as err:
        hp.alloc(1 << 30, page_size="1G", require_huge=True)
    assert "huge pages" in str(err.value)


def test_resize_to_zero_raises_and_keeps_block(block):
    with pytest.raises(hp.SizeError, match="close"):
        block.resize(0)
    assert len(block) == 1 << 20 and block_state(block.address) == "live"


def test_failed_resize_keeps_block_intact():
    with hp.alloc(4096, backend="fallback") as b:
        with b.buf as v:
            v[:4] = b"keep"
        with pytest.raises(hp.SizeError):
            b.resize(1 << 50)
        assert len(b) == 4096 and block_state(b.address) == "live"
        with b.buf as v:
            assert v[:4].tobytes() == b"keep"
        b.resize(8192)  # still fully usable


def test_concurrent_close_and_resize_never_crash():
    for _ in range(20):
        b = hp.alloc(1 << 16, backend="fallback")
        errors = []

        def worker(op):
            try:
                op()
            except (hp.ClosedError, BufferError):
                pass
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(op,)) for op in
                   (b.close, lambda: b.resize(1 << 20), lambda: b.info(), b.close)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        b.close()
        assert b.closed


def _nodes_online():
    """NUMA node numbers of this machine (sysfs), [0] without NUMA support."""
    try:
        with open("/sys/devices/system/node/online") as f:
            spec = f.read().strip()
    except OSError:
        return [0]
    nodes = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        nodes.extend(range(int(lo), int(hi or lo) + 1))
    return nodes


def test_info_numa_node_fd_and_pin():
    # Named backend: pinned; the built-ins answer the node of a touched first
    # page and back nothing with a descriptor.
    with hp.alloc(1 << 20, backend="fallback") as b:
        b[0] = 1
        info = b.info()
        assert info.pin == "named"
        assert info.numa_node in _nodes_online()
        assert (info.fd, info.fd_offset) == (-1, 0)
    # Chosen by the selection: not pinned. A first page not yet resident has
    # no node (-1; the query never faults it in), a touched one has.
    with hp.alloc(1 << 20, exclude="hugetlbfs") as b:
        info = b.info()
        assert info.pin == "none"
        assert info.numa_node in [-1] + _nodes_online()
        b[0] = 1
        assert b.info().numa_node in _nodes_online()
