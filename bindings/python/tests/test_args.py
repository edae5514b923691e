"""Every argument is checked at the binding boundary: a wrong type is a
TypeError and a value out of range a ValueError, each naming the parameter;
switches take True or False only; nothing is wrapped or converted silently;
a partial configuration changes only what is passed; and a refused call
changes nothing and leaks nothing (no block left live)."""

import gc
import os
import subprocess
import sys

import pytest

import hp
from conftest import BINDING_DIR, REPO, block_state, need, run_python, thp_madvise_available

MiB = 1 << 20


# -- switches: True or False, nothing else --------------------------------------

@pytest.mark.parametrize("name", ["require_huge", "populate", "collapse", "zero", "pool"])
@pytest.mark.parametrize("value", ["no", "false", None, 0, 1, 1.0, [], b""])
def test_alloc_switches_take_bools_only(name, value):
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        hp.alloc(4096, backend="fallback", **{name: value})


def test_zero_no_is_refused_not_taken_as_true():
    # zero="no" used to zero the block (a truthy str), zero=None to skip it.
    with pytest.raises(TypeError, match="zero must be True or False, not 'no'"):
        hp.alloc(4096, zero="no")
    with pytest.raises(TypeError, match="zero must be True or False, not None"):
        hp.alloc(4096, zero=None)


def test_require_huge_false_string_is_refused():
    with pytest.raises(TypeError, match="require_huge must be True or False, not 'false'"):
        hp.alloc(4096, backend="fallback", require_huge="false")


@pytest.mark.parametrize("name", ["huge", "hugetlb", "thp", "allow_lean", "populate", "cache"])
def test_stack_switches_take_bools_only(name):
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        hp.stack(1 << 16, **{name: "no"})


# -- sizes and counts -----------------------------------------------------------

@pytest.mark.parametrize("size", [True, False, 4096.0, "4096", None])
def test_alloc_size_must_be_an_int(size):
    with pytest.raises(TypeError, match="size must be an int"):
        hp.alloc(size)


def test_alloc_size_out_of_range_names_the_range():
    with pytest.raises(hp.SizeError, match=r"size=-1 is out of range: expected an int from 0"):
        hp.alloc(-1)
    with pytest.raises(hp.SizeError, match="out of range"):
        hp.alloc(1 << 64)


def test_resize_size_is_checked_and_the_block_survives(block):
    block[0] = 7
    for bad in (True, 1.5, "8"):
        with pytest.raises(TypeError, match="size must be an int"):
            block.resize(bad)
    with pytest.raises(hp.SizeError, match="out of range"):
        block.resize(-5)
    assert len(block) == 1 << 20 and block[0] == 7


@pytest.mark.parametrize("guard", [True, 1.5, "4096", -1])
def test_stack_guard_size_is_checked(guard):
    with pytest.raises((TypeError, ValueError), match="guard_size"):
        hp.stack(1 << 16, guard_size=guard)


@pytest.mark.parametrize("exclude", [5, b"fallback", [b"hugetlbfs"], ["fallback", 3]])
def test_exclude_must_be_str_or_strings(exclude):
    with pytest.raises(TypeError, match="exclude"):
        hp.alloc(4096, exclude=exclude)


# -- the cache's configuration ------------------------------------------------------

@pytest.fixture
def cache_settings():
    old = hp.cache_stats()
    yield old
    hp.cache_configure(max_bytes=old.max_bytes, idle_ms=old.idle_ms,
                       pool_idle_ms=old.pool_idle_ms)


def _cache_limits():
    st = hp.cache_stats()
    return st.max_bytes, st.idle_ms, st.pool_idle_ms


def test_cache_configure_negative_is_a_value_error_naming_the_field(cache_settings):
    before = _cache_limits()
    with pytest.raises(ValueError, match=r"max_bytes=-1 is out of range: expected an int "
                                         r"from 0 to 70368744177664"):
        hp.cache_configure(max_bytes=-1)
    with pytest.raises(ValueError, match="idle_ms=86400001"):
        hp.cache_configure(idle_ms=86400001)
    assert _cache_limits() == before


