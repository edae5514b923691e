"""The README's install steps, verbatim, offline, into a fresh venv.

Runs when HP_TEST_PIP_INSTALL=1 (CI sets it): it takes a few seconds and
needs the apt packages the README names. The shell block under "## Install"
that creates the venv is run as written, with bash -e, in a scratch
directory holding a copy of the binding (so pip's build/ and *.egg-info
never land in the source tree) and a link to the real build/. The apt line
is not run (root, network); instead every package it names must be in
tools/deps/build.txt or test.txt (what tools/deps/install.sh installs) and
installed.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import BINDING_DIR, REPO, need

pytestmark = pytest.mark.skipif(os.environ.get("HP_TEST_PIP_INSTALL") != "1",
                                reason="set HP_TEST_PIP_INSTALL=1 to run the pip install check")


def install_blocks():
    text = (BINDING_DIR / "README.md").read_text()
    section = text.split("## Install", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def run(*cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_readme_apt_packages_are_in_ci_deps():
    apt, _ = install_blocks()
    packages = apt.split("install -y", 1)[1].split()
    listed = subprocess.run([str(REPO / "tools/deps/install.sh"), "--list", "test"],
                            capture_output=True, text=True, check=True).stdout.split()
    for package in packages:
        assert package in listed, f"{package} is not in tools/deps/build.txt or test.txt"
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                                capture_output=True, text=True).stdout
        need("ok installed" in status, f"{package} is not installed (apt-get install {package})")


def test_readme_install_steps_verbatim(tmp_path):
    _, steps = install_blocks()
    assert "/usr/bin/python3 -m venv" in steps and "pip install" in steps
    need((REPO / "build/lib/libhp.so.1").exists(), "build/lib/libhp.so.1 not built")
    (tmp_path / "bindings").mkdir()
    shutil.copytree(BINDING_DIR, tmp_path / "bindings/python", ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    (tmp_path / "build").symlink_to(REPO / "build")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HP_LIBRARY", "VIRTUAL_ENV", "PYTHONHOME")}
    out = run("bash", "-e", "-c", steps, cwd=tmp_path, env=env)
    import hp
    assert f"libhp {hp.version} from " in out and "/build/lib/libhp.so" in out, out
    python = tmp_path / "venv/bin/python"
    env["HP_LIBRARY"] = str(REPO / "build/lib/libhp.so.1")
    out = run(python, "-c",
              "import hp, numpy\n"
              "print(hp.__file__)\n"
              "a = hp.zeros(1 << 20, numpy.uint8); a[:] = 1\n"
              "print(int(a.sum()))\n",
              env=env, cwd=tmp_path)
    path, total = out.split()
    assert path.startswith(str(tmp_path / "venv")) and total == str(1 << 20)
    assert "libhp" in run(python, "-m", "pip", "show", "libhp")
