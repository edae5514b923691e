"""Finds and loads libhp once (cffi ABI mode: no compiler needed).

Where it looks, in this order, stopping at the first that loads:

1. ``$HP_LIBRARY``, if set: that file and nothing else (an error if it does
   not load, so a typo never silently picks another copy);
2. in a copy of the package that ``meson install`` installed: ``libhp.so.1``
   in the libdir of that install, which meson wrote into
   ``hp/_hp_installed.py`` (so the package finds its own libhp under any
   prefix, whatever the loader path says);
3. ``libhp.so.1`` through the dynamic loader (LD_LIBRARY_PATH, the ldconfig
   cache, the default directories);
4. ``libhp.so.1`` in ``pkg-config --variable=libdir libhp`` (a ``meson
   install`` to a prefix the loader does not search, with PKG_CONFIG_PATH
   pointing at it).

``LIBRARY`` is what was loaded, ``SEARCHED`` what was tried (both shown by
``hp.status()`` and ``python3 -m hp``). If nothing loads, importing hp raises
ImportError with one line saying where it looked.

``lib`` is a module global on purpose: cffi unloads (dlclose) a library when
its lib object is collected, and a call through a collected lib crashes.
Every deferred ``hp_free`` (see ``_free``) holds a reference to ``lib`` too,
so the library outlives the last block even during interpreter shutdown.
"""

import importlib
import os
import shutil
import subprocess
from typing import Any, List, Optional, Tuple

from cffi import FFI

from ._cdef import CDEF

#: Typed as Any: cdata objects are dynamic (struct fields, functions).
ffi: Any = FFI()
ffi.cdef(CDEF)

SONAME = "libhp.so.1"


def _pkg_config_libdir() -> Tuple[Optional[str], str]:
    exe = shutil.which("pkg-config")
    if not exe:
        return None, "pkg-config not installed"
    try:
        proc = subprocess.run([exe, "--variable=libdir", "libhp"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:  # pragma: no cover
        return None, f"pkg-config failed: {exc}"
    libdir = proc.stdout.strip()
    if proc.returncode != 0 or not libdir:
        return None, "pkg-config does not know libhp"
    return os.path.join(libdir, SONAME), ""


def installed_libdir() -> Optional[str]:
    """The libdir recorded by ``meson install`` (hp/_hp_installed.py), or
    None in a copy of the package that meson did not install."""
    try:
        mod = importlib.import_module("._hp_installed", __package__)
    except ImportError:
        return None
    return str(mod.LIBDIR)


def _load() -> Tuple[Any, str, List[str]]:
    searched: List[str] = []
    explicit = os.environ.get("HP_LIBRARY")
    if explicit:
        try:
            return ffi.dlopen(explicit), explicit, [f"HP_LIBRARY={explicit}"]
        except OSError as exc:
            why = str(exc).split("  Additionally,")[0]   # cffi's ctypes hint: noise here
            raise ImportError(f"hp: cannot load libhp from HP_LIBRARY={explicit}: {why}",
                              name="hp") from None
    searched.append("HP_LIBRARY (unset)")
    libdir = installed_libdir()
    if libdir is not None:
        mine = os.path.join(libdir, SONAME)
        try:
            return ffi.dlopen(mine), mine, searched + [f"the installed libdir: {mine}"]
        except OSError:
            searched.append(f"the installed libdir: {mine} (not loadable)")
    try:
        return ffi.dlopen(SONAME), SONAME, searched + [f"{SONAME} on the loader path"]
    except OSError:
        searched.append(f"{SONAME} on the loader path (not found)")
    path, why = _pkg_config_libdir()
    if path is None:
        searched.append(f"pkg-config libdir ({why})")
    else:
        try:
            return ffi.dlopen(path), path, searched + [f"pkg-config libdir: {path}"]
        except OSError:
            searched.append(f"pkg-config libdir: {path} (not loadable)")
    # name="hp": `python3 -m hp` then prints this as one line, no traceback.
    raise ImportError("hp: cannot load libhp; looked at " + ", ".join(searched) +
                      ". Install libhp (meson install, then ldconfig) or set HP_LIBRARY "
                      f"to the path of {SONAME}", name="hp")


def _check_symbols(loaded: Any, where: str) -> None:
    """ImportError (one line, like _load's) unless every function the
    bindings declare resolves in the loaded file: a file that is not libhp,
    or a libhp older than the bindings, is refused here rather than failing
    with AttributeError at its first call."""
    missing = []
    for name in dir(loaded):
        try:
            getattr(loaded, name)
        except AttributeError:
            missing.append(name)
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more"
                                          if len(missing) > 4 else "")
        raise ImportError(f"hp: {where} is not a libhp these bindings can use: it lacks "
                          f"{shown}", name="hp")


lib: Any
LIBRARY: str
SEARCHED: List[str]
lib, LIBRARY, SEARCHED = _load()
_check_symbols(lib, SEARCHED[-1])

if lib.hp_version() // 10000 != lib.HP_VERSION_MAJOR:  # pragma: no cover
    raise ImportError(
        f"hp: {LIBRARY!r} is libhp {ffi.string(lib.hp_version_string()).decode()}, "
        f"but these bindings need major version {lib.HP_VERSION_MAJOR}", name="hp")


def _free(ptr: Any, _lib: Any = lib) -> None:
    """ffi.gc destructor of a block that was never closed explicitly."""
    _lib.hp_free(ptr)


def string(cdata: Any) -> str:
    """A C string (or char array) as str; libhp strings are ASCII/UTF-8."""
    return str(ffi.string(cdata).decode("utf-8", "replace"))


def library_path() -> str:
    """The file the dynamic linker actually loaded for LIBRARY: the mapping
    in /proc/self/maps that holds libhp's hp_version function."""
    address = int(ffi.cast("uintptr_t", ffi.addressof(lib, "hp_version")))
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                if lo <= address < hi and len(fields) == 6:
                    return fields[5].strip()
    except OSError:  # pragma: no cover - no /proc
        pass
    return LIBRARY
