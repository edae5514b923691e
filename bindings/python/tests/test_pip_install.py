"""`pip install` of bindings/python, offline, into a fresh venv.

Runs when HP_TEST_PIP_INSTALL=1 (CI sets it): it takes a few seconds and
needs python3-venv and python3-wheel-whl. Builds from a copy so that pip's
in-tree build/ and *.egg-info never land in the source tree.
"""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import BINDING_DIR, need

pytestmark = pytest.mark.skipif(os.environ.get("HP_TEST_PIP_INSTALL") != "1",
                                reason="set HP_TEST_PIP_INSTALL=1 to run the pip install check")


def run(*cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_pip_install_offline_into_venv(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(BINDING_DIR, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    venv = tmp_path / "venv"
    proc = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True)
    need(proc.returncode == 0, f"python3 -m venv failed (apt install python3-venv): {proc.stderr}")
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--no-build-isolation", "--no-index", str(src))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = run(python, "-c",
              "import hp, numpy\n"
              "print(hp.__file__)\n"
              "with hp.alloc(1 << 20) as b:\n"
              "    a = numpy.frombuffer(b.buf, dtype=numpy.uint8); a[:] = 1\n"
              "    print(int(a.sum())); del a\n",
              env=env, cwd=tmp_path)
    path, total = out.split()
    assert path.startswith(str(venv)) and total == str(1 << 20)
    assert "libhp" in run(python, "-m", "pip", "show", "libhp")
    run(python, "-m", "hp", env=env, cwd=tmp_path)
