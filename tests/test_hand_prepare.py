"""``hcl prepare`` by hand writes under runs/ like every other hand stage; a hand stage reads it, else the pipeline's."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcl_cli.cli import main
from hcl_cli.config import EmbedConfig, LinearConfig, PretrainConfig, ReportConfig
from hcl_cli.config.base import PIPELINE_PREPARED, PREPARED


def run_cli(args: list[str]) -> int:
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_hand_prepare_writes_under_runs_and_leaves_the_pipelines_folder_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli(["prepare", "--dataset", "digits"]) == 0
    assert (tmp_path / "runs" / "prepared" / "card.json").is_file()
    assert not (tmp_path / "data").exists()
    assert PretrainConfig().data == PREPARED == "runs/prepared"


@pytest.mark.parametrize("config_cls", [PretrainConfig, EmbedConfig, LinearConfig, ReportConfig])
def test_a_hand_stage_reads_the_pipelines_dataset_only_when_no_hand_prepare_made_one(
    config_cls: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert config_cls().data == PREPARED  # neither exists: the hand default, which the stage's missing-card error names
    (tmp_path / PIPELINE_PREPARED).mkdir(parents=True)
    assert config_cls().data == PIPELINE_PREPARED  # after dvc repro
    (tmp_path / PREPARED).mkdir(parents=True)
    assert config_cls().data == PREPARED  # a hand hcl prepare wins by hand
    assert config_cls(data="elsewhere").data == "elsewhere"  # --data always wins
    assert config_cls(data=PREPARED).data == PREPARED
