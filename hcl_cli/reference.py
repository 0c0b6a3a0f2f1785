"""The README's reference figures for the default digits run, and whether a run reproduces them.

The reference is what ``benchmarks/bench_dvc_repro.py`` measured for the default pipeline
(``benchmarks/results/dvc_repro_digits.json``: kNN and linear top-1, the machine and the date;
never copied by hand). Float32 training is not bitwise equal across CPU models, so another machine
moves the figures by a test image or two; what a user can rely on is the README's stated interval,
the Wilson 95% interval of each reference figure over the run's test images
(:func:`hcl_cli.stats.wilson_interval`). :func:`reproduction_note` tells, for a run with the reference
run's parameters (the defaults on digits, as the benchmark recorded them), whether each figure is
within that interval.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hcl_cli.metrics import EvaluationMetrics
from hcl_cli.stats import wilson_interval

REFERENCE_FILE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "dvc_repro_digits.json"
"""Where a clone keeps the reference (a dvc dependency of the report stage)."""
FIGURES = {"knn": ("kNN", "knn_top1"), "linear": ("linear", "linear_top1")}
STAGES = ("prepare", "pretrain", "knn", "linear")
"""The stages whose parameters make a run the reference run (benchmarks/bench_dvc_repro.py records them)."""


@dataclass(frozen=True)
class Reference:
    """The default digits run's top-1 figures as the README quotes them, and where and when they were measured."""

    top1: dict[str, float]
    machine: str
    date: str
    params: dict[str, dict[str, Any]]
    """The reference run's params.yaml groups (prepare, pretrain, knn, linear), as the benchmark recorded them."""


def load_reference(path: Path = REFERENCE_FILE) -> Reference | None:
    """The reference in ``path``, or None where this installation has none (or an unreadable one)."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict):
        return None
    top1 = {name: recorded.get(key) for name, (_, key) in FIGURES.items()}
    if not all(isinstance(value, float) and 0.0 <= value <= 1.0 for value in top1.values()):
        return None
    params = recorded.get("params")
    if not isinstance(params, dict) or not all(isinstance(params.get(stage), dict) for stage in STAGES):
        return None
    machine = recorded.get("machine") if isinstance(recorded.get("machine"), dict) else {}
    cpu = machine.get("cpu_model") or machine.get("processor") or "an unnamed CPU"
    described = f"{cpu}, {machine.get('cpus', '?')} CPUs"
    return Reference(
        top1=top1,
        machine=described,
        date=str(recorded.get("date", "an unrecorded date")),
        params={stage: params[stage] for stage in STAGES},
    )


def is_reference_run(params: Mapping[str, Mapping[str, Any]], reference: Reference) -> bool:
    """Whether a run's recorded parameters (by stage: prepare, pretrain, knn, linear) are those of the reference run.

    Each stage's recorded values must equal the reference run's (prepare records only what its card
    holds, so only those keys are compared there; every other stage records all of its parameters).
    """
    for stage, expected in reference.params.items():
        recorded = params.get(stage)
        if recorded is None or (stage != "prepare" and set(recorded) != set(expected)):
            return False
        if any(key not in expected or recorded[key] != expected[key] for key in recorded):
            return False
    return True


def reproduction_note(
    metrics: Mapping[str, EvaluationMetrics], params: Mapping[str, Mapping[str, Any]], reference: Reference | None
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
        f"on {reference.machine} on {reference.date} (benchmarks/results/dvc_repro_digits.json); float32 training is not "
        "bitwise equal across CPU models, so another CPU moves the figures by a test image or two."
    )
