"""``hcl table``: a paper's graph table from a fresh clone (no network, no ../shared: the shipped MUTAG), and its verify
mode, which reruns one seed of every row and says per row whether it is equal; the README's table shows that."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hcl_cli.errors import UsageError
from hcl_cli.stages import table as table_stage
from hcl_cli.stages.table import TableRequest
from hcl_cli.tables.markdown import markdown, verification_column
from hcl_cli.tables.runs import Prepared

ROOT = Path(__file__).resolve().parents[1]


def hcl(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(clone.parent),
        "PYTHONPATH": str(clone),
        "OMP_NUM_THREADS": "1",
        "HCL_TU_MIRROR": "http://127.0.0.1:9",  # the discard port: any download would fail, none may be tried
    }
    return subprocess.run(
        [sys.executable, "-m", "hcl_cli", *args], cwd=clone, env=env, capture_output=True, text=True, check=False, timeout=1200
    )


@pytest.mark.slow
@pytest.mark.e2e
def test_the_table_command_runs_in_a_fresh_clone_and_its_verify_mode_flags_a_changed_row(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    assert not (clone.parent / "shared").exists()
    result = hcl(clone, "table", "--name", "smoke", "--datasets", "mutag", "--methods", "ucl,hucl", "--seeds", "2", "--epochs", "1")
    assert result.returncode == 0, result.stderr
    table = json.loads((clone / "runs" / "tables" / "smoke.json").read_text())
    rows = table["datasets"]["MUTAG"]
    assert [rows["untrained"]["seeds"], rows["methods"]["ucl"]["seeds"], rows["methods"]["hucl"]["seeds"]] == [[0, 1]] * 3
    assert rows["methods"]["hucl"]["minus_ucl"]["seeds"] == [0, 1]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True).stdout.strip()
    assert {run["commit"] for run in rows["methods"]["hucl"]["provenance"]} == {head}
    assert "| MUTAG | hucl |" in result.stdout and "87.2 (H-SCL Table II)" in result.stdout
    assert (clone / "runs" / "tables" / "smoke.md").read_text() == markdown(table)

    again = hcl(clone, "table", "--name", "smoke", "--datasets", "mutag", "--methods", "ucl,hucl", "--seeds", "2", "--epochs", "1")
    assert again.returncode == 0 and "hcl table: mutag/" not in again.stdout, again.stdout  # resumed: nothing rerun

    changed = clone / "runs" / "tables" / "changed.json"
    hucl = rows["methods"]["hucl"]
    hucl["accuracies"], hucl["mean"] = [accuracy + 10.0 for accuracy in hucl["accuracies"]], hucl["mean"] + 10.0
    changed.write_text(json.dumps(table))
    verified = hcl(clone, "table", "--verify", str(changed.relative_to(clone)))
    assert verified.returncode == 0, verified.stderr
    record = json.loads((clone / "runs" / "tables" / "verify_changed.json").read_text())
    assert {(row["method"], row["agrees"], row["bitwise"]) for row in record["rows"]} == {
        ("untrained", True, "equal"),
        ("ucl", True, "equal"),
        ("hucl", False, "equal"),  # the same weights: the record's accuracies are not what they gave
    }
    assert record["commit"] == head and record["dirty"] is False
    assert record["command"].startswith("hcl table --verify runs/tables/changed.json") and record["torch"] == torch.__version__
    shown = markdown(table, record)
    assert f"95% CI of the difference contains 0) at {head[:10]}" in shown
    assert "| MUTAG | ucl |" in shown and shown.count("| yes: ") == 2 and "| no: " in shown


def test_the_verification_column_says_per_row_whether_its_rerun_agrees_and_where_it_reran() -> None:
    row = {"seeds": [0, 1], "accuracies": [80.0, 82.0], "mean": 81.0, "std": 1.0, "minus_untrained": None, "minus_ucl": None}
    result = {"datasets": {"MUTAG": {"untrained": {**row}, "methods": {"ucl": {**row, "paper": {}, "parameters": {"sampler": "ucl"}}}}}}
    checked = {"seeds": [0, 1], "recorded_mean": 81.0, "paired": True, "tolerance": 3.0, "recorded_cpus": ["Intel"]}
    record = {
        "commit": "0123456789abcdef",
        "dirty": True,
        "rows": [
            {"dataset": "MUTAG", "method": "untrained", **checked, "now_mean": 81.0, "difference": 0.0, "ci95": [0.0, 0.0], "agrees": True},
            {**checked, "dataset": "MUTAG", "method": "ucl", "now_mean": 86.0, "difference": 5.0, "ci95": [4.0, 6.0], "agrees": False},
        ],
        "machine": {"cpu_model": "Intel"},
    }
    lines = markdown(result, record).splitlines()
    assert lines[0].endswith("| rerun agrees (within 3 points, 95% CI of the difference contains 0) at 0123456789+dirty |")
    assert lines[2].endswith("| yes: 81.00 recorded, 81.00 now, +0.00 [+0.00, +0.00] (2 seeds) |")
    assert lines[3].endswith("| no: 81.00 recorded, 86.00 now, +5.00 [+4.00, +6.00] (2 seeds) |")
    assert "rerun agrees" not in markdown(result)
    record["rows"][1].update(
        recorded_cpus=["AMD EPYC"], bitwise="differs", rerun_commit="84d5f0b5e6aa", rerun_machine={"cpu_model": "Xeon"}
    )
    lines = markdown(result, record).splitlines()  # every row checked by distribution reran at 84d5f0b: the heading's commit
    assert lines[0].endswith("contains 0) at 84d5f0b5e6 |")
    assert lines[3].endswith("(2 seeds; weights bitwise differs; made on AMD EPYC, rerun on Xeon) |")
    record["rows"][0].update(rerun_commit="0123456789abcdef", rerun_dirty=True)  # two commits: the record's heads the column
    assert (
        markdown(result, record)
        .splitlines()[3]
        .endswith("(2 seeds; weights bitwise differs; made on AMD EPYC, rerun on Xeon; rerun at 84d5f0b5e6) |")
    )
    record["rows"][0] = {"dataset": "MUTAG", "method": "untrained", "seed": 0, "recorded": 80.0, "now": 79.5, "equal": False}
    assert markdown(result, record).splitlines()[2].endswith("| not checked by distribution (seed 0 alone: 80.00 recorded, 79.50 now) |")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"datasets": ("foo",)}, "--datasets foo"),
        ({"methods": ("nope",)}, "unknown method 'nope'"),
        ({"methods": ("scl@official",)}, "readings differ only"),
        ({"seeds": 0}, "--seeds"),
        ({"name": "../x"}, "--name"),
        ({"data": Path("nowhere")}, "--data nowhere: no such file"),
    ],
)
def test_a_bad_request_is_one_usage_error_and_writes_nothing(tmp_path: Path, change: dict, says: str) -> None:
    request = TableRequest(
        **{"name": "x", "datasets": ("mutag",), "methods": ("ucl",), "data": ROOT / "data" / "raw", "out": tmp_path / "out", **change}
    )
    with pytest.raises(UsageError, match=re.escape(says)):
        table_stage.run(request)
    assert not (tmp_path / "out").exists()


def test_verify_of_a_missing_or_foreign_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        table_stage.verify(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"rows": []}')
    with pytest.raises(UsageError, match="not a table's results file"):
        table_stage.verify(tmp_path / "other.json")


def test_a_sentence_names_the_transductive_rows_even_with_too_few_seeds_to_judge_the_rest() -> None:
    """A row whose encoder saw the test labels is never judged, and the dataset's sentence says so, also when no other
    row has the seeds for a verdict yet."""
    from hcl_cli.config.pretrain import TRANSDUCTIVE_LABELS
    from hcl_cli.tables.markdown import verdict

    row = {"parameters": {"sampler": "scl"}, "protocol": TRANSDUCTIVE_LABELS, "seeds": [0], "accuracies": [80.0], "minus_ucl": None}
    hard = {"parameters": {"sampler": "hscl", "beta": 1.0}, "protocol": "inductive", "seeds": [0], "accuracies": [81.0]}
    sentence = verdict("MUTAG", {"scl": row, "hscl": hard}, {"seeds": []})
    assert "too few seeds" in sentence and f"Not judged here ({TRANSDUCTIVE_LABELS}): scl" in sentence


def relabelled(data: Prepared, labels: torch.Tensor) -> Prepared:
    """``data`` with every graph's label replaced by ``labels`` (by position), in the batcher's graphs too."""
    import dataclasses

    from hcl_cli.graph.batch import GraphBatcher
    from hcl_cli.graph.data import load_prepared_graphs
    from hcl_cli.graph.modality import GraphSamples

    dataset, _ = load_prepared_graphs(data.folder)
    by_graph = dataset.labels.clone()
    by_graph[data.samples.indices] = labels
    batcher = GraphBatcher(dataclasses.replace(dataset, labels=by_graph), "cpu")
    return Prepared(data.folder, data.card, GraphSamples(batcher, data.samples.indices), labels)


def test_an_inductive_table_run_never_reads_a_held_out_graph_s_label(tmp_path: Path) -> None:
    """Under the inductive protocol (hcl_cli.tables.runs) run ``seed`` pretrains without the graphs of its held-out fold:
    with the same fold, flipping those graphs' labels leaves the trained scl encoder bitwise the same, flipping others'
    changes it."""
    from test_graph_step import write_toy_tu

    from hcl_cli.config import PretrainConfig
    from hcl_cli.tables.runs import train_encoder, training_part

    data = table_stage.prepared(tmp_path / "work", "TOY", write_toy_tu(tmp_path / "raw"))
    config = PretrainConfig(sampler="scl", arch="gin", epochs=2, batch_size=16, seed=3, data=str(data.folder), device="cpu")
    training, held_out = training_part(data, config.seed)
    held_out_graphs = set(data.samples.indices[torch.from_numpy(held_out)].tolist())
    assert len(held_out) > 0 and not held_out_graphs & set(training.samples.indices.tolist())
    encoder = train_encoder(config, training, tmp_path / "scratch").state_dict()

    def trained_with(labels: torch.Tensor) -> dict[str, torch.Tensor]:
        part, _ = training_part(relabelled(data, labels), config.seed, held_out)  # the same fold
        return train_encoder(config, part, tmp_path / "scratch").state_dict()

    flipped = data.labels.clone()
    flipped[held_out] = 1 - flipped[held_out]
    assert all(torch.equal(encoder[name], tensor) for name, tensor in trained_with(flipped).items()), "a held-out label reached pretraining"
    seen = data.labels.clone()
    kept = [index for index in range(len(seen)) if index not in set(held_out.tolist())][:4]
    seen[kept] = 1 - seen[kept]
    assert not all(torch.equal(encoder[name], tensor) for name, tensor in trained_with(seen).items()), "scl reads the training labels"


@pytest.mark.parametrize(
    ("recorded", "reruns"), [({"protocol": "transductive"}, "transductive"), ({}, "transductive"), ({"protocol": "inductive"}, "inductive")]
)
def test_verify_reruns_a_row_under_the_protocol_its_file_ran(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, recorded: dict, reruns: str
) -> None:
    """A transductive file (or one from before protocols were recorded) is rerun transductive, an inductive one inductive:
    verifying against the other protocol's readout would call every row different."""
    from hcl_cli.tables import verify as verify_module

    protocols = []

    def fake_run(values: dict, seed: int, epochs: int | None, data: Prepared, scratch: Path, *, train: bool, protocol: str) -> dict:
        protocols.append(protocol)
        return {"accuracy": 80.0, "train_seconds": 0.0, "eval_seconds": 0.0}

    monkeypatch.setattr(verify_module, "run_one", fake_run)
    row = {"seeds": [0], "accuracies": [80.0], "mean": 80.0, "std": 0.0, "parameters": {"sampler": "ucl"}, "commits": ["0123abc"]}
    result = {**recorded, "datasets": {"MUTAG": {"untrained": dict(row), "methods": {"ucl": dict(row)}}}}
    card = type("Card", (), {"source": "tu.tar.gz", "files": {}})()
    record = verify_module.verification(
        result, "x.json", lambda name: Prepared(tmp_path, card, None, torch.zeros(0)), tmp_path, say=lambda _: None
    )
    assert protocols == [reruns, reruns] and record["protocol"] == reruns and record["agree"] == 2
    assert [row["recorded_commits"] for row in record["rows"]] == [["0123abc"], ["0123abc"]]


