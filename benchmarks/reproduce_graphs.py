"""Reproduce the papers' graph tables (H-SCL Table II, HCL-OT Table V, HCL Fig. 3) with N seeded repeats, resumably.

Every method is a graph preset of :mod:`hcl_cli.presets.graphs` (its ``pretrain`` values), trained
from scratch once per seed 0..N-1, every method on the same seeds, and read out with the papers'
SVM protocol (:func:`hcl_cli.graph.svm.svm_protocol`, seeded by the run's seed, so that the
methods of one seed share their initial encoder and their folds). Per seed the untrained encoder
(the initialisation every method of that seed starts from) is read out the same way.

One process does everything: each dataset is prepared once (``hcl prepare``'s stage code, into
``WORK/prepared/NAME``) and loaded once; a run is the product's training, step for step what
``hcl pretrain`` does for the same config (:func:`train_encoder`: the modality's samples and
model, ``context.seed_everything(seed)``, the epoch loop's ``train_one_epoch`` with the epoch's
sampler options), then the modality's ``embed`` of every graph and the SVM protocol, without the
stage's per-epoch checkpoints and log files. ``tests/test_reproduce_graphs.py`` checks that the
embeddings equal those of ``hcl pretrain`` + ``hcl embed``.

Runs are recorded one by one in ``WORK/runs.json``; a rerun skips the runs done (and refuses a
method whose parameters changed), those of ``WORK/runs.json`` and those that the results file of the
same ``--name`` holds for the same parameters (so a fresh clone resumes from the committed file). ``--time-budget SECONDS`` stops between runs once the budget is
spent (exit 75; rerun the same command to continue). ``--merge NAME ...`` also takes the runs of other
names' results files: parts of one table run in parallel (``--name part_a --datasets mutag``, ``--name
part_b --datasets ptc``), then joined by one more invocation with every dataset and method. The order is seed-major, so a partial table
has every method on the same seeds; ot runs come last (``--methods`` order otherwise).

``--protocol`` (:data:`PROTOCOLS`, docs/protocol-graphs.md) applies to every row of an invocation, ucl and the untrained
encoder included, so that the paired differences compare encoders that saw the same graphs: ``inductive`` (the default)
pretrains seed s without fold s of one seeded 10-fold split and scores that fold (ten seeds score every graph once);
``transductive`` pretrains on every graph and cross-validates over all (under scl and hscl the encoder saw the test labels).
Every run records the commit it ran at (``+dirty`` when the tree differed) and its environment (machine and versions).

Methods: ``ucl`` (UCL = InfoGraph), ``hucl`` (H-UCL = HCL), ``scl``, ``hscl`` (H-SCL(beta)),
``ot-eps0.05`` ... ``ot-eps1`` (HCL-OT), ``hucl-beta2``, ``hucl-beta10``, ``hscl-beta2``,
``hscl-beta10`` (the rest of the tables' beta grid), ``fig3-beta0`` ... ``fig3-beta10`` (HCL Fig. 3,
lr 0.001), each with ``@official`` for HCL's graph-code reading where the readings differ (the
samplers debiased and hucl). Groups: ``table2`` (ucl hucl hucl@official scl hscl), ``table5``
(ucl hucl hucl@official and the four ot), ``betas``, ``fig3``. Run from the repository root::

    python -m benchmarks.reproduce_graphs --name mutag_ptc --datasets mutag ptc --methods table2 table5 --repeats 10 --time-budget 3000

It writes ``benchmarks/results/reproduce_graph_<name>.json`` after every invocation: per dataset
and method our mean and std (%, over seeds, ddof 0 as the papers' code) beside the paper's
numbers, the seeds and per-seed accuracies, the wall time, the paired difference from ucl
(InfoGraph) and from the untrained encoder with 95% t intervals over the seeds, and the untrained
encoder's accuracy. ``--readme`` rewrites the README's graph tables (between :data:`README_BEGIN` and
:data:`README_END`) from every results file: per dataset and method ours beside the paper's numbers and
whether they lie within one std of ours, the paired differences, and one sentence per dataset on
whether hard negatives help, derived from the intervals (:func:`verdict`)::

    python -m benchmarks.reproduce_graphs --readme
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from benchmarks.common import ROOT, load_average, write_result
from hcl_cli.checkpoint import CheckpointStore
from hcl_cli.config import PrepareConfig, PretrainConfig
from hcl_cli.config.pretrain import LABEL_PROTOCOLS, TRANSDUCTIVE_LABELS
from hcl_cli.distributed import DistributedContext
from hcl_cli.graph.modality import GRAPHS, GraphSamples
from hcl_cli.graph.prepared import SPLITS
from hcl_cli.graph.svm import PAPER_FOLDS, heldout_svm, inductive_fold, svm_protocol
from hcl_cli.presets import graphs as presets
from hcl_cli.provenance import code_state
from hcl_cli.stages import prepare
from hcl_cli.training.builders import build_training
from hcl_cli.training.loop import EpochTotals, RunClock, TrainingRun, train_one_epoch
from hcl_cli.training.signals import StopRequest
from hcl_cli.versions import installed

STOPPED_BY_BUDGET = 75
TU_ARCHIVE = ROOT.parent / "shared" / "datasets" / "tu.tar.gz"
OFFICIAL = "@official"
PROTOCOLS = LABEL_PROTOCOLS
"""How a run's encoder and SVM meet the labels (docs/protocol-graphs.md): ``inductive``, run seed s pretrains on the
graphs outside fold s of one seeded 10-fold split (:func:`~hcl_cli.graph.svm.inductive_fold`), fits the SVM on their
embeddings and scores fold s; ``transductive``, every graph is pretrained on (with its label, under a sampler that reads
labels) and the SVM cross-validates over all of them: a results file without a ``protocol`` was run so."""
VERSIONS = ("torch", "numpy", "scipy", "scikit-learn", "hcl")
SVM_TEXT = {
    "transductive": "evaluate_embedding.py's protocol: 10 stratified folds seeded by the run's seed, C in {1e-3..1e3} by 5-fold search",
    "inductive": "evaluate_embedding.py's fold: seed s's SVM fitted on the graphs outside fold s of one 10-fold split seeded by 0 "
    "(those it pretrained on), C in {1e-3..1e3} by 5-fold search, scored on fold s",
}
GROUPS: dict[str, tuple[str, ...]] = {
    "table2": ("ucl", "hucl", "hucl@official", "scl", "hscl"),
    "table5": ("ucl", "hucl", "hucl@official", "ot-eps0.05", "ot-eps0.1", "ot-eps0.5", "ot-eps1"),
    "betas": ("hucl-beta2", "hucl-beta2@official", "hucl-beta10", "hucl-beta10@official", "hscl-beta2", "hscl-beta10"),
    "fig3": tuple(f"fig3-beta{beta:g}{reading}" for beta in presets.FIG3_BETAS for reading in ("", OFFICIAL)),
}


@dataclass(frozen=True)
class Method:
    """One row of a table on one dataset: the pretrain values and the numbers the papers print for it."""

    name: str
    pretrain: dict[str, Any]
    paper: dict[str, str] = field(default_factory=dict)
    """Table -> the accuracy (%) it prints for this row (a string as printed)."""


def preset_values(name: str) -> dict[str, Any]:
    """The pretrain values of preset ``name`` (as written, before defaults)."""
    (preset,) = [p for p in presets.GRAPH_PRESETS if p.name == name]
    return dict(preset.values["pretrain"])


def preset_number(name: str) -> str:
    (preset,) = [p for p in presets.GRAPH_PRESETS if p.name == name]
    return preset.top1 + (f" ({preset.reported})" if preset.reported else "")


def method(dataset: str, name: str) -> Method:
    """The method ``name`` (module docstring) on ``dataset`` (a key of :data:`~hcl_cli.presets.graphs.TU_DATASETS`)."""
    base, official, reading = name.removesuffix(OFFICIAL), name.endswith(OFFICIAL), {"graph_weights": "official"}
    table2, table5, fig3 = "H-SCL Table II", "HCL-OT Table V", "HCL Fig. 3"
    in_tables = dataset in presets.HSCL_TABLE["ucl"]
    if base.startswith("fig3-beta"):
        if dataset not in presets.FIG3_DATASETS:
            raise SystemExit(f"HCL Fig. 3 has no {dataset}")
        preset = f"hcl-{dataset}-{base.removeprefix('fig3-')}"
        values, paper = preset_values(preset), {fig3: preset_number(preset)}
    elif base == "ucl" and not in_tables:
        values, paper = {**presets.infograph(lr=1e-2, weight_decay=0.0), "sampler": "ucl"}, {}  # InfoGraph as the tables train it
    elif not in_tables:
        raise SystemExit(f"H-SCL Table II and HCL-OT Table V have no {dataset} (their datasets: {', '.join(presets.HSCL_TABLE['ucl'])})")
    elif base in ("ucl", "hucl"):
        values = preset_values(f"hscl-{dataset}-{base}")
        paper = {table2: presets.HSCL_TABLE[base][dataset], table5: presets.OT_TABLE["infograph" if base == "ucl" else "hcl"][dataset]}
    elif base in ("scl", "hscl"):
        values, paper = preset_values(f"hscl-{dataset}-{base}"), {table2: presets.HSCL_TABLE[base][dataset]}
    elif base in presets.OT_EPSILONS:
        values, paper = preset_values(f"hclot-{dataset}-{base}"), {table5: presets.OT_TABLE[base][dataset]}
    elif base.startswith(("hucl-beta", "hscl-beta")):
        sampler, _, beta = base.partition("-beta")
        values = {**preset_values(f"hscl-{dataset}-{sampler}"), "beta": float(beta)}
        paper = {table2: presets.HSCL_TABLE[sampler][dataset] + " (the best beta of 1, 2, 10)"}
    else:
        raise SystemExit(f"unknown method {name!r}; the methods: {', '.join(sorted({m for g in GROUPS.values() for m in g}))}")
    if official:
        if values["sampler"] not in ("hucl", "debiased"):
            raise SystemExit(f"{name}: the readings differ only for hucl and debiased")
        values |= reading
    return Method(name, values, paper)


def expand(names: list[str]) -> list[str]:
    """Method names and groups -> method names, first mention first, ot last."""
    out: list[str] = []
    for name in names:
        for item in GROUPS.get(name, (name,)):
            if item not in out:
                out.append(item)
    return sorted(out, key=lambda m: m.startswith("ot-"))


@dataclass
class Prepared:
    """A prepared TU dataset, loaded once: every graph (the splits concatenated, as a self-supervised pretrain reads them) and the labels."""

    folder: Path
    card: Any
    samples: Any
    labels: torch.Tensor


def load_dataset(work: Path, tu_name: str, source: Path) -> Prepared:
    """Prepare the TU dataset ``tu_name`` from ``source`` into ``WORK/prepared/NAME`` (once, with hcl prepare's stage code) and load it."""
    folder = work / "prepared" / tu_name
    if not (folder / "card.json").is_file():
        prepare.run(PrepareConfig(dataset="tu", name=tu_name, path=str(source), out=str(folder)))
    card = GRAPHS.load_card(folder)
    samples, labels = GRAPHS.load_samples(folder, SPLITS, "cpu")
    return Prepared(folder, card, samples, labels)


def train_encoder(
    config: PretrainConfig, data: Prepared, scratch: Path, *, train: bool = True, epoch_seconds: list[float] | None = None
) -> torch.nn.Module:
    """What ``hcl pretrain`` trains for ``config`` (its seeding, model, step and epoch loop), without
    its checkpoints and log; with ``train=False`` the untrained encoder of ``config.seed``. Each
    epoch's seconds are appended to ``epoch_seconds`` when given."""
    context = DistributedContext(rank=0, world_size=1, local_rank=0, device=torch.device("cpu"))
    context.seed_everything(config.seed)
    model, step = build_training(GRAPHS, config, data.card, context)
    if not train:
        return model
    steps = context.steps_per_epoch(len(data.samples), config.batch_size, GRAPHS.keep_last_batch, noun=GRAPHS.sample_noun)
    training = TrainingRun(
        config, model, step, data.samples, data.labels, CheckpointStore(scratch), {}, context, steps, keep_last_batch=GRAPHS.keep_last_batch
    )
    clock = RunClock(steps * config.epochs, config.epochs, steps, context.device, plain=False, reported=True)
    for epoch in range(config.epochs):
        start = time.perf_counter()
        train_one_epoch(training, epoch, 0, config.loss_options(epoch), EpochTotals(), StopRequest(), clock)
        if epoch_seconds is not None:
            epoch_seconds.append(time.perf_counter() - start)
    return model


def evaluate(model: torch.nn.Module, data: Prepared, seed: int, batch_size: int, held_out: np.ndarray | None = None) -> dict[str, Any]:
    """The SVM protocol (seeded by ``seed``) on the frozen graph embeddings of every graph; with ``held_out`` (the
    inductive protocol) the SVM fitted on the other graphs' embeddings and scored on those graphs'."""
    embeddings, _ = GRAPHS.embed(model, None, data.samples, batch_size, "embed")
    x, y = embeddings.numpy(), data.labels.numpy()
    if held_out is None:
        result = svm_protocol(x, y, seed=seed)
        return {"accuracy": 100 * result.mean, "fold_std": 100 * result.std, "chosen_c": result.chosen_c[0]}
    training = np.setdiff1d(np.arange(len(y)), held_out)
    fold = heldout_svm(x[training], y[training], x[held_out], y[held_out])
    return {"accuracy": 100 * fold.accuracy, "fold": seed % PAPER_FOLDS, "held_out": len(held_out), "chosen_c": [fold.c]}


def training_part(data: Prepared, seed: int, held_out: np.ndarray | None = None) -> tuple[Prepared, np.ndarray]:
    """The inductive protocol's run ``seed``: the graphs it pretrains on (those outside its held-out fold, with their
    labels) and the held-out graphs' positions in ``data`` (:func:`~hcl_cli.graph.svm.inductive_fold`, or ``held_out``)."""
    if held_out is None:
        held_out = inductive_fold(data.labels.numpy(), seed)[1]
    kept = torch.from_numpy(np.setdiff1d(np.arange(len(data.labels)), held_out))
    return Prepared(data.folder, data.card, GraphSamples(data.samples.batcher, data.samples.indices[kept]), data.labels[kept]), held_out


def run_one(
    values: dict[str, Any],
    seed: int,
    epochs: int | None,
    data: Prepared,
    scratch: Path,
    *,
    train: bool = True,
    protocol: str = "transductive",
) -> dict[str, Any]:
    """Train (unless ``train`` is False: the untrained encoder) and read out one (method, seed) under ``protocol``
    (:data:`PROTOCOLS`)."""
    config = PretrainConfig(**{**values, **({"epochs": epochs} if epochs else {})}, seed=seed, data=str(data.folder), device="cpu")
    training, held_out = training_part(data, seed) if protocol == "inductive" else (data, None)
    start = time.perf_counter()
    model = train_encoder(config, training, scratch, train=train)
    trained = time.perf_counter()
    figures = evaluate(model, data, seed, config.batch_size, held_out)
    done = time.perf_counter()
    return {**figures, "train_seconds": round(trained - start, 3), "eval_seconds": round(done - trained, 3), "load": load_average()}


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
    """Per-seed accuracies and seconds, their mean and std; the seconds' means over the runs that have them (not the imported ones)."""
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
    }


