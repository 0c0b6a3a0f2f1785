"""A table's rows from its runs: per dataset and method the per-seed accuracies, their mean and std (ddof 0, as the
papers' code), and the paired differences from InfoGraph (ucl) and from the untrained encoder with 95% t intervals."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from scipy import stats

from hcl_cli.config.pretrain import TRANSDUCTIVE_LABELS, PretrainConfig
from hcl_cli.presets import graphs as presets
from hcl_cli.tables.methods import Method


def mean_interval(values: list[float]) -> dict[str, Any]:
    """Mean of ``values`` and its 95% t interval (None with fewer than 2 values)."""
    n, mean = len(values), float(np.mean(values))
    if n < 2:
        return {"mean": round(mean, 2), "ci95": None, "n": n}
    half = float(stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1) / math.sqrt(n))
    return {"mean": round(mean, 2), "ci95": [round(mean - half, 2), round(mean + half, 2)], "n": n}


def paired(runs: dict[int, dict[str, Any]], baseline: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The per-seed differences of accuracy from ``baseline`` over the seeds both have: mean and 95% t interval."""
    seeds = sorted(set(runs) & set(baseline))
    return mean_interval([runs[s]["accuracy"] - baseline[s]["accuracy"] for s in seeds]) | {"seeds": seeds} if seeds else None


def summary(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per-seed accuracies and seconds, their mean and std; the seconds' means over the runs that have them (not the imported ones);
    per seed the run's provenance (:func:`~hcl_cli.provenance.run_identity`: commit, dirty flag, versions, machine), None for a
    run recorded before runs kept it."""
    seeds = sorted(runs)
    accuracies = [runs[s]["accuracy"] for s in seeds]

    def seconds(kind: str) -> tuple[list[float | None], float | None]:
        per_seed = [runs[s].get(kind) for s in seeds]
        known = [t for t in per_seed if t is not None]
        return per_seed, round(float(np.mean(known)), 2) if known else None

    (train, train_mean), (evaluation, eval_mean) = seconds("train_seconds"), seconds("eval_seconds")
    return {
        "seeds": seeds,
        "accuracies": [round(a, 2) for a in accuracies],
        "mean": round(float(np.mean(accuracies)), 2) if accuracies else None,
        "std": round(float(np.std(accuracies)), 2) if accuracies else None,
        "train_seconds": train,
        "eval_seconds": evaluation,
        "train_seconds_mean": train_mean,
        "eval_seconds_mean": eval_mean,
        "provenance": [runs[s].get("provenance") for s in seeds],
    }


def runs_in_results(result: dict[str, Any], methods: dict[str, dict[str, Method]], epochs: Any, protocol: str) -> dict[str, Any]:
    """The runs a results file holds (per seed: the accuracy, and the seconds where it kept them), for the
    methods whose parameters, epochs and protocol are those asked for (a file without a protocol ran transductive):
    what a rerun resumes from when the work folder's runs.json is gone (a fresh clone has only the committed results file)."""
    if result.get("epochs") != epochs or result.get("protocol", "transductive") != protocol:
        return {}
    runs: dict[str, Any] = {}
    for dataset, rows in methods.items():
        stored = result.get("datasets", {}).get(presets.TU_DATASETS[dataset][0], {})
        same = {
            name: stored["methods"][name]
            for name, spec in rows.items()
            if stored.get("methods", {}).get(name, {}).get("parameters") == json.loads(json.dumps(spec.pretrain))
        }
        if "ucl" in same and "untrained" in stored:
            same["untrained"] = stored["untrained"]
        for name, row in same.items():
            count = len(row["seeds"])
            timings = zip(row.get("train_seconds") or [None] * count, row.get("eval_seconds") or [None] * count, strict=True)
            provenance = row.get("provenance") or recorded_provenance(result, row)
            for seed, accuracy, (train, evaluation), made in zip(row["seeds"], row["accuracies"], timings, provenance, strict=True):
                runs[f"{dataset}/{name}/{seed}"] = {
                    "accuracy": accuracy,
                    "train_seconds": train,
                    "eval_seconds": evaluation,
                    "provenance": made,
                    "from": "results file",
                }
    return runs


def recorded_provenance(result: dict[str, Any], row: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Per seed of ``row``, its provenance as a file from before per-run provenance records it: the row's ``commits`` and
    the file's ``environments`` (versions and machine) they name, the dirty flag unknown; None where it records no commit."""
    count = len(row["seeds"])
    commits, environments = row.get("commits") or [None] * count, row.get("environments") or [None] * count
    made = []
    for commit, key in zip(commits, environments, strict=True):
        environment = result.get("environments", {}).get(key) or {}
        versions = {"python": environment.get("python"), **environment.get("versions", {})} if environment else None
        made.append({"commit": commit, "dirty": None, "versions": versions, "machine": environment.get("machine")} if commit else None)
    return made


def table(methods: dict[str, dict[str, Method]], done: dict[str, Any], repeats: int, protocol: str) -> dict[str, Any]:
    """The results file's per-dataset rows from the runs done, each naming its protocol (:func:`protocol_label`)."""
    out = {}
    for dataset, rows in methods.items():
        by = {name: {int(k.rsplit("/", 1)[1]): v for k, v in done.items() if k.rsplit("/", 1)[0] == f"{dataset}/{name}"} for name in rows}
        untrained = {int(k.rsplit("/", 1)[1]): v for k, v in done.items() if k.rsplit("/", 1)[0] == f"{dataset}/untrained"}
        entries = {}
        for name, spec in rows.items():
            runs = by[name]
            entries[name] = {
                "parameters": spec.pretrain,
                "paper": spec.paper,
                "protocol": protocol_label(protocol, spec.pretrain),
                **summary(runs),
                "complete": len(runs) == repeats,
                "minus_ucl": paired(runs, by["ucl"]) if "ucl" in by and name != "ucl" else None,
                "minus_untrained": paired(runs, untrained),
            }
        out[presets.TU_DATASETS[dataset][0]] = {"untrained": summary(untrained), "methods": entries}
    return out


def protocol_label(protocol: str, pretrain: dict[str, Any]) -> str:
    """A row's protocol as the results file and the tables name it: a transductive row whose sampler reads labels says
    that its encoder saw the test labels (:data:`~hcl_cli.config.pretrain.TRANSDUCTIVE_LABELS`)."""
    return TRANSDUCTIVE_LABELS if protocol == "transductive" and PretrainConfig(**pretrain).needs_labels else protocol