@pytest.mark.parametrize("dirty", [False, True], ids=["clean", "dirty"])
def test_a_stopped_verification_keeps_its_rows_and_a_rerun_at_the_same_clean_commit_continues(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dirty: bool
) -> None:
    """The record is saved after every row with ``partial``; a rerun given it reruns only the rows it lacks, unless either
    ran on a tree that differs from its commit (then the same code is not known to have run: every row reruns)."""
    from hcl_cli.tables import verify as verify_module

    reruns: list[str] = []

    def fake_run(values: dict, seed: int, epochs: int | None, data: Prepared, scratch: Path, *, train: bool, protocol: str) -> dict:
        reruns.append(values["sampler"])
        if values["sampler"] == "scl" and len(reruns) < 4:
            raise KeyboardInterrupt  # the first verification stops at its third row
        return {"accuracy": 80.0, "train_seconds": 1.0, "eval_seconds": 0.0}

    monkeypatch.setattr(verify_module, "run_one", fake_run)
    monkeypatch.setattr(verify_module, "run_identity", lambda **_: {"commit": "0123abc", "dirty": dirty})
    row = {"seeds": [0], "accuracies": [80.0], "mean": 80.0, "std": 0.0, "commits": ["0123abc"]}
    methods = {name: {**row, "parameters": {"sampler": name}} for name in ("ucl", "hucl", "scl")}
    result = {"protocol": "inductive", "datasets": {"MUTAG": {"methods": methods}}}
    card = type("Card", (), {"source": "tu.tar.gz", "files": {}})()
    store = verify_module.RecordInMemory()

    def verify() -> dict:
        load = lambda name: Prepared(tmp_path, card, None, torch.zeros(0))  # noqa: E731
        return verify_module.verification(result, "x.json", load, tmp_path, say=lambda _: None, update=store)

    with pytest.raises(KeyboardInterrupt):
        verify()
    stopped = store.saved[-1]
    assert [r["method"] for r in stopped["rows"]] == ["ucl", "hucl"] and stopped["partial"].startswith("2 of the 3 rows")
    record = verify()
    assert "partial" not in record and [r["method"] for r in record["rows"]] == ["ucl", "hucl", "scl"] and record["agree"] == 3
    assert reruns[3:] == (["ucl", "hucl", "scl"] if dirty else ["scl"])


