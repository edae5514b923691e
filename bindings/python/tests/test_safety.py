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


def with_exported_array(source, body, size=1 << 20):
    """Run body in a child where b = hp.alloc(size) and a is a float64
    ndarray over source (b itself or b.buf). A child whose numpy refuses to
    take the buffer at all prints "no-export": that is safe too."""
    return verdict(f"""
b = hp.alloc({size})
try:
    a = np.ndarray(({size} // 8,), np.float64, buffer={source})
except TypeError:
    print("no-export"); sys.exit()
""" + body)


def expect(out, source, good):
    # Only the hp.Block itself may decline to export; b.buf always exports.
    assert out in (good, "no-export") and (source == "b" or out == good), out


# While an ndarray holds the block's buffer, an operation that would unmap
# or move the memory is refused with BufferError and the array stays valid.
LIVE_BUFFER_REFUSES = {
    "close": """
a[:] = 2.0
r = refused(b.close)
assert r == "BufferError" and not b.closed, r
print(float(a.sum()) == 2.0 * len(a) and "refused")
del a
b.close()
""",
    "resize": """
a[:] = 3.0
addr = b.address
r = refused(b.resize, 256 << 20)
assert r == "BufferError" and b.address == addr and len(b) == 1 << 20, r
a[:] = 4.0                              # still its own, mapped memory
print(float(a.sum()) == 4.0 * len(a) and "refused")
""",
}


@pytest.mark.usefixtures("np")
@pytest.mark.parametrize("action", sorted(LIVE_BUFFER_REFUSES))
@pytest.mark.parametrize("source", ["b", "b.buf"])
def test_live_ndarray_buffer_is_refused(source, action):
    out = with_exported_array(source, LIVE_BUFFER_REFUSES[action])
    expect(out, source, "refused")


@pytest.mark.usefixtures("np")
@pytest.mark.parametrize("source", ["b", "b.buf"])
def test_no_stale_write_into_a_reused_block(source):
    # 64 MiB goes back to libhp's cache on free and the next alloc of the
    # same size reuses it: a stale array would write into the new block.
    out = with_exported_array(source, """
try:
    b.close()
except BufferError:
    pass
b2 = hp.alloc(64 << 20)
a[:] = 7.0                              # must not reach b2
print("clean" if not any(ctypes.string_at(b2.address, 64 << 20)) else "CORRUPTED")
""", size=64 << 20)
    expect(out, source, "clean")