@pytest.mark.parametrize("value", [1.5, "1G", True, [1]])
def test_cache_configure_wrong_types_name_the_field(cache_settings, value):
    before = _cache_limits()
    with pytest.raises(TypeError, match="max_bytes must be an int"):
        hp.cache_configure(max_bytes=value)
    assert _cache_limits() == before


def test_cache_configure_changes_only_what_is_passed(cache_settings):
    hp.cache_configure(max_bytes=64 * MiB, idle_ms=4321, pool_idle_ms=99)
    hp.cache_configure(max_bytes=32 * MiB)
    assert _cache_limits() == (32 * MiB, 4321, 99)
    hp.cache_configure(idle_ms=1234)
    assert _cache_limits() == (32 * MiB, 1234, 99)
    hp.cache_configure(pool_idle_ms=7)
    assert _cache_limits() == (32 * MiB, 1234, 7)


def test_stack_cache_configure_changes_only_what_is_passed():
    old = hp.stack_cache_stats()
    try:
        hp.stack_cache_configure(max_stacks=5, max_bytes=64 * MiB, keep_bytes=MiB)
        hp.stack_cache_configure(max_stacks=3)
        st = hp.stack_cache_stats()
        assert (st.max_stacks, st.max_bytes, st.keep_bytes) == (3, 64 * MiB, MiB)
        with pytest.raises(TypeError, match="keep_bytes must be an int"):
            hp.stack_cache_configure(keep_bytes=True)
        with pytest.raises(ValueError, match="max_bytes=-1"):
            hp.stack_cache_configure(max_bytes=-1)
        st = hp.stack_cache_stats()
        assert (st.max_stacks, st.max_bytes, st.keep_bytes) == (3, 64 * MiB, MiB)
    finally:
        hp.stack_cache_configure(max_stacks=old.max_stacks, max_bytes=old.max_bytes,
                                 keep_bytes=old.keep_bytes)


# -- hp.numpy settings --------------------------------------------------------------

@pytest.fixture
def hpnumpy(np):
    try:
        import hp.numpy as hpn
        hpn._extension()
    except ImportError as exc:
        need(False, str(exc))
    return hpn


@pytest.mark.parametrize("min_size", [2 ** 64 + 5, 1 << 70, 0, -1])
def test_numpy_min_size_out_of_range_is_refused_not_wrapped(hpnumpy, min_size):
    before = hpnumpy.stats()
    with pytest.raises(ValueError, match=f"min_size={min_size} is out of range"):
        hpnumpy.install(min_size)
    assert not hpnumpy.installed()
    assert hpnumpy.stats()["min_size"] == before["min_size"]


@pytest.mark.parametrize("min_size", [True, 1.5, "2M"])
def test_numpy_min_size_must_be_an_int(hpnumpy, min_size):
    with pytest.raises(TypeError, match="min_size must be an int"):
        hpnumpy.install(min_size)
    assert not hpnumpy.installed()


@pytest.mark.parametrize("name", ["require_huge", "populate", "pool"])
def test_numpy_switches_take_bools_only(hpnumpy, name):
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        hpnumpy.install(**{name: "yes"})
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        with hp.numpy_allocator(**{name: 1}):
            pass  # pragma: no cover - never entered
    assert not hpnumpy.installed()


def test_the_extension_refuses_what_would_wrap(hpnumpy):
    ext = hpnumpy._extension()
    from hp._lib import ffi, lib, library_path
    address = int(ffi.cast("uintptr_t", ffi.addressof(lib, "hp_alloc")))
    before = hpnumpy.stats()
    with pytest.raises(OverflowError):
        ext.configure(library_path(), address, 2 ** 64 + 5, 0)
    with pytest.raises(OverflowError):
        ext.configure(library_path(), address, 4096, -1)
    with pytest.raises(ValueError):
        ext.configure(library_path(), address, 0, 0)
    assert hpnumpy.stats() == before


