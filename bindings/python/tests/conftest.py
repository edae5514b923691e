"""Shared fixtures. Run from the repository root:

    HP_LIBRARY=$PWD/build/lib/libhp.so.1 HP_BACKEND_PATH=$PWD/build/backends \
    PYTHONPATH=bindings/python /usr/bin/python3 -m pytest -q bindings/python/tests

HP_TEST_STRICT=1 (set by CI) turns every "tool missing" skip (numpy, a C
compiler, the repository headers, venv/pip) into a failure, so CI cannot pass
by skipping.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hp
from hp._lib import ffi, lib

STRICT = os.environ.get("HP_TEST_STRICT") == "1"
BINDING_DIR = Path(__file__).resolve().parent.parent      # bindings/python
REPO = BINDING_DIR.parent.parent


def need(condition, why):
    """Skip (fail under HP_TEST_STRICT=1) unless condition holds."""
    if not condition:
        if STRICT:
            pytest.fail(f"HP_TEST_STRICT=1: {why}")
        pytest.skip(why)


@pytest.fixture(scope="session")
def np():
    try:
        import numpy
    except ImportError:
        need(False, "numpy is not installed (apt install python3-numpy)")
    return numpy


@pytest.fixture(scope="session")
def cc():
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    need(compiler, "no C compiler (cc) to preprocess the headers")
    return compiler


@pytest.fixture(scope="session")
def include_dir():
    """The public headers: the source tree's, or $HP_INCLUDE_DIR (to try the
    drift check against a modified copy)."""
    inc = Path(os.environ.get("HP_INCLUDE_DIR") or REPO / "include")
    need((inc / "hp.h").is_file(), f"{inc}/hp.h not found: not run from the libhp source tree")
    return inc


def block_state(address):
    """libhp's view of a block start: "live", or the error name (freed)."""
    info = ffi.new("struct hp_block_info *")
    info.size = ffi.sizeof("struct hp_block_info")
    rc = lib.hp_info(ffi.cast("void *", address), info)
    return "live" if rc == lib.HP_OK else ffi.string(lib.hp_error_name(rc)).decode()


def mapped(address):
    """True if address lies in a mapping of this process (/proc/self/maps)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split(None, 1)[0].split("-"))
            if lo <= address < hi:
                return True
    return False


def run_python(code, **env):
    """Run code in a fresh interpreter (libhp reads HP_* once per process)."""
    full = dict(os.environ, PYTHONPATH=str(BINDING_DIR), **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def block():
    with hp.alloc(1 << 20, backend="fallback") as b:
        yield b
