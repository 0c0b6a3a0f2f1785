"""Re-derive a results file: rerun N seeds (all by default) of every row at the current commit and say per row whether
the rerun is the same experiment (:mod:`~hcl_cli.tables.agreement`: the 95% interval of the difference of means contains
0 and the difference is under a tolerance), and, where the run can be compared bit for bit (the recorded run's clean
commit, torch, CPU and float kernels: :func:`~hcl_cli.tables.digests.bitwise_comparable`), whether its weights digest is
the recorded one.

A row's run is what the file records for it: its ``parameters``, the file's ``epochs`` and ``protocol`` (a file
without one ran transductive), the untrained encoder with the parameters of the dataset's ``ucl`` row. Before any run
each row's mean and std are recomputed from its accuracies; a file whose summary disagrees is refused. The record
(:func:`verification`) holds per row both means, the interval, the verdict and where (commit, machine, CPU, kernels) and
when it reran; the README's tables read it (:func:`hcl_cli.tables.markdown.markdown`). A part reruns only the rows it
names; its record keeps the others as some earlier part checked them, and the record's own commit and machine are those
of a run over every row (a part's are its rows' alone).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from hcl_cli.errors import InputError, UsageError
from hcl_cli.provenance import run_identity
from hcl_cli.tables.agreement import DEFAULT_TOLERANCE, agreement, verdict_text
from hcl_cli.tables.digests import bitwise_comparable
from hcl_cli.tables.runs import Prepared, run_one
from hcl_cli.tables.summary import recorded_provenance

VERIFIED_PREFIX = "verify_"
"""The record of ``results/NAME.json`` is ``results/verify_NAME.json``."""
IDENTITY = ("commit", "dirty", "changed", "versions", "machine")
"""The record's own provenance: a run over every row writes it, a part keeps the stored one."""
ROUNDING = 0.011
"""How far a recorded mean or std may lie from the one recomputed from the accuracies, which are rounded to 0.01."""


def is_record(path: str) -> bool:
    """Whether the repository path ``path`` is a verification record: one a part rewrites while another runs, which
    changes no code (a part started after it is not dirty for it)."""
    name = PurePosixPath(path).name
    return name.startswith(VERIFIED_PREFIX) and name.endswith(".json")


def record_path(results: Path) -> Path:
    """Where the verification record of the results file ``results`` goes: beside it, ``verify_NAME.json``."""
    return results.with_name(f"{VERIFIED_PREFIX}{results.name}")


def file_epochs(result: dict[str, Any]) -> int | None:
    """The epochs a results file trained (an int), or None for the presets' own (``"the presets' (200)"``)."""
    epochs = result.get("epochs")
    return epochs if isinstance(epochs, int) else None


def made_by(result: dict[str, Any], row: dict[str, Any], seed: int) -> dict[str, Any]:
    """The provenance of ``row``'s run of ``seed``: its own, or as a file from before per-run provenance records it
    (:func:`~hcl_cli.tables.summary.recorded_provenance`); empty where the file records none."""
    runs = row.get("provenance") or recorded_provenance(result, row)
    return runs[row["seeds"].index(seed)] or {}


def recorded_cpu(result: dict[str, Any], row: dict[str, Any], seed: int) -> str | None:
    """The CPU that made ``row``'s run of ``seed``: its provenance's where the file keeps one, else the file's machine."""
    return (made_by(result, row, seed).get("machine") or {}).get("cpu_model") or (result.get("machine") or {}).get("cpu_model")


def recorded_commit(result: dict[str, Any], row: dict[str, Any], seed: int) -> str | None:
    """The commit that made ``row``'s run of ``seed``; None where the file predates per-run commits."""
    return made_by(result, row, seed).get("commit")


RowKey = tuple[str, str]


@dataclass(frozen=True)
class PlannedRow:
    """A row of a results file to rerun: its seeds to rerun, every recorded accuracy by seed, its parameters and per seed
    the provenance of the recorded run."""

    dataset: str
    method: str
    seeds: tuple[int, ...]
    recorded: dict[int, float]
    parameters: dict[str, Any]
    made: dict[int, dict[str, Any]]

    @property
    def key(self) -> RowKey:
        return self.dataset, self.method


