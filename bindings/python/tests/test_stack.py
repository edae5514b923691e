"""hp.stack() and the stack cache (hp/stack.h)."""

import gc

import pytest

import hp


def test_lean_stack():
    with hp.stack(1 << 20) as s:
        info = s.info()
        assert info.mode == "lean" and info.kind == hp.BackendKind.BASE
        assert s.size == info.usable_size >= 1 << 20
        assert s.base == info.base_addr and s.base % 4096 == 0
        assert info.guard_addr + info.guard_size == info.base_addr
        assert info.huge_bytes == 0
    assert s.closed
    with pytest.raises(hp.ClosedError):
        s.info()
    with pytest.raises(hp.ClosedError):
        s.base
    s.close()


def test_huge_stack_or_lean_fallback():
    with hp.stack(2 << 20, huge=True, allow_lean=True) as s:
        info = s.info()
        assert info.mode in ("lean", "huge")
        if info.mode == "huge":
            assert info.page_size > 4096 and info.base_addr % info.page_size == 0


def test_stack_errors():
    with pytest.raises(hp.SizeError):
        hp.stack(0)
    with pytest.raises(hp.FlagsError):
        hp.stack(1 << 20, hugetlb=True, thp=True)


def test_stack_garbage_collected():
    s = hp.stack(1 << 16, cache=False)
    del s
    gc.collect()
    assert hp.stack_cache_stats().cached_stacks >= 0


def test_stack_cache_configure_stats_trim():
    before = hp.stack_cache_stats()
    try:
        hp.stack_cache_configure(max_stacks=4, max_bytes=64 << 20, keep_bytes=1 << 20)
        st = hp.stack_cache_stats()
        assert (st.max_stacks, st.max_bytes, st.keep_bytes) == (4, 64 << 20, 1 << 20)
        hp.stack(1 << 16).close()
        assert hp.stack_cache_stats().cached_stacks >= 1
        hp.stack_cache_trim()
        assert hp.stack_cache_stats().cached_stacks == 0
        with pytest.raises(hp.OutOfRangeError):
            hp.stack_cache_configure(max_stacks=1 << 40)
    finally:
        hp.stack_cache_configure(max_stacks=before.max_stacks, max_bytes=before.max_bytes,
                                 keep_bytes=before.keep_bytes)
