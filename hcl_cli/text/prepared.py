"""The prepared text folder: the token ids of every sentence, the vocabulary and the card (``modality: text``).

``train.safetensors`` (kind :data:`SPLIT_KIND`) holds ``tokens`` (n, L) int64 padded with 0 to the longest kept
sentence, ``lengths`` (n,), ``documents`` (n,) (the file each sentence came from: no positive crosses two) and
``labels`` (n,) (-1: a corpus has none); ``vocabulary.json`` the tokens by id; ``card.json`` what prepare counted.
:func:`load_text_card` checks every field of the card in one line naming the file and the field.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hcl_cli.artifacts.files import read_json, write_json
from hcl_cli.artifacts.tensors import SCHEMA_VERSION, library_versions, load_artifact, save_artifact
from hcl_cli.errors import InputError
from hcl_cli.text.corpus import TextFile, build_vocabulary, encode

MODALITY = "text"
CARD_FILE = "card.json"
VOCABULARY_FILE = "vocabulary.json"
SPLIT_KIND = "sentences"
SPLITS = ("train",)
"""A corpus's one split: every sentence trains quick-thought."""


@dataclass(frozen=True)
class TextCard:
    """What ``hcl prepare --dataset text`` records (module docstring): the source files with their sha256 and encodings, the
    counts, the vocabulary's options and size, the unknown tokens' share of the kept tokens, the sentences cut."""

    name: str
    source: str
    files: dict[str, str]
    encodings: dict[str, str]
    counts: dict[str, int]
    documents: int
    tokens: int
    vocab_size: int
    min_count: int
    max_tokens: int
    unknown_share: float
    truncated: int
    skipped_lines: int
    vocabulary: str
    """The sha256 of the vocabulary's tokens (:func:`vocabulary_sha256`): what an encoder and a task prepared with it share."""
    task: str | None = None
    """A SentEval task's name (:mod:`hcl_cli.text.tasks`); None for a corpus."""
    classes: list[str] = field(default_factory=list)
    corpus: dict[str, str] | None = None
    """A task's: the sha256 of the prepared corpus whose vocabulary it reads (what its encoder trained on)."""
    pairs: bool = False
    """MRPC: each split holds its pairs' first sentences, then their second sentences, in the same order."""
    modality: str = MODALITY
    schema_version: int = SCHEMA_VERSION

    @property
    def num_sentences(self) -> int:
        return sum(self.counts.values())


def split_file(folder: str | Path, split: str) -> Path:
    return Path(folder) / f"{split}.safetensors"


def write_split(folder: Path, split: str, encoded: list[list[int]], documents: list[int], labels: list[int], name: str) -> None:
    """One split's sentences as padded token ids with their lengths, documents and labels."""
    width = max(len(row) for row in encoded)
    tokens = torch.zeros(len(encoded), width, dtype=torch.int64)
    for index, row in enumerate(encoded):
        tokens[index, : len(row)] = torch.tensor(row, dtype=torch.int64)
    tensors = {
        "tokens": tokens,
        "lengths": torch.tensor([len(row) for row in encoded], dtype=torch.int64),
        "documents": torch.tensor(documents, dtype=torch.int64),
        "labels": torch.tensor(labels, dtype=torch.int64),
    }
    save_artifact(
        split_file(folder, split), tensors, kind=SPLIT_KIND, meta={"dataset": name, "split": split, "versions": library_versions()}
    )


def write_card(folder: Path, card: TextCard, vocabulary: list[str]) -> None:
    write_json(folder / VOCABULARY_FILE, {"tokens": vocabulary})
    write_json(folder / CARD_FILE, asdict(card))


def load_split(folder: str | Path, split: str) -> dict[str, Tensor]:
    """The tensors of ``split`` (module docstring), checked as a set: one line naming the file otherwise."""
    path = split_file(folder, split)
    tensors, _ = load_artifact(path, SPLIT_KIND, expected={}, device="cpu")
    names = {"tokens", "lengths", "documents", "labels"}
    if (
        set(tensors) != names
        or tensors["tokens"].ndim != 2
        or any(tensors[name].shape != (len(tensors["tokens"]),) for name in names - {"tokens"})
    ):
        raise InputError(f"{path}: not a prepared text split (tokens (n, L), lengths, documents and labels (n,))")
    lengths = tensors["lengths"]
    if len(lengths) and (int(lengths.min()) < 1 or int(lengths.max()) > tensors["tokens"].shape[1]):
        raise InputError(f"{path}: a sentence length lies outside [1, {tensors['tokens'].shape[1]}]")
    return tensors


