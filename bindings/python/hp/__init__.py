"""libhp for Python: huge pages made easy, as zero-copy buffers.

    import hp
    with hp.alloc(64 << 20) as block:        # 64 MiB from the best backend
        view = block.buf                     # zero-copy, writable memoryview
        view[:5] = b"hello"
        print(block.info().backend, len(block))
        view.release()                       # views must go before close

Loads libhp.so.1 (or $HP_LIBRARY) through cffi in ABI mode: no compiler is
needed. Errors are hp.HugePageError subclasses carrying libhp's detail text.
"""

__version__ = "1.4.0"

from typing import Any

from ._array import empty, zeros
from ._block import Block, BlockInfo, NoHugePagesWarning, alloc, block_nodes, info
from ._errors import (
    BackendError,
    ClosedError,
    DoubleFreeError,
    EnvironmentVariableError,
    FlagsError,
    ForeignPointerError,
    HugePageError,
    InteriorPointerError,
    InvalidArgumentError,
    NoBackendError,
    NoHugePagesError,
    NotSupportedError,
    OSCallError,
    OutOfMemoryError,
    OutOfRangeError,
    SizeError,
    error_class,
    error_from_code,
)
from ._introspect import (
    BackendInfo,
    BackendKind,
    VersionInfo,
    backends,
    reprobe,
    status,
    version,
    version_info,
)
from ._stack import (
    Stack,
    StackCacheStats,
    StackInfo,
    stack,
    stack_cache_configure,
    stack_cache_stats,
    stack_cache_trim,
)
from ._cache import CacheEntry, CacheStats, cache_configure, cache_stats, cache_trim
from ._lib import lib as _clib

#: Allocation flag bits as in BlockInfo.flags (hp/alloc.h).
F_REQUIRE_HUGE = _clib.HP_F_REQUIRE_HUGE
F_POPULATE = _clib.HP_F_POPULATE
F_COLLAPSE = _clib.HP_F_COLLAPSE
F_NOZERO = _clib.HP_F_NOZERO
F_NOPOOL = _clib.HP_F_NOPOOL

__all__ = [
    "alloc", "Block", "BlockInfo", "info", "block_nodes", "NoHugePagesWarning", "empty", "zeros",
    "numpy_allocator",
    "backends", "BackendInfo", "BackendKind", "reprobe", "status", "version", "version_info",
    "VersionInfo",
    "stack", "Stack", "StackInfo", "StackCacheStats", "stack_cache_configure",
    "stack_cache_stats", "stack_cache_trim",
    "cache_trim", "cache_stats", "cache_configure", "CacheStats", "CacheEntry",
    "F_REQUIRE_HUGE", "F_POPULATE", "F_COLLAPSE", "F_NOZERO", "F_NOPOOL",
    "HugePageError", "InvalidArgumentError", "OutOfMemoryError", "SizeError", "FlagsError",
    "ForeignPointerError", "InteriorPointerError", "DoubleFreeError", "NoHugePagesError",
    "NoBackendError", "BackendError", "EnvironmentVariableError", "NotSupportedError",
    "OutOfRangeError", "OSCallError", "ClosedError", "error_class", "error_from_code",
]


def __getattr__(name: str) -> Any:
    # hp.numpy and hp.numpy_allocator load numpy and the _hp_numpy extension
    # on first use, so that `import hp` needs neither.
    if name in ("numpy", "numpy_allocator"):
        import importlib

        module = importlib.import_module(".numpy", __name__)
        return module if name == "numpy" else module.allocator
    raise AttributeError(f"module 'hp' has no attribute {name!r}")
