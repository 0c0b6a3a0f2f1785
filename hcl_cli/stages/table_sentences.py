"""``hcl table --sentences CORPUS --senteval DIR``: HCL Table 2 and UnDiMix Table 4, every row on a corpus at one recipe,
N seeded repeats, read out on SentEval's tasks, resumably.

The sentence side of ``hcl table`` (:mod:`hcl_cli.stages.table`), with the same parts, ``--merge``, ``--time-budget``,
resume and ownership of ``OUT/NAME.json`` and ``OUT/NAME.md`` (:mod:`hcl_cli.tables.owned`). The corpus (a folder of .txt
files, one sentence a line, or a prepared corpus) and every SentEval task that ``--senteval`` holds are prepared once into
the work folder by ``hcl prepare``'s stage code. Every row (:mod:`hcl_cli.tables.sentence_rows`) trains from scratch once
per seed 0..N-1 at the same recipe and is read out on every task (:mod:`hcl_cli.tables.sentence_runs`), seed-major; the
baselines (the mean untrained word embeddings and the untrained encoder) are read out once, at seed 0, before them.

Each run is written the moment it ends: ``WORK/runs.json`` and the results file, which holds every run (``runs``, each
with its commit), so that a results file is a record that a later invocation resumes: it skips the (row, seed) runs the
record holds and adds the ones it runs. A record of another recipe, other tasks, another corpus or other row parameters is
refused. ``--page FILE`` also puts the tables between FILE's generated markers (:data:`~hcl_cli.tables.sentences.BEGIN`),
the only part of FILE it changes (docs/sentences.md).
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hcl_cli.config import PretrainConfig
from hcl_cli.errors import UsageError, shown
from hcl_cli.provenance import portable
from hcl_cli.stages.table import (
    TableStopped,
    Writer,
    check_name,
    prepared_folder,
    read_json,
    save_json,
    save_text,
    sources_digest,
    write_json,
)
from hcl_cli.tables.owned import check_owned, write_owned
from hcl_cli.tables.runs import Prepared
from hcl_cli.tables.sentence_rows import BASELINES, Recipe, papers, sentence_rows
from hcl_cli.tables.sentence_runs import SentenceData, run_sentences
from hcl_cli.tables.sentences import BEGIN, END, replace_generated, sentences_markdown
from hcl_cli.text.modality import TEXT
from hcl_cli.text.senteval import TASKS, task_folder

CORPUS_COUNTS = ("sentences", "documents", "tokens", "vocab_size")


@dataclass(frozen=True)
class SentenceTableRequest:
    """One invocation of ``hcl table --sentences`` (:func:`hcl_cli.cli.table`)."""

    name: str
    corpus: Path
    senteval: Path
    rows: tuple[str, ...] = ("sentences",)
    seeds: int = 5
    recipe: Recipe = field(default_factory=Recipe)
    out: Path = Path("runs/tables")
    work: Path | None = None
    threads: int = 1
    time_budget: float = 0.0
    merge: tuple[str, ...] = ()
    page: Path | None = None
    writer: Writer = field(default=write_json, compare=False)

    @property
    def work_folder(self) -> Path:
        return self.work or self.out / self.name


def request(
    name: str,
    methods: str,
    seeds: int | None,
    recipe: tuple[int | None, int | None, int],
    paths: tuple[str, str, str, str | None, str | None],
    threads: int,
    time_budget: float,
    merge: tuple[str, ...],
) -> SentenceTableRequest:
    """The request of ``hcl table --sentences`` from its options (:func:`hcl_cli.cli.table`): ``recipe`` is ``--epochs``,
    ``--batch-size`` and ``--folds``, ``paths`` ``--sentences``, ``--senteval``, ``--out``, ``--work`` and ``--page``."""
    corpus, senteval, out, work, page = paths
    if not senteval:
        raise UsageError("--sentences needs --senteval DIR, the folder of SentEval's task files")
    rows = tuple(filter(None, (methods or "sentences").split(",")))
    return SentenceTableRequest(
        name,
        Path(corpus),
        Path(senteval),
        rows,
        5 if seeds is None else seeds,
        Recipe(*recipe),
        Path(out),
        Path(work) if work else None,
        threads,
        time_budget,
        merge,
        Path(page) if page else None,
    )


def check(request: SentenceTableRequest) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The rows (qt first) and the recipe, or a one-line usage error for a bad name, count, row, recipe or page; then the
    ownership of the results files (before any work)."""
    check_name(request.name)
    if request.seeds < 1 or request.threads < 1 or (request.recipe.epochs or 1) < 1:
        raise UsageError("--seeds, --epochs and --threads must be at least 1")
    if not 2 <= request.recipe.folds <= 100:
        raise UsageError(f"--folds must be in [2, 100] (SentEval's default 10; got {request.recipe.folds})")
    if not (math.isfinite(request.time_budget) and request.time_budget >= 0):
        raise UsageError(f"--time-budget must be a finite number of seconds, at least 0 (got {request.time_budget})")
    rows, recipe = sentence_rows(list(request.rows)), request.recipe.values()
    training = {key: value for key, value in recipe.items() if key not in ("folds", "readout_seed")}
    for values in rows.values():  # a bad value: one line, before anything is written
        PretrainConfig(**training, **values, data=str(request.corpus), device="cpu")
    if request.page is not None:
        text = request.page.read_text(encoding="utf-8") if request.page.is_file() and not request.page.is_symlink() else ""
        if replace_generated(text, "") is None:
            raise UsageError(f"--page {shown(request.page)}: not a page holding the generated markers {BEGIN} and {END}")
    out = request.out
    check_owned(out / f"{request.name}.json", True, {name: out / f"{name}.json" for name in request.merge})
    return rows, recipe


