"""Sentences, the third :class:`~hcl_cli.modality.Modality`: a text corpus, quick-thought's f and g, consecutive sentences.

What each method does, and the decisions behind it:

- **The prepared folder** (:mod:`hcl_cli.text.prepared`): every sentence's token ids, its document, the vocabulary
  and the card; one split, ``train`` (a corpus has no labels and no test split).
- **Batches** (:class:`TextSamples`): QT's batch is consecutive sentences (Logeswaran & Lee 2018, Sec. 3), not a
  random draw, and the epoch loop gives each step a slice of a seeded permutation of the samples. ``samples[index]``
  is therefore the window of ``len(index)`` consecutive sentences that starts where the slice's first index falls,
  scaled onto the starts ``0 .. n - len(index)``: an epoch reads n / B windows at seeded random places, every
  sentence once per epoch on average (QT's code reads the corpus once in order); a resumed run reads the same windows.
  A window may span two documents: the loss then pairs no sentence across them
  (:func:`~hcl_cli.objectives.sentence_batch.context_pairs`). An epoch drops its last partial batch.
- **Encoder**: :class:`~hcl_cli.text.encoder.QtModel`, stored as a ``text encoder`` artifact bound to its
  vocabulary; ``embed`` writes ``[f(s); g(s)]`` as backbone and projection.
- **Raw features**: the mean of untrained word embeddings over each sentence's tokens (a 128-d table drawn from torch's
  RNG seeded 0, as ``nn.Embedding`` draws it: the width of the default ``[f; g]``), the bag-of-words baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from hcl_cli.artifacts.binding import prepared_sha256
from hcl_cli.errors import InputError, UsageError
from hcl_cli.text.encoder import TEXT_ENCODER_KIND, QtModel, TextEncoderSidecar, embed_tokens, load_text_encoder, save_text_encoder
from hcl_cli.text.prepared import TextCard, load_split, load_text_card

MIN_SENTENCES = 3
"""The fewest sentences a batch holds: a sentence, its neighbour and one negative."""
RAW_WORD_DIM = 128
"""The width of the untrained word embeddings whose mean is the raw-feature baseline."""


@dataclass(frozen=True)
class SentenceWindow:
    """Consecutive sentences on a device: token ids (n, L), lengths (n,), documents (n,)."""

    tokens: Tensor
    lengths: Tensor
    documents: Tensor


class TextSamples:
    """A split's sentences resident on a device (:class:`~hcl_cli.modality.Samples`); ``samples[index]`` is the
    :class:`SentenceWindow` of ``len(index)`` consecutive sentences the index's first entry starts (module docstring)."""

    index_device = torch.device("cpu")

    def __init__(self, tokens: Tensor, lengths: Tensor, documents: Tensor, vocab_size: int) -> None:
        self.tokens, self.lengths, self.documents = tokens, lengths, documents
        self.vocab_size = vocab_size

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def device(self) -> torch.device:
        return self.tokens.device

    def window(self, start: int, size: int) -> SentenceWindow:
        """Sentences ``start .. start + size - 1``, their tokens cut to the longest of them."""
        lengths = self.lengths[start : start + size]
        width = int(lengths.max())
        return SentenceWindow(self.tokens[start : start + size, :width], lengths, self.documents[start : start + size])

    def __getitem__(self, index: Tensor) -> SentenceWindow:
        size = len(index)
        start = int(index[0]) * (len(self) - size + 1) // len(self)
        return self.window(start, size)


