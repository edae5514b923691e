"""hp.backends(), hp.status(), hp.version and hp.version_info."""

import enum
import os
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from ._errors import check
from ._lib import SEARCHED, _pkg_config_libdir, ffi, lib, library_path, string

#: enum hp_backend_kind, names without the HP_KIND_ prefix.
_IntEnum: Any = enum.IntEnum   # built from the cdef at run time: opaque to mypy
BackendKind: Any = _IntEnum("BackendKind", {
    name[len("HP_KIND_"):]: value
    for name, value in sorted(ffi.typeof("enum hp_backend_kind").relements.items(),
                              key=lambda item: int(item[1]))
}, module=__name__)

_UNPOOLED = (1 << 64) - 1


@dataclass(frozen=True)
class BackendInfo:
    """One entry of libhp's backend list (struct hp_backend_info)."""

    name: str                     #: "" if a rejected plugin had no readable name
    available: bool               #: True if it can serve requests
    kind: Union[BackendKind, int]  #: BackendKind (int if unknown to this binding)
    path: str                     #: plugin file, or "builtin"
    reason: str                   #: why unavailable or rejected, else a summary
    page_sizes: Tuple[int, ...]   #: ascending, bytes
    pool_free: Tuple[Optional[int], ...]  #: free pool pages per size, None if unpooled
    description: str = ""         #: the plugin's own description ("" if none)


class VersionInfo(NamedTuple):
    major: int
    minor: int
    patch: int


def _version_info() -> VersionInfo:
    number = lib.hp_version()
    return VersionInfo(number // 10000, number // 100 % 100, number % 100)


#: Version of the loaded libhp, "major.minor.patch".
version = string(lib.hp_version_string())
#: The same as a (major, minor, patch) named tuple.
version_info = _version_info()


def _kind(value: int) -> Union[BackendKind, int]:
    try:
        return BackendKind(value)
    except ValueError:
        return value


def backends() -> List[BackendInfo]:
    """Every backend libhp found (BackendInfo list); pool figures are fresh."""
    result = []
    for index in range(check(lib.hp_backend_count())):
        info = ffi.new("struct hp_backend_info *")
        info.size = ffi.sizeof("struct hp_backend_info")
        check(lib.hp_backend_get(index, info))
        n = min(info.n_page_sizes, lib.HP_MAX_PAGE_SIZES)
        result.append(BackendInfo(
            name=string(info.name),
            available=bool(info.available),
            kind=_kind(info.kind),
            path=string(info.path),
            reason=string(info.reason),
            page_sizes=tuple(info.page_sizes[0:n]),
            pool_free=tuple(None if v == _UNPOOLED else v for v in info.pool_free[0:n]),
            description=string(info.description),
        ))
    return result


def _plugin_dir(found: List[BackendInfo]) -> Tuple[str, str]:
    """(directories searched for plugins, in order and ":"-separated: the
    entries of HP_BACKEND_PATH, then the built-ins' directory; how they were
    chosen)."""
    path = os.environ.get("HP_BACKEND_PATH")
    builtin = os.environ.get("HP_BACKEND_DIR")
    loaded = [os.path.dirname(b.path) for b in found
              if b.path.startswith("/") and not b.reason.startswith("rejected")]
    how = ("HP_BACKEND_PATH, then " if path else "") + \
        ("HP_BACKEND_DIR" if builtin else "the built-in default")
    dirs = (path.split(":") if path else []) + [builtin or (loaded[-1] if loaded else "")]
    searched = ":".join(d for d in dirs if d)
    if loaded:
        return searched, how
    if searched:
        return searched, f"{how}; no plugin loaded from it"
    lib_path, _ = _pkg_config_libdir()
    return "", f"{how}; no plugin loaded (pkg-config --variable=backenddir libhp " \
        f"names the installed directory{'' if lib_path else '; pkg-config does not know libhp'})"


def status() -> Dict[str, Any]:
    """A JSON-ready dict: versions, the library file and where it was looked
    for, the plugin directory, backends, HP_* settings, and warnings (for
    example: no huge-page backend is available)."""
    from . import __version__

    found = backends()
    huge_kinds = (BackendKind.HUGETLB, BackendKind.THP, BackendKind.MTHP)
    rows = []
    for b in found:
        row = asdict(b)
        row["kind"] = b.kind.name.lower() if isinstance(b.kind, BackendKind) else b.kind
        row["page_sizes"] = list(b.page_sizes)
        row["pool_free"] = list(b.pool_free)
        rows.append(row)
    huge = [b.name for b in found if b.available and b.kind in huge_kinds]
    plugin_dir, plugin_dir_source = _plugin_dir(found)
    warnings = []
    if not huge:
        why = "; ".join(f"{b.name}: {b.reason}" for b in found if b.kind in huge_kinds)
        warnings.append("no huge-page backend is available: every block gets base pages ("
                        + (why or f"no huge-page plugin loaded; {plugin_dir_source}") + ")")
    return {
        "version": version,
        "version_number": lib.hp_version(),
        "binding_version": __version__,
        "header_version": f"{lib.HP_VERSION_MAJOR}.{lib.HP_VERSION_MINOR}.{lib.HP_VERSION_PATCH}",
        "library": library_path(),
        "library_search": list(SEARCHED),
        "plugin_dir": plugin_dir,
        "plugin_dir_source": plugin_dir_source,
        "backends": rows,
        "available": [b.name for b in found if b.available],
        "huge_page_backends": huge,
        "warnings": warnings,
        "environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("HP_")},
    }


def reprobe() -> None:
    """Probe every backend again now (hp_reprobe): call it after changing
    kernel settings (nr_hugepages, THP enabled) to see them at once."""
    check(lib.hp_reprobe())