def present_tasks(request: SentenceTableRequest) -> list[str]:
    """The SentEval tasks whose files ``--senteval`` holds, in SentEval's order; none, or no corpus folder: a usage error."""
    if not request.corpus.is_dir():
        raise UsageError(f"--sentences {shown(request.corpus)}: no such folder (a folder of .txt files, one sentence a line)")
    tasks = [task for task in TASKS if request.senteval.is_dir() and task_folder(request.senteval, task) is not None]
    if not tasks:
        raise UsageError(f"--senteval {shown(request.senteval)}: holds the files of none of SentEval's {', '.join(TASKS)}")
    return tasks


def recorded(path: Path, recipe: dict[str, Any], rows: dict[str, Any], tasks: list[str]) -> dict[str, Any]:
    """The results file ``path`` (empty where there is none); another recipe, other tasks or a row with other parameters is
    a usage error."""
    stored = read_json(path, {})
    if not stored:
        return {}
    if stored.get("modality") != "text" or stored.get("recipe") != recipe or stored.get("tasks") != tasks:
        raise UsageError(
            f"{shown(path)} holds another table (recipe {stored.get('recipe')}, tasks {stored.get('tasks')}): use another --name"
        )
    for name, parameters in stored["rows"].items():
        if name in rows and parameters != rows[name]:
            raise UsageError(f"{shown(path)} ran {name} with other parameters ({parameters}): use another --name")
    return stored


def load_sentences(request: SentenceTableRequest, tasks: list[str], counts: dict[str, int] | None) -> SentenceData:
    """The corpus (a prepared one used as it is) and ``tasks``, prepared into ``WORK/prepared/HASH`` (one per pair of sources)
    once and loaded; a corpus whose counts are not the record's ``counts`` is a usage error."""
    corpus = request.corpus
    folder = request.work_folder / "prepared" / sources_digest(request.corpus, request.senteval)
    if not (corpus / "card.json").is_file():
        corpus = prepared_folder(folder / "corpus", dataset="text", path=str(corpus))
    card = TEXT.load_card(corpus)
    found = dict(zip(CORPUS_COUNTS, (card.num_sentences, card.documents, card.tokens, card.vocab_size), strict=True))
    if counts is not None and found != counts:
        raise UsageError(
            f"--sentences {shown(request.corpus)} is another corpus ({found}) than the record's ({counts}): use another --name"
        )
    loaded = {}
    for task in tasks:
        task_path = prepared_folder(folder / task, dataset="senteval", task=task, path=str(request.senteval), corpus=str(corpus))
        splits = tuple(TEXT.load_samples(task_path, [split]) for split in ("train", "test"))
        loaded[task] = (task_path, TEXT.load_card(task_path), splits)
    return SentenceData(Prepared(corpus, card, *TEXT.load_samples(corpus, ["train"])), loaded, found)