class TextModality:
    """Sentences of a corpus; a batch is a :class:`SentenceWindow` (module docstring)."""

    name = "text"
    sample_noun = "sentence"
    encoder_kind = TEXT_ENCODER_KIND
    keep_last_batch = False
    two_views = False
    loss_note = ""
    objectives = ("nce",)
    raw_name = "mean untrained word embeddings"
    raw_feature = "word embeddings"
    eval_inputs = "sentences"
    raw_description = f"each sentence's mean of {RAW_WORD_DIM}-d untrained word embeddings (seed 0), L2-normalised"

    def load_card(self, folder: str | Path) -> TextCard:
        return load_text_card(folder)

    def describe(self, card: TextCard, count: int) -> str:
        return f"{count} sentences of {card.tokens / max(card.num_sentences, 1):.1f} tokens on average"

    def check_trainable(self, card: TextCard, folder: str) -> None:
        if card.task is not None:
            raise UsageError(
                f"{folder} holds SentEval's {card.task}, a task to read out: pretrain on a corpus (hcl prepare --dataset text)"
            )
        if card.num_sentences < MIN_SENTENCES:
            raise UsageError(f"{folder} holds {card.num_sentences} sentences: quick-thought needs batches of at least {MIN_SENTENCES}")

    def training_splits(self, card: TextCard | None, labelled: bool, transductive: bool = False) -> list[str]:
        return ["train"]

    def encoder_data(self, folder: str | Path, card: TextCard) -> dict[str, str]:
        """A task's corpus (its encoder trained on the corpus whose vocabulary it reads), else the folder itself."""
        return card.corpus if card.corpus is not None else prepared_sha256(folder)

    def load_samples(self, folder: str | Path, splits: Sequence[str], device: torch.device | str = "cpu") -> tuple[TextSamples, Tensor]:
        card = load_text_card(folder)
        parts = [load_split(folder, split) for split in splits]
        width = max(part["tokens"].shape[1] for part in parts)
        tokens = torch.cat([nn.functional.pad(part["tokens"], (0, width - part["tokens"].shape[1])) for part in parts])
        if len(tokens) and int(tokens.max()) >= card.vocab_size:
            raise InputError(f"{folder}: a token id is outside the card's vocabulary of {card.vocab_size}: run hcl prepare again")
        joined = {name: torch.cat([part[name] for part in parts]) for name in ("lengths", "documents", "labels")}
        samples = TextSamples(tokens.to(device), joined["lengths"].to(device), joined["documents"].to(device), card.vocab_size)
        return samples, joined["labels"]

    def save_encoder(self, path: str | Path, model: QtModel, card: TextCard, meta: dict[str, Any]) -> None:
        save_text_encoder(path, model, card.vocabulary, meta)

    def load_encoder(self, path: str | Path, device: torch.device | str = "cpu") -> tuple[QtModel, TextEncoderSidecar]:
        return load_text_encoder(path, device)

    def check_fits(self, model: QtModel, card: TextCard, model_path: str, data_path: str) -> None:
        encoder = load_text_encoder(model_path)[1] if Path(model_path).is_file() else None
        if encoder is not None and encoder.vocabulary != card.vocabulary:
            raise InputError(
                f"{model_path} was trained with another vocabulary than {data_path}'s: prepare it with the corpus's vocabulary"
            )
        if model.vocab_size != card.vocab_size:
            raise InputError(f"{model_path} reads {model.vocab_size} token ids, but {data_path}'s vocabulary has {card.vocab_size}")

    def embed(self, model: QtModel, stats: Any, samples: TextSamples, batch_size: int, description: str) -> tuple[Tensor, Tensor]:
        """``[f(s); g(s)]`` of every sentence in order, float32 on the CPU, ``batch_size`` a pass, in eval mode (as backbone,
        and a copy as projection: QT has no head)."""
        features = embed_tokens(model, samples.tokens, samples.lengths, batch_size)
        return features, features.clone()

    def untrained(self, model: QtModel, seed: int) -> QtModel:
        device = next(model.parameters()).device
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            fresh = QtModel(model.vocab_size, model.word_dim, model.hidden)
        return fresh.to(device).eval()

    def card_summary(self, card: TextCard) -> str:
        return (
            f"{card.num_sentences:,} sentences in {card.documents} documents, {card.tokens:,} tokens, a vocabulary of "
            f"{card.vocab_size:,} ({card.unknown_share:.1%} of tokens unknown), cut at {card.max_tokens} tokens"
        )

    def recorded_prepare(self, card: TextCard) -> dict[str, Any]:
        if card.task is not None:
            return {"dataset": "senteval", "task": card.task}
        return {"dataset": "text", "vocab_size": card.vocab_size, "min_count": card.min_count, "max_tokens": card.max_tokens}

    def raw_features(self, samples: TextSamples) -> Tensor:
        """Each sentence's mean untrained word embedding (module docstring), float32 on the CPU."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            table = torch.randn(samples.vocab_size, RAW_WORD_DIM)
        table[0] = 0.0
        tokens, lengths = samples.tokens.cpu(), samples.lengths.cpu()
        return table[tokens].sum(dim=1) / lengths[:, None].to(table.dtype)


TEXT = TextModality()
