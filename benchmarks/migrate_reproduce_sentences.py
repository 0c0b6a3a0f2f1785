"""Migrate ``benchmarks/results/reproduce_sentences.json`` once, from the retired ``benchmarks/reproduce_sentences.py``'s
format into an ``hcl table --sentences`` record (:mod:`hcl_cli.stages.table_sentences`), without rerunning a run.

Every run is kept as it was (its scores, seconds and commit), with the torch threads it pretrained on (the retired script
ran ``hcl pretrain`` under ``OMP_NUM_THREADS=1``); the record gains what ``hcl table`` resumes by: the tasks, the recipe
(``hcl pretrain``'s defaults on sentences, unchanged since the runs' commits, and the file's folds), the rows' sampler
values (checked against each run's) and the retired script's invocation. It is written as hcl's own
(``benchmarks/results/.hcl-written.json``), so that ``hcl table`` resumes it and rewrites it::

    python -m benchmarks.migrate_reproduce_sentences
    hcl table --name reproduce_sentences --out benchmarks/results --sentences BOOKS --senteval SENTEVAL --seeds 5 --folds 5 \\
        --page docs/sentences.md     # nothing missing: the record and docs/sentences.md rewritten from it
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import RESULTS
from hcl_cli.stages.table import write_json
from hcl_cli.tables.sentence_rows import Recipe, papers, sentence_rows
from hcl_cli.text.senteval import TASKS

NAME = "reproduce_sentences"
HEADER = ("command", "date", "commit", "machine", "device_name", "torch", "python")
"""The retired script's environment record, kept as the record's first invocation."""


def migrated(legacy: dict) -> dict:
    """The ``hcl table`` record of the retired script's results ``legacy``; a run that is not the rows' or the recipe's
    is an error."""
    recipe, rows = Recipe(folds=legacy["folds"]).values(), sentence_rows(["sentences"])
    steps = recipe["epochs"] * (legacy["corpus"]["sentences"] // recipe["batch_size"])
    for run in legacy["runs"]:
        assert sorted(run["scores"]) == sorted(TASKS), run
        if "sampler" in run:
            options = {key.replace("-", "_"): value for key, value in run["options"].items()}
            assert rows[run["row"]] == {"sampler": run["sampler"], **options} and run["run"]["steps"] == steps, run
    assert legacy["papers"] == papers()
    invocation = {key: legacy[key] for key in HEADER} | {"seconds": None, "stopped": None}  # its last; the earlier left no record
    return {
        "modality": "text",
        "corpus": legacy["corpus"],
        "tasks": list(TASKS),
        "recipe": recipe,
        "rows": rows,
        "repeats": 5,
        "runs": [run | {"threads": 1} for run in legacy["runs"]],
        "invocations": [invocation],
        "load_average": legacy["load_average"],
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    path = RESULTS / f"{NAME}.json"
    legacy = json.loads(path.read_text(encoding="utf-8"))
    if "modality" in legacy:
        raise SystemExit(f"{path.name} is an hcl table record already: nothing to migrate")
    path.unlink()  # a file git holds, not one hcl wrote: the record below is hcl's
    write_json(path, migrated(legacy))
    print(f"wrote {path.name}: run hcl table on it to rewrite it whole (module docstring)")


if __name__ == "__main__":
    main()
