"""``hcl table``: reproduce a paper's graph table (H-SCL Table II, HCL-OT Table V, HCL Fig. 3) with N seeded repeats, resumably.

Every method is a graph preset's ``pretrain`` values (:mod:`hcl_cli.tables.methods`), trained from
scratch once per seed 0..N-1, every method on the same seeds, and read out with the papers' SVM
protocol; per seed the untrained encoder is read out the same way (:mod:`hcl_cli.tables.runs`).
Each dataset is prepared once (``hcl prepare``'s stage code, from ``--data``: the shipped or
fetched TU zips under ``data/raw`` by default) into ``WORK/prepared/NAME-HASH`` (one per ``--data``) and loaded once.

Runs are recorded one by one in ``WORK/runs.json``, each with its provenance (commit, dirty flag,
versions, machine: :func:`hcl_cli.provenance.run_identity`); a rerun skips the runs done (and
refuses a method whose parameters changed), those of ``WORK/runs.json`` and those that the results
file of the same name holds for the same parameters (so a fresh clone resumes from a committed
file). ``--time-budget`` stops between runs once it is spent (exit 75; rerun the same command to
continue). ``--merge NAME`` also takes the runs of other results files: parts of one table run
side by side (each its own ``--name`` and ``--datasets``), then joined by one more invocation with
every dataset and method. The order is seed-major, so a partial table has every method on the same
seeds; ot runs come last.

It writes ``OUT/NAME.json`` (per dataset and method the per-seed accuracies, their mean and std,
the paired differences from ucl and from the untrained encoder with 95% t intervals, the papers'
numbers) and ``OUT/NAME.md``, the table as the README prints it, also printed on stdout.
"""

from __future__ import annotations

import datetime
import fcntl
import hashlib
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hcl_cli.config import PrepareConfig
from hcl_cli.config.pretrain import LABEL_PROTOCOLS
from hcl_cli.errors import HclError, InputError, UsageError, shown
from hcl_cli.presets import graphs as presets
from hcl_cli.provenance import portable, run_identity
from hcl_cli.stages import prepare
from hcl_cli.tables.agreement import DEFAULT_TOLERANCE
from hcl_cli.tables.markdown import markdown
from hcl_cli.tables.methods import Method, expand, method
from hcl_cli.tables.owned import check_owned, write_owned
from hcl_cli.tables.runs import Prepared, load_prepared, run_one
from hcl_cli.tables.summary import runs_in_results, table
from hcl_cli.tables.verify import record_path, verification

STOPPED_BY_BUDGET = 75
SVM_NOTES = {
    "transductive": "evaluate_embedding.py's protocol: 10 stratified folds seeded by the run's seed, C in {1e-3..1e3} by 5-fold search",
    "inductive": "evaluate_embedding.py's fold: seed s's SVM fitted on the graphs outside fold s of one 10-fold split seeded by 0 "
    "(those it pretrained on), C in {1e-3..1e3} by 5-fold search, scored on fold s",
}
"""What the SVM readout of each protocol is, as the results file says."""
STD_NOTE = "over seeds, ddof 0 (numpy's default, as the papers' code); intervals: t over the per-seed paired differences"


class TableStopped(HclError):
    """The time budget was spent between two runs: the results file holds what is done; rerun to continue."""

    exit_code = STOPPED_BY_BUDGET


