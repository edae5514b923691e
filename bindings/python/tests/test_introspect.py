"""hp.backends(), hp.status(), hp.version, python3 -m hp."""

import ctypes.util
import json
import os
import re
import subprocess
import sys

import pytest

import hp
from conftest import BINDING_DIR, REPO, run_python

FOUR = {"fallback", "thp-madvise", "hugetlbfs", "anon-orders"}


def test_backends_lists_the_four_backends():
    found = hp.backends()
    assert all(isinstance(b, hp.BackendInfo) for b in found)
    by_name = {b.name: b for b in found}
    assert FOUR <= set(by_name), f"HP_BACKEND_DIR set? found {sorted(by_name)}"
    fallback = by_name["fallback"]
    assert fallback.available and fallback.kind == hp.BackendKind.BASE
    assert fallback.page_sizes == (4096,) and fallback.pool_free == (None,)
    assert fallback.description and all(" " <= c <= "~" for c in fallback.description)
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


def test_status_names_library_search_and_plugin_dir():
    st = hp.status()
    assert os.path.isfile(st["library"]) and os.path.realpath(st["library"]) == st["library"]
    assert st["library_search"] and all(isinstance(x, str) for x in st["library_search"])
    if os.environ.get("HP_LIBRARY"):
        assert st["library_search"] == [f"HP_LIBRARY={os.environ['HP_LIBRARY']}"]
    plugins = [b.path for b in hp.backends() if b.path.startswith("/")]
    if plugins:
        assert st["plugin_dir"] == os.path.dirname(plugins[0])


def _m_hp(**env):
    full = {k: v for k, v in os.environ.items() if k not in ("HP_LIBRARY", "LD_LIBRARY_PATH")}
    full["PYTHONPATH"] = str(BINDING_DIR)
    full.update(env)
    return subprocess.run([sys.executable, "-m", "hp"], capture_output=True, text=True, env=full)


@pytest.mark.parametrize("env", [
    {"HP_LIBRARY": "/nonexistent/libhp.so.1"},
    {"PKG_CONFIG_PATH": "/nonexistent", "PKG_CONFIG_LIBDIR": "/nonexistent"},
])
def test_python_m_hp_without_libhp_prints_one_line(env):
    if "HP_LIBRARY" not in env and ctypes.util.find_library("hp"):
        pytest.skip("a libhp is installed on the loader path")
    proc = _m_hp(**env)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert "cannot load libhp" in proc.stderr
    if "HP_LIBRARY" in env:
        assert "HP_LIBRARY=/nonexistent/libhp.so.1" in proc.stderr
    else:       # says where it looked
        assert "loader path" in proc.stderr and "pkg-config" in proc.stderr


def test_loader_path_is_tried_without_hp_library():
    libdir = os.path.dirname(hp.status()["library"])
    proc = _m_hp(LD_LIBRARY_PATH=libdir)
    assert proc.returncode == 0, proc.stderr
    assert "libhp.so.1 on the loader path" in proc.stdout


def test_python_m_hp_warns_without_huge_page_backends(tmp_path):
    proc = _m_hp(HP_LIBRARY=hp.status()["library"], HP_BACKEND_PATH=str(tmp_path),
                 HP_SYSFS_ROOT="/nonexistent-hp-sysfs-root")
    assert proc.returncode == 0, proc.stderr
    assert "warning: no huge-page backend is available" in proc.stderr
    assert f"plugins from (none)" in proc.stdout or str(tmp_path) in proc.stdout


def test_python_m_hp_nameless_row_shows_dash(tmp_path):
    # tmp_path is under /tmp, which anybody may write: the directory is
    # refused before any name is read, and its row says "-" (as hpctl
    # status does), never "?", which reads as a garbled name.
    proc = _m_hp(HP_LIBRARY=hp.status()["library"], HP_BACKEND_PATH=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in proc.stdout.splitlines() if "untrusted backend directory" in r]
    assert rows and all(r.split()[0] == "-" for r in rows), proc.stdout


def test_large_alloc_without_huge_page_backends_warns_once(tmp_path):
    proc = run_python(
        "import warnings, hp\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(3):\n"
        "        hp.alloc(64 << 20).close()\n"
        "print(len(seen), seen[0].category.__name__ if seen else '-')\n"
        "print(seen[0].message if seen else '')\n",
        HP_BACKEND_PATH=str(tmp_path), HP_SYSFS_ROOT="/nonexistent-hp-sysfs-root")
    assert proc.returncode == 0, proc.stderr
    count, category = proc.stdout.split("\n", 1)[0].split()
    assert (count, category) == ("1", "NoHugePagesWarning")
    assert "no huge-page backend is available" in proc.stdout


def _installed_copy(tmp_path, libdir):
    """A copy of the package as `meson install` lays it out: hp/ with
    _hp_installed.py made from bindings/python/hp-installed.py.in."""
    import shutil
    site = tmp_path / "site"
    shutil.copytree(BINDING_DIR / "hp", site / "hp",
                    ignore=shutil.ignore_patterns("__pycache__", "*.c"))
    template = (BINDING_DIR / "hp-installed.py.in").read_text()
    assert "@LIBDIR@" in template
    (site / "hp" / "_hp_installed.py").write_text(template.replace("@LIBDIR@", libdir))
    return site


def test_source_tree_copy_has_no_installed_libdir():
    from hp._lib import installed_libdir
    assert not (BINDING_DIR / "hp" / "_hp_installed.py").exists()
    assert installed_libdir() is None


def test_installed_copy_loads_the_libhp_of_its_install(tmp_path):
    # Neither HP_LIBRARY, nor the loader path, nor pkg-config point at this
    # libhp: only the libdir recorded at install time does.
    libdir = os.path.dirname(hp.status()["library"])
    site = _installed_copy(tmp_path, libdir)
    proc = _m_hp(PYTHONPATH=str(site), PKG_CONFIG_PATH="/nonexistent",
                 PKG_CONFIG_LIBDIR="/nonexistent")
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.split("\n", 1)[0]
    assert f"from {os.path.realpath(os.path.join(libdir, 'libhp.so.1'))}" in first, first
    assert f"the installed libdir: {libdir}/libhp.so.1" in first, first


def test_installed_copy_with_its_libdir_gone_says_so_and_goes_on(tmp_path):
    libdir = os.path.dirname(hp.status()["library"])
    site = _installed_copy(tmp_path, "/nonexistent-hp-libdir")
    proc = _m_hp(PYTHONPATH=str(site), LD_LIBRARY_PATH=libdir)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.split("\n", 1)[0]
    assert "the installed libdir: /nonexistent-hp-libdir/libhp.so.1 (not loadable)" in first
    assert "libhp.so.1 on the loader path" in first, first
