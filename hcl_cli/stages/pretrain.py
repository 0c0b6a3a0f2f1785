"""``hcl pretrain``: contrastive pretraining of an encoder under a chosen negative sampler.

SimCLR's recipe as HCL trains it (Robinson et al., Sec. 5.1 and App. D.1): every image of a batch
gives two independently augmented views, the encoder and projection head map both to ``z``, and
:func:`hcl_cli.objectives.contrastive_loss` scores them under the sampler's negative distribution;
Adam with the papers' lr 1e-3 and weight decay 1e-6. The loop reads like torchvision's
``references/classification/train.py``: :func:`run` joins the torchrun ranks (or is one process),
:func:`pretrain` sets everything up and walks the epochs, :func:`train_one_epoch` walks the steps,
:class:`TrainingStep` is one optimisation step.

Speed: the whole uint8 training set lives on the training device; each epoch is a seeded
permutation whose batches are index slices of it (the tail that does not fill a batch is
dropped), augmented there, batched (no per-sample Python). On CUDA the encoder runs under bf16
autocast in channels_last, optionally ``torch.compile``-d; the loss is computed in float32.

Reliability (issue 6): a checkpoint (:mod:`hcl_cli.checkpoint`) at the end of every epoch and
every ``checkpoint_every`` steps; ``--resume`` continues from the newest one, and on the CPU a
resumed run ends bitwise equal to an uninterrupted one. The data order of epoch ``e`` is a
permutation seeded by ``(seed, e)``, and augmentation draws from torch's global RNG, whose state
the checkpoint restores. SIGINT / SIGTERM stop at the next step boundary with a checkpoint; a
non-finite loss or gradient stops before the update, naming the last good checkpoint. The
encoder is written only at the end.

Data parallel (issue 7, :mod:`hcl_cli.distributed`): under ``torchrun --nproc-per-node K`` every
rank holds the data, takes its block of ``batch_size`` images of each global batch of K x
``batch_size``, augments it on its own device, and scores its own anchors against the negatives
of all ranks; DDP averages the gradients, so a step equals one process's step on the global
batch (up to BatchNorm statistics, which stay per rank). Only rank 0 writes checkpoints, the
encoder and the logs.

Monitoring, logged per epoch with dvclive to ``live_dir`` (:func:`epoch_log`): ``loss`` (the mean over the epoch's
steps); with ``eval_every`` N, ``knn_top1`` every N epochs (:class:`KnnProbe`); for the supervised
samplers ``same_label_pairs`` and ``anchors_left_out`` per batch, and H-SCL's diagnostics on one
fixed batch (:class:`HsclProbe`).
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from hcl_cli.augment import build_augmentation, build_eval_transform, resolve_recipe
from hcl_cli.checkpoint import Checkpoint, CheckpointMismatch, CheckpointStore, TrainingPosition
from hcl_cli.training.signals import StopRequest, TrainingInterrupted, stop_on_signals
from hcl_cli.config import KnnConfig, PretrainConfig
from hcl_cli.datasets import load_card, load_split
from hcl_cli.diagnostics import hscl_diagnostics
from hcl_cli.distributed import DistributedContext, derived_seed, distributed_context
from hcl_cli.embeddings import topk_accuracy
from hcl_cli.errors import HclError, UsageError
from hcl_cli.knn import knn_predict
from hcl_cli.models import ContrastiveModel, build_model, encode, resolve_arch, save_encoder
from hcl_cli.objectives import SUPERVISED, check_sampler_inputs, contrastive_loss

KNN_PROBE_BANK = 10_000
KNN_PROBE_QUERIES = 2_000


@dataclass(frozen=True)
class StepResult:
    """What one step reports: the loss, the gradients' total L2 norm, and the batch's positives.

    ``same_label_pairs`` counts the ordered (anchor, positive) pairs among the batch's 2B views
    (the partner included; for the supervised samplers, every view sharing the anchor's label);
    ``anchors_left_out`` the anchors without a different-label negative (supervised samplers).
    """

    loss: float
    grad_norm: float
    same_label_pairs: float
    anchors_left_out: float

    @property
    def finite(self) -> bool:
        return math.isfinite(self.loss) and math.isfinite(self.grad_norm)


@dataclass
class EpochTotals:
    """Running sums over the epoch's steps; saved in mid-epoch checkpoints so a resumed epoch logs the same means."""

    steps: int = 0
    loss: float = 0.0
    same_label_pairs: float = 0.0
    anchors_left_out: float = 0.0

    def add(self, result: StepResult) -> None:
        self.steps += 1
        self.loss += result.loss
        self.same_label_pairs += result.same_label_pairs
        self.anchors_left_out += result.anchors_left_out

    def means(self, supervised: bool) -> dict[str, float]:
        """Per-step means to log: the loss, and for the supervised samplers the batch's positives and left-out anchors."""
        means = {"loss": self.loss / self.steps}
        if supervised:
            means |= {"same_label_pairs": self.same_label_pairs / self.steps, "anchors_left_out": self.anchors_left_out / self.steps}
        return means


@dataclass
class TrainingStep:
    """One optimisation step on a uint8 batch: two augmented views, forward, loss, backward, Adam.

    Both views go through the encoder as one batch of 2B (as SupContrast does), so BatchNorm
    normalises over both. ``network`` is the model, wrapped in DDP under torchrun, and optionally
    ``torch.compile``-d. The loss is taken over the global batch of all ranks
    (:meth:`~hcl_cli.distributed.DistributedContext.gather_views`) and the reported loss is the
    global one, so every rank takes the same decision. The update is applied only when the loss
    and the gradients are finite; :attr:`StepResult.finite` tells the caller.
    """

    network: nn.Module
    augment: nn.Module
    optimizer: torch.optim.Optimizer
    sampler: str
    loss_options: dict[str, Any]
    context: DistributedContext

    def __call__(self, images: Tensor, labels: Tensor, *, beta: float, threshold: float) -> StepResult:
        self.optimizer.zero_grad(set_to_none=True)
        on_cuda = self.context.device.type == "cuda"
        views = torch.cat([self.augment(images), self.augment(images)])
        if on_cuda:
            views = views.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.context.device.type, dtype=torch.bfloat16, enabled=on_cuda):
            _, hidden, z = self.network(views)
        z1, z2 = z.float().chunk(2)
        head_inputs = tuple(hidden.float().chunk(2)) if self.sampler == "undimix" else None
        batch = self.context.gather_views(z1, z2, labels if self.sampler in SUPERVISED else None, head_inputs)
        loss, stats = contrastive_loss(
            batch.z1, batch.z2, batch.labels, sampler=self.sampler, beta=beta, threshold=threshold, head_inputs=batch.head_inputs,
            anchor_mask=batch.anchor_mask, return_stats=True, **self.loss_options,
        )
        (loss * self.context.loss_scale).backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in self.network.parameters() if p.grad is not None])
        values = torch.stack([self.context.reduce_sum(loss), grad_norm, stats.terms.float(), stats.anchors_without_negatives.float()]).tolist()
        result = StepResult(*values)
        if result.finite:
            self.optimizer.step()
        return result


