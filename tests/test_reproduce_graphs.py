"""benchmarks/reproduce_graphs.py: its in-process training is ``hcl pretrain``'s, its intervals are t intervals
of the paired per-seed differences, and a rerun resumes (runs done are kept, changed parameters refused)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from test_graph_step import write_toy_tu

from benchmarks import common, reproduce_graphs
from benchmarks.reproduce_graphs import load_dataset, mean_interval, method, paired, train_encoder
from hcl_cli.config import PretrainConfig
from hcl_cli.graph.modality import GRAPHS
from hcl_cli.stages import pretrain


def test_the_benchmarks_training_is_hcl_pretrains(tmp_path: Path) -> None:
    data = load_dataset(tmp_path / "work", "TOY", write_toy_tu(tmp_path / "raw"))
    values = {**method("mutag", "hucl@official").pretrain, "epochs": 2, "batch_size": 16}
    config = PretrainConfig(**values, seed=3, data=str(data.folder), device="cpu")
    ours = train_encoder(config, data, tmp_path / "scratch")
    stage = PretrainConfig(
        **values, seed=3, data=str(data.folder), device="cpu", out=str(tmp_path / "models"), live_dir=str(tmp_path / "live")
    )
    pretrain.run(stage)
    theirs, _ = GRAPHS.load_encoder(tmp_path / "models" / "encoder.safetensors")
    for (name, mine), (_, stored) in zip(ours.state_dict().items(), theirs.state_dict().items(), strict=True):
        assert torch.equal(mine, stored), name
    untrained = train_encoder(config, data, tmp_path / "scratch", train=False)
    assert not torch.equal(untrained.encoder.convs[0].nn[0].weight, ours.encoder.convs[0].nn[0].weight)


def test_intervals_are_t_intervals_of_the_paired_differences() -> None:
    assert mean_interval([1.0, 2.0, 3.0]) == {"mean": 2.0, "ci95": [-0.48, 4.48], "n": 3}  # 2 +- t(0.975, 2) / sqrt(3)
    runs = {0: {"accuracy": 80.0}, 1: {"accuracy": 82.0}, 2: {"accuracy": 84.0}, 3: {"accuracy": 90.0}}
    baseline = {0: {"accuracy": 79.0}, 1: {"accuracy": 80.0}, 2: {"accuracy": 81.0}}
    assert paired(runs, baseline) == {"mean": 2.0, "ci95": [-0.48, 4.48], "n": 3, "seeds": [0, 1, 2]}, "only the seeds both ran"


def test_methods_carry_both_tables_numbers_and_the_official_reading() -> None:
    ucl, official, ot = method("ptc", "ucl"), method("ptc", "hucl@official"), method("mutag", "ot-eps0.1")
    assert ucl.paper == {"H-SCL Table II": "55.3", "HCL-OT Table V": "55.3"}
    assert (official.pretrain["graph_weights"], official.pretrain["sampler"], official.paper["HCL-OT Table V"]) == (
        "official",
        "hucl",
        "57.3",
    )
    assert (ot.pretrain["ot_epsilon"], ot.paper) == (0.1, {"HCL-OT Table V": "88.2"})
    with pytest.raises(SystemExit, match="readings differ only"):
        method("mutag", "scl@official")


def invoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str, name: str = "toy") -> dict:
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    argv = ["reproduce_graphs", "--name", name, "--work", str(tmp_path / f"work_{name}"), "--tu-archive", str(tmp_path / "raw"), *args]
    monkeypatch.setattr(sys, "argv", argv)
    reproduce_graphs.main()
    return json.loads((tmp_path / "results" / f"reproduce_graph_{name}.json").read_text())


def test_a_rerun_adds_seeds_keeps_the_runs_done_resumes_from_the_results_file_and_refuses_other_parameters(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_toy_tu(tmp_path / "raw", name="MUTAG")
    first = invoke(monkeypatch, tmp_path, "--datasets", "mutag", "--methods", "scl", "--repeats", "1", "--epochs", "1")
    second = invoke(monkeypatch, tmp_path, "--datasets", "mutag", "--methods", "scl", "--repeats", "2", "--epochs", "1")
    rows = second["datasets"]["MUTAG"]
    assert rows["methods"]["scl"]["seeds"] == rows["methods"]["ucl"]["seeds"] == rows["untrained"]["seeds"] == [0, 1]
    assert rows["methods"]["scl"]["accuracies"][0] == first["datasets"]["MUTAG"]["methods"]["scl"]["accuracies"][0]
    assert rows["methods"]["scl"]["minus_ucl"]["seeds"] == [0, 1] and rows["methods"]["scl"]["complete"]
    assert rows["methods"]["scl"]["paper"] == {"H-SCL Table II": "86.9"} and second["complete"]
    assert [len(i["command"]) > 0 for i in second["invocations"]] == [True, True]
    (tmp_path / "work_toy" / "runs.json").unlink()  # a fresh clone: only the results file is left
    third = invoke(monkeypatch, tmp_path, "--datasets", "mutag", "--methods", "scl", "--repeats", "3", "--epochs", "1")
    resumed = third["datasets"]["MUTAG"]["methods"]["scl"]
    assert resumed["accuracies"][:2] == rows["methods"]["scl"]["accuracies"] and resumed["seeds"] == [0, 1, 2]
    assert resumed["train_seconds"][:2] == rows["methods"]["scl"]["train_seconds"] and third["runs_without_seconds"] == 0
    table = reproduce_graphs.markdown(second).splitlines()
    assert (
        table[2].startswith("| MUTAG | untrained encoder | ")
        and table[4].startswith("| MUTAG | scl | ")
        and "86.9 (H-SCL Table II)" in table[4]
    )
    with pytest.raises(SystemExit, match="other parameters"):
        invoke(monkeypatch, tmp_path, "--datasets", "mutag", "--methods", "scl", "--repeats", "2", "--epochs", "2")


def test_parts_run_by_parallel_processes_merge_into_one_table_without_running_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_toy_tu(tmp_path / "raw", name="MUTAG")
    smoke = ("--datasets", "mutag", "--repeats", "1", "--epochs", "1")
    part_a = invoke(monkeypatch, tmp_path, *smoke, "--methods", "scl", name="part_a")
    part_b = invoke(monkeypatch, tmp_path, *smoke, "--methods", "hscl", name="part_b")

    def no_more_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a merged run was trained again")

    monkeypatch.setattr(reproduce_graphs, "run_one", no_more_training)
    merged = invoke(monkeypatch, tmp_path, *smoke, "--methods", "scl", "hscl", "--merge", "part_a", "part_b")
    rows = merged["datasets"]["MUTAG"]["methods"]
    assert rows["scl"]["accuracies"] == part_a["datasets"]["MUTAG"]["methods"]["scl"]["accuracies"]
    assert rows["hscl"]["accuracies"] == part_b["datasets"]["MUTAG"]["methods"]["hscl"]["accuracies"]
    assert rows["hscl"]["minus_ucl"]["seeds"] == [0] and merged["complete"]
    with pytest.raises(SystemExit, match="--merge nope"):
        invoke(monkeypatch, tmp_path, *smoke, "--methods", "scl", "--merge", "nope")
