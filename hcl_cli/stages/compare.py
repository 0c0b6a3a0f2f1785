"""``hcl compare``: one paper-style table of a DVC sweep (HCL Table 1, H-SCL Table I).

Reads every finished experiment from ``dvc exp show --json`` (the experiments of the current
commit, and the workspace) and tabulates, per row, its dataset, its linear protocol, its sampler
and the pretrain parameters that vary between the rows, each shown only where the row's sampler
reads it (``-`` where it does not), against kNN and linear top-1 (a sentence sweep: each SentEval task's accuracy) with their spread: the 95% Wilson
interval of a test split (from the test-split size the metrics record), or for the SVM protocol,
which cross-validates over every sample, the mean over the folds with their standard deviation.
A value is in bold only when it beats every other row beyond those intervals; rows within the
intervals of the best are ties, and none of them is bolded.

One table compares one dataset: ``--dataset``'s, else the one most rows share. The workspace's
row is what its metrics came from: the parameters ``dvc.lock`` records for its last ``dvc repro``
(params.yaml may have changed since, e.g. by ``hcl preset``), so a workspace whose metrics are
another dataset's is not tabulated beside the sweep. Rows of another dataset, queued, running and
failed experiments, and those without both metrics files, are listed under the table.

The JSON shape (dvc 3.x): a list of baseline entries ``{"rev", "name", "data", "error",
"experiments"}``, the first being ``"workspace"``; each entry's ``experiments`` is a list of
groups ``{"name", "executor": None | {"state": "success" | "queued" | "running" | "failed", ...},
"revs": [experiment entry, newest first]}``; an entry's ``data`` holds
``params["params.yaml"]["data"]`` and ``metrics["metrics/knn.json"]["data"]`` (or ``["error"]``). A metrics file holds
what was measured; the parameters it was measured with (the linear readout's protocol, for one) are its stage's group of
params.yaml as the entry records it (the workspace: as ``dvc.lock`` does).
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAMLError

from hcl_cli.artifacts import check_replaceable, is_finite_number, is_integer, recorded_output, write_output
from hcl_cli.config.base import load_yaml12
from hcl_cli.config.pipeline import STAGE_CONFIGS
from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.logs import LOG
from hcl_cli.metrics import PARAMS, evaluation_metrics
from hcl_cli.objectives.registry import SAMPLERS
from hcl_cli.report.sentences import SENTENCE_METRICS, TASK_ORDER
from hcl_cli.report.sweep import EVALUATIONS, WORKSPACE, Accuracy, ExperimentRow, csv_table, markdown_table

PARAMS_FILE = "params.yaml"
LOCK_FILE = "dvc.lock"
"""What the workspace's metrics came from: the params of each stage's last run."""
TABLE_OUTPUT = recorded_output("comparison table")
"""``OUT.md`` and ``OUT.csv``, hcl's own only as their folder's record lists them (:mod:`~hcl_cli.artifacts.record`)."""
METRICS = dict(zip(EVALUATIONS, ("metrics/knn.json", "metrics/linear.json")))
"""The accuracies of an image or graph run; a sentence run's are its SentEval tasks' (:func:`evaluated_metrics`)."""
TRAINING_LOG = "dvclive/pretrain/metrics.json"
"""pretrain's training log in the pipeline: its ``steps`` and ``planned_steps`` say whether --max-steps stopped the run."""
FINISHED_STATES = (None, "success")


@dataclass(frozen=True)
class Selection:
    """Which experiments to tabulate: by sampler, by parameter values (``pretrain.beta=1``), by name pattern, and the dataset
    (none: the one most experiments share)."""

    samplers: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    name: str | None = None
    dataset: str | None = None

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
        try:
            parsed = load_yaml12(wanted)
        except YAMLError:
            parsed = wanted
        return value == parsed or str(value) == wanted


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
    check_replaceable("--out", f"{out}.md", TABLE_OUTPUT)
    check_replaceable("--out", f"{out}.csv", TABLE_OUTPUT)
    selection.check()
    entries, workspace = dvc_exp_show(), locked_params()
    every, _ = parse_experiments(entries, workspace_params=workspace)
    if selection.name is not None and not any(fnmatch.fnmatchcase(row.name, selection.name) for row in every):
        names = ", ".join(row.name for row in every) or "none"
        raise HclError(
            f"--name {selection.name!r} matches no finished experiment; dvc exp show lists {names} "
            "(dvc exp run names them with random words unless given -n NAME)"
        )
    rows, skipped = parse_experiments(entries, selection, workspace)
    if not rows:
        reason = f" ({'; '.join(skipped)})" if skipped else ""
        raise HclError(
            f"dvc exp show lists no finished experiment with both {METRICS['knn']} and {METRICS['linear']} (or a sentence run's "
            f"metrics/{SENTENCE_METRICS.format(task='TASK')}) that the filters keep{reason}; run `dvc exp run` first"
        )
    dataset = selection.dataset or majority_dataset(rows)
    if not any(row.dataset == dataset for row in rows):
        raise UsageError(
            f"--dataset {dataset!r}: no experiment the filters keep is of it (theirs: {', '.join(sorted({row.dataset for row in rows}))})"
        )
    skipped += [f"{row.name}: dataset {row.dataset}, not {dataset}" for row in rows if row.dataset != dataset]
    rows = [row for row in rows if row.dataset == dataset]
    rows.sort(key=lambda row: (row.name != WORKSPACE, row.sampler, sorted(map(str, row.pretrain.items())), row.name))
    table = markdown_table(rows, skipped)
    write_output(f"{out}.md", table, TABLE_OUTPUT)
    write_output(f"{out}.csv", csv_table(rows), TABLE_OUTPUT)
    print(table.rstrip("\n") + "\n")  # on the terminal too, as it was written
    LOG.info(f"hcl compare: {len(rows)} experiments -> {shown(out)}.md, {shown(out)}.csv")


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


