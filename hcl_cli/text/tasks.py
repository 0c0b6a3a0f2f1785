"""A SentEval task as the trained encoder reads it, and its prepared folder (``hcl prepare --dataset senteval``).

The task's sentences are tokenised as the corpus was (:func:`~hcl_cli.text.corpus.tokenise`), their ids taken from the
corpus's vocabulary (unknown tokens its unknown id) and cut at the corpus's ``max_tokens``; a sentence with no token
(SentEval keeps blank lines as empty sentences) is read as one padding token, whose word embedding is zero.

The folder is a text folder (:mod:`hcl_cli.text.prepared`) with a ``train`` and a ``test`` split. TREC and MRPC keep
their own; MR, CR, SUBJ and MPQA, which SentEval cross-validates over every item, put every fourth item in ``test``
(so ``linear-eval --protocol fixed`` has a split to read) and ``linear-eval --protocol senteval`` reads both splits
together, in file order (each row's ``documents`` entry is its item's place in the task's files). MRPC's splits hold
their pairs' first sentences, then the second ones. The card records the task, its classes and the sha256 of the
prepared corpus whose vocabulary it reads: the data the encoder that embeds it trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hcl_cli.artifacts.binding import prepared_sha256
from hcl_cli.errors import InputError
from hcl_cli.text.corpus import encode, tokenise
from hcl_cli.text.encoder import QtModel, embed_tokens
from hcl_cli.text.modality import TEXT
from hcl_cli.text.prepared import TextCard, load_split, load_text_card, load_vocabulary, write_card, write_split
from hcl_cli.text.senteval import CROSS_VALIDATED, SentEvalTask

TEST_EVERY = 4
"""A cross-validated task's every fourth item is in its ``test`` split."""
TASK_FILES = ("card.json", "vocabulary.json", "train.safetensors", "train.json", "test.safetensors", "test.json")
"""The files of a prepared task folder."""


def encoded_rows(sentences: Sequence[str], vocabulary: Sequence[str], max_tokens: int) -> tuple[list[list[int]], int]:
    """Each sentence's token ids (module docstring), and how many of them are unknown."""
    encoded, unknown, _ = encode([tokenise(sentence) for sentence in sentences], vocabulary, max_tokens)
    return [row or [0] for row in encoded], unknown


def sentence_tensors(sentences: Sequence[str], vocabulary: Sequence[str], max_tokens: int) -> tuple[Tensor, Tensor]:
    """(n, L) token ids padded with 0 and (n,) lengths of ``sentences``."""
    rows, _ = encoded_rows(sentences, vocabulary, max_tokens)
    tokens = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.int64)
    for index, row in enumerate(rows):
        tokens[index, : len(row)] = torch.tensor(row, dtype=torch.int64)
    return tokens, torch.tensor([len(row) for row in rows], dtype=torch.int64)


def item_splits(task: SentEvalTask) -> list[str]:
    """Each item's split in the folder (module docstring)."""
    if task.task in CROSS_VALIDATED:
        return ["test" if index % TEST_EVERY == TEST_EVERY - 1 else "train" for index in range(len(task.labels))]
    return list(task.splits)


def write_prepared_task(folder: Path, task: SentEvalTask, files: dict[str, str], source: str, corpus: Path) -> TextCard:
    """``task`` under ``corpus``'s vocabulary, written into ``folder`` (module docstring)."""
    corpus_card, vocabulary = load_text_card(corpus), load_vocabulary(corpus)
    splits, counts, tokens, unknown = item_splits(task), {}, 0, 0
    for split in ("train", "test"):
        items = [index for index, name in enumerate(splits) if name == split]
        sentences = [task.sentences[index] for index in items]
        if task.seconds is not None:
            sentences += [task.seconds[index] for index in items]
            items = items + items
        rows, missing = encoded_rows(sentences, vocabulary, corpus_card.max_tokens)
        write_split(folder, split, rows, items, [task.labels[index] for index in items], task.task)
        counts[split], tokens, unknown = len(rows), tokens + sum(map(len, rows)), unknown + missing
    card = TextCard(
        name=task.task,
        source=source,
        files=files,
        encodings={},
        counts=counts,
        documents=len(task.labels),
        tokens=tokens,
        vocab_size=corpus_card.vocab_size,
        min_count=corpus_card.min_count,
        max_tokens=corpus_card.max_tokens,
        unknown_share=unknown / max(tokens, 1),
        truncated=0,
        skipped_lines=0,
        vocabulary=corpus_card.vocabulary,
        task=task.task,
        classes=list(task.classes),
        corpus=prepared_sha256(corpus),
        pairs=task.seconds is not None,
    )
    write_card(folder, card, vocabulary)
    return card


