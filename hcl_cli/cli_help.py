"""How ``hcl`` prints its help: plain text that fits the terminal, and each declared option as a Typer parameter.

Every value a flag takes is named by one placeholder rule (:func:`placeholder`): a word in capitals (``FILE``, ``NAME``,
``INT``, ``FLOAT``, ``TEXT``) or the few values it takes (``true|false``, ``batch|moco``), whatever Typer's release
would print (recent ones print ``<str>``). ``hcl --help`` gives each command the whole first sentence of its help.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import typer.core

from hcl_cli.config.base import DATA_DEFAULT_TEXT, PREPARED
from hcl_cli.option import Option

FLAG_COLUMN = 24
"""The widest first column of a help listing (a flag with its value, a command); a longer one puts its text on the next line."""
CHOICES_WIDTH = 24
"""The longest ``a|b|c`` list of values a placeholder spells out; more is ``NAME`` (the help text lists them)."""
TYPE_PLACEHOLDERS: dict[Any, str] = {int: "INT", float: "FLOAT"}
"""The placeholder of a value by its type (anything else: ``TEXT``); a declared number's too, which the command reads as
text (:func:`~hcl_cli.option.parse_number`)."""
SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")
"""Where a help text's first sentence ends: a full stop, then a capital (``HCL Fig. 3`` and ``et al. 2020`` go on)."""


def write_definitions(formatter: Any, rows: Sequence[tuple[str, str]]) -> None:
    """click's definition list (``HelpFormatter.write_dl``: a term, its text wrapped beside it) without splitting a word at
    its hyphens, so that a flag named in a text (``--gin-hidden``) stays whole."""
    if not rows:
        return
    column = min(max(len(term) for term, _ in rows), FLAG_COLUMN) + 2
    margin = " " * formatter.current_indent
    wrapper = textwrap.TextWrapper(width=max(formatter.width - formatter.current_indent - column, 20), break_on_hyphens=False)
    for term, text in rows:
        lines = wrapper.wrap(text)
        if lines and len(term) + 2 <= column:
            formatter.write(f"{margin}{term.ljust(column)}{lines.pop(0)}\n")
        else:
            formatter.write(f"{margin}{term}\n")
        formatter.write("".join(f"{margin}{' ' * column}{line}\n" for line in lines))


def placeholder(param: Any) -> str:
    """The word ``--help`` shows for the value of ``param`` (a click option or argument): its metavar, else its type's
    (the annotation recent Typer releases keep, else click's type)."""
    descriptor = getattr(param, "type_descriptor", None)
    kind = descriptor.annotation if descriptor is not None else {"integer": int, "float": float}.get(param.type.name)
    return param.metavar or TYPE_PLACEHOLDERS.get(kind, "TEXT")


def help_term(param: Any) -> str:
    """``param``'s first column: its flags (``--estimate / --no-estimate``) and the placeholder of its value, or an
    argument's placeholder."""
    if param.param_type_name == "argument":
        return placeholder(param)
    flags = ", ".join(param.opts) + (" / " + ", ".join(param.secondary_opts) if param.secondary_opts else "")
    return flags if param.is_flag else f"{flags} {placeholder(param)}"


def write_parameters(command: Any, ctx: Any, formatter: Any) -> None:
    """``command``'s arguments and options under the headings of Typer's panels (Parameters, Runtime options, Options)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None:
            default_panel = "Arguments" if param.param_type_name == "argument" else "Options"
            sections.setdefault(getattr(param, "rich_help_panel", None) or default_panel, []).append((help_term(param), record[1]))
    for heading, rows in sections.items():
        with formatter.section(heading):
            write_definitions(formatter, rows)


def first_sentence(text: str) -> str:
    """The first sentence of a help text (:data:`SENTENCE_END`), on one line."""
    return SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]


class HelpCommand(typer.core.TyperCommand):
    """A command whose ``--help`` is plain text that fits the terminal (at most 80 columns; Typer's Rich layout left a
    column of 26 characters for the texts there): the options by panel, each text wrapped beside its flag."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        write_parameters(self, ctx, formatter)


class HelpGroup(typer.core.TyperGroup):
    """``hcl --help``: plain text like :class:`HelpCommand`'s, each command with the whole first sentence of its help."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        write_parameters(self, ctx, formatter)
        commands = [(name, self.commands[name]) for name in self.list_commands(ctx) if not self.commands[name].hidden]
        with formatter.section("Commands"):
            write_definitions(formatter, [(name, first_sentence(command.help or "")) for name, command in commands])


def typer_parameter(option: Option, *, valued: bool) -> inspect.Parameter:
    """``option`` as a keyword parameter of a Typer command; a valued boolean and a number are taken as text."""
    choices = ("true", "false") if valued else option.choices
    metavar = ("|".join(choices) if len("|".join(choices)) <= CHOICES_WIDTH else "NAME") if choices else TYPE_PLACEHOLDERS.get(option.type)
    typer_option = typer.Option(
        option.flag,
        help=option.described_help,
        metavar=metavar,
        rich_help_panel="Runtime options" if option.runtime else "Parameters",
        show_default=DATA_DEFAULT_TEXT if option.name == "data" and option.default == PREPARED else option.shown_default,
    )
    annotation = Annotated[str if valued or option.type in TYPE_PLACEHOLDERS else option.type, typer_option]
    default = str(option.default).lower() if valued else option.default
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
