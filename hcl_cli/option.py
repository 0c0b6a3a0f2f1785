"""The declaration type of every option: :class:`Option` (name, type, default, help, allowed values, range).

Every stage option and every sampler option is one :class:`Option`. The ``hcl`` subcommands'
command-line options, the groups of ``params.yaml`` (``hcl params``), validation, help text and
the README's tables are all derived from these declarations. Every number has a declared range
(a finite minimum and maximum): a value outside it, a subnormal temperature or a 300-digit batch
size, is a one-line usage error that gives the range. This module imports nothing heavy, so that
``hcl --help`` stays instant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hcl_cli.errors import UsageError

EXPONENT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
"""A number like ``1e-3``: YAML 1.2 reads it as a float, PyYAML (YAML 1.1) as a string; a params.yaml means the number."""


def option_name(name: str) -> str:
    """The command-line spelling of an option: ``tau_plus`` -> ``--tau-plus``."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Option:
    """One option of a stage or a sampler.

    ``default`` fixes the type (bool, int, float or str). A *parameter* is a key of its stage's
    ``params.yaml`` group and a command-line option; a ``runtime`` option (a path, the device) is
    command-line only. ``parse`` turns a valid raw value into the value the code uses (e.g. a
    comma-separated list into a tuple of floats) and raises ``ValueError`` with a reason when the
    raw value cannot be parsed. ``modality`` names the one modality that reads the option
    (``image`` or ``graph``; None: both), so that a value set on the other one is refused, not ignored.
    """

    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    runtime: bool = False
    parse: Callable[[Any], Any] | None = None
    modality: str | None = None

    def __post_init__(self) -> None:
        if self.type in (int, float) and not self.runtime and not (_finite(self.minimum) and _finite(self.maximum)):
            raise ValueError(f"option {self.name}: a number needs a finite declared minimum and maximum")

    @property
    def type(self) -> type:
        return type(self.default)

    @property
    def flag(self) -> str:
        return option_name(self.name)

    def check(self, value: Any, *, where: str | None = None) -> Any:
        """``value`` converted to this option's type, or a one-line :class:`UsageError` naming it.

        ``where`` names the source in messages (``params.yaml: pretrain.beta``); the default is the
        command-line flag. Integers, and strings like ``1e-3`` (:data:`EXPONENT_FLOAT`), are accepted for floats;
        nothing else is coerced.
        """
        label = where or self.flag
        value = self._typed(value, label)
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{label} must be one of {', '.join(self.choices)} (got {shown(value)})")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{label} must be a finite number (got {value}){self._range}")
        if self.minimum is not None and (value < self.minimum or (self.min_exclusive and value == self.minimum)):
            raise UsageError(f"{label} must be {'>' if self.min_exclusive else '>='} {self.minimum} (got {shown(value)}){self._range}")
        if self.maximum is not None and (value > self.maximum or (self.max_exclusive and value == self.maximum)):
            raise UsageError(f"{label} must be {'<' if self.max_exclusive else '<='} {self.maximum} (got {shown(value)}){self._range}")
        if self.parse is not None:
            try:
                self.parse(value)
            except ValueError as exc:
                raise UsageError(f"{label} {exc} (got {shown(value)})") from None
        return value

    @property
    def range(self) -> str:
        """The declared range in interval notation, ``[0.001, 1000.0]`` or ``(0.0, 1.0)``; empty for a non-number."""
        if self.minimum is None or self.maximum is None:
            return ""
        return f"{'(' if self.min_exclusive else '['}{self.minimum}, {self.maximum}{')' if self.max_exclusive else ']'}"

    @property
    def _range(self) -> str:
        return f"; its range is {self.range}" if self.range else ""

    def value(self, raw: Any) -> Any:
        """The value the code uses for a checked raw value (``parse``'s result, or the raw value)."""
        return self.parse(raw) if self.parse is not None else raw

    def _typed(self, value: Any, label: str) -> Any:
        kind = self.type
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise UsageError(f"{label} must be true or false (got {shown(value)})")
        if kind is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise UsageError(f"{label} must be a whole number (got {shown(value)})")
        if kind is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                try:
                    return float(value)
                except OverflowError:  # an integer of more than 308 digits
                    raise UsageError(f"{label} must be <= {self.maximum} (got {shown(value)}){self._range}") from None
            if isinstance(value, str) and EXPONENT_FLOAT.fullmatch(value):
                return self._typed(float(value), label)
            raise UsageError(f"{label} must be a number (got {shown(value)})")
        if isinstance(value, str) or self.parse is not None:
            return value  # a parsed option also takes its parsed form (e.g. a tuple of floats); parse checks it
        raise UsageError(f"{label} must be a string (got {shown(value)})")


def _finite(bound: float | None) -> bool:
    return bound is not None and math.isfinite(bound)


def shown(value: Any, limit: int = 40) -> str:
    """``repr(value)`` for a message, a long one (a 300-digit integer) cut to ``limit`` characters with its length."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}... ({len(text)} characters)"


def parse_bool(label: str, text: str) -> bool:
    """``true``/``yes``/``1`` or ``false``/``no``/``0`` (any case), as a command line spells a boolean."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise UsageError(f"{label} must be true or false (got {text!r})")
