"""libhp error codes as exceptions: the one place codes become exceptions.

Every exception derives from HugePageError and carries ``code`` (the C value,
``None`` for errors found in Python), ``name`` ("HP_ENOMEM"), ``detail`` (the
thread-local detail text libhp set) and a message that includes the detail.
Where a builtin fits, the class also derives from it, so generic handlers
work: ``except MemoryError`` catches HP_ENOMEM and HP_ENOHUGE.
"""

from typing import Optional, Type

from ._lib import lib, string


class HugePageError(Exception):
    """Base class of every libhp error."""

    code: Optional[int] = None
    name: str = "HP_UNKNOWN"

    def __init__(self, message: str = "", *, code: Optional[int] = None,
                 detail: str = "") -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
            self.name = string(lib.hp_error_name(code))
        self.detail = detail


class InvalidArgumentError(HugePageError, ValueError):
    """HP_EINVAL: an argument is malformed (bad backend name, bad list)."""


class OutOfMemoryError(HugePageError, MemoryError):
    """HP_ENOMEM: no memory (or address space) for the request."""


class SizeError(HugePageError, ValueError):
    """HP_ESIZE: the size is zero or too large."""


class FlagsError(HugePageError, ValueError):
    """HP_EFLAGS: unknown or conflicting flags, or a bad page size."""


class ForeignPointerError(HugePageError):
    """HP_EFOREIGN: the pointer was not allocated by libhp."""


class InteriorPointerError(HugePageError):
    """HP_EINTERIOR: the pointer is inside a block, not at its start."""


class DoubleFreeError(HugePageError):
    """HP_EDOUBLEFREE: the block was already freed."""


class NoHugePagesError(HugePageError, MemoryError):
    """HP_ENOHUGE: huge pages were required but cannot be provided."""


class NoBackendError(HugePageError):
    """HP_ENOBACKEND: no such backend, or it is unavailable."""


class BackendError(HugePageError):
    """HP_EBACKEND: a backend failed or returned an invalid result."""


class EnvironmentVariableError(HugePageError, ValueError):
    """HP_EENV: an HP_* environment variable has an invalid value."""


class NotSupportedError(HugePageError):
    """HP_ENOTSUP: the operation is not supported."""


class OutOfRangeError(HugePageError, IndexError, ValueError):
    """HP_ERANGE: an index or value is out of range (an IndexError for an
    index, a ValueError for a setting: it is both)."""


class OSCallError(HugePageError, OSError):
    """HP_EOS: an operating system call failed."""


class ClosedError(HugePageError, ValueError):
    """The block was closed (freed); found in Python, so ``code`` is None."""


#: C code -> exception class. tests/test_errors.py checks that every member
#: of enum hp_error except HP_OK has an entry.
_BY_CODE = {
    lib.HP_EINVAL: InvalidArgumentError,
    lib.HP_ENOMEM: OutOfMemoryError,
    lib.HP_ESIZE: SizeError,
    lib.HP_EFLAGS: FlagsError,
    lib.HP_EFOREIGN: ForeignPointerError,
    lib.HP_EINTERIOR: InteriorPointerError,
    lib.HP_EDOUBLEFREE: DoubleFreeError,
    lib.HP_ENOHUGE: NoHugePagesError,
    lib.HP_ENOBACKEND: NoBackendError,
    lib.HP_EBACKEND: BackendError,
    lib.HP_EENV: EnvironmentVariableError,
    lib.HP_ENOTSUP: NotSupportedError,
    lib.HP_ERANGE: OutOfRangeError,
    lib.HP_EOS: OSCallError,
}


def error_class(code: int) -> Type[HugePageError]:
    """The exception class for a C error code (HugePageError if unknown)."""
    return _BY_CODE.get(code, HugePageError)


def error_from_code(code: int, detail: str = "") -> HugePageError:
    """The exception for a C error code, with libhp's texts in the message.

    The message reads "<description> (<HP_NAME>): <detail>". Also used for
    argument errors found in Python before calling C, with the code C would
    have given.
    """
    text = string(lib.hp_strerror(code))
    name = string(lib.hp_error_name(code))
    message = f"{text} ({name}): {detail}" if detail else f"{text} ({name})"
    return error_class(code)(message, code=code, detail=detail)


def last_error() -> HugePageError:
    """The exception for the last failing libhp call on this thread.

    Call it right after the failing call: the detail text is only valid until
    the next libhp call on this thread.
    """
    detail = string(lib.hp_last_error_detail())
    code = lib.hp_last_error()
    if code == lib.HP_OK:  # pragma: no cover - a failing call always sets a code
        return HugePageError(f"libhp call failed without an error code: {detail}", detail=detail)
    return error_from_code(code, detail)


def check(rc: int) -> int:
    """Raise for a negative int32_t return code, else return it."""
    if rc < 0:
        raise error_from_code(rc, string(lib.hp_last_error_detail()))
    return rc
