"""The CLI, params.yaml and dvc.yaml agree with the stage configs, one to one."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from hcl_cli.cli import _parse_bool, main
from hcl_cli.config import STAGE_CONFIGS, PretrainConfig, option_name
from hcl_cli.params import unknown_params, warn_unknown_params

ROOT = Path(__file__).resolve().parents[1]
STAGE_OF_GROUP = {"prepare": "prepare", "pretrain": "pretrain", "embed": "embed", "linear": "linear-eval", "knn": "knn-eval", "report": "report"}


def test_params_yaml_holds_every_default_and_nothing_else() -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert unknown_params(params) == []
    for cls in STAGE_CONFIGS:
        defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.metadata.get("param")}
        assert params[cls.group] == defaults, cls.group


def test_each_dvc_stage_passes_exactly_its_own_group() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    for cls in STAGE_CONFIGS:
        stage = stages[STAGE_OF_GROUP[cls.group]]
        cmd = " ".join(stage["cmd"].split())
        passed = re.findall(r"(--[a-z-]+) \"?\$\{(\w+)\.(\w+)\}", cmd)
        assert sorted(passed) == sorted((option_name(n), cls.group, n) for n in cls.param_names())
        assert stage["params"] == [cls.group], "a stage lists only its own parameters"


@pytest.mark.parametrize("command", ["prepare", "pretrain", "embed", "linear-eval", "knn-eval", "report", "compare"])
def test_help_lists_every_option(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    cls = next((c for c in STAGE_CONFIGS if STAGE_OF_GROUP[c.group] == command), None)
    for f in dataclasses.fields(cls) if cls else []:
        assert option_name(f.name) in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pretrain", "--sampler", "nope"], "--sampler must be one of"),
        (["pretrain", "--beta", "-1"], "--beta must be >= 0.0"),
        (["pretrain", "--tau-plus", "1"], "--tau-plus must be < 1.0"),
        (["pretrain", "--clip", "maybe"], "--clip must be true or false"),
        (["pretrain", "--undimix-weights", "1,x,1"], "--undimix-weights must be three"),
        (["prepare", "--dataset", "mnist"], "--dataset must be one of"),
        (["knn-eval", "--k", "abc"], "--k"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_boolean_parameters_take_true_or_false() -> None:
    assert PretrainConfig(clip=True).clip is True
    for spelling, expected in (("true", True), ("False", False), ("1", True), ("no", False)):
        assert _parse_bool("clip", spelling) is expected


def test_unknown_params_keys_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "params.yaml").write_text("pretrain:\n  betta: 2\nfoo: {}\n")
    monkeypatch.chdir(tmp_path)
    warn_unknown_params()
    err = capsys.readouterr().err
    assert "'pretrain.betta'" in err and "'foo'" in err
