"""One mapping from C error codes to exceptions."""

import pytest

import hp
from hp._lib import ffi, lib
from conftest import run_python

CODES = {name: value for name, value in ffi.typeof("enum hp_error").relements.items()
         if name != "HP_OK"}


def test_every_code_has_its_own_class():
    classes = {name: hp.error_class(code) for name, code in CODES.items()}
    assert all(c is not hp.HugePageError for c in classes.values()), classes
    assert len(set(classes.values())) == len(classes)
    assert all(issubclass(c, hp.HugePageError) for c in classes.values())


@pytest.mark.parametrize("name", sorted(CODES))
def test_error_from_code_carries_code_name_and_detail(name):
    code = CODES[name]
    err = hp.error_from_code(code, "the detail")
    assert type(err) is hp.error_class(code)
    assert err.code == code and err.name == name and err.detail == "the detail"
    text = ffi.string(lib.hp_strerror(code)).decode()
    assert str(err) == f"{text} ({name}): the detail"


def test_builtin_bases_where_they_fit():
    assert issubclass(hp.OutOfMemoryError, MemoryError)
    assert issubclass(hp.NoHugePagesError, MemoryError)
    for cls in (hp.InvalidArgumentError, hp.SizeError, hp.FlagsError, hp.ClosedError,
                hp.EnvironmentVariableError):
        assert issubclass(cls, ValueError)
    assert issubclass(hp.OutOfRangeError, IndexError)
    assert issubclass(hp.OSCallError, OSError)
    err = hp.error_from_code(lib.HP_EOS, "mmap failed: errno 12")
    assert isinstance(err, OSError) and err.detail == "mmap failed: errno 12"


def test_unknown_code_maps_to_base_class():
    err = hp.error_from_code(-999, "from the future")
    assert type(err) is hp.HugePageError
    assert err.code == -999 and err.name == "HP_UNKNOWN" and "from the future" in str(err)


def test_closed_error_has_no_code():
    assert hp.ClosedError("x").code is None


def test_bad_environment_raises_environment_variable_error():
    proc = run_python(
        "import hp\n"
        "try:\n"
        "    hp.alloc(4096)\n"
        "except hp.EnvironmentVariableError as e:\n"
        "    print(type(e).__name__, e.name, '|', e.detail)\n",
        HP_BACKENDS="Not A Name!")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("EnvironmentVariableError HP_EENV |"), proc.stdout
    assert "HP_BACKENDS" in proc.stdout and "Not A Name!" in proc.stdout


def test_no_huge_page_support_at_all_raises_no_huge_pages():
    """With an empty fake sysfs (HP_SYSFS_ROOT) no backend offers huge pages:
    require_huge must fail, and a plain alloc must still work from base pages."""
    proc = run_python(
        "import hp\n"
        "print(sorted(b.name for b in hp.backends() if b.available))\n"
        "with hp.alloc(1 << 21) as b:\n"
        "    print(b.info().backend)\n"
        "try:\n"
        "    hp.alloc(1 << 21, require_huge=True)\n"
        "except MemoryError as e:\n"
        "    print(type(e).__name__, '|', e.detail)\n",
        HP_SYSFS_ROOT="/nonexistent-hp-sysfs-root")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "['fallback']"
    assert lines[1] == "fallback"
    assert lines[2].startswith("NoHugePagesError | ") and "huge pages" in lines[2]


def test_unknown_exclude_name_is_an_error_like_unknown_backend():
    with pytest.raises(hp.NoBackendError, match='no loaded backend named "nope"'):
        hp.alloc(4096, backend="nope")
    for exclude in ("nope", ["fallback", "nope"], "fallback,nope"):
        with pytest.raises(hp.NoBackendError, match='exclude: no loaded backend named "nope"'):
            hp.alloc(4096, exclude=exclude)


def test_page_size_failure_names_the_size():
    with pytest.raises(hp.HugePageError) as err:
        hp.alloc(4096, page_size="1G", exclude="hugetlbfs")
    assert "page size 1G was requested for 4096 bytes" in str(err.value)
