"""The tables as the README prints them: per dataset and method ours beside the papers' numbers, the paired
differences with their 95% intervals, the untrained encoder, one verdict per dataset on whether hard negatives help,
and, where a verification record is given (:mod:`~hcl_cli.tables.verify`), whether each row's rerun agrees with it."""

from __future__ import annotations

from typing import Any

from hcl_cli.config.pretrain import TRANSDUCTIVE_LABELS
from hcl_cli.tables.methods import OFFICIAL
from hcl_cli.tables.summary import paired

HARD_SAMPLERS = ("hucl", "hscl", "hscl-threshold", "ot", "undimix")
"""The samplers of hard negatives (hucl at beta 0 is the debiased loss: not hard)."""
FIG7_INFOGRAPH, FIG7_HCL, FIG7_UNDIMIX = "fig7-infograph", "fig3-beta1@official", "fig7-undimix"
"""UnDiMix Fig. 7's three rows: InfoGraph, HCL (beta 1, the official reading: HCL Fig. 3's row) and UnDiMix."""
FIG7_SENTENCE = (
    '"Overall InfoGraph performs better in 3 out of the 6 benchmarks, and HCL has the best performance 2 out of 6 times. '
    'Our method works better or is comparable to InfoGraph and HCL in 2 benchmark datasets." (UnDiMix Sec. 4.3)'
)


def interval_text(diff: dict[str, Any] | None) -> str:
    """``+1.26 [-0.49, +3.01]`` (a paired difference and its 95% interval), or ``-``."""
    if not diff:
        return "-"
    ci = f" [{diff['ci95'][0]:+.2f}, {diff['ci95'][1]:+.2f}]" if diff["ci95"] else ""
    return f"{diff['mean']:+.2f}{ci}"


def ours_text(row: dict[str, Any]) -> str:
    return f"{row['mean']:.2f} ± {row['std']:.2f} ({len(row['seeds'])})" if row["seeds"] else "not run"


def infograph_of(name: str, rows: dict[str, Any]) -> str:
    """The InfoGraph a method is compared with: in a table of UnDiMix Fig. 7 its InfoGraph row; else ucl (the tables'
    InfoGraph row), or for an HCL Fig. 3 row its beta 0 in the same reading, which Fig. 3 labels InfoGraph."""
    if FIG7_INFOGRAPH in rows and (name.startswith("fig7-") or name == FIG7_HCL):
        return FIG7_INFOGRAPH
    return f"fig3-beta0{OFFICIAL if name.endswith(OFFICIAL) else ''}" if name.startswith("fig3-beta") else "ucl"


def per_seed(row: dict[str, Any]) -> dict[int, dict[str, float]]:
    """A row's accuracies by seed, as :func:`paired` reads them."""
    return {seed: {"accuracy": value} for seed, value in zip(row["seeds"], row["accuracies"])}


def minus_infograph(name: str, rows: dict[str, Any]) -> dict[str, Any] | None:
    """The paired difference of method ``name`` from its InfoGraph (:func:`infograph_of`): the results file's ``minus_ucl``,
    or for a Fig. 3 row from the per-seed accuracies the file records (rounded to 0.01)."""
    reference = infograph_of(name, rows)
    if name == reference or reference not in rows:
        return None
    if reference == "ucl":
        return rows[name]["minus_ucl"]
    return paired(per_seed(rows[name]), per_seed(rows[reference]))


def within_one_std(row: dict[str, Any]) -> str:
    """For each paper's number, whether it lies within one std of our mean: ``yes``, ``no``, or ``-`` (no number, or not run)."""
    answers = []
    for number in row["paper"].values():
        leading = number.split(" ", 1)[0]
        if not row["seeds"] or not leading.replace(".", "", 1).isdigit():
            answers.append("-")
        else:
            answers.append("yes" if abs(float(leading) - row["mean"]) <= row["std"] else "no")
    return "; ".join(dict.fromkeys(answers)) if answers else "-"


def hard(row: dict[str, Any]) -> bool:
    """Whether a method samples hard negatives (:data:`HARD_SAMPLERS`, hucl with beta > 0)."""
    parameters = row["parameters"]
    return parameters["sampler"] in HARD_SAMPLERS and not (parameters["sampler"] == "hucl" and parameters.get("beta", 1.0) == 0)


MIN_VERDICT_SEEDS = 3
"""Rows with fewer paired seeds than this are left out of a verdict: two seeds give no interval worth a sentence."""