@dataclass(frozen=True)
class KnnProbe:
    """kNN top-1 of the current backbone (HCL Fig. 11), for ``--eval-every``.

    The bank is a fixed random subset of at most 10,000 labelled train images, the queries one of
    at most 2,000 test images (never trained on); the weighted kNN of ``hcl knn-eval`` with its
    default k (capped at the bank size) and temperature. A monitor of training, not a model
    selection: the final numbers come from ``embed`` + ``knn-eval`` on the full splits.
    """

    bank_images: Tensor
    bank_labels: Tensor
    query_images: Tensor
    query_labels: Tensor
    transform: nn.Module
    num_classes: int
    batch_size: int
    knn: KnnConfig

    @classmethod
    def from_prepared(cls, folder: str, card: dict[str, Any], seed: int, batch_size: int) -> KnnProbe:
        generator = torch.Generator().manual_seed(seed)
        bank_images, bank_labels = load_split(folder, "train")
        query_images, query_labels = load_split(folder, "test")
        bank = torch.randperm(len(bank_labels), generator=generator)[:KNN_PROBE_BANK]
        queries = torch.randperm(len(query_labels), generator=generator)[:KNN_PROBE_QUERIES]
        transform = build_eval_transform(card["mean"], card["std"])
        return cls(bank_images[bank], bank_labels[bank], query_images[queries], query_labels[queries], transform, card["num_classes"], batch_size, KnnConfig())

    def __call__(self, model: ContrastiveModel) -> float:
        bank, _ = encode(model, self.transform, self.bank_images, self.batch_size, description="kNN probe bank")
        queries, _ = encode(model, self.transform, self.query_images, self.batch_size, description="kNN probe queries")
        scores = knn_predict(
            bank,
            self.bank_labels,
            queries.to(next(model.parameters()).device),
            k=min(self.knn.k, len(bank)),
            temperature=self.knn.temperature,
            num_classes=self.num_classes,
            chunk_size=self.knn.chunk_size,
            bank_chunk_size=self.knn.bank_chunk_size,
        )
        return topk_accuracy(scores, self.query_labels, ks=(1,))[1]