def run(request: SentenceTableRequest) -> dict[str, Any]:
    """Run what is missing of the sentence table ``request`` names, writing the results file and Markdown after every run."""
    rows, recipe = check(request)
    tasks = present_tasks(request)
    torch.set_num_threads(request.threads)
    started = time.monotonic()
    deadline = started + request.time_budget if request.time_budget else math.inf
    work, path = request.work_folder, request.out / f"{request.name}.json"
    stored = recorded(path, recipe, rows, tasks)
    done = {f"{run['row']}/{run['seed']}": run for run in stored.get("runs", [])}
    shown_rows, corpus = stored.get("rows", {}), stored.get("corpus")
    for name in request.merge:
        part = recorded(request.out / f"{name}.json", recipe, rows, tasks)
        if not part:
            raise UsageError(f"--merge {name}: no {shown(request.out / f'{name}.json')}")
        done = {f"{run['row']}/{run['seed']}": run for run in part["runs"]} | done
        shown_rows, corpus = part["rows"] | shown_rows, corpus or part["corpus"]
    shown_rows = {name: (shown_rows | rows)[name] for name in sentence_rows(["sentences"]) if name in shown_rows | rows}
    ran = read_json(work / "table.json", {"recipe": recipe, "tasks": tasks, "rows": rows})
    if ran["recipe"] != recipe or ran["tasks"] != tasks or any(ran["rows"].get(name, value) != value for name, value in rows.items()):
        raise UsageError(
            f"{shown(work)} ran another recipe, tasks or row parameters (see {shown(work / 'table.json')}): use another --work"
        )
    save_json(work / "table.json", {"recipe": recipe, "tasks": tasks, "rows": ran["rows"] | rows})
    done |= {key: run for key, run in read_json(work / "runs.json", {}).items() if key not in done}
    command = shlex.join(["hcl", *(portable(argument, Path.cwd().resolve()) for argument in sys.argv[1:])])
    invocations = [*stored.get("invocations", []), {"command": command, "seconds": 0.0, "stopped": None}]
    queue = [f"{row}/{seed}" for seed in range(request.seeds) for row in [*(BASELINES if seed == 0 else ()), *rows]]
    data = None if corpus is not None else load_sentences(request, tasks, None)
    table = {"corpus": corpus or data.counts, "tasks": tasks, "recipe": recipe, "rows": shown_rows}  # type: ignore[union-attr]

    def write(stopped: str | None) -> dict[str, Any]:
        invocations[-1] |= {"seconds": round(time.monotonic() - started, 1), "stopped": stopped}
        complete = stopped is None and all(key in done for key in queue)
        result = results(request.seeds, table, done, invocations, complete, stored.get("load_average"))
        request.writer(path, result)
        write_owned(path.with_suffix(".md"), sentences_markdown(result), markdown=True)
        return result

    stopped = None
    for key in queue:
        if key in done:
            continue
        if time.monotonic() >= deadline:
            stopped = f"time budget spent before {key}"
            break
        data = data or load_sentences(request, tasks, corpus)
        row, seed = key.split("/")
        done[key] = run_sentences(row, rows.get(row, rows["qt"]), int(seed), data, recipe, work / "scratch")
        save_json(work / "runs.json", done)
        write(None)
        accuracies = ", ".join(f"{task} {100 * score['accuracy']:.1f}" for task, score in done[key]["scores"].items())
        print(f"hcl table: {key}: {accuracies}", flush=True)
    result = write(stopped)
    markdown = sentences_markdown(result)
    if request.page is not None:
        save_text(request.page, replace_generated(request.page.read_text(encoding="utf-8"), markdown) or "")
    print(markdown, end="", flush=True)
    if stopped:
        raise TableStopped(f"{stopped}; wrote {shown(path)} with the runs done: rerun the same command to continue")
    return result


def results(
    seeds: int, table: dict[str, Any], done: dict[str, Any], invocations: list[Any], complete: bool, load: float | None
) -> dict[str, Any]:
    """The results file: the table's corpus, tasks, recipe and rows, the papers' numbers, every run, every invocation and the
    load at the last run (``load`` where none of ``done`` records it)."""
    return {
        "modality": "text",
        "torch": torch.__version__,
        "device": "cpu",
        "complete": complete,
        **table,
        "absent": "SICK (UnDiMix Table 4's first task) is not available"
        + "".join(f"; {task} is not in --senteval" for task in TASKS if task not in table["tasks"]),
        "repeats": seeds,
        "papers": papers(),
        "runs": list(done.values()),
        "invocations": invocations,
        "load_average": next((run["load"] for run in reversed(done.values()) if "load" in run), load),
    }
