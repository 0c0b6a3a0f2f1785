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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hcl_cli.errors import UsageError

EXPONENT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")
"""A number like ``1e-3``: YAML 1.2 reads it as a float, PyYAML (YAML 1.1) as a string; a params.yaml means the number."""


def option_name(name: str) -> str:
    """The command-line spelling of an option: ``tau_plus`` -> ``--tau-plus``."""
    return "--" + name.replace("_", "-")


def either(values: tuple[str, ...]) -> str:
    """``a, b or c``: the values of an option under which another is read, in a sentence."""
    return " or ".join(filter(None, [", ".join(values[:-1]), values[-1]]))


@dataclass(frozen=True)
class Option:
    """One option of a stage or a sampler.

    ``default`` fixes the type (bool, int, float or str). A *parameter* is a key of its stage's
    ``params.yaml`` group and a command-line option; a ``runtime`` option (a path, the device) is
    command-line only. ``parse`` turns a valid raw value into the value the code uses (e.g. a
    comma-separated list into a tuple of floats) and raises ``ValueError`` with a reason when the
    raw value cannot be parsed. ``modality`` names the one modality that reads the option
    (``image`` or ``graph``; None: both), so that a value set on the other one is refused, not ignored.
    ``read_when`` names the option whose value decides whether this one is read, and the values under which it
    is, ``("protocol", ("svm",))``: ``--help`` says so, the report lists an option only where the run read it
    (:meth:`~hcl_cli.config.base.StageConfig.read_params`), and a value set away from the default where it is not read is
    refused by ``hcl pretrain`` (:meth:`~hcl_cli.config.base.StageConfig.refuse_unread`), warned about by ``prepare`` and
    ``linear-eval`` (:meth:`~hcl_cli.config.base.StageConfig.unread_changes`).
    ``modality_defaults`` gives a modality its own default, ``(("graph", 200),)``: what a stage takes
    for a value given neither on the command line nor in the params file once it knows the data's
    modality (:meth:`~hcl_cli.config.base.StageConfig.for_modality`).
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
    modality_defaults: tuple[tuple[str, Any], ...] = ()
    read_when: tuple[str, tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        if self.type in (int, float) and not self.runtime and not (_finite(self.minimum) and _finite(self.maximum)):
            raise ValueError(f"option {self.name}: a number needs a finite declared minimum and maximum")

    def default_for(self, modality: str) -> Any:
        """The default on ``modality``'s data: its own (:attr:`modality_defaults`), else :attr:`default`."""
        return dict(self.modality_defaults).get(modality, self.default)

    @property
    def described_help(self) -> str:
        """The help, the values of another option under which it is read, and the range, as ``--help`` prints them."""
        return f"{self.help}{self.read_sentence}" + (f" Range {self.range}." if self.range else "")

    @property
    def read_sentence(self) -> str:
        """`` Only with --optimizer sgd or lars.``: the values of another option under which this one is read (:attr:`read_when`);
        "" for one read whatever the others say."""
        if self.read_when is None:
            return ""
        key, values = self.read_when
        return f" Only with {option_name(key)} {either(values)}."

    @property
    def shown_default(self) -> str | bool:
        """The default as ``--help`` shows it after the text: ``60; on graphs: 200`` where a modality has its own
        (:attr:`modality_defaults`), else True (the value itself)."""
        if not self.modality_defaults:
            return True
        shown_value = str(self.default).lower() if isinstance(self.default, bool) else self.default
        return f"{shown_value}" + "".join(f"; on {modality}s: {value}" for modality, value in self.modality_defaults)

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
    """``repr(value)`` for a message, a long one cut to ``limit`` characters (a 300-digit integer with its length).

    A list, tuple or mapping is written piece by piece and cut as soon as the limit is passed, so that a value
    of a billion items (a YAML alias bomb in params.yaml) costs what a short one does.
    """
    if not isinstance(value, (list, tuple, dict)):
        text = repr(value)
        return text if len(text) <= limit else f"{text[: limit - 12]}... ({len(text)} characters)"
    text = ""
    for piece in _repr_pieces(value):
        text += piece
        if len(text) > limit:
            return f"{text[: limit - 3]}..."
    return text


def _repr_pieces(value: Any) -> Iterator[str]:
    """``repr(value)`` in pieces, lists, tuples and mappings written lazily (a scalar's repr is one piece)."""
    if isinstance(value, dict):
        yield "{"
        for index, (key, item) in enumerate(value.items()):
            yield ", " if index else ""
            yield from _repr_pieces(key)
            yield ": "
            yield from _repr_pieces(item)
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "[" if isinstance(value, list) else "("
        for index, item in enumerate(value):
            yield ", " if index else ""
            yield from _repr_pieces(item)
        yield "]" if isinstance(value, list) else ("," if len(value) == 1 else "") + ")"
    else:
        yield repr(value)


YAML_BOOLEANS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
"""The booleans of YAML 1.2 (its core schema), as params.yaml and DVC read them: ``on``, ``yes`` and ``1`` are not among them."""


COMMAND_LINE_INTEGER = re.compile(r"[-+]?[0-9]+")
COMMAND_LINE_FLOAT = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?(inf|infinity|nan)", re.IGNORECASE)
"""Numbers as a command line spells them: ASCII digits, a sign, a point, an exponent (a float's ``inf`` and ``nan`` are
read, for its range check to refuse them by name)."""


def parse_number(label: str, text: str, kind: type) -> int | float:
    """A command-line number of type ``kind`` (int or float). Python's ``int()`` and ``float()`` also read ``1_0`` (10)
    and other scripts' digits; a params.yaml does not, so neither does the command line."""
    spelt = text.strip()
    if kind is int and COMMAND_LINE_INTEGER.fullmatch(spelt):
        try:
            return int(spelt)
        except ValueError:  # more digits than Python converts (4300)
            raise UsageError(
                f"{label} is a whole number of {len(spelt)} characters, more than any range holds (got {shown(text)})"
            ) from None
    if kind is float and COMMAND_LINE_FLOAT.fullmatch(spelt):
        return float(spelt)
    raise UsageError(f"{label} must be {'a whole number' if kind is int else 'a number'} (got {shown(text)})")


def parse_bool(label: str, text: str) -> bool:
    """A command-line boolean, spelt as params.yaml spells it (:data:`YAML_BOOLEANS`), so that ``--clip X`` and
    ``clip: X`` (and ``dvc exp run -S pretrain.clip=X``) take the same values."""
    if text.strip() in YAML_BOOLEANS:
        return YAML_BOOLEANS[text.strip()]
    raise UsageError(f"{label} must be true or false (got {shown(text)})")