def hardness_difference(name: str, rows: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """What a hard-negative row is judged against, and its paired difference from that: a supervised row (hscl) against scl,
    the same labels without hardness, so that the labels' gain is not read as the hard negatives'; any other row against
    its InfoGraph."""
    if rows[name]["parameters"]["sampler"] in ("hscl", "hscl-threshold") and "scl" in rows:
        return "scl", paired(per_seed(rows[name]), per_seed(rows["scl"]))
    return "InfoGraph", minus_infograph(name, rows)


def verdict(dataset: str, rows: dict[str, Any], untrained: dict[str, Any]) -> str:
    """One plain sentence on whether hard negatives help on ``dataset``, from the 95% intervals of the paired differences
    (:func:`hardness_difference`) of the rows with at least :data:`MIN_VERDICT_SEEDS` seeds. Rows whose encoder saw the
    test labels (:data:`~hcl_cli.config.pretrain.TRANSDUCTIVE_LABELS`) judge neither hardness nor labels: the sentence
    names them."""
    sides: dict[str, list[str]] = {"above": [], "within": [], "below": []}
    unjudged = []
    transductive = [name for name, row in rows.items() if row.get("protocol") == TRANSDUCTIVE_LABELS]
    rows = {name: row for name, row in rows.items() if name not in transductive}
    for name, row in rows.items():
        if not hard(row):
            continue
        against, diff = hardness_difference(name, rows)
        if not diff or not diff["ci95"] or diff["n"] < MIN_VERDICT_SEEDS:
            unjudged.append(name)
            continue
        side = "above" if diff["ci95"][0] > 0 else "below" if diff["ci95"][1] < 0 else "within"
        sides[side].append(f"{name} {interval_text(diff)}" + (f" against {against}" if against != "InfoGraph" else ""))
    count = sum(map(len, sides.values()))
    left_out = f"; not judged yet, under {MIN_VERDICT_SEEDS} seeds: {', '.join(unjudged)}" if unjudged else ""
    not_judged = f". Not judged here ({TRANSDUCTIVE_LABELS}): {', '.join(transductive)}" if transductive else ""
    if not count:
        return f"{dataset}: too few seeds yet to say whether hard negatives help{left_out}{not_judged}."
    below = f"; below it beyond the noise: {', '.join(sides['below'])}" if sides["below"] else ""
    if sides["above"]:
        said = f"hard negatives help beyond the noise in {', '.join(sides['above'])} ({len(sides['within'])} of {count} hard-negative rows within the noise{below}{left_out})"
    else:
        said = (
            "hard negatives do not help beyond the noise: no hard-negative row is above its InfoGraph"
            f"{' (hscl judged against scl)' if any('against scl' in entry for entries in sides.values() for entry in entries) else ''} "
            f"({len(sides['within'])} of {count} within the noise{below}{left_out})"
        )
    against_hcl = fig7_against_hcl(rows)
    if against_hcl:
        said += f". UnDiMix against HCL (beta 1): {interval_text(against_hcl)}"
    labels = rows.get("scl", {}).get("minus_ucl")
    if labels and labels["ci95"] and labels["n"] >= MIN_VERDICT_SEEDS:
        said += f". The labels (scl against InfoGraph): {interval_text(labels)}"
    said += not_judged
    infograph = FIG7_INFOGRAPH if FIG7_INFOGRAPH in rows else "ucl"
    base = rows.get(infograph, {}).get("minus_untrained")
    if base and base["ci95"]:
        side = "above" if base["ci95"][0] > 0 else "below" if base["ci95"][1] < 0 else "within the noise of"
        said += f". InfoGraph ({infograph}) is {side} its untrained encoder ({interval_text(base)})"
    return f"{dataset}: {said}."


def fig7_against_hcl(rows: dict[str, Any]) -> dict[str, Any] | None:
    """In a table of UnDiMix Fig. 7, UnDiMix's paired difference from HCL (beta 1); else None."""
    if FIG7_UNDIMIX not in rows or FIG7_HCL not in rows:
        return None
    return paired(per_seed(rows[FIG7_UNDIMIX]), per_seed(rows[FIG7_HCL]))


def fig7_summary(result: dict[str, Any]) -> str:
    """UnDiMix Fig. 7's sentence beside ours: per dataset the best mean of its three rows, and on how many datasets UnDiMix is
    above or within the noise of both InfoGraph and HCL (its paired intervals)."""
    best, comparable, judged = [], [], 0
    for dataset, entry in result["datasets"].items():
        rows = entry["methods"]
        if not all(rows.get(name, {}).get("seeds") for name in (FIG7_INFOGRAPH, FIG7_HCL, FIG7_UNDIMIX)):
            continue
        means = {"InfoGraph": rows[FIG7_INFOGRAPH]["mean"], "HCL": rows[FIG7_HCL]["mean"], "UnDiMix": rows[FIG7_UNDIMIX]["mean"]}
        best.append(f"{dataset} {max(means, key=lambda name: means[name])}")
        differences = [minus_infograph(FIG7_UNDIMIX, rows), fig7_against_hcl(rows)]
        if all(diff and diff["ci95"] and diff["n"] >= MIN_VERDICT_SEEDS for diff in differences):
            judged += 1
            if all(diff["ci95"][1] >= 0 for diff in differences if diff):
                comparable.append(dataset)
    if not best:
        return ""
    return (
        f"- UnDiMix Fig. 7: {FIG7_SENTENCE} Ours, on the {len(best)} dataset(s) run: the best mean is {', '.join(best)}; UnDiMix "
        f"is above or within the noise of both InfoGraph and HCL on {len(comparable)} of {judged} judged"
        f"{': ' + ', '.join(comparable) if comparable else ''}.\n"
    )


def markdown(result: dict[str, Any], verification: dict[str, Any] | None = None) -> str:
    """The README's table of a results file: per dataset and method ours beside the papers' (and whether they lie within one
    std of ours), the paired differences from InfoGraph and from the untrained encoder, and a verdict per dataset; with a
    ``verification`` (:func:`~hcl_cli.tables.verify.verification`'s record of this file), whether each row's rerun agrees."""
    checked = verification_column(verification)
    lines = [
        "| dataset | method | ours: mean ± std (seeds) | paper | paper within one std | minus InfoGraph, 95% CI | minus untrained, 95% CI |"
        + (f" {checked[0]} |" if checked else ""),
        "| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if checked else ""),
    ]
    verdicts = []
    for dataset, rows in result["datasets"].items():
        untrained = rows["untrained"]
        if untrained["seeds"]:
            lines.append(
                f"| {dataset} | untrained encoder | {ours_text(untrained)} | - | - | - | - |" + checked_cell(checked, dataset, "untrained")
            )
        for name, row in rows["methods"].items():
            paper = "; ".join(f"{number} ({table})" for table, number in row["paper"].items()) or "-"
            differences = f"{interval_text(minus_infograph(name, rows['methods']))} | {interval_text(row['minus_untrained'])}"
            shown = f"{name} ({TRANSDUCTIVE_LABELS})" if row.get("protocol") == TRANSDUCTIVE_LABELS else name
            lines.append(
                f"| {dataset} | {shown} | {ours_text(row)} | {paper} | {within_one_std(row)} | {differences} |"
                + checked_cell(checked, dataset, name)
            )
        verdicts.append(f"- {verdict(dataset, rows['methods'], untrained)}")
    return "\n".join([*lines, "", *verdicts]) + "\n" + fig7_summary(result)


def verification_column(verification: dict[str, Any] | None) -> tuple[str, dict[tuple[str, str], str]] | None:
    """The column a verification record adds: its heading (the tolerance, and the commit every row checked by distribution
    reran at where they share one, else the record's where some reran there, else none: each cell names its own) and per
    (dataset, row) its
    cell, the verdict by distribution (:mod:`~hcl_cli.tables.agreement`) with both means and the interval, bitwise
    where known, and where the row reran when that is not the record's commit and CPU; a row of a record from before
    the distribution check says what its one seed gave."""
    if not verification:
        return None
    checked = {
        (row["rerun_commit"], bool(row.get("rerun_dirty"))) for row in verification["rows"] if "agrees" in row and row.get("rerun_commit")
    }
    record = (verification.get("commit"), bool(verification.get("dirty")))
    # one commit heads the column: the rows' own, else the record's (where no row names one, or some reran there); else
    # each cell names its own
    heading = checked.pop() if len(checked) == 1 else record if not checked or record in checked else (None, False)
    at = f" at {heading[0][:10]}{'+dirty' if heading[1] else ''}" if heading[0] else ""
    tolerances = sorted({row["tolerance"] for row in verification["rows"] if "tolerance" in row})
    cells = {}
    for row in verification["rows"]:
        there = (row.get("rerun_commit"), bool(row.get("rerun_dirty")))
        elsewhere = there[0] is not None and there != heading  # another part's
        rerun_at = f"rerun at {there[0][:10]}{'+dirty' if there[1] else ''}" if elsewhere else ""
        if "agrees" not in row:
            said = (
                "equal"
                if row.get("equal")
                else f"{row['recorded']:.2f} recorded, {row['now']:.2f} now"
                if row.get("now") is not None
                else "not rerun"
            )
            cells[row["dataset"], row["method"]] = (
                f"not checked by distribution (seed {row.get('seed')} alone: {said}{', ' + rerun_at if rerun_at else ''})"
            )
            continue
        interval = f" [{row['ci95'][0]:+.2f}, {row['ci95'][1]:+.2f}]" if row["ci95"] else ""
        notes = [
            f"{len(row['seeds'])} seeds",
            *([f"weights bitwise {row['bitwise']}"] if row.get("bitwise") else []),
            made_where(verification, row),
        ]
        cells[row["dataset"], row["method"]] = (
            f"{'yes' if row['agrees'] else 'no'}: {row['recorded_mean']:.2f} recorded, {row['now_mean']:.2f} now, "
            f"{row['difference']:+.2f}{interval} ({'; '.join(filter(None, [*notes, rerun_at]))})"
        )
    tolerance = f"within {'/'.join(f'{value:g}' for value in tolerances)} points, " if tolerances else ""
    return f"rerun agrees ({tolerance}95% CI of the difference contains 0){at}", cells


def made_where(verification: dict[str, Any], row: dict[str, Any]) -> str:
    """On which CPUs a row was made, where that is not the CPU it reran on (a seed's draw moves with the float kernels)."""
    now_cpu = (row.get("rerun_machine") or verification.get("machine") or {}).get("cpu_model")
    then = [cpu for cpu in row.get("recorded_cpus", []) if cpu != "unknown"]
    return f"made on {', '.join(then)}, rerun on {now_cpu}" if then and now_cpu and then != [now_cpu] else ""


def checked_cell(checked: tuple[str, dict[tuple[str, str], str]] | None, dataset: str, method: str) -> str:
    return "" if checked is None else f" {checked[1].get((dataset, method), 'not checked')} |"


TABLES_NOTE = (
    "Ours: mean ± std over the seeds (ddof 0, as the papers' code), each row's number of seeds in brackets; \"paper within one "
    "std\" says whether each paper's number lies within one std of our mean. The intervals are 95% t intervals of the "
    "per-seed paired differences from InfoGraph (ucl, the tables' InfoGraph row; for HCL Fig. 3's rows their beta 0 in the "
    "same reading, which Fig. 3 labels InfoGraph; for UnDiMix Fig. 7's its InfoGraph row, fig7-infograph) and from the "
    "untrained encoder of the same seed. Each dataset's sentence says whether a hard-negative row (hucl with beta > 0, hscl, "
    "ot, undimix) is above its InfoGraph beyond that interval (hscl: "
    "judged against scl), and what the labels add (scl against InfoGraph), judged from inductive rows only. Each table names "
    "its protocol (docs/protocol-graphs.md): inductive, seed s pretrains every method, ucl included, without the graphs of "
    "fold s of one seeded 10-fold split and the SVM, fitted on the other folds, scores fold s (ten seeds score each graph "
    "once); transductive, every graph is pretrained on and the SVM cross-validates over all, so that an scl or hscl row's "
    f"encoder saw the test labels, which its name says ({TRANSDUCTIVE_LABELS}).\n"
)
BETA_NOTE = (
    "The hucl and hscl rows run beta 1 (H-SCL's main.py default) beside the paper's best of beta in {1, 2, 10}, which "
    "Table II and Table V print without naming the beta; the `betas` group runs 2 and 10.\n\n"
)


def sections(results: dict[str, dict[str, Any]], verifications: dict[str, dict[str, Any]], folder: str) -> str:
    """The README's graph tables, one per results file (``reproduce_graph_NAME.json`` in ``folder`` by NAME; the tables'
    files before HCL Fig. 3's), each with its verification's column where ``verifications`` holds one for NAME."""
    parts = [TABLES_NOTE]
    for name, result in sorted(results.items(), key=lambda item: (is_fig7(item[1]), is_fig3(item[1]), item[0])):
        tables = "UnDiMix Fig. 7" if is_fig7(result) else "HCL Fig. 3" if is_fig3(result) else "H-SCL Table II and HCL-OT Table V"
        state = "" if result["complete"] else ", still running"
        parts.append(
            f"\n### {tables}: {', '.join(result['datasets'])} ({result.get('protocol', 'transductive')}; "
            f"`{folder}/reproduce_graph_{name}.json`, "
            f"{result['repeats']} seeds of {''.join(filter(str.isdigit, str(result['epochs'])))} epochs{state})\n\n"
            + ("" if is_fig3(result) else BETA_NOTE)
            + markdown(result, verifications.get(name))
        )
    return "".join(parts)


def is_fig3(result: dict[str, Any]) -> bool:
    return any("fig3" in m for d in result["datasets"].values() for m in d["methods"])


def is_fig7(result: dict[str, Any]) -> bool:
    return any(m.startswith("fig7-") for d in result["datasets"].values() for m in d["methods"])