@dataclass(frozen=True)
class HsclProbe:
    """H-SCL's diagnostics (Jiang et al., Figs. 4-5) each epoch, on one fixed batch with fixed views.

    The batch is a seeded random draw of ``batch_size`` training images. Its two views are drawn
    from torch's RNG forked and seeded with ``seed``, so they are the same every epoch and the
    training stream of random numbers is untouched. The model runs in eval mode (BatchNorm running
    statistics) and is put back in training mode.
    """

    images: Tensor
    labels: Tensor
    seed: int
    temperature: float

    @classmethod
    def from_training(cls, images: Tensor, labels: Tensor, seed: int, batch_size: int, temperature: float) -> HsclProbe:
        batch = torch.randperm(len(images), generator=torch.Generator().manual_seed(seed))[:batch_size].to(images.device)
        return cls(images[batch], labels[batch], seed, temperature)

    @torch.no_grad()
    def __call__(self, model: ContrastiveModel, augment: nn.Module, beta: float) -> dict[str, float]:
        device = self.images.device
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(self.seed)
            views = torch.cat([augment(self.images), augment(self.images)])
        model.eval()
        _, _, z = model(views)
        model.train()
        z1, z2 = z.float().chunk(2)
        return hscl_diagnostics(z1, z2, self.labels, temperature=self.temperature, beta=beta)


@dataclass
class TrainingRun:
    """What the epoch loop works on: the config, the model and its step, the resident data, the checkpoints, the ranks."""

    config: PretrainConfig
    model: ContrastiveModel
    step: TrainingStep
    images: Tensor
    labels: Tensor
    store: CheckpointStore
    identity: dict[str, Any]
    context: DistributedContext

    def save(self, position: TrainingPosition, sampler_state: dict[str, float], totals: EpochTotals) -> Path:
        """A checkpoint at ``position``, with the sampler's state and the epoch's running sums.

        Rank 0 writes it (the model and optimizer states are the same on every rank); the other
        ranks only return its path.
        """
        if not self.context.is_main:
            return self.store.folder / f"{position.name}.safetensors"
        loop_state = {"sampler": sampler_state, "epoch_totals": asdict(totals)}
        return self.store.save(self.model, self.step.optimizer, position, loop_state, self.identity)


def run(config: PretrainConfig) -> None:
    """Pretrain an encoder on ``config.data`` and write ``config.out/encoder.safetensors``, in one
    process or, under torchrun, in one process per device."""
    with distributed_context(config.device) as context:
        pretrain(config, context)