def named_rows(result: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Every (dataset, row name, row) of ``result`` that ran a seed, the untrained encoder first."""
    rows = []
    for dataset, entry in result.get("datasets", {}).items():
        for name, row in {"untrained": entry.get("untrained"), **entry.get("methods", {})}.items():
            if row and row.get("seeds"):
                rows.append((dataset, name, row))
    return rows


def summary_disagreements(result: dict[str, Any]) -> list[str]:
    """The rows whose recorded mean or std (ddof 0) is not the one their accuracies give, each as ``MUTAG/ucl``."""
    wrong = []
    for dataset, name, row in named_rows(result):
        accuracies = row.get("accuracies")
        if not isinstance(accuracies, list) or len(accuracies) != len(row["seeds"]):
            wrong.append(f"{dataset}/{name} (its accuracies are not one per seed)")
            continue
        for figure, value in (("mean", float(np.mean(accuracies))), ("std", float(np.std(accuracies)))):
            stated = row.get(figure)
            if not isinstance(stated, int | float) or abs(stated - value) > ROUNDING:
                wrong.append(f"{dataset}/{name} ({figure} {stated}, its accuracies give {value:.2f})")
    return wrong


def planned_rows(result: dict[str, Any], seeds: int | None = None) -> list[PlannedRow]:
    """Every row of ``result`` with its first ``seeds`` seeds (all where None) to rerun."""
    planned = []
    methods = {dataset: entry.get("methods", {}) for dataset, entry in result.get("datasets", {}).items()}
    for dataset, name, row in named_rows(result):
        parameters = (methods[dataset].get("ucl") or {}).get("parameters") if name == "untrained" else row.get("parameters")
        if parameters is None:
            raise InputError(f"{dataset}/{name}: the results file records no parameters for it (and no ucl row for the untrained encoder)")
        order = sorted(row["seeds"])
        recorded = {seed: float(row["accuracies"][row["seeds"].index(seed)]) for seed in order}
        made = {seed: made_by(result, row, seed) for seed in order}
        for seed in order:  # a file from before per-run machines: its own machine made every run
            made[seed] = {**made[seed], "machine": made[seed].get("machine") or {"cpu_model": recorded_cpu(result, row, seed)}}
        planned.append(PlannedRow(dataset, name, tuple(order[:seeds] if seeds else order), recorded, parameters, made))
    return planned


RecordUpdate = Callable[[Callable[[dict[str, Any] | None], dict[str, Any]]], dict[str, Any]]
"""Apply a change to the record as it now stands (None where there is none yet), store and return what it gives, as one
step that no other part's update interleaves (:func:`hcl_cli.stages.table.verify` holds a lock)."""


class RecordInMemory:
    """A record kept in memory (:data:`RecordUpdate` for a caller that stores none): every state it took, in order."""

    def __init__(self) -> None:
        self.saved: list[dict[str, Any]] = []

    def __call__(self, change: Callable[[dict[str, Any] | None], dict[str, Any]]) -> dict[str, Any]:
        self.saved.append(change(self.saved[-1] if self.saved else None))
        return self.saved[-1]


def selected_rows(planned: list[PlannedRow], rows: tuple[str, ...]) -> set[RowKey]:
    """The planned rows that ``rows`` names (each ``DATASET`` or ``DATASET/METHOD``, as the results file names them); all of
    them where it names none. A name that matches no row is a one-line error."""
    keys = {plan.key for plan in planned}
    if not rows:
        return keys
    unknown = [wanted for wanted in rows if not any(matches(wanted, *key) for key in keys)]
    if unknown:
        known = ", ".join(f"{plan.dataset}/{plan.method}" for plan in planned)
        raise UsageError(f"--rows {','.join(unknown)}: no such row in the results file (it has {known})")
    return {key for key in keys if any(matches(wanted, *key) for wanted in rows)}


def matches(wanted: str, dataset: str, name: str) -> bool:
    return wanted in (dataset, f"{dataset}/{name}")


def still_recorded(row: dict[str, Any], plan: PlannedRow) -> bool:
    """Whether a stored record's row checked the accuracies and weights digests the file now records for it (a row of a
    record from before the distribution check names one ``seed``)."""
    if "seed" in row:
        return row["seed"] in plan.recorded and row["recorded"] == plan.recorded[row["seed"]]
    if not all(seed in plan.recorded for seed in row["seeds"]):
        return False
    digests = [(plan.made.get(seed) or {}).get("weights_sha256") for seed in row["seeds"]]
    return row["recorded"] == [plan.recorded[seed] for seed in row["seeds"]] and row.get("recorded_weights_sha256") == digests


def rerun_row(plan: PlannedRow, rerun: Callable[[int], dict[str, Any]], identity: dict[str, Any], tolerance: float) -> dict[str, Any]:
    """Rerun ``plan``'s seeds (``rerun`` gives one seed's run) and judge them against the record: by distribution
    (:func:`~hcl_cli.tables.agreement.agreement`), and bit for bit where each seed's recorded run can be compared."""
    now, digests, bitwise, notes, seconds = {}, [], [], set(), 0.0
    for seed in plan.seeds:
        run = rerun(seed)
        now[seed] = round(run["accuracy"], 2)
        provenance = run.get("provenance") or {}
        digests.append(provenance.get("weights_sha256"))
        reason = bitwise_comparable(plan.made.get(seed), provenance)
        if reason is None:
            bitwise.append(plan.made[seed]["weights_sha256"] == provenance["weights_sha256"])
        else:
            notes.add(reason)
        seconds += (run.get("train_seconds") or 0.0) + (run.get("eval_seconds") or 0.0)
    check = agreement(plan.recorded, now, tolerance)
    return {
        "dataset": plan.dataset,
        "method": plan.method,
        "seeds": list(plan.seeds),
        "recorded": [plan.recorded[seed] for seed in plan.seeds],
        "now": [now[seed] for seed in plan.seeds],
        **check,
        "bitwise": None if not bitwise else "equal" if all(bitwise) else "differs",
        "bitwise_seeds": len(bitwise),
        "not_bitwise": sorted(notes),
        "weights_sha256": digests,
        "recorded_weights_sha256": [(plan.made.get(seed) or {}).get("weights_sha256") for seed in plan.seeds],
        "recorded_cpus": sorted({(made.get("machine") or {}).get("cpu_model") or "unknown" for made in plan.made.values()}),
        "recorded_commits": sorted({made.get("commit") or "unknown" for made in plan.made.values()}),
        "rerun_commit": identity.get("commit"),
        "rerun_dirty": identity.get("dirty"),
        "rerun_machine": identity.get("machine"),
        "rerun_torch": (identity.get("versions") or {}).get("torch"),
        "rerun_date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
    }


def verification(
    result: dict[str, Any],
    source: str,
    load: Callable[[str], Prepared],
    scratch: Path,
    say: Callable[[str], None] = print,
    rows: tuple[str, ...] = (),
    update: RecordUpdate | None = None,
    seeds: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """Rerun the first ``seeds`` seeds (all where None) of the rows of ``result`` (the results file ``source``) that
    ``rows`` names (all where it names none), ``load`` giving each dataset by its TU name; the record.

    ``update`` stores the record after every row, with ``partial`` naming the rows no part has checked. The record holds
    every row that some part checked: the rows this run reran, and the others as the stored record holds them, each
    with where and when it reran, so parts with disjoint ``rows`` run side by side join in one record. A rerun keeps
    the rows that the stored record checked at the same clean commit with the same seeds and tolerance."""
    wrong = summary_disagreements(result)
    if wrong:
        raise InputError(f"{source}: the mean or std of {len(wrong)} row(s) is not the one their accuracies give: {'; '.join(wrong[:3])}")
    planned = planned_rows(result, seeds)
    selected = selected_rows(planned, rows)
    epochs = file_epochs(result)
    protocol = result.get("protocol", "transductive")
    identity = run_identity(written=is_record)
    update = update or RecordInMemory()
    stored = update(lambda record: record or {})
    ours = {
        key: row
        for key, row in resumable_rows(stored, identity, protocol).items()
        if key in selected
        and row.get("tolerance") == tolerance
        and row.get("seeds") == list(next(p for p in planned if p.key == key).seeds)
    }
    data: dict[str, Any] = {}
    loaded: dict[str, Prepared] = {}

    def joined(record: dict[str, Any] | None) -> dict[str, Any]:
        theirs = {} if record is None or record.get("protocol", protocol) != protocol else record_rows(record)
        checked = [row for plan in planned if (row := ours.get(plan.key, theirs.get(plan.key))) is not None and still_recorded(row, plan)]
        missing = [f"{plan.dataset}/{plan.method}" for plan in planned if plan.key not in {(r["dataset"], r["method"]) for r in checked}]
        part = bool(rows) and bool(record and record.get("commit"))  # a part keeps the record's own provenance
        done = {
            "verifies": source,
            "date": (record or {}).get("date") if part else datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **({key: (record or {}).get(key) for key in IDENTITY} if part else {key: identity.get(key) for key in IDENTITY}),
            "check": "per row, the rerun's mean against the recorded one: the 95% t interval of the difference (paired by seed) "
            "contains 0 and the difference is under the tolerance (accuracy points); bitwise, the weights' sha256 where the "
            "recorded run's clean commit, torch, CPU and float kernels are the rerun's",
            "epochs": result.get("epochs"),
            "protocol": protocol,
            "data": {**((record or {}).get("data") or {}), **data},
            "rows": checked,
            "agree": sum(row.get("agrees") is True for row in checked),
            "checked": sum("agrees" in row for row in checked),
            "total": len(planned),
            "seconds": round(sum(row.get("seconds") or 0.0 for row in checked), 1),
        }
        if missing:
            done["partial"] = f"{len(checked)} of the {len(planned)} rows rerun so far; not checked: {', '.join(missing)}"
        return done

    for index, plan in enumerate(planned, start=1):
        if plan.key not in selected:
            continue
        label = f"hcl table: verify {index}/{len(planned)} {plan.dataset}/{plan.method} ({len(plan.seeds)} seeds)"
        if plan.key in ours and still_recorded(ours[plan.key], plan):
            say(f"{label}: kept from the stopped run at this commit")
            continue
        if plan.dataset not in loaded:
            loaded[plan.dataset] = load(plan.dataset)
            data[plan.dataset] = {"source": Path(loaded[plan.dataset].card.source).name, "files": loaded[plan.dataset].card.files}

        def rerun(seed: int, plan: PlannedRow = plan) -> dict[str, Any]:
            train = plan.method != "untrained"
            return run_one(plan.parameters, seed, epochs, loaded[plan.dataset], scratch, train=train, protocol=protocol)

        ours[plan.key] = rerun_row(plan, rerun, identity, tolerance)
        bitwise = ours[plan.key]["bitwise"]
        say(f"{label}: {verdict_text(ours[plan.key])}" + (f"; weights bitwise {bitwise}" if bitwise else ""))
        update(joined)
    return update(joined)


def record_rows(record: dict[str, Any]) -> dict[RowKey, dict[str, Any]]:
    """The rows of a stored record by (dataset, method), each naming the commit it reran at (the record's, where a row
    from before ``rerun_commit`` names none)."""
    return {
        (row["dataset"], row["method"]): {"rerun_commit": record.get("commit"), "rerun_dirty": record.get("dirty"), **row}
        for row in record.get("rows", [])
    }


def resumable_rows(earlier: dict[str, Any] | None, identity: dict[str, Any], protocol: str) -> dict[RowKey, dict[str, Any]]:
    """The rows of the ``earlier`` record that a rerun keeps, by (dataset, method): those checked by distribution at the
    clean commit that runs now, on the same machine, under the same protocol."""
    if not earlier or identity["dirty"] is not False or earlier.get("protocol") != protocol:
        return {}
    return {
        key: row
        for key, row in record_rows(earlier).items()
        if "agrees" in row
        and row["rerun_commit"] == identity["commit"]
        and row["rerun_dirty"] is False
        and row.get("rerun_machine") == identity.get("machine")
    }
