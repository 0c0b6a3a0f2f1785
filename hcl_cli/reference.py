"""The README's reference figures for the default digits run, and whether a run reproduces them.

The reference is what ``benchmarks/bench_dvc_repro.py`` measured for the default pipeline
(``benchmarks/results/dvc_repro_digits.json``: kNN and linear top-1, the machine and the date;
copied into :data:`REFERENCE`, which a test holds equal to that file). Float32 training is not bitwise equal across CPU models, so another machine
moves the figures by a test image or two; what a user can rely on is the README's stated interval,
the Wilson 95% interval of each reference figure over the run's test images
(:func:`hcl_cli.stats.wilson_interval`). :func:`reproduction_note` tells, for a run with the reference
run's parameters (the defaults on digits, as the benchmark recorded them), whether each figure is
within that interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hcl_cli.config import STAGE_CONFIGS
from hcl_cli.metrics import EvaluationMetrics
from hcl_cli.stats import wilson_interval

RESULTS_FILE = "benchmarks/results/dvc_repro_digits.json"
"""The results file the reference comes from (tests/test_reference.py holds :data:`REFERENCE` equal to it)."""
FIGURES = {"knn": ("kNN", "knn_top1"), "linear": ("linear", "linear_top1")}
STAGES = ("prepare", "pretrain", "knn", "linear")
"""The stages whose parameters make a run the reference run (benchmarks/bench_dvc_repro.py records them)."""
MONITORING = {"pretrain": ("eval_every",)}
"""Parameters that watch a run without changing it (the kNN probe leaves the trained encoder bitwise the same:
tests/test_pretrain.py), so that a run is the reference run whatever their values."""


@dataclass(frozen=True)
class Reference:
    """The default digits run's top-1 figures as the README quotes them, and where and when they were measured."""

    top1: dict[str, float]
    machine: str
    date: str
    params: dict[str, dict[str, Any]]
    """The reference run's params.yaml groups (prepare, pretrain, knn, linear), as the benchmark recorded them."""


REFERENCE = Reference(
    top1={"knn": 0.94, "linear": 0.9911111111111112},
    machine="Intel(R) Xeon(R) Processor, 2 CPUs",
    date="2026-11-28T03:51:04+00:00",
    params={
        "prepare": {"dataset": "digits", "path": "data/raw", "name": "MUTAG", "image_size": 0, "test_fraction": 0.25, "seed": 0},
        "pretrain": {
            "sampler": "hucl",
            "arch": "auto",
            "gin_layers": 3,
            "gin_hidden": 32,
            "projection_dim": 128,
            "projection_hidden": 512,
            "projection_batchnorm": True,
            "epochs": 60,
            "batch_size": 256,
            "queue_size": 0,
            "momentum": 0.99,
            "queue_mode": "batch",
            "optimizer": "adam",
            "lr": 0.001,
            "weight_decay": 1e-06,
            "sgd_momentum": 0.9,
            "nesterov": False,
            "lars_eta": 0.001,
            "lr_schedule": "constant",
            "warmup_epochs": 0,
            "blur": False,
            "seed": 0,
            "label_protocol": "inductive",
            "eval_every": 0,
            "max_steps": 0,
            "checkpoint_every": 0,
            "compile": False,
            "precision": "auto",
            "sync_batchnorm": False,
            "temperature": 0.5,
            "objective": "auto",
            "positives": "partner",
            "tau_plus": 0.1,
            "graph_weights": "paper",
            "beta": 1.0,
            "anneal": "none",
            "anneal_steps": 9,
            "detach_weights": False,
            "clip": False,
            "threshold_start": -0.3,
            "threshold_end": 0.0,
            "ot_epsilon": 0.5,
            "ot_cost": "sq",
            "ot_kappa": 1.0,
            "ot_iterations": 50,
            "undimix_weights": "1,1,1",
            "undimix_learned": False,
            "undimix_uncertainty": "badge",
            "undimix_diversity": "negative-view",
        },
        "knn": {"k": 200, "temperature": 0.5, "feature": "backbone", "chunk_size": 1024, "bank_chunk_size": 32768},
        "linear": {
            "protocol": "fixed",
            "svm_folds": 10,
            "svm_repeats": 1,
            "svm_c_grid": "1e-3,1e-2,1e-1,1,10,100,1000",
            "svm_inner_folds": 5,
            "feature": "backbone",
            "optimizer": "lbfgs",
            "epochs": 100,
            "batch_size": 512,
            "lr": 1.0,
            "weight_decay": 0.001,
            "seed": 0,
        },
    },
)
"""The reference, kept in the code rather than read from :data:`RESULTS_FILE`: the report depends on hcl's code, never on a
benchmark's file, so rerunning a benchmark reruns no user's report; a remeasured reference is a change of this module."""


def is_reference_run(params: Mapping[str, Mapping[str, Any]], reference: Reference) -> bool:
    """Whether a run's recorded parameters (by stage: prepare, pretrain, knn, linear) are those of the reference run.

    Each stage's recorded values must equal the reference run's (prepare records only what its card
    holds, so only those keys are compared there; every other stage records all of its parameters). An option declared
    since the reference was measured counts when it is at its default, which leaves a run as it was (the sentence
    modality's options on a digits run, say), and so does any value of a parameter that only watches the run (:data:`MONITORING`).
    """
    for stage, expected in reference.params.items():
        recorded = params.get(stage)
        if recorded is None or (stage != "prepare" and not set(expected) <= set(recorded)):
            return False
        defaults, watching = added_defaults(stage, expected), MONITORING.get(stage, ())
        compared = [key for key in recorded if key not in watching]
        if any(recorded[key] != expected[key] if key in expected else defaults.get(key, _ABSENT) != recorded[key] for key in compared):
            return False
    return True


_ABSENT = object()


def added_defaults(stage: str, expected: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults of ``stage``'s options that the reference run did not record (declared after it was measured)."""
    configs = {config.group: config for config in STAGE_CONFIGS}
    defaults = configs[stage]().params() if stage in configs else {}
    return {key: value for key, value in defaults.items() if key not in expected}


def reproduction_note(
    metrics: Mapping[str, EvaluationMetrics], params: Mapping[str, Mapping[str, Any]], reference: Reference | None = REFERENCE
) -> str | None:
    """One markdown paragraph: each top-1 of a default digits run within or outside the README's interval; None for another run."""
    if reference is None or not all(name in metrics for name in FIGURES) or not is_reference_run(params, reference):
        return None
    verdicts = []
    for name, (label, _) in FIGURES.items():
        measured, expected = metrics[name], reference.top1[name]
        low, high = wilson_interval(expected, measured.test_size)
        where = "within" if low <= measured.top1 <= high else "outside"
        verdicts.append(
            f"{label} top-1 {measured.top1:.4f} is {where} the README's stated interval {low:.4f}-{high:.4f} "
            f"(reference {expected:.4f}, Wilson 95% over {measured.test_size} test images)"
        )
    return (
        f"**Against the README's default**: this is the default digits run; {'; '.join(verdicts)}. The reference was measured "
        f"on {reference.machine} on {reference.date} ({RESULTS_FILE}); float32 training is not "
        "bitwise equal across CPU models, so another CPU moves the figures by a test image or two."
    )
