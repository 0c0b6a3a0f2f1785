"""``--help`` reads well at 80 columns: no line wider, every text whole, no value shown for a flag, a short listing.

Typer's Rich layout of ``hcl pretrain --help`` at 80 columns had a description column about 26
characters wide (407 lines), cut a path off mid-word, truncated the commands' texts with ``...``
and showed ``<bool>`` beside flags that take no value.
"""

from __future__ import annotations

import pytest

from hcl_cli.cli import main
from hcl_cli.config.export import ExportConfig
from hcl_cli.config.pipeline import STAGE_CONFIGS

CONFIGS = (*STAGE_CONFIGS, ExportConfig)
"""Every command built from a stage's configuration: the pipeline's stages, and ``hcl export``."""
COMMANDS = [[config_cls.command] for config_cls in CONFIGS] + [[], ["params"], ["preset"], ["compare"]]
PRETRAIN_LINES = 280
"""The most lines ``hcl pretrain --help`` may take at 80 columns (225 when written; the Rich layout took 407)."""


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
