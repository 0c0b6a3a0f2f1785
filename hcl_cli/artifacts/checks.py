"""Checks of the values read from an artifact, and the one-line form of a library's error about it."""

from __future__ import annotations

import math
from typing import Any


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_integer(value: Any) -> bool:
    """Whether a JSON value is an integer: ``true`` is not 1 in any artifact field (Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """Whether a JSON value is a finite number (an int or a float, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
