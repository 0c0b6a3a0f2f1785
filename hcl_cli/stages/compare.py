"""``hcl compare``: one paper-style table of a DVC sweep (HCL Table 1, H-SCL Table I).

Reads every finished experiment from ``dvc exp show --json`` (the experiments of the current
commit, the baseline) and tabulates its sampler, beta and tau_plus against kNN and linear top-1,
best of each column in bold. Queued, running and failed experiments, and those without both
metrics files, are listed under the table rather than silently dropped.

The JSON shape (dvc 3.x): a list of baseline entries ``{"rev", "name", "data", "error",
"experiments"}``, the first being ``"workspace"``; each entry's ``experiments`` is a list of
groups ``{"name", "executor": None | {"state": "success" | "queued" | "running" | "failed", ...},
"revs": [experiment entry, newest first]}``; an entry's ``data`` holds
``params["params.yaml"]["data"]`` and ``metrics["metrics/knn.json"]["data"]`` (or ``["error"]``).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from dataclasses import dataclass
from typing import Any

from hcl_cli.artifacts import write_text
from hcl_cli.errors import HclError

PARAMS_FILE = "params.yaml"
KNN_METRICS = "metrics/knn.json"
LINEAR_METRICS = "metrics/linear.json"
FINISHED_STATES = (None, "success")
CSV_COLUMNS = ("experiment", "rev", "baseline", "sampler", "beta", "tau_plus", "knn_top1", "linear_top1", "knn_top1_best", "linear_top1_best")


@dataclass(frozen=True)
class ExperimentRow:
    """One finished experiment: its sweep parameters and its two top-1 accuracies."""

    name: str
    rev: str
    baseline: str
    sampler: str
    beta: float
    tau_plus: float
    knn_top1: float
    linear_top1: float


def run(out: str) -> None:
    """Write ``OUT.md`` and ``OUT.csv`` tabulating every finished experiment of the current commit."""
    rows, skipped = parse_experiments(dvc_exp_show())
    if not rows:
        reason = f" ({'; '.join(skipped)})" if skipped else ""
        raise HclError(f"dvc exp show lists no finished experiment with both {KNN_METRICS} and {LINEAR_METRICS}{reason}; run `dvc exp run` first")
    rows.sort(key=lambda row: (row.sampler, row.beta, row.tau_plus, row.name))
    write_text(f"{out}.md", markdown_table(rows, skipped))
    write_text(f"{out}.csv", csv_table(rows))
    print(f"hcl compare: {len(rows)} experiments -> {out}.md, {out}.csv")


def dvc_exp_show() -> list[dict[str, Any]]:
    """The parsed output of ``dvc exp show --json`` in the working folder."""
    try:
        result = subprocess.run(["dvc", "exp", "show", "--json"], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise HclError("dvc is not installed (hcl compare reads `dvc exp show --json`)") from None
    if result.returncode != 0:
        errors = [line.removeprefix("ERROR: ") for line in result.stderr.splitlines() if line.startswith("ERROR")]
        raise HclError(f"dvc exp show failed: {errors[0] if errors else result.stderr.strip() or f'exit code {result.returncode}'}")
    try:
        entries = json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise HclError(f"dvc exp show --json printed invalid JSON: {exc}") from exc
    if not isinstance(entries, list):
        raise HclError("dvc exp show --json printed an unexpected shape (expected a list of baselines)")
    return entries


def parse_experiments(entries: list[dict[str, Any]]) -> tuple[list[ExperimentRow], list[str]]:
    """Rows of the finished experiments under each baseline, and why any other was left out."""
    rows: list[ExperimentRow] = []
    skipped: list[str] = []
    for baseline in entries:
        if baseline.get("rev") == "workspace":
            continue
        baseline_name = baseline.get("name") or baseline["rev"][:7]
        for group in baseline.get("experiments") or []:
            latest = group["revs"][0]
            name = group.get("name") or latest.get("name") or latest["rev"][:7]
            state = (group.get("executor") or {}).get("state")
            if state not in FINISHED_STATES or latest.get("error"):
                skipped.append(f"{name}: {'failed' if state in FINISHED_STATES else state}")
                continue
            row = experiment_row(latest, name, baseline_name)
            if isinstance(row, str):
                skipped.append(f"{name}: {row}")
            else:
                rows.append(row)
    return rows, skipped


def experiment_row(entry: dict[str, Any], name: str, baseline: str) -> ExperimentRow | str:
    """The row of one experiment entry, or the reason it has none."""
    data = entry.get("data") or {}
    pretrain = (data.get("params", {}).get(PARAMS_FILE, {}).get("data") or {}).get("pretrain", {})
    top1 = {}
    for path in (KNN_METRICS, LINEAR_METRICS):
        metrics = data.get("metrics", {}).get(path, {}).get("data")
        if not isinstance(metrics, dict) or not isinstance(metrics.get("top1"), (int, float)):
            return f"no top1 in {path}"
        top1[path] = float(metrics["top1"])
    if not {"sampler", "beta", "tau_plus"} <= pretrain.keys():
        return f"{PARAMS_FILE} has no pretrain.sampler, pretrain.beta and pretrain.tau_plus"
    return ExperimentRow(
        name=name,
        rev=entry["rev"][:7],
        baseline=baseline,
        sampler=str(pretrain["sampler"]),
        beta=float(pretrain["beta"]),
        tau_plus=float(pretrain["tau_plus"]),
        knn_top1=top1[KNN_METRICS],
        linear_top1=top1[LINEAR_METRICS],
    )


def markdown_table(rows: list[ExperimentRow], skipped: list[str]) -> str:
    """A Markdown table, one row per experiment, the best value of each accuracy column in bold."""
    best_knn, best_linear = best_top1(rows)
    baselines = sorted({row.baseline for row in rows})
    lines = [
        "# Sweep comparison",
        "",
        f"Experiments of {', '.join(f'`{name}`' for name in baselines)} from `dvc exp show`; top-1 accuracy on the test split "
        "(fraction, 4 decimals), best of each column in **bold**.",
        "",
        "| Experiment | Sampler | beta | tau_plus | kNN top-1 | Linear top-1 |",
        "|:--|:--|--:|--:|--:|--:|",
    ]
    for row in rows:
        knn = bold_if(f"{row.knn_top1:.4f}", row.knn_top1 == best_knn)
        linear = bold_if(f"{row.linear_top1:.4f}", row.linear_top1 == best_linear)
        lines.append(f"| {row.name} | {row.sampler} | {row.beta:g} | {row.tau_plus:g} | {knn} | {linear} |")
    if skipped:
        lines += ["", "Not tabulated: " + "; ".join(skipped) + "."]
    return "\n".join(lines) + "\n"


def best_top1(rows: list[ExperimentRow]) -> tuple[float, float]:
    """The best kNN and the best linear top-1 over ``rows``."""
    return max(row.knn_top1 for row in rows), max(row.linear_top1 for row in rows)


def bold_if(text: str, condition: bool) -> str:
    """``**text**`` when ``condition`` holds, else ``text``."""
    return f"**{text}**" if condition else text


def csv_table(rows: list[ExperimentRow]) -> str:
    """The same table as CSV, accuracies at full precision, best-of-column flags as 0/1."""
    best_knn, best_linear = best_top1(rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow(
            [row.name, row.rev, row.baseline, row.sampler, repr(row.beta), repr(row.tau_plus), repr(row.knn_top1), repr(row.linear_top1), int(row.knn_top1 == best_knn), int(row.linear_top1 == best_linear)]
        )
    return buffer.getvalue()

