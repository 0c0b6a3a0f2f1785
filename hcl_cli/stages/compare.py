"""``hcl compare``: one paper-style table of a DVC sweep (HCL Table 1, H-SCL Table I).

Reads every finished experiment from ``dvc exp show --json`` (the experiments of the current
commit, and the workspace) and tabulates, per row, its sampler and the pretrain parameters that
vary between the rows, each shown only where the row's sampler reads it (``-`` where it does
not), against kNN and linear top-1 with their 95% intervals (Wilson, from the test-split size
the metrics record). A value is in bold only when it beats every other row beyond the intervals;
rows within the intervals of the best are ties, and none of them is bolded. Queued, running and
failed experiments, and those without both metrics files, are listed under the table.

The JSON shape (dvc 3.x): a list of baseline entries ``{"rev", "name", "data", "error",
"experiments"}``, the first being ``"workspace"``; each entry's ``experiments`` is a list of
groups ``{"name", "executor": None | {"state": "success" | "queued" | "running" | "failed", ...},
"revs": [experiment entry, newest first]}``; an entry's ``data`` holds
``params["params.yaml"]["data"]`` and ``metrics["metrics/knn.json"]["data"]`` (or ``["error"]``).
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hcl_cli.artifacts import write_text
from hcl_cli.config.pipeline import STAGE_CONFIGS
from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.objectives.registry import SAMPLERS, users_of
from hcl_cli.stats import wilson_interval

PARAMS_FILE = "params.yaml"
METRICS = {"knn": "metrics/knn.json", "linear": "metrics/linear.json"}
TRAINING_LOG = "dvclive/pretrain/metrics.json"
"""pretrain's training log in the pipeline: its ``steps`` and ``planned_steps`` say whether --max-steps stopped the run."""
FINISHED_STATES = (None, "success")
WORKSPACE = "workspace"


@dataclass(frozen=True)
class Accuracy:
    """A top-1 accuracy and, when the metrics record the test-split size, its 95% interval."""

    top1: float
    test_size: int | None = None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.top1, self.test_size) if self.test_size else (self.top1, self.top1)


@dataclass(frozen=True)
class ExperimentRow:
    """One finished experiment: its pretrain parameters and its two accuracies."""

    name: str
    rev: str
    baseline: str
    pretrain: dict[str, Any]
    accuracy: dict[str, Accuracy] = field(default_factory=dict)
    steps: tuple[int, int] | None = None
    """The optimisation steps pretraining took and planned (from its training log), when it records them."""

    @property
    def extent(self) -> str:
        """``stopped at step 120 of 300`` for a run --max-steps ended early, else ``complete``."""
        if self.steps is not None and self.steps[0] < self.steps[1]:
            return f"stopped at step {self.steps[0]} of {self.steps[1]}"
        return "complete"

    @property
    def sampler(self) -> str:
        return str(self.pretrain.get("sampler", ""))

    def shows(self, parameter: str) -> bool:
        """Whether ``parameter`` matters for this row: a training parameter, or an option its sampler reads."""
        readers = users_of(parameter)
        return not readers or self.sampler in readers


@dataclass(frozen=True)
class Selection:
    """Which experiments to tabulate: by sampler, by parameter values (``pretrain.beta=1``) and by name pattern."""

    samplers: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    name: str | None = None

    def check(self) -> None:
        """Refuse, before dvc runs, a sampler or a ``--where`` key that no experiment can have: a usage error naming the known ones."""
        for sampler in self.samplers:
            if sampler not in SAMPLERS:
                raise UsageError(f"--sampler {sampler!r} is not a sampler (one of {', '.join(SAMPLERS)})")
        known = parameter_keys()
        for condition in self.where:
            key, separator, _ = condition.partition("=")
            group, _, name = key.partition(".")
            if not separator or not name:
                raise UsageError(f"--where {condition!r} must be GROUP.KEY=VALUE, e.g. pretrain.beta=1")
            if group not in known:
                raise UsageError(f"--where {condition!r}: {group!r} is not a params.yaml group (one of {', '.join(known)})")
            if name not in known[group]:
                raise UsageError(f"--where {condition!r}: {name!r} is not a parameter of {group} (one of {', '.join(known[group])})")

    def keeps(self, row: ExperimentRow, params: dict[str, Any]) -> bool:
        if self.samplers and row.sampler not in self.samplers:
            return False
        if self.name is not None and not fnmatch.fnmatchcase(row.name, self.name):
            return False
        return all(self._matches(condition, params) for condition in self.where)

    @staticmethod
    def _matches(condition: str, params: dict[str, Any]) -> bool:
        key, separator, wanted = condition.partition("=")
        group, _, name = key.partition(".")
        if not separator or not name:
            raise UsageError(f"--where {condition!r} must be GROUP.KEY=VALUE, e.g. pretrain.beta=1")
        value = (params.get(group) or {}).get(name)
        return value == yaml.safe_load(wanted) or str(value) == wanted


