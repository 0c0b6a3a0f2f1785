"""``--help`` reads well at 80 columns: no line wider, every text whole, no value shown for a flag, a short listing.

Typer's Rich layout of ``hcl pretrain --help`` at 80 columns had a description column about 26
characters wide (407 lines), cut a path off mid-word, truncated the commands' texts with ``...``
and showed ``<bool>`` beside flags that take no value.
"""

from __future__ import annotations

import re

import pytest
import typer.main

from hcl_cli.cli import app, main
from hcl_cli.cli_help import placeholder
from hcl_cli.config.export import ExportConfig
from hcl_cli.config.pipeline import STAGE_CONFIGS

CONFIGS = (*STAGE_CONFIGS, ExportConfig)
"""Every command built from a stage's configuration: the pipeline's stages, and ``hcl export``."""
COMMANDS = [[config_cls.command] for config_cls in CONFIGS] + [[], ["params"], ["preset"], ["compare"], ["table"]]
PRETRAIN_LINES = 300
"""The most lines ``hcl pretrain --help`` may take at 80 columns (225 when written; the Rich layout took 407; the sentence
modality's three options brought it to 295)."""


def help_text(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: " ".join(["hcl", *args]))
def test_help_fits_80_columns_and_shows_no_value_for_a_flag(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = help_text(args, capsys, monkeypatch).splitlines()
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    assert not any("<bool>" in line for line in lines)
    assert not any(line.rstrip().endswith("...") for line in lines[1:]), "a text cut short"  # but the usage line's [ARGS]...


@pytest.mark.parametrize("config_cls", CONFIGS, ids=lambda cls: cls.command)
def test_every_option_text_is_whole(config_cls: type, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(help_text([config_cls.command], capsys, monkeypatch).split())
    for option in config_cls.declared_options():
        assert " ".join(option.described_help.split()) in text, option.flag


def test_every_command_text_is_whole_in_the_listing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(help_text([], capsys, monkeypatch).split())
    for config_cls in CONFIGS:
        first_sentence = " ".join((config_cls.__doc__ or "").split()).split(". ")[0]
        assert first_sentence in text, config_cls.command


def test_pretrain_help_is_short_enough_to_read(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(help_text(["pretrain"], capsys, monkeypatch).splitlines()) <= PRETRAIN_LINES


def test_the_listing_gives_each_command_its_whole_first_sentence(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hcl --help`` cut ``table``'s summary at "HCL Fig." (click ends a summary at any word ending in a full stop)."""
    text = " ".join(help_text([], capsys, monkeypatch).split())
    assert "HCL Fig. 3, UnDiMix Fig. 7) from the shipped or fetched TU data. preset" not in text
    assert (
        "table Reproduce a paper's table: on graphs (H-SCL Table II, HCL-OT Table V, HCL Fig. 3, UnDiMix Fig. 7), images or sentences."
        in text
    )


PLACEHOLDER = re.compile(r"[A-Z]+(=[A-Z]+)?|[a-z0-9_-]+(\|[a-z0-9_-]+)+")
"""A value's placeholder in ``--help``: a word in capitals (``FILE``, ``NAME``, ``INT``, ``FLOAT``, ``TEXT``; two for a
``KEY=VALUE`` pair, ``NAME=PATH``) or its few values."""


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: " ".join(["hcl", *args]))
def test_every_placeholder_follows_one_rule(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Typer printed ``<str>``, ``<int>`` and ``<list[str]>`` beside hcl's own ``FILE`` and ``NAME``."""
    text = help_text(args, capsys, monkeypatch)
    group = typer.main.get_command(app)
    command = group.commands[args[0]] if args else group  # type: ignore[attr-defined]
    for param in command.params:
        if param.param_type_name == "argument" or not param.is_flag:
            value = placeholder(param)
            assert PLACEHOLDER.fullmatch(value), (param.name, value)
            assert f"{param.opts[0]} {value}" in text if param.param_type_name != "argument" else f"  {value}  " in text
    assert not re.search(r"^ +-\S+ <", text, re.MULTILINE)


def test_a_modality_s_own_default_is_shown_once_beside_the_default(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--epochs`` said "Default on graphs: 200 ... [default: 60]": two defaults, one in the text."""
    text = " ".join(help_text(["pretrain"], capsys, monkeypatch).split())
    assert "Default on graphs" not in text
    assert "[default: (60; on graphs: 200; on texts: 3)]" in text and "[default: (256; on graphs: 128; on" in text


def test_compile_says_it_compiles_on_a_cpu_too(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(help_text(["pretrain"], capsys, monkeypatch).split())
    assert "--compile true|false Images: torch.compile the training step (CUDA or CPU)." in text
