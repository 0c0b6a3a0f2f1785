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
from hcl_cli.errors import UsageError
from hcl_cli.graph.modality import GRAPHS
from hcl_cli.presets import PRESETS
from hcl_cli.presets.graphs import infograph
from hcl_cli.stages import pretrain
from hcl_cli.stages import table as table_stage


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
    with pytest.raises(UsageError, match="readings differ only"):
        method("mutag", "scl@official")


TABLE_BATCH = infograph(lr=0.01, weight_decay=0.0)["batch_size"]
"""The batch of every table's method (HCL's graph code, 128): a dataset must hold at least that many graphs."""


def invoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str, name: str = "toy") -> dict:
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    argv = ["reproduce_graphs", "--name", name, "--work", str(tmp_path / f"work_{name}"), "--tu-archive", str(tmp_path / "raw"), *args]
    monkeypatch.setattr(sys, "argv", argv)
    reproduce_graphs.main()
    return json.loads((tmp_path / "results" / f"reproduce_graph_{name}.json").read_text())


def test_a_rerun_adds_seeds_keeps_the_runs_done_resumes_from_the_results_file_and_refuses_other_parameters(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_toy_tu(
        tmp_path / "raw", name="MUTAG", graphs=TABLE_BATCH + 20
    )  # the tables' batch of 128 fits in the nine folds a run pretrains on
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
    write_toy_tu(
        tmp_path / "raw", name="MUTAG", graphs=TABLE_BATCH + 20
    )  # the tables' batch of 128 fits in the nine folds a run pretrains on
    smoke = ("--datasets", "mutag", "--repeats", "1", "--epochs", "1")
    part_a = invoke(monkeypatch, tmp_path, *smoke, "--methods", "scl", name="part_a")
    part_b = invoke(monkeypatch, tmp_path, *smoke, "--methods", "hscl", name="part_b")

    def no_more_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a merged run was trained again")

    monkeypatch.setattr(table_stage, "run_one", no_more_training)
    merged = invoke(monkeypatch, tmp_path, *smoke, "--methods", "scl", "hscl", "--merge", "part_a", "part_b")
    rows = merged["datasets"]["MUTAG"]["methods"]
    assert rows["scl"]["accuracies"] == part_a["datasets"]["MUTAG"]["methods"]["scl"]["accuracies"]
    assert rows["hscl"]["accuracies"] == part_b["datasets"]["MUTAG"]["methods"]["hscl"]["accuracies"]
    assert rows["hscl"]["minus_ucl"]["seeds"] == [0] and merged["complete"]
    with pytest.raises(SystemExit, match="--merge nope"):
        invoke(monkeypatch, tmp_path, *smoke, "--methods", "scl", "--merge", "nope")


def test_the_official_methods_train_the_official_presets_byte_for_byte() -> None:
    for dataset in ("mutag", "ptc", "enzymes", "imdb-b", "imdb-m"):
        for name, preset in (("hucl@official", f"hscl-{dataset}-hucl-official"), ("fig3-beta2@official", f"hcl-{dataset}-beta2-official")):
            assert json.dumps(method(dataset, name).pretrain) == json.dumps(PRESETS[preset].values["pretrain"]), (dataset, name)
        assert json.dumps(method(dataset, "hucl").pretrain) == json.dumps(PRESETS[f"hscl-{dataset}-hucl"].values["pretrain"])


def test_the_readmes_graph_tables_are_generated_from_every_results_file() -> None:
    readme = reproduce_graphs.README.read_text(encoding="utf-8")
    start, end = readme.index(reproduce_graphs.README_BEGIN), readme.index(reproduce_graphs.README_END) + len(reproduce_graphs.README_END)
    assert readme[start:end] == reproduce_graphs.readme_section(reproduce_graphs.results_files()), (
        "run python -m benchmarks.reproduce_graphs --readme"
    )


def row(parameters: dict, accuracies: list[float], paper: dict | None = None, **differences: dict | None) -> dict:
    """A results file's method row over seeds 0..n-1 (std with ddof 0, as the file has it)."""
    mean = sum(accuracies) / len(accuracies)
    std = (sum((a - mean) ** 2 for a in accuracies) / len(accuracies)) ** 0.5
    return {
        "parameters": parameters,
        "paper": paper or {},
        "seeds": list(range(len(accuracies))),
        "accuracies": accuracies,
        "mean": mean,
        "std": std,
        "minus_ucl": differences.get("minus_ucl"),
        "minus_untrained": differences.get("minus_untrained"),
    }


def test_each_datasets_sentence_follows_the_intervals_and_fig3_is_read_against_its_beta_0() -> None:
    untrained = {"seeds": [0, 1, 2], "accuracies": [50.0, 51.0, 52.0], "mean": 51.0, "std": 0.82}
    above = {"mean": 3.0, "ci95": [1.0, 5.0], "n": 10}
    within = {"mean": 0.5, "ci95": [-1.0, 2.0], "n": 10}
    rows = {
        "ucl": row({"sampler": "ucl"}, [60.0, 61.0, 62.0], {"Table": "61.5"}, minus_untrained=above),
        "hucl": row({"sampler": "hucl", "beta": 1.0}, [63.0, 64.0, 65.0], {"Table": "70.0"}, minus_ucl=above),
        "scl": row({"sampler": "scl"}, [70.0, 71.0, 72.0], minus_ucl=above),
        "ot-eps0.1": row({"sampler": "ot"}, [60.0, 61.5, 62.0], minus_ucl=within),
        "fig3-beta0@official": row({"sampler": "hucl", "beta": 0.0}, [55.0, 56.0, 57.0], minus_ucl=within),
        "fig3-beta1@official": row({"sampler": "hucl", "beta": 1.0}, [54.0, 55.5, 56.0], minus_ucl=above),
    }
    sentence = reproduce_graphs.verdict("TOY", rows, untrained)
    assert sentence.startswith("TOY: hard negatives help beyond the noise in hucl +3.00 [+1.00, +5.00] (1 of 3 hard-negative rows within")
    assert "below it beyond the noise: fig3-beta1@official -0.83 [-1.55, -0.12]" in sentence, "Fig. 3's rows against their beta 0"
    assert "The labels (scl against InfoGraph): +3.00 [+1.00, +5.00]" in sentence, "scl's gain is the labels'"
    assert "scl +" not in sentence and "scl -" not in sentence, "scl samples no hard negatives"
    assert "InfoGraph (ucl) is above its untrained encoder (+3.00 [+1.00, +5.00])" in sentence
    assert reproduce_graphs.within_one_std(rows["ucl"]) == "yes" and reproduce_graphs.within_one_std(rows["hucl"]) == "no"
    few = {**rows, "ot-eps0.1": row({"sampler": "ot"}, [60.0, 61.5, 62.0], minus_ucl={**within, "n": 2})}
    assert "not judged yet, under 3 seeds: ot-eps0.1" in reproduce_graphs.verdict("TOY", few, untrained)
    calm = {name: rows[name] for name in ("ucl", "ot-eps0.1")}
    assert "hard negatives do not help beyond the noise: no hard-negative row is above its InfoGraph (1 of 1 within" in (
        reproduce_graphs.verdict("TOY", calm, untrained)
    )


def test_a_file_that_lent_a_table_some_rows_keeps_its_own_table_and_a_joined_part_does_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def results_file(name: str, methods: list[str], merge: str = "") -> None:
        command = f"benchmarks/reproduce_graphs.py --name {name}" + (f" --merge {merge} --tu-archive x" if merge else "")
        result = {"datasets": {"MUTAG": {"methods": dict.fromkeys(methods, {})}}, "invocations": [{"command": command}]}
        (tmp_path / f"{reproduce_graphs.PREFIX}{name}.json").write_text(json.dumps(result))

    monkeypatch.setattr(reproduce_graphs.common, "RESULTS", tmp_path)
    results_file("fig3", ["ucl", "fig3-beta0@official", "fig3-beta1@official"])
    results_file("half", ["fig7-undimix"])
    results_file("part_other", ["fig7-infograph"])
    results_file("fig7", ["ucl", "fig3-beta1@official", "fig7-undimix", "fig7-infograph"], merge="fig3 half part_other")
    assert sorted(reproduce_graphs.results_files()) == ["fig3", "fig7"]