def test_parts_of_a_verification_run_side_by_side_join_in_one_record_and_a_later_part_keeps_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``rows`` splits a verification: a part that writes while another runs keeps that part's rows (each write joins the
    stored record under a lock), and a part at a later commit reruns only its rows, the others keeping the commit they
    reran at, which the table's column names."""
    from hcl_cli.tables import verify as verify_module

    reruns: list[tuple[str, str]] = []
    identity = {"commit": "aaaa000000000000", "dirty": False}

    def fake_run(values: dict, seed: int, epochs: int | None, data: Prepared, scratch: Path, *, train: bool, protocol: str) -> dict:
        reruns.append((identity["commit"], values["sampler"] if train else "untrained"))
        if reruns[-1] == ("aaaa000000000000", "ucl"):  # the other part runs and writes while this one trains
            table_stage.verify(results, work=tmp_path / "work", rows=("MUTAG/hucl", "MUTAG/scl"))
        return {"accuracy": 80.0, "train_seconds": 1.0, "eval_seconds": 0.0}

    card = type("Card", (), {"source": "tu.tar.gz", "files": {}})()
    monkeypatch.setattr(verify_module, "run_one", fake_run)
    monkeypatch.setattr(verify_module, "run_identity", lambda **_: dict(identity))
    monkeypatch.setattr(table_stage, "prepared", lambda work, name, source: Prepared(tmp_path, card, None, torch.zeros(0)))
    row = {"seeds": [0], "accuracies": [80.0], "mean": 80.0, "std": 0.0}
    methods = {name: {**row, "parameters": {"sampler": name}} for name in ("ucl", "hucl", "scl")}
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"protocol": "inductive", "datasets": {"MUTAG": {"untrained": dict(row), "methods": methods}}}))

    with pytest.raises(UsageError, match="--rows MUTAG/hscl: no such row"):
        table_stage.verify(results, work=tmp_path / "work", rows=("MUTAG/hscl",))
    assert not (tmp_path / "verify_results.json").exists()

    first = table_stage.verify(results, work=tmp_path / "work", rows=("MUTAG/untrained", "MUTAG/ucl"))
    assert [r["method"] for r in first["rows"]] == ["untrained", "ucl", "hucl", "scl"] and "partial" not in first
    assert sorted(reruns) == sorted(("aaaa000000000000", name) for name in ("untrained", "ucl", "hucl", "scl"))

    identity["commit"] = "bbbb000000000000"
    later = table_stage.verify(results, work=tmp_path / "work", rows=("MUTAG/ucl",))
    assert reruns[4:] == [("bbbb000000000000", "ucl")] and later["agree"] == 4
    assert [r["rerun_commit"][:4] for r in later["rows"]] == ["aaaa", "bbbb", "aaaa", "aaaa"]
    stored = json.loads((tmp_path / "verify_results.json").read_text())
    assert stored["rows"] == later["rows"] and stored["command"].startswith("hcl")
    assert stored["commit"] == "aaaa000000000000", "a part over some rows keeps the record's own commit and machine"
    heading, cells = verification_column(stored)
    assert heading.endswith("contains 0) at aaaa000000")
    assert cells["MUTAG", "hucl"].startswith("yes: ") and cells["MUTAG", "ucl"].endswith("; rerun at bbbb000000)")

    identity["commit"] = "cccc000000000000"  # a part over the whole dataset, stopped after its first row
    calls: list[str] = []

    def stops_at_the_second(
        values: dict, seed: int, epochs: int | None, data: Prepared, scratch: Path, *, train: bool, protocol: str
    ) -> dict:
        calls.append(values["sampler"])
        if len(calls) > 1:
            raise KeyboardInterrupt
        return {"accuracy": 80.0, "train_seconds": 1.0, "eval_seconds": 0.0}

    monkeypatch.setattr(verify_module, "run_one", stops_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        table_stage.verify(results, work=tmp_path / "work", rows=("MUTAG",))
    stopped = json.loads((tmp_path / "verify_results.json").read_text())
    assert "partial" not in stopped and [r["rerun_commit"][:4] for r in stopped["rows"]] == ["cccc", "bbbb", "aaaa", "aaaa"]


@pytest.mark.parametrize("option", [["--rows", "MUTAG"], ["--tolerance", "2"]])
def test_rows_or_tolerance_without_verify_is_a_one_line_usage_error(option: list[str]) -> None:
    result = hcl(ROOT, "table", "--name", "x", *option)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"hcl table: error: {option[0]} belongs to a verification: give it with --verify"
    ]