def runs_in_results(result: dict[str, Any], methods: dict[str, dict[str, Method]], epochs: Any, protocol: str) -> dict[str, Any]:
    """The runs a results file holds (per seed: the accuracy, and the seconds where it kept them), for the
    methods whose parameters and epochs are those asked for: what a rerun resumes from when the work
    folder's runs.json is gone (a fresh clone has only the committed results file)."""
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
            unknown = [None] * len(row["seeds"])
            timings = zip(row.get("train_seconds") or unknown, row.get("eval_seconds") or unknown)
            made = zip(row.get("commits") or unknown, row.get("environments") or unknown)
            for seed, accuracy, (train, evaluation), (commit, environment) in zip(
                row["seeds"], row["accuracies"], timings, made, strict=True
            ):
                runs[f"{dataset}/{name}/{seed}"] = {
                    "accuracy": accuracy,
                    "train_seconds": train,
                    "eval_seconds": evaluation,
                    "commit": commit,
                    "environment": environment,
                    "from": "results file",
                }
    return runs


def table(methods: dict[str, dict[str, Method]], done: dict[str, Any], repeats: int, protocol: str) -> dict[str, Any]:
    """The results file's per-dataset rows from the runs done, each with its protocol and the commit and environment
    (:func:`run_environment`) of each seed's run (None where the run recorded none)."""
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
                **made_by(runs),
                "complete": len(runs) == repeats,
                "minus_ucl": paired(runs, by["ucl"]) if "ucl" in by and name != "ucl" else None,
                "minus_untrained": paired(runs, untrained),
            }
        out[presets.TU_DATASETS[dataset][0]] = {"untrained": summary(untrained) | made_by(untrained), "methods": entries}
    return out