def locked_params() -> dict[str, Any] | None:
    """The params.yaml groups that ``dvc.lock`` records for the stages' last runs (what the workspace's metrics came from),
    or None without a readable ``dvc.lock``."""
    try:
        lock = load_yaml12(Path(LOCK_FILE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError):
        return None
    stages = lock.get("stages") if isinstance(lock, dict) else None
    if not isinstance(stages, dict):
        return None
    groups: dict[str, Any] = {}
    for stage in stages.values():
        recorded = (stage.get("params") or {}).get(PARAMS_FILE) if isinstance(stage, dict) else None
        groups |= recorded if isinstance(recorded, dict) else {}
    return groups


def majority_dataset(rows: list[ExperimentRow]) -> str:
    """The dataset most experiments share (the workspace counts only without experiments; ties: the first by name)."""
    counted = [row.dataset for row in rows if row.name != WORKSPACE] or [row.dataset for row in rows]
    return min(set(counted), key=lambda dataset: (-counted.count(dataset), dataset))


def parse_experiments(
    entries: list[dict[str, Any]], selection: Selection | None = None, workspace_params: dict[str, Any] | None = None
) -> tuple[list[ExperimentRow], list[str]]:
    """Rows of the workspace and of the finished experiments under each baseline, and why any other was left out.

    ``workspace_params`` (:func:`locked_params`) replace the workspace's params.yaml groups they hold."""
    selection = selection or Selection()
    rows: list[ExperimentRow] = []
    skipped: list[str] = []

    def consider(entry: dict[str, Any], name: str, baseline: str) -> None:
        params = {**params_of(entry), **(workspace_params or {})} if name == WORKSPACE else params_of(entry)
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
    protocols: dict[str, str] = {}
    for key, path in evaluated_metrics(data).items():
        metrics = data.get("metrics", {}).get(path, {}).get("data")
        if not isinstance(metrics, dict) or "top1" not in metrics:
            return f"no top1 in {path}"
        evaluation = key if key in METRICS else "linear"  # a SentEval task's accuracy is a linear readout's
        group = params.get(evaluation) if isinstance(params.get(evaluation), dict) else {}
        try:  # the report's check, with the parameters params.yaml held: what it refuses is not tabulated
            checked = evaluation_metrics(metrics, path, f"{evaluation}-eval", {PARAMS: group}, complete=False)
        except HclError as error:
            return str(error)
        protocol = protocols[evaluation] = str(checked.params.get("protocol", "-"))
        accuracy[key] = Accuracy(checked.top1, checked.test_size, *fold_spread(checked.details.get("svm") if protocol == "svm" else None))
    pretrain = params.get("pretrain")
    if not isinstance(pretrain, dict) or "sampler" not in pretrain:
        return f"{PARAMS_FILE} has no pretrain.sampler"
    prepare = params.get("prepare") if isinstance(params.get("prepare"), dict) else {}
    dataset = prepare.get("name") if prepare.get("dataset") == "tu" else prepare.get("dataset")
    return ExperimentRow(
        name=name,
        rev=str(entry.get("rev", ""))[:7],
        baseline=baseline,
        pretrain=pretrain,
        accuracy=accuracy,
        dataset=str(dataset) if dataset is not None else "-",
        protocol=protocols["linear"],
        steps=training_steps(data),
        graphs=prepare.get("dataset") == "tu",
    )


def evaluated_metrics(data: dict[str, Any]) -> dict[str, str]:
    """The accuracies a row shows, by column: a sentence run's SentEval tasks (``metrics/senteval-TASK.json``, in SentEval's
    order) where the entry has any, else kNN and linear (:data:`METRICS`)."""
    recorded = data.get("metrics") or {}
    tasks = {task: f"metrics/{SENTENCE_METRICS.format(task=task)}" for task in TASK_ORDER}
    return {task: path for task, path in tasks.items() if path in recorded} or METRICS


def fold_spread(svm: Any) -> tuple[float, int]:
    """The std over the folds and their number (repeats x folds) that the SVM protocol records (``details.svm``), else (0, 0)."""
    if (
        not isinstance(svm, dict)
        or not is_finite_number(svm.get("std"))
        or not all(is_integer(svm.get(key)) for key in ("repeats", "folds"))
    ):
        return 0.0, 0
    return float(svm["std"]), svm["repeats"] * svm["folds"]


def training_steps(data: dict[str, Any]) -> tuple[int, int] | None:
    """``(steps, planned_steps)`` from an entry's training log, or None where it does not record them."""
    log = data.get("metrics", {}).get(TRAINING_LOG, {}).get("data")
    if not isinstance(log, dict):
        return None
    steps, planned = log.get("steps"), log.get("planned_steps")
    if not all(isinstance(value, int) and not isinstance(value, bool) and value >= 0 for value in (steps, planned)):
        return None
    return steps, planned
