"""Re-derive a results file: rerun one seed of every row (seed 0 where the row has it, else its first) at the current
commit and say per row whether the accuracy equals the recorded one to the printed digits (two decimals).

A row's run is what the file records for it: its ``parameters``, the file's ``epochs`` and ``protocol`` (a file
without one ran transductive), the untrained encoder with the parameters of the dataset's ``ucl`` row. The record
(:func:`verification`) holds the commit, dirty flag, versions and machine of the rerun, and per row
the seed, the recorded and the new accuracy and whether they are equal; the README's tables read it
(:func:`hcl_cli.tables.markdown.markdown`). One run per row: a file costs the sum over its rows of
one seed's training and SVM readout (its ``train_seconds_mean`` and ``eval_seconds_mean``). A part reruns only the
rows it names, and its record keeps the others as some earlier part checked them, each with its ``rerun_commit``.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from hcl_cli.errors import InputError, UsageError
from hcl_cli.provenance import run_identity
from hcl_cli.tables.runs import Prepared, run_one
from hcl_cli.tables.summary import recorded_provenance

VERIFIED_PREFIX = "verify_"
"""The record of ``results/NAME.json`` is ``results/verify_NAME.json``."""


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


def planned_rows(result: dict[str, Any]) -> list[tuple[str, str, int, float, dict[str, Any], str | None, str | None]]:
    """Per row of ``result``: (dataset, method or ``untrained``, the seed to rerun, its recorded accuracy, the parameters, the CPU
    and the commit that made it)."""
    rows = []
    for dataset, entry in result.get("datasets", {}).items():
        methods = entry.get("methods", {})
        named = {"untrained": entry.get("untrained"), **methods}
        for name, row in named.items():
            if not row or not row.get("seeds"):
                continue
            parameters = (methods.get("ucl") or {}).get("parameters") if name == "untrained" else row.get("parameters")
            if parameters is None:
                raise InputError(
                    f"{dataset}/{name}: the results file records no parameters for it (and no ucl row for the untrained encoder)"
                )
            seed = 0 if 0 in row["seeds"] else min(row["seeds"])
            recorded = row["accuracies"][row["seeds"].index(seed)]
            rows.append(
                (dataset, name, seed, float(recorded), parameters, recorded_cpu(result, row, seed), recorded_commit(result, row, seed))
            )
    return rows


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


RowKey = tuple[str, str, int]


def selected_rows(planned: list[tuple[Any, ...]], rows: tuple[str, ...]) -> set[RowKey]:
    """The planned rows that ``rows`` names (each ``DATASET`` or ``DATASET/METHOD``, as the results file names them); all of
    them where it names none. A name that matches no row is a one-line error."""
    keys = {(dataset, name, seed) for dataset, name, seed, *_ in planned}
    if not rows:
        return keys
    unknown = [wanted for wanted in rows if not any(matches(wanted, dataset, name) for dataset, name, _ in keys)]
    if unknown:
        known = ", ".join(f"{dataset}/{name}" for dataset, name, *_ in planned)
        raise UsageError(f"--rows {','.join(unknown)}: no such row in the results file (it has {known})")
    return {(dataset, name, seed) for dataset, name, seed in keys if any(matches(wanted, dataset, name) for wanted in rows)}


def matches(wanted: str, dataset: str, name: str) -> bool:
    return wanted in (dataset, f"{dataset}/{name}")


def verification(
    result: dict[str, Any],
    source: str,
    load: Callable[[str], Prepared],
    scratch: Path,
    say: Callable[[str], None] = print,
    rows: tuple[str, ...] = (),
    update: RecordUpdate | None = None,
) -> dict[str, Any]:
    """Rerun the rows of ``result`` (the results file ``source``) that ``rows`` names (all where it names none) once each,
    ``load`` giving each dataset by its TU name; the record.

    ``update`` stores the record after every row, with ``partial`` naming the rows no part has checked. The record holds
    every row of the file that some part checked: the rows this run reran, and the others (those it has yet to rerun
    included) as the stored record holds them, each with the commit it reran at (``rerun_commit``), so parts with
    disjoint ``rows`` run side by side join in one record, and a stopped part leaves the rows it did not reach as they
    were. A rerun
    keeps the rows of its selection that the stored record checked at the same clean commit (the same code reruns a seed
    to the same number) and reruns the others."""
    planned = planned_rows(result)
    selected = selected_rows(planned, rows)
    epochs = file_epochs(result)
    protocol = result.get("protocol", "transductive")
    identity = run_identity(written=is_record)
    update = update or RecordInMemory()
    stored = update(lambda record: record or {})
    ours = {key: row for key, row in resumable_rows(stored, identity, protocol).items() if key in selected}
    data: dict[str, Any] = {}
    loaded: dict[str, Prepared] = {}

    def joined(record: dict[str, Any] | None) -> dict[str, Any]:
        theirs = {} if record is None or record.get("protocol", protocol) != protocol else record_rows(record)
        checked = []
        for dataset, name, seed, recorded, *_ in planned:
            key = (dataset, name, seed)
            row = ours.get(key, theirs.get(key))
            if row is not None and row["recorded"] == recorded:
                checked.append(row)
        rerun = {(row["dataset"], row["method"], row["seed"]) for row in checked}
        missing = [f"{dataset}/{name}" for dataset, name, seed, *_ in planned if (dataset, name, seed) not in rerun]
        done = {
            "verifies": source,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **identity,
            "seed_rule": "0 (else the row's first)",
            "epochs": result.get("epochs"),
            "protocol": protocol,
            "data": {**((record or {}).get("data") or {}), **data},
            "rows": checked,
            "equal": sum(row["equal"] for row in checked),
            "total": len(checked),
            "seconds": round(sum(row.get("seconds") or 0.0 for row in checked), 1),
        }
        if missing:
            done["partial"] = f"{len(checked)} of the {len(planned)} rows rerun so far; not checked: {', '.join(missing)}"
        return done

    for index, (dataset, name, seed, recorded, parameters, cpu, commit) in enumerate(planned, start=1):
        key = (dataset, name, seed)
        if key not in selected:
            continue
        if key in ours and ours[key]["recorded"] == recorded:
            say(f"hcl table: verify {index}/{len(planned)} {dataset}/{name} seed {seed}: kept from the stopped run at this commit")
            continue
        if dataset not in loaded:
            loaded[dataset] = load(dataset)
            data[dataset] = {"source": Path(loaded[dataset].card.source).name, "files": loaded[dataset].card.files}
        run = run_one(parameters, seed, epochs, loaded[dataset], scratch, train=name != "untrained", protocol=protocol)
        now = round(run["accuracy"], 2)
        equal = now == round(recorded, 2)
        ours[key] = {
            "dataset": dataset,
            "method": name,
            "seed": seed,
            "recorded": recorded,
            "now": now,
            "equal": equal,
            "recorded_cpu": cpu,
            "recorded_commit": commit,
            "rerun_commit": identity["commit"],
            "rerun_dirty": identity["dirty"],
            "seconds": run["train_seconds"] + run["eval_seconds"],
        }
        say(
            f"hcl table: verify {index}/{len(planned)} {dataset}/{name} seed {seed}: {recorded:.2f} recorded, {now:.2f} now: {'equal' if equal else 'DIFFERS'}"
        )
        update(joined)
    return update(joined)


def record_rows(record: dict[str, Any]) -> dict[RowKey, dict[str, Any]]:
    """The rows of a stored record by (dataset, method, seed), each naming the commit it reran at (the record's, where a row
    from before ``rerun_commit`` names none)."""
    return {
        (row["dataset"], row["method"], row["seed"]): {"rerun_commit": record.get("commit"), "rerun_dirty": record.get("dirty"), **row}
        for row in record.get("rows", [])
    }


def resumable_rows(earlier: dict[str, Any] | None, identity: dict[str, Any], protocol: str) -> dict[RowKey, dict[str, Any]]:
    """The rows of the ``earlier`` record that a rerun keeps, by (dataset, method, seed): those rerun at the clean commit
    that runs now, under the same protocol."""
    if not earlier or identity["dirty"] is not False or earlier.get("protocol") != protocol:
        return {}
    return {
        key: row for key, row in record_rows(earlier).items() if row["rerun_commit"] == identity["commit"] and row["rerun_dirty"] is False
    }
