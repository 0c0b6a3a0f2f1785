"""Re-derive a results file: rerun one seed of every row (seed 0 where the row has it, else its first) at the current
commit and say per row whether the accuracy equals the recorded one to the printed digits (two decimals).

A row's run is what the file records for it: its ``parameters``, the file's ``epochs`` and ``protocol`` (a file
without one ran transductive), the untrained encoder with the parameters of the dataset's ``ucl`` row. The record
(:func:`verification`) holds the commit, dirty flag, versions and machine of the rerun, and per row
the seed, the recorded and the new accuracy and whether they are equal; the README's tables read it
(:func:`hcl_cli.tables.markdown.markdown`). One run per row: a file costs the sum over its rows of
one seed's training and SVM readout (its ``train_seconds_mean`` and ``eval_seconds_mean``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hcl_cli.errors import InputError
from hcl_cli.provenance import run_identity
from hcl_cli.tables.runs import Prepared, run_one
from hcl_cli.tables.summary import recorded_provenance

VERIFIED_PREFIX = "verify_"
"""The record of ``results/NAME.json`` is ``results/verify_NAME.json``."""


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


def verification(
    result: dict[str, Any],
    source: str,
    load: Callable[[str], Prepared],
    scratch: Path,
    say: Callable[[str], None] = print,
    earlier: dict[str, Any] | None = None,
    save: Callable[[dict[str, Any]], None] = lambda record: None,
) -> dict[str, Any]:
    """Rerun every row of ``result`` (the results file ``source``) once, ``load`` giving each dataset by its TU name; the record.

    ``save`` gets the record after every row, with ``partial`` saying how far it is, so a stopped verification keeps its
    rows; given that record as ``earlier``, a rerun keeps the rows it checked where both ran at the same clean commit (the
    same code reruns a seed to the same number) and reruns the others."""
    planned = planned_rows(result)
    epochs = file_epochs(result)
    protocol = result.get("protocol", "transductive")
    started = time.monotonic()
    identity = run_identity()
    kept = resumable_rows(earlier, identity, protocol)
    data: dict[str, Any] = dict(earlier["data"]) if kept and earlier else {}
    seconds = float(earlier.get("seconds") or 0.0) if kept and earlier else 0.0
    loaded: dict[str, Prepared] = {}
    checked: list[dict[str, Any]] = []

    def record() -> dict[str, Any]:
        done = {
            "verifies": source,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **identity,
            "seed_rule": "0 (else the row's first)",
            "epochs": result.get("epochs"),
            "protocol": protocol,
            "data": data,
            "rows": checked,
            "equal": sum(row["equal"] for row in checked),
            "total": len(checked),
            "seconds": round(seconds + time.monotonic() - started, 1),
        }
        if len(checked) < len(planned):
            done["partial"] = f"{len(checked)} of the {len(planned)} rows rerun so far: rerun the same command to continue"
        return done

    for index, (dataset, name, seed, recorded, parameters, cpu, commit) in enumerate(planned, start=1):
        row = kept.get((dataset, name, seed))
        if row is not None and row["recorded"] == recorded:
            checked.append(row)
            say(f"hcl table: verify {index}/{len(planned)} {dataset}/{name} seed {seed}: kept from the stopped run at this commit")
            continue
        if dataset not in loaded:
            loaded[dataset] = load(dataset)
            data[dataset] = {"source": Path(loaded[dataset].card.source).name, "files": loaded[dataset].card.files}
        run = run_one(parameters, seed, epochs, loaded[dataset], scratch, train=name != "untrained", protocol=protocol)
        now = round(run["accuracy"], 2)
        equal = now == round(recorded, 2)
        checked.append(
            {
                "dataset": dataset,
                "method": name,
                "seed": seed,
                "recorded": recorded,
                "now": now,
                "equal": equal,
                "recorded_cpu": cpu,
                "recorded_commit": commit,
                "seconds": run["train_seconds"] + run["eval_seconds"],
            }
        )
        say(
            f"hcl table: verify {index}/{len(planned)} {dataset}/{name} seed {seed}: {recorded:.2f} recorded, {now:.2f} now: {'equal' if equal else 'DIFFERS'}"
        )
        save(record())
    return record()


def resumable_rows(earlier: dict[str, Any] | None, identity: dict[str, Any], protocol: str) -> dict[tuple[str, str, int], dict[str, Any]]:
    """The rows of the ``earlier`` record a rerun keeps, by (dataset, method, seed): all of them where it ran at the clean
    commit that runs now under the same protocol, else none."""
    if not earlier or identity["dirty"] is not False or earlier.get("dirty") is not False:
        return {}
    if earlier.get("commit") != identity["commit"] or earlier.get("protocol") != protocol:
        return {}
    return {(row["dataset"], row["method"], row["seed"]): row for row in earlier.get("rows", [])}
