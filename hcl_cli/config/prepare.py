"""``hcl prepare``'s options: decode a dataset once into tensors, labels and a fixed split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hcl_cli.config.base import PREPARED, SEED_LIMIT, StageConfig, param, runtime

DATASETS = ("digits", "cifar10", "cifar100", "stl10", "imagefolder", "tu", "text", "senteval")
SENTEVAL_TASKS = ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC")
"""SentEval's six transfer tasks of the quick-thought papers (:data:`hcl_cli.text.senteval.TASKS`)."""
SENTEVAL = ("dataset", ("senteval",))
TEXT = ("dataset", ("text",))
"""The ``read_when`` of the text corpus's options."""
SPLIT_HERE = ("dataset", ("digits", "tu"))
"""The datasets ``prepare`` splits itself (the others ship their own split): the ``read_when`` of the split's options."""


@dataclass(init=False, frozen=True)
class PrepareConfig(StageConfig):
    """Decode a dataset once into uint8 tensors, labels and a fixed split."""

    group: ClassVar[str] = "prepare"
    command: ClassVar[str] = "prepare"
    dataset: str = param(
        "digits",
        "Dataset: digits (bundled with scikit-learn, offline), cifar10, cifar100, stl10, imagefolder (your own train/ and test/ class folders), "
        "tu (a graph dataset in the TU format, named by --name: graphs for InfoGraph), "
        "text (a folder of .txt files, one sentence a line: sentences for quick-thought), "
        "or senteval (SentEval's --task, under --corpus's vocabulary, to read a text encoder out on).",
        choices=DATASETS,
    )
    path: str = param(
        "data/raw",
        "Source: the download root for cifar10/cifar100/stl10, the root holding train/ and test/ for imagefolder (or a .tar.gz of it), "
        "for tu a .tar.gz archive (tu.tar.gz's layout) or a folder holding NAME/NAME_A.txt, ... or NAME_A.txt, ..., "
        "for text a folder of .txt files (UTF-8 or Latin-1), one sentence a line, in file then line order, "
        "for senteval a folder holding the task's files (or TASK/ or senteval/TASK/ in it; fetched there once where none is).",
        read_when=("dataset", tuple(name for name in DATASETS if name != "digits")),
    )
    name: str = param(
        "MUTAG",
        "tu only: the TU dataset's name, the prefix of its files (MUTAG, PTC_MR, PROTEINS, DD, ...).",
        read_when=("dataset", ("tu",)),
    )
    image_size: int = param(
        0,
        "Resize every image to this many pixels square (0 keeps the native size; imagefolder needs it when sizes differ).",
        minimum=0,
        maximum=4096,
        read_when=("dataset", tuple(name for name in DATASETS if name not in ("tu", "text", "senteval"))),
    )
    test_fraction: float = param(
        0.25,
        "Share of digits, or of tu graphs, held out as the stratified test split (other datasets ship their own split).",
        minimum=0.0,
        maximum=1.0,
        min_exclusive=True,
        max_exclusive=True,
        read_when=SPLIT_HERE,
    )
    vocab_size: int = param(
        20000,
        "text: the vocabulary's size, the padding and unknown tokens included (the most frequent tokens are kept).",
        minimum=3,
        maximum=10_000_000,
        read_when=TEXT,
    )
    min_count: int = param(1, "text: the fewest times a token is seen to enter the vocabulary.", minimum=1, maximum=10**9, read_when=TEXT)
    max_tokens: int = param(
        30, "text: a sentence is cut after this many tokens (UnDiMix App. A: 30).", minimum=1, maximum=10_000, read_when=TEXT
    )
    task: str = param(
        "MR", "senteval: the task (HCL Table 2, UnDiMix Table 4; SICK is not available).", choices=SENTEVAL_TASKS, read_when=SENTEVAL
    )
    corpus: str = param(
        PREPARED, "senteval: the prepared text corpus whose vocabulary the task's sentences are read with.", read_when=SENTEVAL
    )
    seed: int = param(0, "Seed of the train/test split (digits, tu).", minimum=0, maximum=SEED_LIMIT, read_when=SPLIT_HERE)
    out: str = runtime(PREPARED, "Output folder for train/test(/unlabeled).safetensors and card.json.")