def protocol_label(protocol: str, pretrain: dict[str, Any]) -> str:
    """A row's protocol as the results file and the README name it: a transductive row that reads labels says that
    the encoder saw the test labels."""
    reads_labels = PretrainConfig(**pretrain).needs_labels
    return TRANSDUCTIVE_LABELS if protocol == "transductive" and reads_labels else protocol


def made_by(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per seed (in order) the commit its run ran at (``+dirty`` when the tree differed from it) and its environment's
    key in the file's ``environments``; ``commit``: the one commit of them all, or ``mixed`` (or None: not recorded)."""
    commits = [runs[seed].get("commit") for seed in sorted(runs)]
    distinct = set(commits)
    return {
        "commit": next(iter(distinct)) if len(distinct) == 1 else "mixed" if distinct else None,
        "commits": commits,
        "environments": [runs[seed].get("environment") for seed in sorted(runs)],
    }


def run_environment() -> dict[str, Any]:
    """What a run ran on, besides its commit: the machine and the versions of :data:`VERSIONS`."""
    machine = {key: value for key, value in common.environment()["machine"].items() if key != "node"}
    return {"machine": machine, "python": common.environment()["python"], "versions": {name: installed(name) for name in VERSIONS}}


def environment_key(environment: dict[str, Any]) -> str:
    """A short stable key of ``environment`` (the results file's ``environments`` maps it back)."""
    import hashlib

    return hashlib.sha256(json.dumps(environment, sort_keys=True).encode()).hexdigest()[:12]


def relative_command(argv: list[str]) -> str:
    """The command line with no machine's paths (none in a results file): a path inside the repository relative to its
    root, an absolute one outside it as ``.../NAME``."""

    def shown(arg: str) -> str:
        path = Path(arg)
        if not path.is_absolute():
            return arg
        return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else f".../{path.name}"

    return shlex.join(shown(arg) for arg in argv)


BETA_NOTE = (
    "The hucl and hscl rows run beta 1 (H-SCL's main.py default) beside the paper's best of beta in {1, 2, 10}, which "
    "Table II and Table V print without naming the beta; the `betas` group runs 2 and 10.\n\n"
)

README = ROOT / "README.md"
README_BEGIN = "<!-- generated by `python -m benchmarks.reproduce_graphs --readme` from benchmarks/results/reproduce_graph_*.json -->\n"
README_END = "<!-- end of the generated graph tables -->\n"
HARD_SAMPLERS = ("hucl", "hscl", "hscl-threshold", "ot")
"""The samplers of hard negatives (hucl at beta 0 is the debiased loss: not hard)."""


def interval_text(diff: dict[str, Any] | None) -> str:
    """``+1.26 [-0.49, +3.01]`` (a paired difference and its 95% interval), or ``-``."""
    if not diff:
        return "-"
    ci = f" [{diff['ci95'][0]:+.2f}, {diff['ci95'][1]:+.2f}]" if diff["ci95"] else ""
    return f"{diff['mean']:+.2f}{ci}"


def ours_text(row: dict[str, Any]) -> str:
    return f"{row['mean']:.2f} ± {row['std']:.2f} ({len(row['seeds'])})" if row["seeds"] else "not run"


def infograph_of(name: str) -> str:
    """The InfoGraph a method is compared with: ucl (the tables' InfoGraph row), or for an HCL Fig. 3 row its beta 0 in the
    same reading, which Fig. 3 labels InfoGraph."""
    return f"fig3-beta0{OFFICIAL if name.endswith(OFFICIAL) else ''}" if name.startswith("fig3-beta") else "ucl"


def per_seed(row: dict[str, Any]) -> dict[int, dict[str, float]]:
    """A row's accuracies by seed, as :func:`paired` reads them."""
    return {seed: {"accuracy": value} for seed, value in zip(row["seeds"], row["accuracies"])}


def minus_infograph(name: str, rows: dict[str, Any]) -> dict[str, Any] | None:
    """The paired difference of method ``name`` from its InfoGraph (:func:`infograph_of`): the results file's ``minus_ucl``,
    or for a Fig. 3 row from the per-seed accuracies the file records (rounded to 0.01)."""
    reference = infograph_of(name)
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
    test labels (``protocol`` :data:`TRANSDUCTIVE_LABELS`) judge neither hardness nor labels: the sentence names them."""
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
    if not count:
        return f"{dataset}: too few seeds yet to say whether hard negatives help{left_out}."
    below = f"; below it beyond the noise: {', '.join(sides['below'])}" if sides["below"] else ""
    if sides["above"]:
        said = f"hard negatives help beyond the noise in {', '.join(sides['above'])} ({len(sides['within'])} of {count} hard-negative rows within the noise{below}{left_out})"
    else:
        said = (
            "hard negatives do not help beyond the noise: no hard-negative row is above its InfoGraph"
            f"{' (hscl judged against scl)' if any('against scl' in entry for entries in sides.values() for entry in entries) else ''} "
            f"({len(sides['within'])} of {count} within the noise{below}{left_out})"
        )
    labels = rows.get("scl", {}).get("minus_ucl")
    if labels and labels["ci95"] and labels["n"] >= MIN_VERDICT_SEEDS:
        said += f". The labels (scl against InfoGraph): {interval_text(labels)}"
    if transductive:
        said += f". Not judged here ({TRANSDUCTIVE_LABELS}): {', '.join(transductive)}"
    base = rows.get("ucl", {}).get("minus_untrained")
    if base and base["ci95"]:
        side = "above" if base["ci95"][0] > 0 else "below" if base["ci95"][1] < 0 else "within the noise of"
        said += f". InfoGraph (ucl) is {side} its untrained encoder ({interval_text(base)})"
    return f"{dataset}: {said}."


def markdown(result: dict[str, Any]) -> str:
    """The README's table of a results file: per dataset and method ours beside the papers' (and whether they lie within one
    std of ours), the paired differences from InfoGraph and from the untrained encoder, and a verdict per dataset."""
    lines = [
        "| dataset | method | ours: mean ± std (seeds) | paper | paper within one std | minus InfoGraph, 95% CI | minus untrained, 95% CI |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    verdicts = []
    for dataset, rows in result["datasets"].items():
        untrained = rows["untrained"]
        if untrained["seeds"]:
            lines.append(f"| {dataset} | untrained encoder | {ours_text(untrained)} | - | - | - | - |")
        for name, row in rows["methods"].items():
            row.setdefault("protocol", protocol_label(result.get("protocol", "transductive"), row["parameters"]))
            paper = "; ".join(f"{number} ({table})" for table, number in row["paper"].items()) or "-"
            differences = f"{interval_text(minus_infograph(name, rows['methods']))} | {interval_text(row['minus_untrained'])}"
            shown = f"{name} ({TRANSDUCTIVE_LABELS})" if row["protocol"] == TRANSDUCTIVE_LABELS else name
            lines.append(f"| {dataset} | {shown} | {ours_text(row)} | {paper} | {within_one_std(row)} | {differences} |")
        verdicts.append(f"- {verdict(dataset, rows['methods'], untrained)}")
    return "\n".join([*lines, "", *verdicts]) + "\n"


def readme_section(results: dict[str, dict[str, Any]]) -> str:
    """The README's graph tables, one per results file (``reproduce_graph_NAME.json`` by NAME; the tables' files first)."""
    parts = [
        README_BEGIN,
        "Ours: mean ± std over the seeds (ddof 0, as the papers' code), each row's number of seeds in brackets; \"paper within one "
        "std\" says whether each paper's number lies within one std of our mean. The intervals are 95% t intervals of the "
        "per-seed paired differences from InfoGraph (ucl, the tables' InfoGraph row; for HCL Fig. 3's rows their beta 0 in the "
        "same reading, which Fig. 3 labels InfoGraph) and from the untrained encoder of the same seed. Each dataset's sentence "
        "says whether a hard-negative row (hucl with beta > 0, hscl, ot) is above its InfoGraph beyond that interval (hscl: above "
        "scl), and what the labels add (scl against InfoGraph), judged from inductive rows only. Each table names its protocol "
        "(docs/protocol-graphs.md): inductive, seed s pretrains every method, ucl included, without the graphs of fold s of one "
        "seeded 10-fold split and the SVM, fitted on the other folds, scores fold s (ten seeds score each graph once); "
        f"transductive, every graph is pretrained on and the SVM cross-validates over all, so that an scl or hscl row's encoder "
        f"saw the test labels, which its name says ({TRANSDUCTIVE_LABELS}).\n",
    ]
    for name, result in sorted(
        results.items(), key=lambda item: (any("fig3" in m for d in item[1]["datasets"].values() for m in d["methods"]), item[0])
    ):
        tables = (
            "HCL Fig. 3"
            if any("fig3" in m for d in result["datasets"].values() for m in d["methods"])
            else "H-SCL Table II and HCL-OT Table V"
        )
        state = "" if result["complete"] else ", still running"
        betas = "" if tables == "HCL Fig. 3" else BETA_NOTE
        parts.append(
            f"\n#### {tables}: {', '.join(result['datasets'])} ({result.get('protocol', 'transductive')}; "
            f"`benchmarks/results/reproduce_graph_{name}.json`, {result['repeats']} seeds of "
            f"{''.join(filter(str.isdigit, str(result['epochs'])))} epochs{state})\n\n{betas}{markdown(result)}"
        )
    return "".join(parts) + README_END


def rewrite_readme(readme: Path, results: dict[str, dict[str, Any]]) -> None:
    """Replace the README's generated graph section (between :data:`README_BEGIN` and :data:`README_END`) by :func:`readme_section`."""
    text = readme.read_text(encoding="utf-8")
    if text.count(README_BEGIN) != 1 or text.count(README_END) != 1:
        raise SystemExit(f"{readme} must hold the markers {README_BEGIN.strip()} and {README_END.strip()} once each")
    start, end = text.index(README_BEGIN), text.index(README_END) + len(README_END)
    save_text(readme, text[:start] + readme_section(results) + text[end:])


