"""Loads libhp once (cffi ABI mode: no compiler needed) and keeps it loaded.

``lib`` is a module global on purpose: cffi unloads (dlclose) a library when
its lib object is collected, and a call through a collected lib crashes.
Every deferred ``hp_free`` (see ``_free``) holds a reference to ``lib`` too,
so the library outlives the last block even during interpreter shutdown.
"""

import os

from cffi import FFI

from ._cdef import CDEF

ffi = FFI()
ffi.cdef(CDEF)

#: What was passed to dlopen: $HP_LIBRARY, else the SONAME.
LIBRARY = os.environ.get("HP_LIBRARY") or "libhp.so.1"

try:
    lib = ffi.dlopen(LIBRARY)
except OSError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        f"hp: cannot load libhp from {LIBRARY!r} ({exc}). Install libhp "
        "(meson install, then ldconfig) or set HP_LIBRARY to the path of libhp.so.1."
    ) from exc

if lib.hp_version() // 10000 != lib.HP_VERSION_MAJOR:  # pragma: no cover
    raise ImportError(
        f"hp: {LIBRARY!r} is libhp {ffi.string(lib.hp_version_string()).decode()}, "
        f"but these bindings need major version {lib.HP_VERSION_MAJOR}"
    )


def _free(ptr, _lib=lib):
    """ffi.gc destructor of a block that was never closed explicitly."""
    _lib.hp_free(ptr)


def string(cdata):
    """A C string (or char array) as str; libhp strings are ASCII/UTF-8."""
    return ffi.string(cdata).decode("utf-8", "replace")


def library_path():
    """The file the dynamic linker actually loaded for LIBRARY, if found."""
    prefix = os.path.basename(LIBRARY).split(".so")[0] + ".so"
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith(prefix):
                    return fields[5].strip()
    except OSError:  # pragma: no cover - no /proc
        pass
    return LIBRARY
