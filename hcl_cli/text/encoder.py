"""Quick-thought's two encoders and their artifact, as ``hcl pretrain`` writes it and ``embed`` reads it.

QT (Logeswaran & Lee, ICLR 2018, Sec. 3-4): two encoders f and g with separate weights, each a word embedding and a
GRU read over the sentence (torch's ``nn.GRU`` over packed sequences, so padding never enters a state), the
sentence's encoding the GRU's last hidden state. The paper's uni-QT uses 1200-d GRUs on 300-d word embeddings (a
2400-d [f; g]); hcl's CPU-sized default is 64-d GRUs on 64-d embeddings (``--qt-hidden``, ``--word-dim``). A
sentence's representation, what ``embed`` writes, is QT's concatenation ``[f(s); g(s)]`` (backbone and projection
alike: QT has no head).

The artifact (kind :data:`TEXT_ENCODER_KIND`) holds the state dict; its sidecar the architecture (``arch``,
``vocab_size``, ``word_dim``, ``hidden``, the feature sizes), the sha256 of the vocabulary the ids index (a task
prepared with another vocabulary is refused), and what pretraining records of every encoder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from hcl_cli.artifacts.encoders import RecordedEncoder, check_state_dict, load_recorded_weights
from hcl_cli.artifacts.tensors import library_versions, load_artifact, save_artifact
from hcl_cli.errors import InputError

TEXT_ENCODER_KIND = "text encoder"
QT_GRU = "qt-gru"
SIZE_FIELDS = ("vocab_size", "word_dim", "hidden")
SIZE_LIMIT = 10_000_000
"""The largest vocabulary or width a sidecar may name."""


class SentenceEncoder(nn.Module):
    """One of QT's encoders: word embeddings (id 0 pads) and a GRU; a sentence's encoding is its last hidden state."""

    def __init__(self, vocab_size: int, word_dim: int, hidden: int) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        self.gru = nn.GRU(word_dim, hidden, batch_first=True)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """(n, hidden) the encodings of ``tokens`` (n, L), each sentence read over its ``lengths`` (n,) tokens only."""
        packed = nn.utils.rnn.pack_padded_sequence(self.words(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, last = self.gru(packed)
        return last[-1]


class QtModel(nn.Module):
    """QT's f and g, separate weights, with the attributes every encoder of the pipeline has."""

    arch = QT_GRU

    def __init__(self, vocab_size: int, word_dim: int = 64, hidden: int = 64) -> None:
        super().__init__()
        self.vocab_size, self.word_dim, self.hidden = vocab_size, word_dim, hidden
        self.f = SentenceEncoder(vocab_size, word_dim, hidden)
        self.g = SentenceEncoder(vocab_size, word_dim, hidden)

    @property
    def feature_dim(self) -> int:
        """Size of ``[f(s); g(s)]``."""
        return 2 * self.hidden

    @property
    def projection_dim(self) -> int:
        return self.feature_dim

    def architecture(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "vocab_size": self.vocab_size,
            "word_dim": self.word_dim,
            "hidden": self.hidden,
            "feature_dim": self.feature_dim,
            "projection_dim": self.projection_dim,
        }

    def embed(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """(n, 2 hidden) QT's representation ``[f(s); g(s)]`` of each sentence."""
        return torch.cat([self.f(tokens, lengths), self.g(tokens, lengths)], dim=1)


@torch.no_grad()
def embed_tokens(model: QtModel, tokens: Tensor, lengths: Tensor, batch_size: int = 1000) -> Tensor:
    """(n, 2 hidden) ``[f(s); g(s)]`` of every sentence, float32 on the CPU, in eval mode (the mode is restored)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    parts = []
    for start in range(0, len(tokens), batch_size):
        length = lengths[start : start + batch_size]
        window = tokens[start : start + batch_size, : int(length.max())]
        parts.append(model.embed(window.to(device), length.to(device)).float().cpu())
    model.train(was_training)
    return torch.cat(parts)


@dataclass(frozen=True, kw_only=True)
class TextEncoderSidecar(RecordedEncoder):
    """The checked sidecar of a text encoder artifact."""

    arch: str
    vocab_size: int
    word_dim: int
    hidden: int
    feature_dim: int
    projection_dim: int
    vocabulary: str
    kind: str = TEXT_ENCODER_KIND


def save_text_encoder(path: str | os.PathLike[str], model: QtModel, vocabulary: str, meta: Mapping[str, Any]) -> None:
    """Write ``model``'s weights (atomic) with ``meta``, its architecture and the sha256 of its ``vocabulary``."""
    extra = {**model.architecture(), "vocabulary": vocabulary, "versions": library_versions()}
    save_artifact(path, model.state_dict(), TEXT_ENCODER_KIND, {**meta, **extra})


def load_text_encoder(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> tuple[QtModel, TextEncoderSidecar]:
    """The encoder the sidecar describes, in eval mode on ``device``, and the checked sidecar (one line naming the field)."""
    tensors, values = load_artifact(path, TEXT_ENCODER_KIND, expected={}, device="cpu")
    if values.get("arch") != QT_GRU:
        raise InputError(f"{path}: sidecar names an unknown arch {values.get('arch')!r} (a text encoder is {QT_GRU})")
    for name in SIZE_FIELDS:
        value = values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= SIZE_LIMIT:
            raise InputError(f"{path}: sidecar field {name!r} must be an integer in [1, {SIZE_LIMIT}] (got {value!r})")
    if not isinstance(values.get("vocabulary"), str):
        raise InputError(f"{path}: sidecar field 'vocabulary' must be the vocabulary's sha256 (got {values.get('vocabulary')!r})")
    model = QtModel(values["vocab_size"], values["word_dim"], values["hidden"])
    check_state_dict(path, model.state_dict(), tensors)
    recorded = load_recorded_weights(path, model, tensors, values)
    sidecar = TextEncoderSidecar(**model.architecture(), vocabulary=values["vocabulary"], **recorded)
    return model.to(device).eval(), sidecar