def test_a_file_from_before_per_run_provenance_keeps_each_run_s_commit_when_merged(tmp_path: Path) -> None:
    """A results file whose rows record ``commits`` and ``environments`` (before per-run provenance) resumes and merges with
    each run's commit and machine, so a joined file still says which code made every row."""
    from hcl_cli.tables.summary import runs_in_results

    request = TableRequest(name="x", datasets=("mutag",), methods=("ucl",), data=ROOT / "data" / "raw", out=tmp_path / "out")
    methods = table_stage.check(request)
    environment = {"machine": {"cpu_model": "Intel"}, "python": "3.11.7", "versions": {"torch": "2.14.1"}}
    row = {"seeds": [0, 1], "accuracies": [80.0, 81.0], "commits": ["aaa", "bbb"], "environments": ["e1", "e1"]}
    result = {
        "epochs": "the presets' (200)",
        "protocol": "inductive",
        "environments": {"e1": environment},
        "datasets": {"MUTAG": {"untrained": dict(row), "methods": {"ucl": {**row, "parameters": methods["mutag"]["ucl"].pretrain}}}},
    }
    runs = runs_in_results(json.loads(json.dumps(result)), methods, "the presets' (200)", "inductive")
    assert {key: run["provenance"]["commit"] for key, run in runs.items()} == {
        "mutag/ucl/0": "aaa",
        "mutag/ucl/1": "bbb",
        "mutag/untrained/0": "aaa",
        "mutag/untrained/1": "bbb",
    }
    assert runs["mutag/ucl/1"]["provenance"]["machine"] == {"cpu_model": "Intel"}
    assert runs["mutag/ucl/1"]["provenance"]["versions"] == {"python": "3.11.7", "torch": "2.14.1"}