def pretrain(config: PretrainConfig, context: DistributedContext) -> None:
    """The training of :func:`run`, as rank ``context.rank`` of ``context.world_size``."""
    card = load_card(config.data)
    supervised = config.sampler in SUPERVISED
    splits = ["train"] + (["unlabeled"] if "unlabeled" in card["counts"] and not supervised else [])
    check_sampler_inputs(config.sampler, labelled="unlabeled" not in splits, **config.loss_options(), **config.sampler_state(0))
    _, height, width = card["image_shape"]
    if height != width:
        raise UsageError(f"{config.data} holds {height}x{width} images; pretrain needs square images (prepare with --image-size)")
    context.steps_per_epoch(sum(card["counts"][split] for split in splits), config.batch_size)

    device = context.device
    parts = [load_split(config.data, split, device) for split in splits]
    images, labels = torch.cat([split_images for split_images, _ in parts]), torch.cat([split_labels for _, split_labels in parts])
    context.seed_everything(config.seed)
    model, step = build_training(config, card, context)
    store = CheckpointStore(Path(config.out) / "checkpoints")
    identity = {**config.params(), "dataset": card["name"], "world_size": context.world_size}
    training = TrainingRun(config, model, step, images, labels, store, identity, context)
    start, totals = TrainingPosition(0, 0), EpochTotals()
    checkpoint = resume_from(store, training) if config.resume else None
    if checkpoint is not None:
        start, totals = checkpoint.position, EpochTotals(**checkpoint.loop_state["epoch_totals"])
        context.reseed_after_resume(config.seed, start.epoch, start.step)
        if context.is_main:
            print(f"hcl pretrain: resuming from {checkpoint.path} ({start.describe()})")
    elif context.is_main:
        store.clear()
    knn_probe = KnnProbe.from_prepared(config.data, card, config.seed, config.batch_size) if config.eval_every and context.is_main else None
    hscl_probe = HsclProbe.from_training(images, labels, config.seed, config.batch_size, config.temperature) if supervised and context.is_main else None
    logger = epoch_log(config.live_dir, resume=checkpoint is not None) if context.is_main else contextlib.nullcontext(skip_log)

    with logger as log, stop_on_signals() as stop:
        for epoch in range(start.epoch, config.epochs):
            sampler_state = config.sampler_state(epoch)
            train_one_epoch(training, epoch, start.step if epoch == start.epoch else 0, sampler_state, totals, stop)
            metrics = totals.means(supervised)
            if knn_probe is not None and (epoch + 1) % config.eval_every == 0:
                metrics["knn_top1"] = knn_probe(model)
            if hscl_probe is not None:
                metrics |= hscl_probe(model, step.augment, beta=sampler_state["beta"])
            log(epoch, metrics)
            totals = EpochTotals()
            path = training.save(TrainingPosition(epoch + 1, 0), sampler_state, totals)
            if context.any_rank(stop.requested):
                raise interrupted(stop, TrainingPosition(epoch + 1, 0), path)

    if context.is_main:
        out = Path(config.out) / "encoder.safetensors"
        meta = {"config": config.params(), "epoch": config.epochs, "seed": config.seed, "dataset": card["name"], "mean": card["mean"], "std": card["std"], "world_size": context.world_size}
        save_encoder(out, model, meta)
        print(f"hcl pretrain: wrote {out} ({model.arch}, {config.sampler}, {config.epochs} epochs)")


def train_one_epoch(training: TrainingRun, epoch: int, first_step: int, sampler_state: dict[str, float], totals: EpochTotals, stop: StopRequest) -> None:
    """Steps ``first_step..`` of ``epoch``, adding to ``totals``; a checkpoint every ``checkpoint_every`` steps.

    Raises a one-line HclError on a non-finite loss or gradient (before the update), and
    :class:`~hcl_cli.training.signals.TrainingInterrupted` after saving a checkpoint when a signal came.
    """
    config, context = training.config, training.context
    order = epoch_order(len(training.images), config.seed, epoch).to(training.images.device)
    batches = context.shard_batches(order, config.batch_size)
    steps = len(batches)
    progress = tqdm(
        range(first_step, steps), initial=first_step, total=steps, desc=f"epoch {epoch + 1}/{config.epochs}", unit="step", disable=None if context.is_main else True, leave=False
    )
    for index in progress:
        batch = batches[index]
        result = training.step(training.images[batch], training.labels[batch], **sampler_state)
        if not result.finite:
            what = "loss" if not math.isfinite(result.loss) else "gradient"
            raise HclError(
                f"non-finite {what} at epoch {epoch + 1}, step {index + 1} (try a lower --lr or a higher --temperature); "
                f"last good checkpoint: {training.store.latest() or 'none yet'}; no encoder was written"
            )
        totals.add(result)
        progress.set_postfix(loss=f"{result.loss:.4f}", refresh=False)
        position = TrainingPosition(epoch, index + 1)
        global_step = epoch * steps + index + 1
        checkpoint_due = config.checkpoint_every > 0 and global_step % config.checkpoint_every == 0 and index + 1 < steps
        stop_requested = context.any_rank(stop.requested)
        if checkpoint_due or stop_requested:
            path = training.save(position, sampler_state, totals)
            if stop_requested:
                raise interrupted(stop, position, path)