def vocabulary_sha256(tokens: list[str]) -> str:
    """The sha256 of ``tokens`` one a line: the vocabulary's identity."""
    return hashlib.sha256("\n".join(tokens).encode("utf-8")).hexdigest()


def load_vocabulary(folder: str | Path) -> list[str]:
    """The prepared folder's tokens by id; a one-line InputError when the file is not such a list."""
    path = Path(folder) / VOCABULARY_FILE
    tokens = read_json(path, what="vocabulary").get("tokens")
    if not isinstance(tokens, list) or len(tokens) < 2 or not all(isinstance(token, str) for token in tokens):
        raise InputError(f"{path}: not a vocabulary (a list of at least 2 tokens)")
    return tokens


_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "source": (str,),
    "files": (dict,),
    "encodings": (dict,),
    "counts": (dict,),
    "documents": (int,),
    "tokens": (int,),
    "vocab_size": (int,),
    "min_count": (int,),
    "max_tokens": (int,),
    "unknown_share": (int, float),
    "truncated": (int,),
    "skipped_lines": (int,),
    "vocabulary": (str,),
}


def load_text_card(folder: str | Path) -> TextCard:
    """The card of a prepared text folder, every field checked; a one-line InputError naming the file otherwise."""
    path = Path(folder) / CARD_FILE
    if not path.is_file():
        raise InputError(f"{folder} is not a prepared dataset folder (no {CARD_FILE}): run hcl prepare first")
    values: dict[str, Any] = read_json(path, what="dataset card")
    if values.get("modality") != MODALITY:
        raise InputError(f"{path} is not a text dataset's card (modality {values.get('modality')!r}): run hcl prepare --dataset text")
    if values.get("schema_version") != SCHEMA_VERSION:
        raise InputError(f"{path}: schema version {values.get('schema_version')!r} is not supported (this hcl reads {SCHEMA_VERSION})")
    for name, types in _TYPES.items():
        value = values.get(name)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise InputError(f"{path} is not a valid text dataset card: {name!r} is {value!r}: run hcl prepare again")
    counts = values["counts"]
    if not counts or not all(isinstance(count, int) and count >= 0 for count in counts.values()):
        raise InputError(f"{path} is not a valid text dataset card: 'counts' is {counts!r}: run hcl prepare again")
    optional = {"task": (str, type(None)), "classes": (list,), "corpus": (dict, type(None)), "pairs": (bool,)}
    for name, types in optional.items():
        if name in values and not isinstance(values[name], types):
            raise InputError(f"{path} is not a valid text dataset card: {name!r} is {values[name]!r}: run hcl prepare again")
    return TextCard(**{item.name: values[item.name] for item in fields(TextCard) if item.name in values})


FOLDER_FILES = (CARD_FILE, VOCABULARY_FILE, "train.safetensors", "train.json")
"""The files of a prepared corpus folder."""


def write_prepared_corpus(folder: Path, files: list[TextFile], source: str, vocab_size: int, min_count: int, max_tokens: int) -> TextCard:
    """Tokenised ``files`` (:func:`~hcl_cli.text.corpus.read_corpus`), their vocabulary and card, written into ``folder``."""
    sentences = [sentence for file in files for sentence in file.sentences]
    vocabulary = build_vocabulary(sentences, vocab_size, min_count)
    encoded, unknown, truncated = encode(sentences, vocabulary, max_tokens)
    documents = [index for index, file in enumerate(files) for _ in file.sentences]
    write_split(folder, "train", encoded, documents, [-1] * len(encoded), "text")
    kept = sum(len(row) for row in encoded)
    card = TextCard(
        name="text",
        source=source,
        files={file.name: file.sha256 for file in files},
        encodings={file.name: file.encoding for file in files},
        counts={"train": len(encoded)},
        documents=sum(1 for file in files if file.sentences),
        tokens=kept,
        vocab_size=len(vocabulary),
        min_count=min_count,
        max_tokens=max_tokens,
        unknown_share=unknown / kept,
        truncated=truncated,
        skipped_lines=sum(file.skipped for file in files),
        vocabulary=vocabulary_sha256(vocabulary),
    )
    write_card(folder, card, vocabulary)
    return card
