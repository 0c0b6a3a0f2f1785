"""An option, declared once: its name, type, default, help, allowed values and range.

Every stage option and every sampler option is one :class:`Option`. The ``hcl`` subcommands'
command-line options, the groups of ``params.yaml`` (``hcl params``), validation, help text and
the README's tables are all derived from these declarations. This module imports nothing heavy,
so that ``hcl --help`` stays instant.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hcl_cli.errors import UsageError

SEED_LIMIT = 2**32 - 1
"""The largest seed NumPy accepts (torch takes 64 bits, NumPy's legacy seeding 32)."""


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
    raw value cannot be parsed.
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

    @property
    def type(self) -> type:
        return type(self.default)

    @property
    def flag(self) -> str:
        return option_name(self.name)

    def check(self, value: Any, *, where: str | None = None) -> Any:
        """``value`` converted to this option's type, or a one-line :class:`UsageError` naming it.

        ``where`` names the source in messages (``params.yaml: pretrain.beta``); the default is the
        command-line flag. Integers are accepted for floats; nothing else is coerced.
        """
        label = where or self.flag
        value = self._typed(value, label)
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{label} must be one of {', '.join(self.choices)} (got {value!r})")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{label} must be a finite number (got {value})")
        if self.minimum is not None and (value < self.minimum or (self.min_exclusive and value == self.minimum)):
            raise UsageError(f"{label} must be {'>' if self.min_exclusive else '>='} {self.minimum} (got {value})")
        if self.maximum is not None and (value > self.maximum or (self.max_exclusive and value == self.maximum)):
            raise UsageError(f"{label} must be {'<' if self.max_exclusive else '<='} {self.maximum} (got {value})")
        if self.parse is not None:
            try:
                self.parse(value)
            except ValueError as exc:
                raise UsageError(f"{label} {exc} (got {value!r})") from None
        return value

    def value(self, raw: Any) -> Any:
        """The value the code uses for a checked raw value (``parse``'s result, or the raw value)."""
        return self.parse(raw) if self.parse is not None else raw

    def _typed(self, value: Any, label: str) -> Any:
        kind = self.type
        if kind is bool:
            if isinstance(value, bool):
                return value
            raise UsageError(f"{label} must be true or false (got {value!r})")
        if kind is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise UsageError(f"{label} must be a whole number (got {value!r})")
        if kind is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            raise UsageError(f"{label} must be a number (got {value!r})")
        if isinstance(value, str) or self.parse is not None:
            return value  # a parsed option also takes its parsed form (e.g. a tuple of floats); parse checks it
        raise UsageError(f"{label} must be a string (got {value!r})")


def parse_bool(label: str, text: str) -> bool:
    """``true``/``yes``/``1`` or ``false``/``no``/``0`` (any case), as a command line spells a boolean."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise UsageError(f"{label} must be true or false (got {text!r})")