def parameter_keys() -> dict[str, list[str]]:
    """Every params.yaml group and its keys, as the stages declare them."""
    return {cls.group: [option.name for option in cls.declared_options() if not option.runtime] for cls in STAGE_CONFIGS}


def check_out(out: str) -> None:
    """Refuse an ``--out`` prefix that names a folder (``reports/``, an existing folder): it would write ``.md`` in it."""
    if out.endswith(("/", os.sep)) or Path(out).name in ("", ".", "..") or Path(out).is_dir():
        raise UsageError(
            f"--out {out} is a folder: give a prefix, e.g. {os.path.join(out, 'compare')} (writes compare.md and compare.csv in it)"
        )


def run(out: str, selection: Selection) -> None:
    """Write ``OUT.md`` and ``OUT.csv`` tabulating the finished experiments of the current commit that ``selection`` keeps."""
    check_out(out)
    selection.check()
    rows, skipped = parse_experiments(dvc_exp_show(), selection)
    if not rows:
        reason = f" ({'; '.join(skipped)})" if skipped else ""
        raise HclError(
            f"dvc exp show lists no finished experiment with both {METRICS['knn']} and {METRICS['linear']} that the filters keep{reason}; run `dvc exp run` first"
        )
    rows.sort(key=lambda row: (row.name != WORKSPACE, row.sampler, sorted(map(str, row.pretrain.items())), row.name))
    write_text(f"{out}.md", markdown_table(rows, skipped))
    write_text(f"{out}.csv", csv_table(rows))
    print(f"hcl compare: {len(rows)} experiments -> {shown(out)}.md, {shown(out)}.csv")


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


def parse_experiments(entries: list[dict[str, Any]], selection: Selection | None = None) -> tuple[list[ExperimentRow], list[str]]:
    """Rows of the workspace and of the finished experiments under each baseline, and why any other was left out."""
    selection = selection or Selection()
    rows: list[ExperimentRow] = []
    skipped: list[str] = []

    def consider(entry: dict[str, Any], name: str, baseline: str) -> None:
        params = params_of(entry)
        row = experiment_row(entry, name, baseline, params)
        if isinstance(row, str):
            skipped.append(f"{name}: {row}")
        elif selection.keeps(row, params):
            rows.append(row)

    for baseline in entries:
        if baseline.get("rev") == WORKSPACE:
            if (baseline.get("data") or {}).get("metrics"):
                consider(baseline, WORKSPACE, WORKSPACE)
            continue
        baseline_name = baseline.get("name") or baseline["rev"][:7]
        for group in baseline.get("experiments") or []:
            latest = group["revs"][0]
            name = group.get("name") or latest.get("name") or latest["rev"][:7]
            state = (group.get("executor") or {}).get("state")
            if state not in FINISHED_STATES or latest.get("error"):
                skipped.append(f"{name}: {'failed' if state in FINISHED_STATES else state}")
                continue
            consider(latest, name, baseline_name)
    return rows, skipped


def params_of(entry: dict[str, Any]) -> dict[str, Any]:
    """The params.yaml groups of one ``dvc exp show`` entry."""
    return ((entry.get("data") or {}).get("params", {}).get(PARAMS_FILE, {}).get("data")) or {}


def experiment_row(entry: dict[str, Any], name: str, baseline: str, params: dict[str, Any]) -> ExperimentRow | str:
    """The row of one experiment entry, or the reason it has none."""
    data = entry.get("data") or {}
    accuracy = {}
    for key, path in METRICS.items():
        metrics = data.get("metrics", {}).get(path, {}).get("data")
        if not isinstance(metrics, dict) or not isinstance(metrics.get("top1"), (int, float)):
            return f"no top1 in {path}"
        size = metrics.get("test_size")
        accuracy[key] = Accuracy(float(metrics["top1"]), size if isinstance(size, int) and size > 0 else None)
    pretrain = params.get("pretrain")
    if not isinstance(pretrain, dict) or "sampler" not in pretrain:
        return f"{PARAMS_FILE} has no pretrain.sampler"
    return ExperimentRow(
        name=name, rev=str(entry.get("rev", ""))[:7], baseline=baseline, pretrain=pretrain, accuracy=accuracy, steps=training_steps(data)
    )


