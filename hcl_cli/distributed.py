"""Data-parallel pretraining under ``torchrun``: one process per device, negatives from the global batch.

``hcl pretrain`` has one code path. :func:`distributed_context` yields a :class:`DistributedContext`
that is a single process (rank 0 of 1) when the command was not started by ``torchrun``, and the
process's place in the group (NCCL on CUDA, gloo on the CPU) when it was. Every rank loads the
training set, takes its own shard of each global batch (:meth:`DistributedContext.shard_batches`)
and augments it on its own device. The projections of all ranks are then gathered *with* their
gradients (:meth:`DistributedContext.gather_views`), so each rank scores its own anchors against
the negatives of every rank, with global labels, a global OT coupling and global UnDiMix scores.
SupContrast and lightly's NT-Xent contrast each device's anchors with that device's batch only
(SupContrast #18, lightly #1554); here the K ranks together compute exactly the loss, and, after
DDP's averaging, exactly the gradients, of one process holding the concatenated batch of K x B.

Gradient bookkeeping (why :attr:`DistributedContext.loss_scale` is K). Let ``L`` be the loss of
the concatenated batch and ``L_r`` the loss rank ``r`` computes over the global batch restricted
to its own anchors (``anchor_mask``); the objective divides by the number of terms over *all*
anchors, so ``sum_r L_r = L``. The backward of ``torch.distributed.nn.functional.all_gather``
sums, over ranks, the gradients that reach each gathered slice and hands rank ``r`` the sum for
its own slice, so rank ``r``'s local projections receive ``sum_r' dL_r'/dz_r = dL/dz_r``: exactly
the single-process gradient of its rows. Backpropagated through rank ``r``'s encoder, this is
rank ``r``'s share ``g_r`` of the parameter gradient ``dL/dtheta = sum_r g_r``. DDP all-reduces
parameter gradients and divides by K, giving ``(1/K) sum_r g_r``; so each rank backpropagates
``K * L_r`` and DDP's average is ``sum_r g_r = dL/dtheta``. The value to log is ``sum_r L_r``
(:meth:`DistributedContext.reduce_sum`), not ``K * L_r``.

With a momentum encoder (``--queue-size``), each rank encodes its own views with its key encoder
(the same on every rank: the moving average of the same parameters), the keys of all ranks are
gathered (:meth:`DistributedContext.gather_rows`) as the global batch's keys, and every rank lets
the same global keys into its queue, so the queues stay equal and the loss is the one of a
single process with the global batch and the same queue.

BatchNorm layers normalise over each rank's own batch unless converted to SyncBatchNorm
(``sync_batchnorm`` of :meth:`DistributedContext.wrap_model`, CUDA only), so a K-rank run equals a
single-process run exactly only for a model without BatchNorm or with SyncBatchNorm.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_autograd
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from hcl_cli.artifacts import first_line
from hcl_cli.errors import HclError, UsageError
from hcl_cli.runtime import resolve_device, seed_everything

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class GlobalViews:
    """The global batch as every rank sees it after :meth:`DistributedContext.gather_views`.

    ``z1``, ``z2`` are (K*B, d) in rank order and carry gradients back to each rank's own rows;
    ``labels`` (K*B,) and ``head_inputs`` (UnDiMix's ``(h1, h2)``, each (K*B, H)) carry none.
    ``anchor_mask`` (2*K*B,) selects this rank's anchors among the rows of ``[z1; z2]``, or is
    None in a single process.
    """

    z1: Tensor
    z2: Tensor
    labels: Tensor | None
    head_inputs: tuple[Tensor, Tensor] | None
    anchor_mask: Tensor | None


@dataclass(frozen=True)
class DistributedContext:
    """This process's place among the training processes: rank, world size and device."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        """Rank 0: the only rank that writes artifacts, checkpoints, logs and progress bars."""
        return self.rank == 0

    @property
    def loss_scale(self) -> float:
        """Factor on the rank's loss before ``backward`` so that DDP's gradient average is the
        gradient of the global batch's loss (module docstring); 1 in a single process."""
        return float(self.world_size)

    def seed_everything(self, seed: int) -> None:
        """Seed this rank's random streams (initialisation, augmentation) so ranks augment independently.

        Rank 0 uses ``seed`` itself, so a single process is exactly
        :func:`hcl_cli.runtime.seed_everything`; rank ``r > 0`` a seed derived from ``(seed, r)``.
        The data order must not come from these streams: every rank needs the same permutation.
        """
        seed_everything(seed if self.is_main else derived_seed(seed, self.rank))

    def reseed_after_resume(self, seed: int, epoch: int, step: int) -> None:
        """Give ranks ``r > 0`` fresh streams derived from ``(seed, r, epoch, step)`` after a resume.

        A checkpoint holds rank 0's random states, and loading it restores them on every rank;
        rank 0 keeps them (a single-process resume stays bitwise exact), the other ranks would
        otherwise repeat rank 0's augmentations. A multi-process resume is therefore correct but
        not bitwise equal to an uninterrupted run.
        """
        if not self.is_main:
            seed_everything(derived_seed(seed, self.rank, epoch, step))

    def steps_per_epoch(self, size: int, batch_size: int, keep_last: bool = False, *, noun: str = "image") -> int:
        """Global steps of ``batch_size`` samples per rank in an epoch of ``size`` samples (the tail is dropped,
        or with ``keep_last``, in one process, kept as a last smaller step when it holds at least 2 samples).

        Raises a one-line UsageError, naming the samples as ``noun``, when one global batch (``batch_size`` x
        world size) is larger than the data, whether or not a partial batch would be kept.
        """
        if batch_size * self.world_size > size:
            processes = f" x {self.world_size} processes" if self.world_size > 1 else ""
            raise UsageError(f"--batch-size {batch_size}{processes} is larger than the {size} training {noun}s")
        steps = size // (batch_size * self.world_size)
        if keep_last and self.world_size == 1 and size % batch_size >= 2:
            steps += 1
        return steps

    def shard_batches(self, order: Tensor, batch_size: int, keep_last: bool = False) -> Sequence[Tensor]:
        """This rank's batches of one epoch: a (steps, batch_size) tensor of indices, or with ``keep_last`` in one
        process a list whose last batch may be smaller (:meth:`steps_per_epoch`).

        ``order`` is the epoch's permutation, identical on every rank. Global step ``i`` covers
        ``order[i*K*B:(i+1)*K*B]`` and rank ``r`` takes its ``r``-th block of ``B``, so the K
        ranks' batches, concatenated in rank order, are the batch of K*B that one process would
        take. The tail that does not fill a global batch is dropped: every rank must run the
        same number of steps with the same batch size (the all_gather needs equal shapes).
        """
        steps = self.steps_per_epoch(len(order), batch_size, keep_last)
        if keep_last and self.world_size == 1:
            return list(order.split(batch_size))[:steps]
        return order[: steps * batch_size * self.world_size].view(steps, self.world_size, batch_size)[:, self.rank]

    def wrap_model(self, model: nn.Module, *, sync_batchnorm: bool = False) -> nn.Module:
        """Wrap ``model`` (already on :attr:`device`) in DistributedDataParallel; itself in a single process.

        DDP starts every rank from rank 0's parameters and buffers (a broadcast at construction)
        and keeps the parameters equal by averaging the gradients. ``sync_batchnorm`` converts
        BatchNorm layers to SyncBatchNorm (in place; the state_dict keys are unchanged, so the
        saved encoder loads as plain BatchNorm), which PyTorch supports on CUDA only.
        """
        if self.world_size == 1:
            return model
        if sync_batchnorm:
            if self.device.type != "cuda":
                raise UsageError("--sync-batchnorm needs CUDA devices (PyTorch's SyncBatchNorm does not run on the CPU)")
            model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids)

    def gather_views(
        self, z1: Tensor, z2: Tensor, labels: Tensor | None = None, head_inputs: tuple[Tensor, Tensor] | None = None
    ) -> GlobalViews:
        """Gather every rank's (B, d) projections, with gradients, into the global batch.

        ``z1`` and ``z2`` travel in one autograd all_gather (one collective forward, one
        backward); ``labels`` (B,) and UnDiMix's ``head_inputs`` ``(h1, h2)`` are gathered
        without gradients (UnDiMix detaches its scores). Every rank must pass the same B
        (see :meth:`shard_batches`).
        """
        if self.world_size == 1:
            return GlobalViews(z1, z2, labels, head_inputs, anchor_mask=None)
        batch = z1.shape[0]
        anchor_mask = torch.zeros(2 * batch * self.world_size, dtype=torch.bool, device=z1.device)
        anchor_mask[self.rank * batch : (self.rank + 1) * batch] = True
        anchor_mask[(self.world_size + self.rank) * batch : (self.world_size + self.rank + 1) * batch] = True
        return GlobalViews(
            *_split_views(all_gather_with_gradients(torch.cat([z1, z2])), batch),
            labels=None if labels is None else torch.cat(self._gather_constant(labels)),
            head_inputs=None if head_inputs is None else self.gather_rows(torch.cat(head_inputs)).chunk(2),
            anchor_mask=anchor_mask,
        )

    def gather_rows(self, rows: Tensor) -> Tensor:
        """Every rank's ``[x1; x2]`` (2B, ...) as the global ``[X1; X2]`` (2KB, ...), without gradient
        (the keys of a momentum encoder, UnDiMix's head inputs); ``rows`` itself in a single process."""
        if self.world_size == 1:
            return rows
        return torch.cat(_split_views(self._gather_constant(rows), len(rows) // 2))

    def reduce_sum(self, value: Tensor) -> Tensor:
        """The sum over ranks of ``value`` (detached), e.g. the global loss ``sum_r L_r``; every rank gets it."""
        total = value.detach().clone()
        if self.world_size > 1:
            dist.all_reduce(total)
        return total

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank, so that all ranks take the same branch at the same step
        (e.g. stop after a SIGINT or SIGTERM that reached the ranks at different steps)."""
        if self.world_size == 1:
            return flag
        count = torch.tensor(int(flag), device=self.device)
        dist.all_reduce(count)
        return bool(count.item())

    def _gather_constant(self, tensor: Tensor) -> list[Tensor]:
        shards = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(shards, tensor.detach().contiguous())
        return shards


def _split_views(shards: Sequence[Tensor], batch: int) -> tuple[Tensor, Tensor]:
    """From each rank's ``[x1; x2]`` (2B, ...), in rank order, the global ``x1`` and ``x2`` (K*B, ...)."""
    return torch.cat([shard[:batch] for shard in shards]), torch.cat([shard[batch:] for shard in shards])


def derived_seed(*entropy: int) -> int:
    """A 32-bit seed mixed from ``entropy`` by NumPy's SeedSequence (distinct tuples, independent streams)."""
    return int(np.random.SeedSequence(list(entropy)).generate_state(1)[0])


def all_gather_with_gradients(tensor: Tensor) -> tuple[Tensor, ...]:
    """Every rank's ``tensor``, in rank order; the backward sums each slice's gradients over ranks.

    ``torch.distributed.nn.functional.all_gather`` is PyTorch's public autograd all_gather; recent
    releases flag it as deprecated in favour of a private module, so that warning is silenced here.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*all_gather is deprecated", category=FutureWarning)
        return dist_autograd.all_gather(tensor)


def launched_by_torchrun() -> bool:
    """Whether torchrun (or an equivalent launcher) set this process's rank variables."""
    return all(name in os.environ for name in TORCHRUN_VARIABLES)


@contextlib.contextmanager
def distributed_context(device_name: str) -> Iterator[DistributedContext]:
    """Join the process group torchrun described in the environment, and leave it on exit.

    ``device_name`` is the stage's ``--device`` (auto|cpu|cuda). Under torchrun a CUDA run puts
    rank ``r`` on ``cuda:LOCAL_RANK`` with NCCL; a CPU run uses gloo. ``MASTER_ADDR`` and
    ``MASTER_PORT`` come from torchrun (``env://``). Without torchrun this yields rank 0 of 1 on
    :func:`~hcl_cli.runtime.resolve_device`'s device and creates no process group.
    """
    device = resolve_device(device_name)
    if not launched_by_torchrun():
        yield DistributedContext(rank=0, world_size=1, local_rank=0, device=device)
        return
    rank, world_size, local_rank = (int(os.environ[name]) for name in TORCHRUN_VARIABLES)
    if device.type == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise UsageError(
                f"torchrun started local rank {local_rank}, but this node has only {torch.cuda.device_count()} CUDA devices (lower --nproc-per-node)"
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    try:
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    except (ValueError, RuntimeError) as exc:
        raise HclError(f"rank {rank} of {world_size} could not join the torchrun process group: {first_line(exc)}") from exc
    try:
        yield DistributedContext(rank=rank, world_size=world_size, local_rank=local_rank, device=device)
    finally:
        dist.destroy_process_group()
