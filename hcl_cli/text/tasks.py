"""Sentences outside the corpus (a SentEval task's) as the trained encoder reads them: tokenised as the corpus was
(:func:`~hcl_cli.text.corpus.tokenise`), ids from the corpus's vocabulary (unknown tokens its unknown id), cut at the
corpus's ``max_tokens``. A sentence with no token (SentEval keeps blank lines as empty sentences) is read as one
padding token, whose word embedding is zero."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from hcl_cli.text.corpus import encode, tokenise
from hcl_cli.text.encoder import QtModel


def sentence_tensors(sentences: Sequence[str], vocabulary: Sequence[str], max_tokens: int) -> tuple[Tensor, Tensor, int]:
    """(n, L) token ids padded with 0, (n,) lengths, and how many of the kept tokens are unknown."""
    encoded, unknown, _ = encode([tokenise(sentence) for sentence in sentences], vocabulary, max_tokens)
    rows = [row or [0] for row in encoded]
    tokens = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.int64)
    for index, row in enumerate(rows):
        tokens[index, : len(row)] = torch.tensor(row, dtype=torch.int64)
    return tokens, torch.tensor([len(row) for row in rows], dtype=torch.int64), unknown


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