Writer = Callable[[Path, dict[str, Any]], None]


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` whole, after the invocation's provenance, as hcl's own (:mod:`hcl_cli.tables.owned`)."""
    header = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["hcl", *(portable(argument, Path.cwd().resolve()) for argument in sys.argv[1:])]),
    }
    write_owned(path, json.dumps({**header, **run_identity(), **payload}, indent=2) + "\n")


@dataclass(frozen=True)
class TableRequest:
    """One invocation of ``hcl table`` (its options, :func:`hcl_cli.cli.table`): :func:`run`'s."""

    name: str
    datasets: tuple[str, ...] = ("mutag", "ptc")
    methods: tuple[str, ...] = ("table2", "table5")
    seeds: int = 10
    epochs: int | None = None
    data: Path = Path("data/raw")
    out: Path = Path("runs/tables")
    work: Path | None = None
    threads: int = 1
    time_budget: float = 0.0
    merge: tuple[str, ...] = ()
    protocol: str = "inductive"
    """How every run meets the labels (:data:`~hcl_cli.config.pretrain.LABEL_PROTOCOLS`, :mod:`hcl_cli.tables.runs`)."""
    prefix: str = ""
    """The results file is ``OUT/PREFIXNAME.json`` (the benchmarks' ``reproduce_graph_``), as are the merged names'."""
    writer: Writer = field(default=write_json, compare=False)
    markdown_file: bool = True
    """Whether to write ``OUT/NAME.md`` beside the results (the benchmarks' folder keeps JSON only)."""
    owned: bool = True
    """Whether ``OUT``'s results files are hcl's by its record there (:mod:`hcl_cli.tables.owned`); the benchmarks' folder
    is git's (its results files are committed)."""

    def results_file(self, name: str) -> Path:
        return self.out / f"{self.prefix}{name}.json"

    @property
    def work_folder(self) -> Path:
        return self.work or self.out / self.name


def check(request: TableRequest) -> dict[str, dict[str, Method]]:
    """The rows of every dataset (ucl first), or a one-line usage error for a bad name, dataset, method or count."""
    check_name(request.name)
    unknown = [d for d in request.datasets if d not in presets.TU_DATASETS]
    if unknown or not request.datasets:
        raise UsageError(f"--datasets {','.join(unknown) or '(none)'}: expected some of {', '.join(presets.TU_DATASETS)}")
    if request.seeds < 1 or (request.epochs is not None and request.epochs < 1) or request.threads < 1:
        raise UsageError("--seeds, --epochs and --threads must be at least 1")
    if not (math.isfinite(request.time_budget) and request.time_budget >= 0):
        raise UsageError(f"--time-budget must be a finite number of seconds, at least 0 (got {request.time_budget})")
    if request.protocol not in LABEL_PROTOCOLS:
        raise UsageError(f"--protocol {request.protocol!r}: expected one of {', '.join(LABEL_PROTOCOLS)}")
    if not request.data.exists():
        raise UsageError(f"--data {shown(request.data)}: no such file or folder (the TU data: data/raw, a zip or a tar archive)")
    names = expand(list(request.methods))
    return {dataset: {name: method(dataset, name) for name in dict.fromkeys(["ucl", *names])} for dataset in request.datasets}


def check_name(name: str) -> None:
    """A one-line usage error for a ``--name`` that is not a plain file name."""
    if not name or any(ch in name for ch in "/\\\0") or name in (".", ".."):
        raise UsageError(f"--name {name!r}: expected a plain name such as mutag_ptc")


def run(request: TableRequest) -> dict[str, Any]:
    """Run what is missing of the table ``request`` names, write its results file and Markdown, and return the results."""
    methods = check(request)
    if request.owned:
        check_owned(request.results_file(request.name), request.markdown_file, {name: request.results_file(name) for name in request.merge})
    torch.set_num_threads(request.threads)
    started = time.monotonic()
    deadline = started + request.time_budget if request.time_budget else math.inf
    work = request.work_folder
    work.mkdir(parents=True, exist_ok=True)
    recorded_path, runs_path = work / "methods.json", work / "runs.json"
    recorded = read_json(recorded_path, {})
    for dataset, rows in methods.items():
        for name, spec in rows.items():
            key, values = (
                f"{dataset}/{name}",
                {**spec.pretrain, "epochs": request.epochs or spec.pretrain["epochs"], "protocol": request.protocol},
            )
            if recorded.setdefault(key, values) != json.loads(json.dumps(values)):
                raise UsageError(f"{shown(work)} ran {key} with other parameters (see {shown(recorded_path)}): use another --name")
    save_json(recorded_path, recorded)
    done: dict[str, Any] = read_json(runs_path, {})
    epochs = request.epochs or "the presets' (200)"
    for name in [*request.merge, request.name]:
        path = request.results_file(name)
        if path.is_file():
            done = {**runs_in_results(read_json(path, {}), methods, epochs, request.protocol), **done}
        elif name != request.name:
            raise UsageError(f"--merge {name}: no {shown(path)}")
    queue = [
        (dataset, name, seed)
        for phase in (False, True)
        for seed in range(request.seeds)
        for dataset in request.datasets
        for name in ["untrained", *methods[dataset]]
        if name.startswith("ot-") == phase and (name != "untrained" or not phase)
    ]
    loaded: dict[str, Prepared] = {}
    stopped = None
    for dataset, name, seed in queue:
        key = f"{dataset}/{name}/{seed}"
        if key in done:
            continue
        if time.monotonic() >= deadline:
            stopped = f"time budget spent before {key}"
            break
        if dataset not in loaded:
            loaded[dataset] = prepared(work, presets.TU_DATASETS[dataset][0], request.data)
        values = methods[dataset]["ucl" if name == "untrained" else name].pretrain
        done[key] = run_one(
            values, seed, request.epochs, loaded[dataset], work / "scratch", train=name != "untrained", protocol=request.protocol
        )
        save_json(runs_path, done)
        print(f"hcl table: {key}: {done[key]['accuracy']:.2f} ({done[key]['train_seconds']:.1f} s train)", flush=True)
    invocations = read_json(work / "invocations.json", [])
    command = shlex.join(portable(argument, Path.cwd().resolve()) for argument in sys.argv)  # a results file holds no machine path
    invocations.append({"command": command, "seconds": round(time.monotonic() - started, 1), "stopped": stopped})
    save_json(work / "invocations.json", invocations)
    result = {
        "complete": stopped is None,
        "protocol": request.protocol,
        "work": relative(work),
        "repeats": request.seeds,
        "epochs": epochs,
        "threads": request.threads,
        "svm": SVM_NOTES[request.protocol],
        "std": STD_NOTE,
        "wall_seconds_total": round(sum((r["train_seconds"] or 0) + (r["eval_seconds"] or 0) for r in done.values()), 1),
        "runs_without_seconds": sum(r["train_seconds"] is None for r in done.values()),
        "datasets": table(methods, done, request.seeds, request.protocol),
        "invocations": invocations,
    }
    path = request.results_file(request.name)
    request.writer(path, result)
    text = markdown(result)
    if request.markdown_file:
        write_owned(path.with_suffix(".md"), text, markdown=True)
    print(text, end="", flush=True)
    if stopped:
        raise TableStopped(f"{stopped}; wrote {shown(path)} with the runs done: rerun the same command to continue")
    return result


def run_command(
    request: Any,
    verified: str | None,
    data: Path,
    threads: int,
    rows: str,
    run_table: Callable[[Any], None] = run,
    seeds: int | None = None,
    tolerance: float | None = None,
) -> None:
    """``hcl table``'s options: ``--verify FILE`` (with ``--rows``, ``--seeds``, ``--tolerance``) verifies a results file,
    else ``run_table`` (:func:`run`, or the image tables' own) runs ``request`` (None without ``--name``)."""
    if verified is not None:
        verify(Path(verified), data, threads=threads, rows=tuple(filter(None, rows.split(","))), seeds=seeds, tolerance=tolerance)
        return
    if rows or tolerance is not None:
        raise UsageError(f"{'--rows' if rows else '--tolerance'} belongs to a verification: give it with --verify")
    if request is None:
        raise UsageError("--name is required (but with --verify)")
    run_table(request)


def verify(
    results: Path,
    data: Path = Path("data/raw"),
    work: Path | None = None,
    threads: int = 1,
    rows: tuple[str, ...] = (),
    seeds: int | None = None,
    tolerance: float | None = None,
) -> dict[str, Any]:
    """Rerun the first ``seeds`` seeds (all where None) of the rows of the results file ``results`` that ``rows`` names
    (all where it names none) at the current commit and judge each row's mean against the recorded one within
    ``tolerance`` (accuracy points, :data:`~hcl_cli.tables.agreement.DEFAULT_TOLERANCE` where None; :func:`hcl_cli.tables.verify.verification`), write ``verify_NAME.json`` beside it after every row and
    return it. Every write holds ``WORK/record.lock`` and joins the record as it then stands, so parts with disjoint
    ``rows`` run side by side in one folder join in one record; a rerun after a stop keeps the rows checked at the same
    clean commit."""
    if not results.is_file():
        raise UsageError(f"--verify {shown(results)}: no such file")
    result = read_json(results, None)
    if not isinstance(result, dict) or not isinstance(result.get("datasets"), dict):
        raise UsageError(f"--verify {shown(results)}: not a table's results file (no datasets in it)")
    tolerance = DEFAULT_TOLERANCE if tolerance is None else tolerance
    if (seeds is not None and seeds < 1) or threads < 1 or not (math.isfinite(tolerance) and tolerance > 0):
        raise UsageError(f"--seeds and --threads must be at least 1, --tolerance a finite number above 0 (got {tolerance})")
    torch.set_num_threads(threads)
    folder = work or Path("runs/tables/verify") / results.stem
    path = record_path(results)
    command = shlex.join(["hcl", *(portable(argument, Path.cwd().resolve()) for argument in sys.argv[1:])])
    head = {"command": command, "torch": torch.__version__, "device": "cpu"}

    def update(change: Callable[[dict[str, Any] | None], dict[str, Any]]) -> dict[str, Any]:
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "record.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process ends
            stored = read_json(path, None)
            record = {**head, **change(stored if isinstance(stored, dict) else None)}
            if record.get("rows") and record != stored:  # a read (the change returns what stands) writes nothing
                save_json(path, record)
            return record

    load = lambda tu_name: prepared(folder, tu_name, data)  # noqa: E731
    record = verification(result, results.name, load, folder / "scratch", rows=rows, update=update, seeds=seeds, tolerance=tolerance)
    print(
        f"hcl table: {record['agree']} of {record['checked']} rows checked of the {record['total']} of {shown(results)} agree with "
        f"their record (tolerance {tolerance:g} points); wrote {shown(path)}",
        flush=True,
    )
    return record


def prepared(work: Path, tu_name: str, source: Path) -> Prepared:
    """The TU dataset ``tu_name`` prepared from ``source`` into ``WORK/prepared/NAME-HASH`` (:func:`prepared_folder`), loaded."""
    folder = work / "prepared" / f"{tu_name}-{sources_digest(source)}"
    return load_prepared(prepared_folder(folder, dataset="tu", name=tu_name, path=str(source)))


def sources_digest(*sources: Path) -> str:
    """Eight hex digits of the sources' resolved paths, naming a table's prepared folder: other sources prepare afresh."""
    return hashlib.sha256(os.fsencode("\0".join(str(source.resolve()) for source in sources))).hexdigest()[:8]


def prepared_folder(folder: Path, **options: Any) -> Path:
    """``folder``, prepared once by ``hcl prepare``'s stage code with ``options`` (kept as it is where it holds a card)."""
    if not (folder / "card.json").is_file():
        prepare.run(PrepareConfig(**options, out=str(folder)))
    return folder


def relative(path: Path) -> str:
    """``path`` relative to the working folder where it lies inside it (a results file holds no absolute path), else its name."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return path.name


def read_json(path: Path, default: Any) -> Any:
    """The JSON of ``path`` (``default`` where there is none); a file that is not JSON is a one-line error."""
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{shown(path)}: not a readable JSON file ({exc})") from exc


def save_json(path: Path, value: Any) -> None:
    """Write ``value`` to ``path`` as indented JSON, whole (:func:`save_text`): the work folder's files and the benchmarks' records."""
    save_text(path, json.dumps(value, indent=2) + "\n")


def save_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole: a temporary sibling renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
