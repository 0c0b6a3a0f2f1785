"""An image table's rows from its runs, and the table as Markdown.

Per row: the per-seed kNN and linear top-1, their mean and std (ddof 0, as the graph tables), the paired per-seed
differences from ucl and from the untrained encoder of the same seed (hscl also from scl, the same labels without
hardness) with 95% t intervals (:func:`~hcl_cli.tables.summary.paired`), and the epochs each run's kNN probe takes to
reach ucl's final probe of the same seed (HCL Fig. 11: "hard sampling takes only 60 epochs to reach the same
performance as SimCLR does in 400"), with its interval over the seeds that reach it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hcl_cli.tables.markdown import interval_text
from hcl_cli.tables.summary import mean_interval, paired

READOUTS = ("knn", "linear")


def by_seed(done: dict[str, Any], name: str) -> dict[int, dict[str, Any]]:
    """The runs of row ``name`` (``untrained`` included) by seed."""
    return {int(key.rsplit("/", 1)[1]): run for key, run in done.items() if key.rsplit("/", 1)[0] == name}


def differences(runs: dict[int, dict[str, Any]], baseline: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per readout, the paired per-seed difference from ``baseline`` with its 95% interval (None without shared seeds)."""
    return {readout: paired(*({s: {"accuracy": r[readout]} for s, r in side.items()} for side in (runs, baseline))) for readout in READOUTS}


def epochs_to_reach(runs: dict[int, dict[str, Any]], ucl: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per seed both ran with a curve, the first probed epoch whose kNN reaches ucl's final probe of that seed (None where
    none does); their mean and 95% interval over the seeds that reach it."""
    seeds = sorted(seed for seed in set(runs) & set(ucl) if runs[seed].get("curve") and ucl[seed].get("curve"))
    reached = {seed: next((epoch for epoch, top1 in runs[seed]["curve"] if top1 >= ucl[seed]["curve"][-1][1]), None) for seed in seeds}
    hits = [float(epoch) for epoch in reached.values() if epoch is not None]
    return {"seeds": seeds, "epochs": [reached[s] for s in seeds], "reached": len(hits), **(mean_interval(hits) if hits else {})}


def summary(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per-seed readouts and seconds, each readout's mean and std, per seed the run's provenance."""
    seeds = sorted(runs)
    out: dict[str, Any] = {"seeds": seeds}
    for readout in READOUTS:
        values = [runs[s][readout] for s in seeds]
        out[readout] = values
        out[f"{readout}_mean"] = round(float(np.mean(values)), 2) if values else None
        out[f"{readout}_std"] = round(float(np.std(values)), 2) if values else None
    out["train_seconds"] = [runs[s]["train_seconds"] for s in seeds]
    out["eval_seconds"] = [runs[s]["eval_seconds"] for s in seeds]
    out["devices"] = sorted({runs[s].get("device", "?") for s in seeds})
    return out


def image_table(rows: dict[str, dict[str, Any]], papers: dict[str, list[str]], done: dict[str, Any], repeats: int) -> dict[str, Any]:
    """The results file's rows: the untrained encoder, then every row with its parameters, papers' numbers and comparisons."""
    untrained, ucl = by_seed(done, "untrained"), by_seed(done, "ucl")
    out: dict[str, Any] = {"untrained": summary(untrained), "rows": {}}
    for name, parameters in rows.items():
        runs = by_seed(done, name)
        out["rows"][name] = {
            "parameters": parameters,
            "paper": papers[name],
            **summary(runs),
            "complete": len(runs) == repeats,
            "minus_ucl": differences(runs, ucl) if name != "ucl" else None,
            "minus_untrained": differences(runs, untrained),
            "minus_scl": differences(runs, by_seed(done, "scl")) if name == "hscl" and "scl" in rows else None,
            "epochs_to_ucl_final_knn": epochs_to_reach(runs, ucl),
        }
    return out


def spread(row: dict[str, Any], readout: str) -> str:
    return f"{row[f'{readout}_mean']:.2f} ± {row[f'{readout}_std']:.2f}" if row["seeds"] else "not run"


def reach_text(reach: dict[str, Any]) -> str:
    """``35 [20, 50] (2 of 2 seeds)``: the epochs to reach ucl's final kNN, or how many seeds never reach it."""
    if not reach["seeds"]:
        return "-"
    if not reach["reached"]:
        return f"not reached (0 of {len(reach['seeds'])} seeds)"
    interval = f" [{reach['ci95'][0]:.0f}, {reach['ci95'][1]:.0f}]" if reach.get("ci95") else ""
    return f"{reach['mean']:.0f}{interval} ({reach['reached']} of {len(reach['seeds'])} seeds)"


