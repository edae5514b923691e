"""Argument checks at the binding boundary, one wording for every function.

Each check names the parameter, shows what was passed and says what is
accepted. A wrong type is a TypeError: options that are switches take True or
False only (``"no"`` and ``None`` are not False, ``1`` is not True), and a
count takes an int, not a bool, float or str. A value out of range is an
hp.InvalidArgumentError (a ValueError), or the function's own error where C
has one (hp.SizeError for sizes). Nothing is converted or truncated silently:
an int that C would wrap (``2**64 + 5``) is refused, never passed on.
"""

import operator
from typing import Any

from ._errors import error_from_code
from ._lib import ffi, lib

#: Largest value of a uint64_t / size_t field.
U64_MAX = (1 << 64) - 1
SIZE_MAX = (1 << (8 * ffi.sizeof("size_t"))) - 1


def switch(value: Any, name: str) -> bool:
    """value if it is True or False, else TypeError naming name."""
    if isinstance(value, bool):
        return value
    raise TypeError(f"{name} must be True or False, not {value!r} ({type(value).__name__})")


def integer(value: Any, name: str) -> int:
    """value as an int (int or an object with __index__, never a bool)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not a bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__} "
                        f"({value!r})") from None


def bounded(value: Any, name: str, low: int, high: int, code: int = lib.HP_EINVAL) -> int:
    """integer(value) within low..high, else the error of code (a ValueError)
    naming name and the range."""
    number = integer(value, name)
    if not low <= number <= high:
        raise error_from_code(code, f"{name}={number} is out of range: expected an int "
                              f"from {low} to {high}")
    return number
