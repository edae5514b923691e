"""hp.backends(), hp.status(), hp.version, python3 -m hp."""

import json
import os
import re
import subprocess
import sys

import hp
from conftest import BINDING_DIR, REPO

FOUR = {"fallback", "thp-madvise", "hugetlbfs", "anon-orders"}


def test_backends_lists_the_four_backends():
    found = hp.backends()
    assert all(isinstance(b, hp.BackendInfo) for b in found)
    by_name = {b.name: b for b in found}
    assert FOUR <= set(by_name), f"HP_BACKEND_PATH set? found {sorted(by_name)}"
    fallback = by_name["fallback"]
    assert fallback.available and fallback.kind == hp.BackendKind.BASE
    assert fallback.page_sizes == (4096,) and fallback.pool_free == (None,)
    assert by_name["hugetlbfs"].kind == hp.BackendKind.HUGETLB
    assert by_name["thp-madvise"].kind == hp.BackendKind.THP
    assert by_name["anon-orders"].kind == hp.BackendKind.MTHP
    for b in found:
        assert b.reason
        assert list(b.page_sizes) == sorted(b.page_sizes)
        assert len(b.pool_free) == len(b.page_sizes)
        if b.available:
            assert b.page_sizes


def test_backend_kind_mirrors_the_c_enum():
    assert [k.name for k in hp.BackendKind] == ["OTHER", "HUGETLB", "THP", "MTHP", "BASE"]
    assert int(hp.BackendKind.BASE) == 4


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", hp.version)
    assert hp.version == "%d.%d.%d" % hp.version_info
    assert hp.version_info.major == 1


def test_binding_version_matches_meson_project():
    meson = (REPO / "meson.build")
    if meson.is_file():
        declared = re.search(r"version:\s*'([^']+)'", meson.read_text()).group(1)
        assert hp.__version__ == declared
    pyproject = (BINDING_DIR / "pyproject.toml").read_text()
    assert f'version = "{hp.__version__}"' in pyproject


def test_status_is_a_json_ready_dict():
    st = hp.status()
    json.dumps(st)
    assert st["version"] == hp.version
    assert st["binding_version"] == hp.__version__
    assert st["library"].split("/")[-1].startswith("libhp.so")
    assert "fallback" in st["available"]
    assert {row["name"] for row in st["backends"]} >= FOUR
    assert all(k.startswith("HP_") for k in st["environment"])
    assert set(st["huge_page_backends"]) <= set(st["available"])


def test_reprobe():
    hp.reprobe()
    assert any(b.name == "fallback" and b.available for b in hp.backends())


def test_python_m_hp_prints_status():
    proc = subprocess.run([sys.executable, "-m", "hp"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(BINDING_DIR)))
    assert proc.returncode == 0, proc.stderr
    assert f"libhp {hp.version}" in proc.stdout
    assert re.search(r"^fallback\s+base\s+yes\s+4K", proc.stdout, re.M), proc.stdout


def test_python_m_hp_json():
    proc = subprocess.run([sys.executable, "-m", "hp", "--json"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(BINDING_DIR)))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["version"] == hp.version