def results_files() -> dict[str, dict[str, Any]]:
    """Every ``results/reproduce_graph_NAME.json`` by NAME, but the parts a merge joined into another (``part_*``, or a
    name that the invocations of a file other than a part took with ``--merge``)."""
    every = {
        path.stem.removeprefix("reproduce_graph_"): json.loads(path.read_text())
        for path in sorted(common.RESULTS.glob("reproduce_graph_*.json"))
    }
    merged = {
        part
        for name, result in every.items()
        if not name.startswith("part_")
        for invocation in result.get("invocations", [])
        for part in merged_names(invocation["command"])
    }
    return {name: result for name, result in every.items() if not name.startswith("part_") and name not in merged}


def merged_names(command: str) -> list[str]:
    """The names an invocation's command line gives ``--merge``."""
    words = shlex.split(command)
    if "--merge" not in words:
        return []
    after = words[words.index("--merge") + 1 :]
    return list(itertools.takewhile(lambda word: not word.startswith("--"), after))


def save_json(path: Path, payload: Any) -> None:
    save_text(path, json.dumps(payload, indent=2) + "\n")


def save_text(path: Path, text: str) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1]
    )
    parser.add_argument("--name", help="results/reproduce_graph_NAME.json, and the work folder (every command but --readme)")
    parser.add_argument("--datasets", nargs="+", default=["mutag", "ptc"], choices=list(presets.TU_DATASETS))
    parser.add_argument("--methods", nargs="+", default=["table2", "table5"], help="methods and groups (module docstring)")
    parser.add_argument("--repeats", type=int, default=10, help="seeds 0..N-1")
    parser.add_argument("--epochs", type=int, help="train this many epochs instead of the presets' 200 (a smoke run)")
    parser.add_argument("--tu-archive", type=Path, default=TU_ARCHIVE, help="the TU datasets (.tar.gz or folder)")
    parser.add_argument("--work", type=Path, help="work folder (default benchmarks/work/graph_NAME)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: on a loaded 2-core machine 2 threads made a MUTAG epoch 30x slower)"
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default="inductive",
        help="inductive: run seed s pretrains without the graphs of fold s of one seeded 10-fold split and scores that fold; "
        f"transductive ({TRANSDUCTIVE_LABELS}, under samplers that read labels): every graph, the SVM cross-validating over all",
    )
    parser.add_argument("--time-budget", type=float, default=0, metavar="SECONDS", help="stop between runs after this long (0: no limit)")
    parser.add_argument(
        "--merge",
        nargs="+",
        default=[],
        metavar="NAME",
        help="also take the runs of results/reproduce_graph_NAME.json (parts of one table run by parallel processes, each with its own --name)",
    )
    parser.add_argument("--table", action="store_true", help="print the README table of results/reproduce_graph_NAME.json and exit")
    parser.add_argument(
        "--readme", action="store_true", help="rewrite the README's graph tables from every results/reproduce_graph_*.json and exit"
    )
    args = parser.parse_args()
    if not args.readme and not args.name:
        parser.error("--name is required (but with --readme)")
    if args.readme:
        rewrite_readme(README, results_files())
        return
    if args.table:
        print(markdown(json.loads((common.RESULTS / f"reproduce_graph_{args.name}.json").read_text())), end="")
        return
    torch.set_num_threads(args.threads)
    started, deadline = time.monotonic(), time.monotonic() + args.time_budget if args.time_budget else math.inf
    work = args.work or ROOT / "benchmarks" / "work" / f"graph_{args.name}"
    work.mkdir(parents=True, exist_ok=True)
    names = expand(args.methods)
    methods = {dataset: {name: method(dataset, name) for name in dict.fromkeys(["ucl", *names])} for dataset in args.datasets}
    recorded_path, runs_path = work / "methods.json", work / "runs.json"
    recorded = json.loads(recorded_path.read_text()) if recorded_path.is_file() else {}
    for dataset, rows in methods.items():
        for name, spec in rows.items():
            key, values = (
                f"{dataset}/{name}",
                {**spec.pretrain, "epochs": args.epochs or spec.pretrain["epochs"], "protocol": args.protocol},
            )
            if recorded.setdefault(key, values) != json.loads(json.dumps(values)):
                raise SystemExit(f"{work} ran {key} with other parameters (see {recorded_path}): use another --name")
    save_json(recorded_path, recorded)
    done: dict[str, Any] = json.loads(runs_path.read_text()) if runs_path.is_file() else {}
    epochs = args.epochs or "the presets' (200)"
    environment = run_environment()
    environments = {environment_key(environment): environment}
    made = {"commit": code_state()["git_commit"], "environment": environment_key(environment)}  # the code this process loaded
    for name in [*args.merge, args.name]:
        result_path = common.RESULTS / f"reproduce_graph_{name}.json"
        if result_path.is_file():
            stored = json.loads(result_path.read_text())
            done = {**runs_in_results(stored, methods, epochs, args.protocol), **done}
            environments = {**stored.get("environments", {}), **environments}
        elif name != args.name:
            raise SystemExit(f"--merge {name}: no {result_path}")
    queue = [
        (dataset, name, seed)
        for phase in (False, True)
        for seed in range(args.repeats)
        for dataset in args.datasets
        for name in ["untrained", *methods[dataset]]
        if name.startswith("ot-") == phase and (name != "untrained" or not phase)
    ]
    loaded: dict[str, Prepared] = {}
    stopped = None
    scratch = work / "scratch"
    for dataset, name, seed in queue:
        key = f"{dataset}/{name}/{seed}"
        if key in done:
            continue
        if time.monotonic() >= deadline:
            stopped = f"time budget spent before {key}"
            break
        if dataset not in loaded:
            loaded[dataset] = load_dataset(work, presets.TU_DATASETS[dataset][0], args.tu_archive)
        values = methods[dataset]["ucl" if name == "untrained" else name].pretrain
        done[key] = run_one(values, seed, args.epochs, loaded[dataset], scratch, train=name != "untrained", protocol=args.protocol) | made
        save_json(runs_path, done)
        print(f"{key}: {done[key]['accuracy']:.2f} ({done[key]['train_seconds']:.1f} s train, load {done[key]['load']})", flush=True)
    complete = stopped is None
    log_path = work / "invocations.json"
    invocations = json.loads(log_path.read_text()) if log_path.is_file() else []
    invocations.append(
        {
            "command": relative_command(sys.argv),
            "commit": made["commit"],
            "seconds": round(time.monotonic() - started, 1),
            "stopped": stopped,
        }
    )
    save_json(log_path, invocations)
    write_result(
        f"reproduce_graph_{args.name}",
        {
            "complete": complete,
            "command": relative_command([Path(sys.executable).name, *sys.argv]),
            "protocol": args.protocol,
            "work": relative_command([str(work)]),
            "repeats": args.repeats,
            "epochs": args.epochs or "the presets' (200)",
            "threads": args.threads,
            "svm": SVM_TEXT[args.protocol],
            "std": "over seeds, ddof 0 (numpy's default, as the papers' code); intervals: t over the per-seed paired differences",
            "wall_seconds_total": round(sum((r["train_seconds"] or 0) + (r["eval_seconds"] or 0) for r in done.values()), 1),
            "runs_without_seconds": sum(r["train_seconds"] is None for r in done.values()),
            "datasets": table(methods, done, args.repeats, args.protocol),
            "environments": {key: environments[key] for key in sorted({run.get("environment") for run in done.values()} - {None})},
            "invocations": invocations,
        },
    )
    if not complete:
        print(f"{stopped}; rerun the same command to continue", file=sys.stderr)
        sys.exit(STOPPED_BY_BUDGET)


if __name__ == "__main__":
    main()
