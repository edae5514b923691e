"""No crash and no corruption from safe Python, whatever holds the memory.

Each risky case runs in a fresh interpreter: a segfault there is a failed
test here, not a dead pytest. The child prints one verdict line; anything
else (a signal, a traceback, a wrong verdict) fails.
"""

import signal

import pytest

from conftest import run_python

PRELUDE = """
import ctypes, gc, sys
import numpy as np
import hp

def refused(fn, *args):
    try:
        fn(*args)
    except (BufferError, TypeError) as exc:
        return type(exc).__name__
    return None
"""


def verdict(code, **env):
    proc = run_python(PRELUDE + code, **env)
    if proc.returncode < 0:
        pytest.fail(f"child died of {signal.Signals(-proc.returncode).name}:\n{proc.stderr}")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.mark.usefixtures("np")
@pytest.mark.parametrize("source", ["b", "b.buf"])
def test_close_with_live_ndarray_buffer_is_refused(source):
    out = verdict(f"""
b = hp.alloc(1 << 20)
try:
    a = np.ndarray((1 << 17,), np.float64, buffer={source})
except TypeError:
    print("no-export"); sys.exit()      # refusing to export at all is safe too
a[:] = 2.0
r = refused(b.close)
assert r == "BufferError" and not b.closed, r
print(float(a.sum()) == 2.0 * (1 << 17) and "refused")
del a
b.close()
""")
    assert out in ("refused", "no-export") and (source == "b" or out == "refused")


@pytest.mark.usefixtures("np")
@pytest.mark.parametrize("source", ["b", "b.buf"])
def test_resize_with_live_ndarray_buffer_is_refused(source):
    out = verdict(f"""
b = hp.alloc(1 << 20)
try:
    a = np.ndarray((1 << 17,), np.float64, buffer={source})
except TypeError:
    print("no-export"); sys.exit()
a[:] = 3.0
addr = b.address
r = refused(b.resize, 256 << 20)
assert r == "BufferError" and b.address == addr and len(b) == 1 << 20, r
a[:] = 4.0                              # still its own, mapped memory
print(float(a.sum()) == 4.0 * (1 << 17) and "refused")
""")
    assert out in ("refused", "no-export") and (source == "b" or out == "refused")


@pytest.mark.usefixtures("np")
@pytest.mark.parametrize("source", ["b", "b.buf"])
def test_no_stale_write_into_a_reused_block(source):
    # 64 MiB goes back to libhp's cache on free and the next alloc of the
    # same size reuses it: a stale array would write into the new block.
    out = verdict(f"""
b = hp.alloc(64 << 20)
try:
    a = np.ndarray((8 << 20,), np.float64, buffer={source})
except TypeError:
    print("no-export"); sys.exit()
try:
    b.close()
except BufferError:
    pass
b2 = hp.alloc(64 << 20)
a[:] = 7.0                              # must not reach b2
print("clean" if not any(ctypes.string_at(b2.address, 64 << 20)) else "CORRUPTED")
""")
    assert out in ("clean", "no-export") and (source == "b" or out == "clean")
