"""The momentum key encoder and its queue of keys (MoCo, He et al. 2020; MoCo-v2, Chen et al. 2020,
which HCL App. C.1 runs with hard negatives and a queue of 65,536).

With ``--queue-size K`` > 0 the number of negatives is no longer tied to the batch size. A *key
encoder*, a copy of the model that takes no gradient, follows the trained (query) encoder as an
exponential moving average, ``theta_k <- m theta_k + (1 - m) theta_q`` before every step
(``--momentum m``; MoCo-v2's code uses 0.999, its CIFAR demo 0.99). ``--queue-mode`` says how
the keys are used:

- ``moco``, MoCo-v2 as facebookresearch/moco's ``moco/builder.py`` runs it: the queries are the
  first views through the model, the key encoder encodes the second views, each query's positive
  is its own key and its negatives are exactly the K queued keys
  (:mod:`hcl_cli.objectives.moco`). The queue starts as K random unit vectors (builder.py's
  ``normalize(randn(dim, K))``), and after the step the batch's B keys replace the oldest at the
  pointer. The key encoder's BatchNorm is shuffled (builder.py's ``_batch_shuffle_ddp``): on one
  device the second views are permuted and encoded in :data:`KEY_BN_SPLITS` groups, each with its
  own batch statistics (the CIFAR demo's SplitBatchNorm, ``--bn-splits 8``), then unpermuted, so a
  query and its key never share BatchNorm statistics; under torchrun each rank does so with its
  own views (the ranks' keys are not exchanged before encoding).
- ``batch``: both views are anchors, each anchor's candidates are the batch's 2B keys and the
  queue's K keys of earlier batches (:class:`~hcl_cli.objectives.candidates.MomentumKeys`), under every
  sampler. After the step both views' keys enter the queue, which starts empty and is full after
  K / 2B steps. The key encoder runs on the whole batch (no shuffle).

Under torchrun the keys of every rank enter the queue, in rank order, so the queues of all ranks
are the same and equal one process's with the global batch. The queue lives on the training
device in the training precision (bfloat16 on CUDA, float32 on the CPU): the unit keys (with
``batch``, both views of an image side by side, rows ``2p`` and ``2p + 1``), their labels, and for
a sampler with ``key_features`` (UnDiMix) what it keeps of each key. The key encoder runs in
training mode, and its BatchNorm statistics are its own. The module is saved in every checkpoint
with the model, so ``--resume`` restores the key encoder and the queue; the encoder artifact
holds the query encoder only.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hcl_cli.image.networks import ContrastiveModel
from hcl_cli.objectives.moco import random_queue

KEY_BN_SPLITS = 8
"""BatchNorm groups of the key encoder with ``queue_mode: moco`` (the MoCo CIFAR demo's ``--bn-splits 8``),
at most half the batch so that each group has two images."""


class MomentumQueue(nn.Module):
    """The key encoder ``key_model`` and the queue of ``size`` keys, as buffers: ``keys`` (K, d) and
    ``features`` (K, e) in ``dtype``, ``labels`` (K,), on the model's device, and ``count``, the keys
    let in so far, as a checkpoint records it. A step reads neither: the count is kept on the device
    (``pointer``, which places the new keys) and the filled part's size on the host (:attr:`filled_rows`,
    which stops changing once the queue is full, so that a compiled step sees the same value from
    then on); ``count`` is written from ``pointer`` when the queue is saved and read back once when
    it is loaded. ``mode`` is ``"moco"`` or ``"batch"``."""

    def __init__(
        self, model: ContrastiveModel, size: int, momentum: float, dtype: torch.dtype, feature_dim: int = 0, mode: str = "batch"
    ) -> None:
        super().__init__()
        if size <= 0 or (mode == "batch" and size % 2):
            raise ValueError(f"the queue size must be a positive even number (got {size})")
        self.momentum = momentum
        self.moco = mode == "moco"
        self.key_model = copy.deepcopy(model).requires_grad_(False)
        device = next(model.parameters()).device
        keys = random_queue(size, model.projection_dim, device) if self.moco else torch.zeros(size, model.projection_dim, device=device)
        self.register_buffer("keys", keys.to(dtype))
        self.register_buffer("labels", torch.zeros(size, dtype=torch.int64, device=device))
        self.register_buffer("features", torch.zeros(size, feature_dim, dtype=dtype, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.int64, device=device), persistent=False)
        self.filled_rows = size if self.moco else 0
        """The keys in the queue, ``min(count, K)``, on the host; K from the start with ``moco`` (its random keys)."""
        self.masked = False
        """Give the whole queue, with the rows that hold keys marked on the device (:meth:`valid_rows`), rather than
        its filled part: one shape from the first step on, so that a compiled step is not compiled again as it fills."""

    @property
    def pushed(self) -> int:
        """The keys let in so far (read from the device: for checks, not for a step)."""
        return int(self.pointer)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        self.count.copy_(self.pointer)
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: object) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args)
        self.pointer.copy_(self.count)
        self.filled_rows = self.size if self.moco else min(int(self.count), self.size)

    @property
    def size(self) -> int:
        return self.keys.shape[0]

    def filled(self) -> int:
        """The number of keys in the queue: ``min(count, K)``; K from the start with ``moco`` (its random keys)."""
        return self.filled_rows

    @torch.no_grad()
    def follow(self, model: nn.Module) -> None:
        """One step of the moving average: ``theta_k <- m theta_k + (1 - m) theta_q`` for every parameter."""
        keys = list(self.key_model.parameters())
        torch._foreach_mul_(keys, self.momentum)
        torch._foreach_add_(keys, [parameter.detach() for parameter in model.parameters()], alpha=1.0 - self.momentum)

    @torch.no_grad()
    def encode(self, views: Tensor) -> tuple[Tensor, Tensor]:
        """The key encoder's head inputs and projections of ``views``, without gradient."""
        _, hidden, keys = self.key_model(views)
        return hidden, keys

    @torch.no_grad()
    def encode_shuffled(self, views: Tensor) -> Tensor:
        """The key encoder's projections of ``views`` with shuffled BatchNorm: permuted, encoded in
        ``min(KEY_BN_SPLITS, N // 2)`` groups (each with its own batch statistics), unpermuted."""
        order = torch.randperm(len(views), device=views.device)
        splits = max(1, min(KEY_BN_SPLITS, len(views) // 2))
        keys = torch.cat([self.key_model(chunk)[2] for chunk in views[order].tensor_split(splits)])
        return keys[torch.argsort(order)]

    @torch.no_grad()
    def push_keys(self, keys: Tensor, keep: Tensor | None = None) -> None:
        """builder.py's ``_dequeue_and_enqueue``: the keys (N, d), normalised, replace the rows at the pointer
        ``count mod K`` onwards (wrapping; of more than K keys only the last K stay). With ``keep`` (0-d bool on the
        device; :meth:`push`) the rows change only where it holds."""
        slots, last = self.slots(len(keys))
        write_rows(self.keys, slots, F.normalize(keys, dim=1)[last], keep)

    @torch.no_grad()
    def push(self, keys: Tensor, labels: Tensor | None = None, features: Tensor | None = None, keep: Tensor | None = None) -> None:
        """Let the keys ``[k1; k2]`` (2N, d) of N images in, with their labels (N,) and ``features`` (2N, e); the oldest leave.

        The keys are stored normalised; the two views of image ``b`` take adjacent rows. Of more
        than K keys only the last K stay. ``keep``, a 0-d bool on the device (the step was finite),
        decides there whether the rows change, without a host sync; the pointer moves either way,
        which only a run that stops at its next read sees (:func:`hcl_cli.training.loop.read_results`).
        """
        slots, last = self.slots(len(keys))
        write_rows(self.keys, slots, side_by_side(F.normalize(keys, dim=1))[last], keep)
        if labels is not None:
            write_rows(self.labels, slots, labels.repeat_interleave(2)[last].to(self.labels.device), keep)
        if features is not None:
            write_rows(self.features, slots, side_by_side(features)[last], keep)

    def slots(self, rows: int) -> tuple[Tensor, slice]:
        """The queue rows that ``rows`` new keys take from the pointer on, and which of the keys stay (the last K); moves
        the pointer."""
        last = slice(max(rows - self.size, 0), rows)
        slots = ((self.pointer + torch.arange(rows, device=self.keys.device)) % self.size)[last]
        self.pointer += rows
        if not self.masked and self.filled_rows < self.size:  # unchanged once full (and never read when masked)
            self.filled_rows = min(self.filled_rows + rows, self.size)
        return slots, last

    def queued(self) -> tuple[Tensor, Tensor, Tensor]:
        """The filled part of the queue: keys (K', d), labels (K',), features (K', e); the whole queue when :attr:`masked`."""
        filled = self.size if self.masked else self.filled()
        return self.keys[:filled], self.labels[:filled], self.features[:filled]

    def valid_rows(self) -> Tensor | None:
        """(K,) bool on the device, the rows that hold keys (``row < count``), when :attr:`masked`; else None (all of
        :meth:`queued`'s rows do)."""
        if not self.masked:
            return None
        return torch.arange(self.size, device=self.pointer.device) < self.pointer


def write_rows(buffer: Tensor, slots: Tensor, rows: Tensor, keep: Tensor | None) -> None:
    """``buffer[slots] = rows`` (cast to the buffer's dtype), or where ``keep`` (0-d bool) is false, ``buffer`` unchanged."""
    rows = rows.to(buffer.dtype)
    if keep is not None:
        rows = torch.where(keep, rows, buffer.index_select(0, slots))
    buffer.index_copy_(0, slots, rows)


def side_by_side(rows: Tensor) -> Tensor:
    """``[x1; x2]`` (2N, ...) as ``x1[0], x2[0], x1[1], x2[1], ...``: each image's two views on adjacent rows."""
    return rows.unflatten(0, (2, -1)).transpose(0, 1).flatten(0, 1)