@contextlib.contextmanager
def epoch_log(live_dir: str, *, resume: bool) -> Iterator[Callable[[int, dict[str, float]], None]]:
    """A ``log(epoch, metrics)`` writing with dvclive to ``live_dir`` (``plots/metrics/NAME.tsv``, which dvc.yaml plots).

    dvclive serves as a file logger only. Its repository hooks are skipped: they crash in a Git
    repository without commits (dvclive #522), run ``dvc init`` in a Git repository without DVC,
    and git-add files inside ``dvc exp run``, while dvc.yaml already declares these outputs.
    Where dvclive is not installed (the GPU images), the metrics are not logged, with a warning.
    """
    try:
        from dvclive import Live
    except ImportError:
        print(f"hcl pretrain: warning: dvclive is not installed, so no metrics are logged to {live_dir}", file=sys.stderr)
        yield skip_log
        return

    class FileLive(Live):
        def _init_dvc(self) -> None:
            """Skip dvclive's Git and DVC integration (see :func:`epoch_log`)."""

    def log(epoch: int, metrics: dict[str, float]) -> None:
        live.step = epoch
        for name, value in metrics.items():
            live.log_metric(name, value)
        live.next_step()

    with FileLive(dir=live_dir, resume=resume, save_dvc_exp=False, dvcyaml=None) as live:
        yield log


def skip_log(epoch: int, metrics: dict[str, float]) -> None:
    """The epoch log of ranks other than 0, which log nothing."""


def resume_from(store: CheckpointStore, training: TrainingRun) -> Checkpoint | None:
    """Restore the newest checkpoint into ``training``; None when there is none to resume.

    A checkpoint of another run is an error, or with ``--restart-on-change`` (what dvc.yaml
    passes: a changed parameter is a new experiment) a note, and training starts over. Under
    ``--restart-on-change`` a finished run starts over too: DVC reruns a finished stage only
    when its code changed or ``--force`` asked for it, and then means a new run.
    """
    config = training.config
    try:
        return store.load(training.model, training.step.optimizer, training.identity, config.epochs, finished_run=not config.restart_on_change)
    except CheckpointMismatch as mismatch:
        if not config.restart_on_change:
            raise
        if training.context.is_main:
            print(f"hcl pretrain: {mismatch.reason}: starting over (--restart-on-change)")
        return None


def build_training(config: PretrainConfig, card: dict[str, Any], context: DistributedContext) -> tuple[ContrastiveModel, TrainingStep]:
    """The model (on the rank's device; channels_last on CUDA) and the step that trains it with Adam (DDP under torchrun)."""
    device = context.device
    channels, image_size = card["image_shape"][0], card["image_shape"][-1]
    model = build_model(resolve_arch(config.arch, image_size), channels, image_size, config.projection_dim).to(device)
    on_cuda = device.type == "cuda"
    if on_cuda:
        model = model.to(memory_format=torch.channels_last)
    augment = build_augmentation(image_size, channels, card["mean"], card["std"], blur=config.blur, recipe=resolve_recipe(image_size)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=on_cuda)
    network = context.wrap_model(model, sync_batchnorm=config.sync_batchnorm)
    network = torch.compile(network) if config.compile else network
    return model, TrainingStep(network, augment, optimizer, config.sampler, config.loss_options(), context)


def epoch_order(size: int, seed: int, epoch: int) -> Tensor:
    """The data order of ``epoch``: a permutation of ``size`` drawn from a generator seeded by ``(seed, epoch)``.

    A pure function of its arguments, so a resumed run walks every epoch in the same order.
    """
    return torch.randperm(size, generator=torch.Generator().manual_seed(derived_seed(seed, epoch)))


def interrupted(stop: StopRequest, position: TrainingPosition, checkpoint: Path) -> TrainingInterrupted:
    """The error that ends a run stopped by a signal, saying where its checkpoint is."""
    return TrainingInterrupted(
        f"stopped by {stop.signal_name} ({position.describe()}); checkpoint saved to {checkpoint}; rerun with --resume to continue",
        stop.signum or 0,
    )
