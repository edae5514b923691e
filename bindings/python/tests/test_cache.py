"""hp.cache_trim(), hp.cache_stats(), hp.cache_configure(): the block cache."""

import pytest

import hp


def thp_block(size):
    try:
        return hp.alloc(size, backend="thp-madvise")
    except hp.HugePageError as e:
        pytest.skip(f"no thp-madvise here: {e}")


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def test_close_caches_then_trim_gives_it_back():
    hp.cache_trim()
    block = thp_block(64 << 20)
    block.buf[:] = b"\x5a" * len(block)
    block.close()
    st = hp.cache_stats()
    assert st.bytes >= 64 << 20
    assert st.reaper_running
    (entry,) = [e for e in st.entries if e.backend == "thp-madvise"]
    assert entry.page_size == 2 << 20 and entry.bytes >= 64 << 20
    held = rss_kb()
    hp.cache_trim()
    after = hp.cache_stats()
    assert after.bytes == 0 and after.entries == ()
    assert after.releases > st.releases
    assert rss_kb() < held - 48 * 1024


def test_reuse_is_a_hit():
    hp.cache_trim()
    thp_block(8 << 20).close()
    before = hp.cache_stats()
    block = thp_block(8 << 20)
    assert hp.cache_stats().hits == before.hits + 1
    assert bytes(block.buf[:16]) == bytes(16)  # reused memory reads as zero
    block.close()


def test_configure():
    old = hp.cache_stats()
    with pytest.raises(hp.OutOfRangeError):
        hp.cache_configure(max_bytes=(1 << 46) + 1)
    hp.cache_configure(max_bytes=0, idle_ms=1234, pool_idle_ms=56)
    try:
        st = hp.cache_stats()
        assert (st.max_bytes, st.idle_ms, st.pool_idle_ms) == (0, 1234, 56)
        thp_block(4 << 20).close()
        assert hp.cache_stats().bytes == 0
    finally:
        hp.cache_configure(max_bytes=old.max_bytes, idle_ms=old.idle_ms,
                           pool_idle_ms=old.pool_idle_ms)