def task_items(folder: str | Path, split: str) -> np.ndarray:
    """(n,) each row's item index in the task's files (its ``documents`` entry)."""
    return load_split(folder, split)["documents"].numpy()


def task_features(
    card: TextCard, folder: str | Path, train: tuple[Tensor, Tensor], test: tuple[Tensor, Tensor]
) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray | None]:
    """A task's embeddings ``(features, labels)`` of its ``train`` and ``test`` splits as SentEval's readout
    (:func:`~hcl_cli.text.readout.task_readout`) takes them: every item once, with its label and split (``all`` for the
    cross-validated tasks, in file order), and for MRPC the second sentences' embeddings."""
    parts = []
    for split, (features, labels) in (("train", train), ("test", test)):
        items = task_items(folder, split)
        if len(items) != len(features):
            raise InputError(f"the {split} embeddings hold {len(features)} rows, but {folder}'s {split} split {len(items)}: embed it again")
        half = len(features) // 2 if card.pairs else len(features)
        seconds = features[half:].double().numpy() if card.pairs else None
        parts.append((items[:half], features[:half].double().numpy(), labels[:half].numpy(), seconds, split))
    if card.task in CROSS_VALIDATED:
        order = np.argsort(np.concatenate([part[0] for part in parts]), kind="stable")
        features = np.concatenate([part[1] for part in parts])[order]
        return features, np.concatenate([part[2] for part in parts])[order], ["all"] * len(order), None
    splits = [part[4] for part in parts for _ in part[0]]
    seconds = np.concatenate([part[3] for part in parts]) if card.pairs else None
    return np.concatenate([part[1] for part in parts]), np.concatenate([part[2] for part in parts]), splits, seconds


def top5_accuracy(features: np.ndarray, labels: np.ndarray, splits: list[str], c: float, seed: int) -> float:
    """The share of a split task's test items whose label is among the five likeliest classes of SentEval's classifier
    refitted on the train split at the chosen ``c`` (:func:`~hcl_cli.text.readout.c_search`'s classifier)."""
    from sklearn.linear_model import LogisticRegression

    from hcl_cli.text.readout import MAX_ITERATIONS

    train, test = np.asarray(splits) == "train", np.asarray(splits) == "test"
    classifier = LogisticRegression(C=c, max_iter=MAX_ITERATIONS, random_state=seed).fit(features[train], labels[train])
    likeliest = classifier.classes_[np.argsort(-classifier.predict_proba(features[test]), axis=1)[:, :5]]
    return float((likeliest == labels[test][:, None]).any(axis=1).mean())


def baseline_features(folder: str | Path, encoder_config: dict[str, Any]) -> dict[str, tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]]:
    """The train and test ``(features, labels)`` of a task's two baselines, by name: ``untrained encoder`` (the run's f and
    g of its ``qt_hidden`` and ``word_dim``, drawn from its ``seed``, :meth:`~hcl_cli.text.modality.TextModality.untrained`)
    and ``mean word embeddings`` (:meth:`~hcl_cli.text.modality.TextModality.raw_features`)."""
    card = load_text_card(folder)
    defaults = QtModel(2)
    config = {"word_dim": defaults.word_dim, "qt_hidden": defaults.hidden, "seed": 0} | encoder_config
    untrained = TEXT.untrained(QtModel(card.vocab_size, config["word_dim"], config["qt_hidden"]), config["seed"])
    features: dict[str, Any] = {"untrained encoder": [], "mean word embeddings": []}
    for split in ("train", "test"):
        samples, labels = TEXT.load_samples(folder, [split])
        features["untrained encoder"].append((embed_tokens(untrained, samples.tokens, samples.lengths), labels))
        features["mean word embeddings"].append((TEXT.raw_features(samples), labels))
    return {name: (train, test) for name, (train, test) in features.items()}