def test_the_adam_rounding_benchmark_reruns_a_row_with_each_optimizer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/adam_rounding.py (why trained rows rerun different): within its block the graph step trains with torch's
    single-tensor Adam, outside it with the product's optimizer again; a run over a results file records both reruns."""
    from test_graph_step import write_toy_tu

    from benchmarks import adam_rounding, common
    from hcl_cli.optimizer import OptimizerSettings, SkipNonFinite

    parameters = {"sampler": "ucl", "arch": "gin", "batch_size": 16}
    with adam_rounding.single_tensor_adam_in_the_graph_step():
        inside = OptimizerSettings().build(torch.nn.Linear(2, 2).parameters())
    outside = OptimizerSettings().build(torch.nn.Linear(2, 2).parameters())
    assert type(inside) is torch.optim.Adam and inside.defaults["foreach"] is False and not inside.defaults["fused"]
    assert isinstance(outside, SkipNonFinite)

    row = {"seeds": [1, 0, 2], "accuracies": [60.0, 50.0, 70.0], "parameters": parameters}
    results = tmp_path / "reproduce_graph_toy.json"
    results.write_text(json.dumps({"protocol": "inductive", "epochs": 1, "datasets": {"TOY": {"methods": {"ucl": row}}}}))
    monkeypatch.setattr(common, "RESULTS", tmp_path / "out")
    monkeypatch.setattr(torch, "set_num_threads", lambda _: None)
    toy = write_toy_tu(tmp_path / "raw")
    adam_rounding.main(
        [
            "--results",
            str(results),
            "--dataset",
            "TOY",
            "--methods",
            "ucl",
            "--seeds",
            "2",
            "--data",
            str(toy),
            "--work",
            str(tmp_path / "w"),
        ]
    )
    record = json.loads((tmp_path / "out" / "adam_rounding.json").read_text())
    rerun, second = record["rows"]
    assert [(rerun["seed"], rerun["recorded"]), (second["seed"], second["recorded"])] == [(0, 50.0), (1, 60.0)], "the first two seeds"
    assert rerun["recorded"] == 50.0 and {"fused_adam_now", "single_tensor_adam_now"} <= rerun.keys() and record["protocol"] == "inductive"
    assert rerun["fused_weights_sha256"] != rerun["single_tensor_weights_sha256"], "the two Adams round apart"
    assert "not a test of equal encoders" in record["reading"]
    with pytest.raises(SystemExit) as refused:
        adam_rounding.main(["--results", str(results), "--dataset", "TOY", "--methods", "ucl", "--seeds", "0"])
    assert refused.value.code == 2, "no seed to rerun is a usage error, before any work"


