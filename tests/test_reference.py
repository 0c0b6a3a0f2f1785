"""The README's reference for the default digits run is its results file's, and a default run is told whether it is within the stated interval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hcl_cli.config import KnnConfig, LinearConfig, PrepareConfig, PretrainConfig
from hcl_cli.metrics import EvaluationMetrics
from hcl_cli.reference import MONITORING, RESULTS_FILE, Reference, is_reference_run, reproduction_note
from hcl_cli.reference import REFERENCE as README_REFERENCE

DEFAULTS = {
    "prepare": {"dataset": "digits", "seed": 0},
    "pretrain": PretrainConfig().params(),
    "knn": KnnConfig().params(),
    "linear": LinearConfig().params(),
}
"""What a default digits run records: the card's dataset and seed, and every parameter of the other stages."""
REFERENCE = Reference(
    top1={"knn": 0.9444, "linear": 0.9911},
    machine="a test CPU, 2 CPUs",
    date="2026-11-25",
    params={**DEFAULTS, "prepare": PrepareConfig().params()},
)


def metrics(knn: float, linear: float) -> dict[str, EvaluationMetrics]:
    return {
        "knn": EvaluationMetrics(top1=knn, top5=1.0, test_size=450, params=DEFAULTS["knn"]),
        "linear": EvaluationMetrics(top1=linear, top5=1.0, test_size=450, params=DEFAULTS["linear"]),
    }


def test_the_reference_is_the_results_file_the_readme_cites() -> None:
    recorded = json.loads((Path(__file__).resolve().parents[1] / RESULTS_FILE).read_text())
    reference = README_REFERENCE
    machine = recorded["machine"]
    assert reference.machine == f"{machine['cpu_model']}, {machine['cpus']} CPUs"
    assert reference.top1 == {"knn": recorded["knn_top1"], "linear": recorded["linear_top1"]}
    assert reference.date == recorded["date"]
    assert reference.params == recorded["params"]
    for stage, values in reference.params.items():
        if stage != "prepare":
            watching = MONITORING.get(stage, ())
            assert {key: value for key, value in values.items() if key not in watching} == {
                key: DEFAULTS[stage][key] for key in values if key not in watching
            }, "the reference run is the default digits run, but for what only watches it (the kNN probe's epochs)"
    assert is_reference_run(DEFAULTS, reference), "options declared since, at their defaults, leave it the default run"


def test_a_default_run_is_told_within_or_outside_the_interval() -> None:
    note = reproduction_note(metrics(0.9467, 0.9911), DEFAULTS, REFERENCE)
    assert note is not None
    assert "kNN top-1 0.9467 is within the README's stated interval 0.9192-0.9621" in note
    assert "linear top-1 0.9911 is within" in note
    assert "a test CPU, 2 CPUs" in note
    outside = reproduction_note(metrics(0.8000, 0.9911), DEFAULTS, REFERENCE)
    assert outside is not None and "kNN top-1 0.8000 is outside the README's stated interval" in outside


@pytest.mark.parametrize("eval_every", [0, 1, PretrainConfig.eval_every])
def test_the_knn_probe_s_epochs_leave_a_run_the_reference_run(eval_every: int) -> None:
    """The probe watches the run (the encoder is bitwise the same with it on or off: tests/test_pretrain.py), so the default
    run with the probe on, off or more often is still compared with a reference measured with the probe off."""
    reference = Reference(REFERENCE.top1, REFERENCE.machine, REFERENCE.date, README_REFERENCE.params)
    params = {**DEFAULTS, "pretrain": {**DEFAULTS["pretrain"], "eval_every": eval_every}}
    assert README_REFERENCE.params["pretrain"]["eval_every"] == 0
    assert is_reference_run(params, reference)
    assert reproduction_note(metrics(0.9444, 0.9911), params, reference) is not None


@pytest.mark.parametrize(
    "changed",
    [
        {"pretrain": {**DEFAULTS["pretrain"], "beta": 2.0}},
        {"prepare": {"dataset": "cifar10", "seed": 0}},
        {"knn": {**DEFAULTS["knn"], "k": 20}},
        {"linear": {key: value for key, value in DEFAULTS["linear"].items() if key != "seed"}},
    ],
)
def test_another_run_gets_no_verdict(changed: dict[str, dict[str, object]]) -> None:
    assert reproduction_note(metrics(0.9444, 0.9911), {**DEFAULTS, **changed}, REFERENCE) is None