def test_numpy_installed_is_false_without_numpy():
    proc = run_python("import sys; sys.modules['numpy'] = None\n"
                      "import hp.numpy as n\n"
                      "print(n.installed()); n.uninstall(); print('ok')")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "ok"]


def test_zeros_and_empty_take_no_zero_switch(np):
    # hp.zeros(..., zero=False) used to hand out leftover bytes.
    with pytest.raises(TypeError):
        hp.zeros(16, zero=False)
    with pytest.raises(TypeError):
        hp.empty(16, zero=True)
    with pytest.raises(TypeError, match="pool must be True or False"):
        hp.zeros(16, pool="no")
    with pytest.raises(TypeError, match="shape"):
        hp.zeros("16")
    with pytest.raises(TypeError, match="shape must be an int"):
        hp.zeros((2, 1.5))
    with pytest.raises(ValueError, match="order"):
        hp.zeros(16, order="K")


# -- hp.info ------------------------------------------------------------------------

@pytest.mark.parametrize("obj", [None, 42, object(), "text"])
def test_info_of_a_non_buffer_names_what_it_takes(obj):
    with pytest.raises(TypeError, match=r"hp.info\(\) takes an hp.Block, an hp.Stack, a numpy "
                                        r"array or a buffer"):
        hp.info(obj)


def test_info_of_a_stack_is_its_stack_info():
    with hp.stack(1 << 16) as s:
        got = hp.info(s)
        assert isinstance(got, hp.StackInfo)
        assert got.base_addr == s.base and got.usable_size >= 1 << 16


def test_info_of_an_empty_buffer_is_foreign():
    with pytest.raises(hp.ForeignPointerError):
        hp.info(b"")


# -- messages that say the right thing --------------------------------------------------

def test_require_huge_for_a_small_block_blames_the_page_size_not_the_pool():
    ok, why = thp_madvise_available()
    need(ok, f"thp-madvise unavailable: {why}")
    with pytest.raises(hp.NoHugePagesError) as err:
        hp.alloc(4096, require_huge=True)
    text = str(err.value)
    assert "free page(s)" not in text, text
    assert "larger than the 4096-byte block" in text and "page_size" in text, text


# -- close() is not fooled by the garbage collector's view ----------------------------

def test_holding_gc_referents_does_not_block_close():
    b = hp.alloc(4096, backend="fallback")
    address = b.address
    held = gc.get_referents(b)
    b.close()                        # used to raise BufferError
    assert block_state(address) != "live"
    del held
    b2 = hp.alloc(4096, backend="fallback")
    view = b2.buf
    with pytest.raises(BufferError):
        b2.close()                   # a real export still counts
    view.release()
    b2.close()


def test_exporter_table_forgets_dead_blocks():
    from hp import _buffer
    before = len(_buffer._EXPORTERS)
    blocks = [hp.alloc(4096, backend="fallback") for _ in range(50)]
    assert len(_buffer._EXPORTERS) == before + 50
    views = [b.buf for b in blocks[:10]]
    del blocks
    gc.collect()
    assert len(_buffer._EXPORTERS) == before    # the views hold their exporters
    assert all(len(v) == 4096 for v in views)   # still valid memory
    for v in views:
        v[0] = 1
        v.release()


# -- the library --------------------------------------------------------------------

def test_python_m_hp_with_a_library_that_is_not_libhp_prints_one_line():
    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6",
                             "/usr/lib/libc.so.6") if os.path.exists(p)), None)
    need(libc, "no libc.so.6 found to stand in for a wrong library")
    env = dict(os.environ, HP_LIBRARY=libc,
               PYTHONPATH=os.pathsep.join([str(BINDING_DIR)] + [
                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.run([sys.executable, "-m", "hp"], env=env, capture_output=True,
                          text=True, timeout=60, cwd=str(REPO))
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"HP_LIBRARY={libc}" in lines[0] and "is not a libhp" in lines[0]
    assert "Traceback" not in proc.stderr
