"""HCL Table 2 and UnDiMix Table 4 at the books corpus's scale: quick-thought under each row's sampler, read out on SentEval's six tasks.

    python benchmarks/reproduce_sentences.py --books DIR --senteval DIR [--seeds 5] [--folds 5] [--resume]
    python benchmarks/reproduce_sentences.py --page docs/sentences.md     # the page's tables from the results file

``--books``: a folder of .txt files, one sentence a line (the 17 public-domain books of ../shared/datasets/books.tar.gz,
1.6 M words, in place of BookCorpus's ~1 B); ``--senteval``: SentEval's task folders (MR, CR, SUBJ, MPQA, TREC, MRPC).
Each row trains ``hcl pretrain`` with the defaults on sentences (quick-thought's f and g, 64-d GRUs on 64-d words,
batch 400, Adam lr 3e-3, three passes over the corpus: 495 steps, where UnDiMix App. A's lr 5e-4 learns nothing) and its sampler's options, and every task is read out by SentEval's
protocol (:mod:`hcl_cli.text.readout`) on ``[f(s); g(s)]`` with ``--folds`` outer and inner folds (SentEval's default
10; its prototyping setting, 5, is what fits a shared CPU here). Seed-major: seed 0 of every row (and the baselines, the
untrained encoder of seed 0 and the mean untrained word embeddings), then seed 1, ...; the results file is rewritten
after every run, so a run stopped early keeps every row at the seeds it finished. SICK (UnDiMix's seventh task) is
not available here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.common import RESULTS, commit, load_average, write_result  # noqa: E402
from hcl_cli.tables.sentences import replace_generated, sentences_markdown  # noqa: E402
from hcl_cli.text.encoder import (  # noqa: E402
    QtModel,
    embed_tokens,  # noqa: E402
    load_text_encoder,
)
from hcl_cli.text.modality import RAW_WORD_DIM  # noqa: E402
from hcl_cli.text.prepared import load_text_card, load_vocabulary  # noqa: E402
from hcl_cli.text.readout import task_readout  # noqa: E402
from hcl_cli.text.senteval import TASKS, read_task, task_folder  # noqa: E402
from hcl_cli.text.tasks import sentence_tensors  # noqa: E402

ROWS: dict[str, tuple[str, dict[str, Any]]] = {
    "qt": ("ucl", {}),
    "debiased": ("debiased", {"tau-plus": 0.01}),
    "hard-beta1": ("hucl", {"beta": 1.0, "tau-plus": 0.0}),
    "hard-beta2": ("hucl", {"beta": 2.0, "tau-plus": 0.0}),
    "undimix": ("undimix", {}),
}
"""HCL Table 2's four rows and UnDiMix Table 4's UnDiMix (its QT is ``qt``, its reimplemented HCL ``hard-beta1``)."""
PAPERS = {
    "HCL Table 2 (BookCorpus)": {
        "columns": ["MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC", "MRPC F1"],
        "rows": {
            "qt": [76.8, 81.3, 86.6, 93.4, 89.8, 73.6, 81.8],
            "debiased": [76.2, 82.9, 86.9, 93.7, 89.1, 74.7, 82.7],
            "hard-beta1": [77.1, 82.5, 87.0, 92.9, 89.2, 73.9, 82.2],
            "hard-beta2": [77.4, 83.6, 86.8, 93.4, 88.7, 73.5, 82.0],
        },
    },
    "UnDiMix Table 4 (BookCorpus)": {
        "columns": ["SICK", "CR", "SUBJ", "MPQA", "TREC", "MRPC", "MRPC F1"],
        "rows": {
            "qt": [67.7, 67.5, 79.9, 80.3, 66.0, 68.0, 80.1],
            "hard-beta1": [60.6, 62.7, 74.1, 79.3, 58.6, 68.3, 79.8],
            "undimix": [74.7, 78.0, 86.8, 78.7, 82.8, 70.7, 80.9],
        },
    },
}


def readout(embed: Any, tasks: dict[str, Any], cache: dict[str, Any], folds: int) -> dict[str, Any]:
    """Every task's accuracy (and MRPC's F1) of the features ``embed(tokens, lengths)`` gives, with the seconds taken."""
    scores: dict[str, Any] = {}
    for task, items in tasks.items():
        first = embed(*cache[task][0]).numpy()
        second = embed(*cache[task][1]).numpy() if cache[task][1] is not None else None
        result = task_readout(task, first, items.labels, items.splits, second, folds=folds)
        scores[task] = {"accuracy": result.accuracy, **({"f1": result.f1} if result.f1 is not None else {})}
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--books", help="the corpus: a folder of .txt files, one sentence a line")
    parser.add_argument("--senteval", help="a folder holding SentEval's task folders")
    parser.add_argument("--work", default="runs/sentences")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--name", default="reproduce_sentences")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--resume", action="store_true", help="keep the runs of an existing results file (each names its commit)")
    parser.add_argument("--page", help="run nothing: write the tables of the results file into this page (docs/sentences.md)")
    args = parser.parse_args()
    if args.page:
        page = Path(args.page)
        page.write_text(replace_generated(page.read_text(), sentences_markdown(json.loads((RESULTS / f"{args.name}.json").read_text()))))
        print(f"wrote {page}")
        return
    if not args.books or not args.senteval:
        parser.error("--books and --senteval are needed to run (or --page to write the page)")
    work = Path(args.work)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    prepared = work / "books"
    if not (prepared / "card.json").is_file():
        subprocess.run(["hcl", "prepare", "--dataset", "text", "--path", args.books, "--out", str(prepared)], check=True, env=env)
    card, vocabulary = load_text_card(prepared), load_vocabulary(prepared)
    tasks = {task: read_task(task_folder(Path(args.senteval), task), task) for task in TASKS}
    cache = {}
    for task, items in tasks.items():
        first = sentence_tensors(items.sentences, vocabulary, card.max_tokens)[:2]
        second = sentence_tensors(items.seconds, vocabulary, card.max_tokens)[:2] if items.seconds else None
        cache[task] = (first, second)
    previous = RESULTS / f"{args.name}.json"
    runs: list[dict[str, Any]] = json.loads(previous.read_text())["runs"] if args.resume and previous.is_file() else []
    done = {(run["row"], run["seed"]) for run in runs}
    here = commit()["commit"]
    payload: dict[str, Any] = {}

    def save() -> None:
        payload.update(
            {
                "corpus": {
                    "sentences": card.num_sentences,
                    "documents": card.documents,
                    "tokens": card.tokens,
                    "vocab_size": card.vocab_size,
                },
                "note": "books corpus (17 public-domain books, 1.6 M words) in place of BookCorpus (~1 B words); SICK not available",
                "papers": PAPERS,
                "folds": args.folds,
                "runs": runs,
                "load_average": load_average(),
            }
        )
        write_result(args.name, payload)

    torch.manual_seed(0)
    table = torch.randn(card.vocab_size, RAW_WORD_DIM)
    table[0] = 0.0
    started = time.time()
    if ("word-embeddings", 0) not in done:
        scores = readout(lambda tokens, lengths: table[tokens].sum(dim=1) / lengths[:, None].float(), tasks, cache, args.folds)
        runs.append({"row": "word-embeddings", "seed": 0, "scores": scores, "readout_seconds": time.time() - started, "commit": here})
        save()
    for seed in range(args.seeds):
        if seed == 0 and ("untrained", 0) not in done:
            started = time.time()
            torch.manual_seed(0)
            model = QtModel(card.vocab_size)
            scores = readout(lambda tokens, lengths, model=model: embed_tokens(model, tokens, lengths), tasks, cache, args.folds)
            runs.append({"row": "untrained", "seed": 0, "scores": scores, "readout_seconds": time.time() - started, "commit": here})
            save()
        for row in args.rows.split(","):
            if (row, seed) in done:
                continue
            sampler, options = ROWS[row]
            out = work / f"{row}-seed{seed}"
            flags = [f"--{name}={value}" for name, value in options.items()]
            command = ["hcl", "pretrain", "--data", str(prepared), "--out", str(out), "--live-dir", str(out / "live"), "--sampler", sampler]
            started = time.time()
            if not (out / "encoder.safetensors").is_file():
                subprocess.run([*command, *flags, "--seed", str(seed)], check=True, env=env)
            pretrain_seconds = time.time() - started
            model, sidecar = load_text_encoder(out / "encoder.safetensors")
            started = time.time()
            scores = readout(lambda tokens, lengths, model=model: embed_tokens(model, tokens, lengths), tasks, cache, args.folds)
            runs.append(
                {
                    "row": row,
                    "seed": seed,
                    "sampler": sampler,
                    "options": options,
                    "scores": scores,
                    "pretrain_seconds": pretrain_seconds,
                    "readout_seconds": time.time() - started,
                    "run": sidecar.run,
                    "commit": here,
                }
            )
            save()
            print(row, seed, {task: round(value["accuracy"], 4) for task, value in scores.items()}, flush=True)


if __name__ == "__main__":
    main()