def pair_text(diff: dict[str, Any] | None) -> str:
    return "-" if not diff else f"{interval_text(diff['knn'])} / {interval_text(diff['linear'])}"


def image_markdown(result: dict[str, Any]) -> str:
    """The table: per row its seeds, kNN and linear top-1 (mean ± std), the paired differences from ucl and from the
    untrained encoder (kNN / linear, 95% t intervals), the epochs to reach ucl's final kNN, and the papers' numbers."""
    table = result["table"]
    lines = [
        f"**{result['dataset']}**: {result['heading']}; every row on seeds 0..{result['repeats'] - 1}"
        f"{'' if result['complete'] else ' (still running: each row says how many seeds it has)'}. Readouts: {result['readouts']}.",
        "",
        "| method | seeds | kNN top-1 | linear top-1 | minus ucl, kNN / linear (95% CI) | minus untrained, kNN / linear (95% CI) "
        "| epochs to reach ucl's final kNN | paper (CIFAR-10, its own budget) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    untrained = table["untrained"]
    if untrained["seeds"]:
        lines.append(
            f"| untrained encoder | {len(untrained['seeds'])} | {spread(untrained, 'knn')} | {spread(untrained, 'linear')} | - | - | - | - |"
        )
    for name, row in table["rows"].items():
        papers = "; ".join(row["paper"]) if result["papers_apply"] else "-"
        against_scl = f" (minus scl: {pair_text(row['minus_scl'])})" if row.get("minus_scl") else ""
        lines.append(
            f"| {name} | {len(row['seeds'])} | {spread(row, 'knn')} | {spread(row, 'linear')} | {pair_text(row['minus_ucl'])}{against_scl} "
            f"| {pair_text(row['minus_untrained'])} | {reach_text(row['epochs_to_ucl_final_knn'])} | {papers} |"
        )
    return "\n".join([*lines, "", *claims(table["rows"]), f"Not in this table: {result['absent']}.", ""])


CLAIMS = (
    (
        "hucl",
        "minus_ucl",
        "HCL Sec. 5.1: on CIFAR-10 'a slight improvement for smaller N, which disappears at larger N' (hucl against ucl)",
    ),
    ("hscl", "minus_scl", "H-SCL Table I: H-SCL 'slightly better than SCL on CIFAR10' (hscl against scl)"),
    ("undimix", "minus_ucl", "UnDiMix Table 1: UnDiMix above its baselines, 93.40 against HCL's 91.19 (undimix against ucl)"),
    ("ot", "minus_ucl", "HCL-OT Table II: OT's negatives above SimCLR's, 91.2 against 91.0 (ot against ucl)"),
)
"""The papers' CIFAR-10 claims the table can test at its one budget: the row, the difference that tests it, the claim."""


def side(diff: dict[str, Any] | None) -> str:
    """Where a paired difference lies: above or below 0 beyond its 95% interval, within it, or too few seeds to say."""
    if not diff or not diff.get("ci95"):
        return "too few seeds to say"
    low, high = diff["ci95"]
    where = "above 0 beyond the noise" if low > 0 else "below 0 beyond the noise" if high < 0 else "within the noise"
    return f"{where} ({interval_text(diff)}, {diff['n']} seeds)"


def claims(rows: dict[str, Any]) -> list[str]:
    """One line per claim of :data:`CLAIMS` whose rows ran (the linear readout, as the papers'), and HCL Fig. 11's: the epochs
    each hard-negative row takes to reach ucl's final kNN."""
    lines = [
        f"- {claim}: {side((rows[name].get(key) or {}).get('linear'))}."
        for name, key, claim in CLAIMS
        if name in rows and rows[name]["seeds"] and (key != "minus_scl" or rows[name].get(key))
    ]
    reach = [f"{name} {reach_text(row['epochs_to_ucl_final_knn'])}" for name, row in rows.items() if name != "ucl" and row["seeds"]]
    if reach and "ucl" in rows:
        lines.append(
            f"- HCL Fig. 11: hard negatives reach SimCLR's final kNN in far fewer epochs. Epochs each row takes to reach ucl's: {'; '.join(reach)}."
        )
    return [*lines, ""] if lines else []
