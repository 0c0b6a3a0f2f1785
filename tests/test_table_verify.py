"""``hcl table --verify``: by distribution (the test that holds across machines and commits) and by weights digest (the
only bitwise test, on the recorded run's clean commit, torch, CPU and float kernels)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from hcl_cli.errors import InputError, UsageError
from hcl_cli.provenance import run_identity
from hcl_cli.stages import table as table_stage
from hcl_cli.stages.table import TableRequest
from hcl_cli.tables import runs as runs_module
from hcl_cli.tables import verify as verify_module
from hcl_cli.tables.agreement import DEFAULT_TOLERANCE, agreement
from hcl_cli.tables.digests import tensors_sha256, weights_sha256
from hcl_cli.tables.runs import Prepared

ROOT = Path(__file__).resolve().parents[1]
CARD = type("Card", (), {"source": "tu.tar.gz", "files": {}})()


MUTAG_UCL = [94.74, 89.47, 94.74, 84.21, 89.47, 89.47, 89.47, 73.68, 66.67, 83.33]
"""MUTAG ucl's inductive accuracies of seeds 0..9 (reproduce_graph_inductive.json): each seed scores one fold of 19 graphs."""


def drawn(seed: int) -> float:
    """A method's accuracy on seed ``seed``: MUTAG ucl's draw of that seed (seeds past 9 repeat them, 3 points lower)."""
    return MUTAG_UCL[seed % 10] - 3.0 * (seed // 10)


def results_of(accuracies: dict[int, float]) -> dict[str, Any]:
    row = {
        "seeds": sorted(accuracies),
        "accuracies": [accuracies[seed] for seed in sorted(accuracies)],
        "mean": round(float(np.mean(list(accuracies.values()))), 2),
        "std": round(float(np.std(list(accuracies.values()))), 2),
        "parameters": {"sampler": "ucl"},
    }
    return {"protocol": "inductive", "datasets": {"MUTAG": {"methods": {"ucl": row}}}}


def verified(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, result: dict[str, Any], rerun: Any, **options: Any) -> dict[str, Any]:
    def fake_run(values: dict, seed: int, epochs: int | None, data: Prepared, scratch: Path, *, train: bool, protocol: str) -> dict:
        return {"accuracy": rerun(seed), "train_seconds": 0.0, "eval_seconds": 0.0}

    monkeypatch.setattr(verify_module, "run_one", fake_run)
    load = lambda name: Prepared(tmp_path, CARD, None, torch.zeros(0))  # noqa: E731
    return verify_module.verification(result, "x.json", load, tmp_path, say=lambda _: None, **options)


def test_the_same_experiment_agrees_and_a_shifted_mean_or_another_seed_set_does_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The rerun draws each seed within a point of the record (another CPU's kernels): it agrees. A record whose every
    seed lies 4 points off, or that was drawn on seeds 10..19 while it names 0..9, differs beyond the tolerance."""
    record = {seed: drawn(seed) for seed in range(10)}
    jitter = lambda seed: drawn(seed) + (0.9 if seed % 2 else -0.7)  # noqa: E731
    same = verified(monkeypatch, tmp_path, results_of(record), jitter)["rows"][0]
    assert same["agrees"] and same["paired"] and same["ci95"][0] <= 0 <= same["ci95"][1] and abs(same["difference"]) < DEFAULT_TOLERANCE
    assert same["recorded_mean"] == round(float(np.mean(list(record.values()))), 2) and same["seeds"] == list(range(10))

    shifted = verified(monkeypatch, tmp_path, results_of({seed: value + 4.0 for seed, value in record.items()}), jitter)["rows"][0]
    assert not shifted["agrees"] and shifted["ci95"][1] < 0 and abs(shifted["difference"]) > DEFAULT_TOLERANCE

    other_seeds = verified(monkeypatch, tmp_path, results_of({seed: drawn(seed + 5) for seed in range(5)}), drawn)["rows"][0]
    assert not other_seeds["agrees"] and abs(other_seeds["difference"]) > DEFAULT_TOLERANCE  # drawn on seeds 5..9, named 0..4
    assert verified(monkeypatch, tmp_path, results_of(record), drawn, seeds=3)["rows"][0]["seeds"] == [0, 1, 2]
    older = {**results_of(record), "machine": {"cpu_model": "AMD EPYC"}}  # a file from before per-run machines
    assert verified(monkeypatch, tmp_path, older, drawn)["rows"][0]["recorded_cpus"] == ["AMD EPYC"]


def test_the_interval_and_the_tolerance_each_decide() -> None:
    """A constant shift of 1 point on every seed: the interval excludes 0 (the rerun is not the same draw), though the
    shift is under the tolerance; a wide interval that contains 0 with a difference beyond the tolerance fails as well.
    Seeds that are not among the recorded ones are compared unpaired (Welch)."""
    record = {seed: drawn(seed) for seed in range(10)}
    assert not agreement(record, {seed: value + 1.0 for seed, value in record.items()})["agrees"]
    wide = agreement(record, {seed: value + (20.0 if seed == 0 else 0.0) for seed, value in record.items()}, tolerance=1.0)
    assert wide["ci95"][0] <= 0 <= wide["ci95"][1] and not wide["agrees"]
    later_seeds = {seed + 10: drawn(seed + 10) for seed in range(10)}
    unpaired = agreement(record, later_seeds, tolerance=4.0)
    assert not unpaired["paired"] and unpaired["difference"] == -3.0 and unpaired["ci95"][0] <= 0 <= unpaired["ci95"][1]
    assert unpaired["agrees"] and not agreement(record, later_seeds, tolerance=2.0)["agrees"]


def test_a_weight_changed_by_one_float_step_changes_the_weights_digest() -> None:
    model = torch.nn.Linear(3, 2)
    before = weights_sha256(model)
    with torch.no_grad():
        model.weight[0, 0] = torch.nextafter(model.weight[0, 0], torch.tensor(math.inf))
    assert weights_sha256(model) != before
    assert tensors_sha256([("a", torch.zeros(2))]) != tensors_sha256([("a", torch.zeros(2, dtype=torch.float64))])


def test_verify_on_the_same_commit_and_machine_passes_by_weights_digest_and_a_perturbed_digest_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A real table (1 epoch, 2 seeds) verified as if on its clean commit: every seed's weights digest is the recorded
    one; one character changed in one recorded digest makes that row differ bitwise (its accuracies still agree)."""
    identity = {**run_identity(), "commit": "0123abcd" * 5, "dirty": False, "changed": []}
    monkeypatch.setattr(runs_module, "run_identity", lambda: dict(identity))
    monkeypatch.setattr(verify_module, "run_identity", lambda **_: dict(identity))
    request = TableRequest(
        name="t", datasets=("mutag",), methods=("ucl",), seeds=2, epochs=1, data=ROOT / "data" / "raw", out=tmp_path / "out"
    )
    result = table_stage.run(request)
    made = result["datasets"]["MUTAG"]["methods"]["ucl"]["provenance"]
    assert all(len(run["weights_sha256"]) == 64 and len(run["embeddings_sha256"]) == 64 for run in made)
    assert made[0]["machine"]["float_kernels"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    path = tmp_path / "out" / "t.json"
    record = table_stage.verify(path, ROOT / "data" / "raw", work=tmp_path / "work")
    assert [(row["method"], row["bitwise"], row["bitwise_seeds"], row["agrees"]) for row in record["rows"]] == [
        ("untrained", "equal", 2, True),
        ("ucl", "equal", 2, True),
    ]
    stored = json.loads(path.read_text())
    digest = stored["datasets"]["MUTAG"]["methods"]["ucl"]["provenance"][1]["weights_sha256"]
    stored["datasets"]["MUTAG"]["methods"]["ucl"]["provenance"][1]["weights_sha256"] = ("0" if digest[0] != "0" else "1") + digest[1:]
    path.write_text(json.dumps(stored))
    again = table_stage.verify(path, ROOT / "data" / "raw", work=tmp_path / "work2")
    assert [(row["method"], row["bitwise"]) for row in again["rows"]] == [("untrained", "equal"), ("ucl", "differs")]
    identity["machine"] = {**identity["machine"], "cpu_model": "Another CPU"}
    elsewhere = table_stage.verify(path, ROOT / "data" / "raw", work=tmp_path / "work3")
    assert {row["bitwise"] for row in elsewhere["rows"]} == {None}
    assert elsewhere["rows"][1]["not_bitwise"] == ["another CPU or float kernels"]


def test_a_results_file_whose_mean_or_std_is_not_its_accuracies_is_refused(tmp_path: Path) -> None:
    result = results_of({seed: drawn(seed) for seed in range(4)})
    result["datasets"]["MUTAG"]["methods"]["ucl"]["mean"] += 0.5
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    with pytest.raises(InputError, match=r"MUTAG/ucl \(mean"):
        table_stage.verify(path, ROOT / "data" / "raw", work=tmp_path / "work")
    assert not (tmp_path / "verify_r.json").exists()


def test_a_part_keeps_the_record_s_machine_and_each_row_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    identity = {"commit": "aaaa", "dirty": False, "machine": {"cpu_model": "Intel"}}
    monkeypatch.setattr(verify_module, "run_identity", lambda **_: dict(identity))
    monkeypatch.setattr(table_stage, "prepared", lambda work, name, source: Prepared(tmp_path, CARD, None, torch.zeros(0)))
    result = results_of({seed: drawn(seed) for seed in range(3)})
    result["datasets"]["MUTAG"]["methods"]["scl"] = {**result["datasets"]["MUTAG"]["methods"]["ucl"], "parameters": {"sampler": "scl"}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))
    monkeypatch.setattr(
        verify_module, "run_one", lambda values, seed, *_, **__: {"accuracy": drawn(seed), "train_seconds": 1.0, "eval_seconds": 0.0}
    )
    table_stage.verify(path, work=tmp_path / "work")
    identity.update(commit="bbbb", machine={"cpu_model": "AMD EPYC"})
    record = table_stage.verify(path, work=tmp_path / "work", rows=("MUTAG/scl",))
    assert record["commit"] == "aaaa" and record["machine"] == {"cpu_model": "Intel"}
    assert [(row["rerun_commit"], row["rerun_machine"]["cpu_model"]) for row in record["rows"]] == [("aaaa", "Intel"), ("bbbb", "AMD EPYC")]
    assert all(row["rerun_date"] for row in record["rows"])


@pytest.mark.parametrize("budget", [math.nan, math.inf, -1.0])
def test_a_time_budget_that_is_not_a_finite_number_of_seconds_is_refused(tmp_path: Path, budget: float) -> None:
    request = TableRequest(
        name="x", datasets=("mutag",), methods=("ucl",), data=ROOT / "data" / "raw", out=tmp_path / "out", time_budget=budget
    )
    with pytest.raises(UsageError, match="--time-budget must be a finite number"):
        table_stage.run(request)
    assert not (tmp_path / "out").exists()


def test_the_docs_no_longer_say_the_optimizer_alone_explains_the_label_samplers_reruns() -> None:
    """Issue 52's findings: ucl trains bitwise equal with single-tensor Adam, scl and hscl do not (393a269 changed their
    float path), and one seed's accuracy is too coarse a test; the docs, the benchmark's results and the inductive
    protocol's page say so."""
    from docs_pages import page

    graphs = " ".join(page("graphs").split())
    assert "the cause is the optimizer" not in graphs and "MUTAG's inductive ucl, scl and hscl rows then rerun equal" not in graphs
    assert "393a269" in graphs and "for the label samplers it does not" in graphs
    for name in ("adam_rounding", "adam_rounding_fig3"):
        assert "not a test of equal encoders" in json.loads((ROOT / "benchmarks" / "results" / f"{name}.json").read_text())["reading"]
    assert "a 2-seed smoke run" in " ".join(page("protocol-graphs").split())


def test_the_help_states_the_tolerance_verify_uses() -> None:
    import subprocess
    import sys

    shown = subprocess.run([sys.executable, "-m", "hcl_cli", "table", "--help"], capture_output=True, text=True, check=True, timeout=120)
    assert f"(default {DEFAULT_TOLERANCE:g})" in " ".join(shown.stdout.split())