def test_a_fig7_table_compares_undimix_with_its_infograph_and_with_hcl_and_answers_the_paper_s_sentence() -> None:
    """UnDiMix Fig. 7's rows (issue 42): each judged against Fig. 7's InfoGraph row, UnDiMix also against HCL (beta 1),
    the section titled by the figure, and the paper's sentence beside our count."""
    from hcl_cli.tables.markdown import sections

    def row(values: list[float], sampler: str) -> dict:
        return {"seeds": [0, 1, 2], "accuracies": values, "mean": sum(values) / 3, "std": 1.0, "paper": {"UnDiMix Fig. 7": "figure only"}}

    rows = {
        "fig7-infograph": {**row([80.0, 81.0, 82.0], "ucl"), "parameters": {"sampler": "ucl"}},
        "fig3-beta1@official": {**row([85.0, 86.5, 87.0], "hucl"), "parameters": {"sampler": "hucl", "beta": 1.0}},
        "fig7-undimix": {**row([84.0, 86.0, 86.5], "undimix"), "parameters": {"sampler": "undimix"}},
    }
    for value in rows.values():
        value.update(minus_ucl=None, minus_untrained=None)
    rows["ucl"] = {**row([79.0, 80.0, 81.0], "ucl"), "parameters": {"sampler": "ucl"}, "minus_ucl": None}
    rows["ucl"]["minus_untrained"] = {"mean": 9.0, "ci95": [8.0, 10.0], "n": 3}
    rows["fig7-infograph"]["minus_untrained"] = {"mean": -1.0, "ci95": [-3.0, 1.0], "n": 3}
    untrained = {"seeds": [0, 1, 2], "accuracies": [70.0, 71.0, 72.0], "mean": 71.0, "std": 1.0}
    result = {
        "complete": True,
        "repeats": 3,
        "epochs": 200,
        "protocol": "transductive",
        "datasets": {"MUTAG": {"untrained": untrained, "methods": rows}},
    }
    text = sections({"fig7": result}, {}, "benchmarks/results")
    assert "### UnDiMix Fig. 7: MUTAG" in text
    undimix_line = next(line for line in text.splitlines() if line.startswith("| MUTAG | fig7-undimix |"))
    assert "| +4.50 [" in undimix_line, "UnDiMix minus Fig. 7's InfoGraph (84, 86, 86.5 against 80, 81, 82)"
    assert "UnDiMix against HCL (beta 1): -0.67 [" in text
    assert "hard negatives help beyond the noise in" in text and "fig7-undimix +4.50" in text
    assert "Overall InfoGraph performs better in 3 out of the 6" in text and "the best mean is MUTAG HCL" in text
    assert "UnDiMix is above or within the noise of both InfoGraph and HCL on 1 of 1 judged: MUTAG" in text
    assert "InfoGraph (fig7-infograph) is within the noise of its untrained encoder (-1.00 [-3.00, +1.00])" in text, (
        "a Fig. 7 table's InfoGraph is its own row, not the ucl a merge brought in"
    )