def training_steps(data: dict[str, Any]) -> tuple[int, int] | None:
    """``(steps, planned_steps)`` from an entry's training log, or None where it does not record them."""
    log = data.get("metrics", {}).get(TRAINING_LOG, {}).get("data")
    if not isinstance(log, dict):
        return None
    steps, planned = log.get("steps"), log.get("planned_steps")
    if not all(isinstance(value, int) and not isinstance(value, bool) and value >= 0 for value in (steps, planned)):
        return None
    return steps, planned


def varying_parameters(rows: list[ExperimentRow]) -> list[str]:
    """The pretrain parameters (other than the sampler) whose values differ between the rows that read them."""
    names = dict.fromkeys(name for row in rows for name in row.pretrain if name != "sampler")
    return [name for name in names if len({json.dumps(row.pretrain.get(name)) for row in rows if row.shows(name)}) > 1]


def winners(rows: list[ExperimentRow], key: str) -> set[int]:
    """The index of the row whose ``key`` accuracy beats every other row beyond the 95% intervals (none when it ties)."""
    if len(rows) < 2:
        return set()
    best = max(range(len(rows)), key=lambda index: rows[index].accuracy[key].top1)
    low = rows[best].accuracy[key].interval[0]
    others = (row.accuracy[key] for index, row in enumerate(rows) if index != best)
    return {best} if all(other.interval[1] < low and other.test_size for other in others) and rows[best].accuracy[key].test_size else set()


def cell(accuracy: Accuracy, bold: bool) -> str:
    """``0.9467 (0.921-0.964)``, in bold when it is a clear winner."""
    low, high = accuracy.interval
    text = f"{accuracy.top1:.4f}" + (f" ({low:.3f}-{high:.3f})" if accuracy.test_size else "")
    return f"**{text}**" if bold else text


def markdown_table(rows: list[ExperimentRow], skipped: list[str]) -> str:
    """A Markdown table, one row per experiment; only the parameters that vary, only where the sampler reads them."""
    columns = varying_parameters(rows)
    best = {key: winners(rows, key) for key in METRICS}
    baselines = sorted({row.baseline for row in rows} - {WORKSPACE})
    stopped = any(row.extent != "complete" for row in rows)
    extent_column = ["Pretraining"] if stopped else []
    lines = [
        "# Sweep comparison",
        "",
        f"The workspace and the experiments of {', '.join(f'`{name}`' for name in baselines) or 'no commit'} from `dvc exp show`; "
        "top-1 accuracy on the test split with its 95% interval (Wilson). Only the pretrain parameters that vary are shown, "
        "and `-` where the row's sampler does not read them. A value is **bold** only when it beats every other row beyond the intervals.",
        "",
        "| " + " | ".join(["Experiment", "Sampler", *extent_column, *columns, "kNN top-1", "Linear top-1"]) + " |",
        "|" + "|".join([":--", ":--", *[":--"] * len(extent_column), *["--:"] * len(columns), "--:", "--:"]) + "|",
    ]
    for index, row in enumerate(rows):
        values = [format_value(row.pretrain.get(name)) if row.shows(name) else "-" for name in columns]
        accuracies = [cell(row.accuracy[key], index in best[key]) for key in METRICS]
        extent = [row.extent] if stopped else []
        lines.append("| " + " | ".join([row.name, row.sampler, *extent, *values, *accuracies]) + " |")
    if not any(best.values()) and len(rows) > 1:
        lines += ["", "No row beats all others beyond the 95% intervals: the differences are within the test-split noise."]
    if skipped:
        lines += ["", "Not tabulated: " + "; ".join(skipped) + "."]
    return "\n".join(lines) + "\n"


def format_value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def csv_table(rows: list[ExperimentRow]) -> str:
    """Every row with every pretrain parameter (empty where its sampler does not read it), accuracies at full precision."""
    parameters = list(dict.fromkeys(name for row in rows for name in row.pretrain))
    best = {key: winners(rows, key) for key in METRICS}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    accuracy_columns = [f"{key}_{part}" for key in METRICS for part in ("top1", "low", "high", "best")]
    writer.writerow(["experiment", "rev", "baseline", "steps", "planned_steps", *parameters, *accuracy_columns])
    for index, row in enumerate(rows):
        values = [row.pretrain.get(name, "") if row.shows(name) else "" for name in parameters]
        accuracies = []
        for key in METRICS:
            accuracy = row.accuracy[key]
            accuracies += [repr(accuracy.top1), *(repr(bound) for bound in accuracy.interval), int(index in best[key])]
        steps = list(row.steps) if row.steps is not None else ["", ""]
        writer.writerow([row.name, row.rev, row.baseline, *steps, *values, *accuracies])
    return buffer.getvalue()
