"""``hcl pretrain``'s options: the training's own, and the loss and sampler options of :mod:`hcl_cli.objectives.registry`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hcl_cli.config.base import (
    BATCH_LIMIT,
    COUNT_LIMIT,
    DEVICES,
    IMAGE_ARCHS,
    PREPARED,
    PROJECTION_DIM,
    RUNS,
    SEED_LIMIT,
    StageConfig,
    param,
    runtime,
    threads_option,
)
from hcl_cli.errors import UsageError
from hcl_cli.objectives.registry import QUEUE_AND_AUTOGRAD, SAMPLERS, Sampler, check_moco, sampler_options, users_label, users_of
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.schedules import LR_SCHEDULES
from hcl_cli.option import Option

ARCHS = ("auto", *IMAGE_ARCHS, "gin", "qt-gru")
LABEL_PROTOCOLS = ("inductive", "transductive")
"""How pretraining on graphs meets the labels under a sampler that reads them (docs/protocol-graphs.md)."""
TRANSDUCTIVE_LABELS = "transductive: the encoder saw the test labels"
"""What every place that shows a transductive run that read labels says of it (report, compare, README, results files)."""
RECORDED_BEFORE = "transductive"
"""The protocol of a pretrain config recorded before ``label_protocol`` existed: it pretrained on every graph."""
OPTIMIZERS = ("adam", "adamw", "sgd", "lars")
"""The optimizers of pretraining, each torch's own fused one (hcl_cli/optimizer.py)."""
MOMENTUM_OPTIMIZERS = ("optimizer", ("sgd", "lars"))
"""What the options of torch's SGD (momentum, Nesterov) declare as their ``read_when``."""
PRECISIONS = ("auto", "fp32", "bf16")
"""The image encoder's training precision (hcl_cli/runtime.py: uses_bf16: what ``auto`` picks, and why)."""


@dataclass(init=False, frozen=True)
class PretrainConfig(StageConfig):
    """Contrastive pretraining of an encoder with a chosen negative sampler."""

    group: ClassVar[str] = "pretrain"
    command: ClassVar[str] = "pretrain"
    sampler: str = param(
        "hucl",
        "Negative sampler q(x-|x): " + ", ".join(f"{name} ({spec.paper})" for name, spec in SAMPLERS.items()) + ".",
        choices=tuple(SAMPLERS),
    )
    arch: str = param(
        "auto",
        "Encoder: small_cnn, resnet18, resnet50 (images), gin (graphs: InfoGraph's GIN, --gin-layers x --gin-hidden), "
        "qt-gru (sentences: quick-thought's two GRUs), or auto (gin for graphs, qt-gru for sentences; small_cnn for images "
        "of 16 px or less, else resnet18).",
        choices=ARCHS,
    )
    gin_layers: int = param(
        3,
        "Graphs (arch gin): GIN layers K (HCL App. D.2: 3); the graph embedding is K x --gin-hidden.",
        minimum=1,
        maximum=64,
        modality="graph",
    )
    gin_hidden: int = param(
        32, "Graphs (arch gin): width of every GIN layer (HCL App. D.2: 32).", minimum=1, maximum=4096, modality="graph"
    )
    qt_hidden: int = param(
        64, "Sentences: width of QT's GRUs f and g (CPU-sized; QT's uni-QT: 1200).", minimum=1, maximum=8192, modality="text"
    )
    word_dim: int = param(
        64, "Sentences: width of each encoder's word embeddings (CPU-sized; QT: 300).", minimum=1, maximum=4096, modality="text"
    )
    context: int = param(
        1,
        "Sentences: the neighbours within this many places, in one document, are positives (QT: 1).",
        minimum=1,
        maximum=64,
        modality="text",
    )
    projection_dim: int = param(
        PROJECTION_DIM,
        "Images: output size of the projection head (graphs: the heads keep the GIN's width).",
        minimum=1,
        maximum=65536,
        modality="image",
    )
    projection_hidden: int = param(
        512,
        "Images: width of the projection head's hidden layer (HCL's code: 512); 0: the encoder's feature width "
        "(MoCo-v2's --mlp head: 2048 on ResNet-50).",
        minimum=0,
        maximum=65536,
        modality="image",
    )
    projection_batchnorm: bool = param(
        True,
        "Images: BatchNorm after the head's hidden layer, which then has no bias (HCL's code); false: a hidden layer with "
        "bias and no BatchNorm (MoCo-v2's --mlp head).",
        modality="image",
    )
    epochs: int = param(
        60,
        "Training epochs (on graphs, HCL App. D.2's; on sentences, passes over the corpus in windows of consecutive sentences).",
        minimum=1,
        maximum=1_000_000,
        modality_defaults=(("graph", 200), ("text", 3)),
    )
    batch_size: int = param(
        256,
        "Samples per batch, at most the training set: images (each gives two views; a last partial batch is dropped) or graphs "
        "(the last partial batch is kept; by default HCL App. D.2's) or sentences (consecutive ones; UnDiMix App. A's 400).",
        minimum=2,
        maximum=BATCH_LIMIT,
        modality_defaults=(("graph", 128), ("text", 400)),
    )
    queue_size: int = param(
        0,
        "Keys of earlier batches that every sampler also contrasts with (MoCo-v2's queue; HCL App. C.1 uses 65536): "
        "a momentum key encoder encodes both views, and each anchor's candidates are the batch's keys and the queue. "
        "Even (both views of an image enter it); 0: in-batch negatives only.",
        minimum=0,
        maximum=2**24,
    )
    momentum: float = param(
        0.99,
        "Momentum m of the key encoder, theta_k <- m theta_k + (1 - m) theta_q every step (MoCo-v2's code: 0.999, its CIFAR demo: 0.99; read only with a queue).",
        minimum=0.0,
        maximum=1.0,
        max_exclusive=True,
    )
    queue_mode: str = param(
        "batch",
        "How the queue is used: moco (MoCo-v2 as facebookresearch/moco's builder.py runs it: queries of the first view, the "
        "second view's key as the positive, the K queued keys alone as negatives, only keys enqueued, the queue started as random "
        "unit vectors, the key encoder's BatchNorm shuffled in splits; ucl, debiased and hucl) or batch (both views are anchors "
        "against the batch's 2B keys and the queue, both views enqueued; every sampler).",
        choices=("batch", "moco"),
    )
    optimizer: str = param(
        "adam",
        "The optimizer, torch's own fused one: adam (the papers'), adamw (decoupled weight decay), sgd (MoCo-v2's), or lars "
        "(SGD scaled per weight by its trust ratio, as solo-learn applies it). See docs/training.md.",
        choices=OPTIMIZERS,
    )
    lr: float = param(
        1e-3,
        "Learning rate (the papers' Adam: 1e-3; MoCo-v2's SGD: 0.03; on sentences 3e-3, CPU-sized: UnDiMix App. A's 5e-4 learns nothing in a few hundred steps); with a warm-up or a schedule, its peak.",
        minimum=1e-8,
        maximum=10.0,
        modality_defaults=(("text", 3e-3),),
    )
    weight_decay: float = param(
        1e-6,
        "Weight decay: L2 added to the gradient (adam, sgd; lars: the adapted weights' alone), decoupled for adamw.",
        minimum=0.0,
        maximum=1.0,
    )
    sgd_momentum: float = param(
        0.9, "SGD's momentum (MoCo-v2: 0.9).", minimum=0.0, maximum=1.0, max_exclusive=True, read_when=MOMENTUM_OPTIMIZERS
    )
    nesterov: bool = param(False, "Nesterov momentum (torch's SGD).", read_when=MOMENTUM_OPTIMIZERS)
    lars_eta: float = param(
        1e-3, "LARS's trust coefficient (SimCLR: 0.001).", minimum=1e-6, maximum=1.0, read_when=("optimizer", ("lars",))
    )
    lr_schedule: str = param(
        "constant",
        "The learning rate over the run's steps after the warm-up: constant (the papers') or cosine, from --lr towards 0 "
        "(MoCo-v2's --cos, solo-learn's).",
        choices=LR_SCHEDULES,
    )
    warmup_epochs: int = param(
        0,
        "Epochs of linear learning-rate warm-up, from --lr / its steps up to --lr, before the schedule (0: none; solo-learn: 10).",
        minimum=0,
        maximum=1_000_000,
    )
    blur: bool = param(False, "Add Gaussian blur to the augmentations.", modality="image")
    seed: int = param(0, "Seed of initialisation, shuffling and augmentation.", minimum=0, maximum=SEED_LIMIT)
    label_protocol: str = param(
        "inductive",
        "Graphs, under a sampler that reads labels (scl, hscl, hscl-threshold, positives labels): inductive pretrains on the "
        "train split alone, so that an SVM fitted on it scores test graphs whose labels the encoder never saw; transductive "
        f"pretrains on every graph with its label, as InfoGraph's code reads the dataset ({TRANSDUCTIVE_LABELS}). "
        "See docs/protocol-graphs.md.",
        choices=LABEL_PROTOCOLS,
        modality="graph",
    )
    eval_every: int = param(
        5,
        "Every N epochs, log kNN top-1 of up to 2,000 test samples against up to 10,000 train samples, with knn-eval's default k on "
        "the data's modality (monitoring only: the trained encoder is the same; 0 disables; sentences have no labelled test samples).",
        minimum=0,
        maximum=1_000_000,
        modality_defaults=(("text", 0),),
    )
    max_steps: int = param(
        0,
        "Stop after this many optimisation steps in total (0: no limit); the checkpoint, the log and the encoder are written as at the end of an epoch.",
        minimum=0,
        maximum=COUNT_LIMIT,
    )
    checkpoint_every: int = param(
        0, "Also save a resumable checkpoint every N steps (0: only at the end of each epoch).", minimum=0, maximum=COUNT_LIMIT
    )
    compile: bool = param(False, "Images: torch.compile the training step (CUDA or CPU).", modality="image")
    precision: str = param(
        "auto",
        "The image encoder's precision: bf16 (bfloat16 autocast, channels_last; the loss stays float32) or fp32; "
        "auto: bf16 on CUDA, fp32 on a CPU (bf16 was not measurably faster on a CPU with AMX: benchmarks/results/cpu_precision.json).",
        choices=PRECISIONS,
        modality="image",
    )
    sync_batchnorm: bool = param(
        False, "Images, under torchrun: convert BatchNorm to SyncBatchNorm so its statistics span all GPUs (CUDA only).", modality="image"
    )
    data: str = runtime(PREPARED, "Prepared dataset folder (from hcl prepare).")
    out: str = runtime(f"{RUNS}/models", "Output folder: encoder.safetensors, its sidecar, and checkpoints/.")
    live_dir: str = runtime(
        f"{RUNS}/dvclive/pretrain", "Folder of the per-epoch training log (metrics.json and plots/metrics/*.tsv, as dvclive lays them out)."
    )
    init: str = runtime(
        "",
        "Start from these weights: an hcl encoder of the run's architecture, or a safetensors backbone state dict "
        "(torchvision's ResNet, or hcl export's; the head starts afresh). See docs/api.md.",
    )
    resume: bool = runtime(
        False,
        "Continue from the last checkpoint in OUT/checkpoints (if any); only --epochs may differ from that run. Without it a run starts over and replaces OUT/checkpoints.",
    )
    restart_on_change: bool = runtime(
        False,
        "With --resume: a checkpoint of other parameters, or of a finished run, starts a fresh run instead of an error or a no-op (for dvc.yaml).",
    )
    device: str = runtime("auto", "Where to train: auto (CUDA when present), cpu or cuda.", choices=DEVICES)
    threads: str = threads_option()
    sampler_options: dict[str, Any] = field(default_factory=dict)
    """The loss and sampler options (temperature, beta, ...), checked, by name, as params.yaml holds them;
    declared in :mod:`hcl_cli.objectives.registry`."""
    _resolved: SamplerOptions = field(init=False, repr=False, compare=False)
    """The same, resolved once (parsed, at the first epoch): what :meth:`loss_options` derives each epoch's options from."""

    @classmethod
    def extra_options(cls) -> tuple[Option, ...]:
        """The loss and sampler options, with the samplers that read each named in the help."""
        return tuple(dataclasses.replace(option, help=f"{option.help} ({users_label(option.name)})") for option in sampler_options())

    @classmethod
    def from_sources(cls, values: Mapping[str, Any], where: Mapping[str, str]) -> StageConfig:
        """The configuration of the values a user gave (:meth:`StageConfig.from_sources`), refusing one that the run would
        not read (:meth:`~StageConfig.refuse_unread`). A configuration built from a record (an encoder's sidecar) is not
        refused for it: it ran."""
        config = super().from_sources(values, where)
        config.refuse_unread()
        return config

    def keep_extra(self, values: dict[str, Any]) -> None:
        object.__setattr__(self, "sampler_options", values)
        object.__setattr__(self, "_resolved", SamplerOptions.from_checked(self.spec, values))

    def check(self) -> None:
        if self.nesterov and self.sgd_momentum == 0 and self.optimizer in MOMENTUM_OPTIMIZERS[1]:
            raise UsageError("--nesterov needs a momentum: set --sgd-momentum above 0")
        if self.warmup_epochs and self.warmup_epochs >= self.epochs:
            raise UsageError(f"--warmup-epochs must be fewer than --epochs (got {self.warmup_epochs} of {self.epochs})")
        if self.queue_size % 2:
            raise UsageError(f"--queue-size must be even: both views of every image enter the queue (got {self.queue_size})")
        if self.queue_size and self.queue_mode == "moco":
            check_moco(self.sampler, self.needs_labels)
        if self.queue_size and self.reads("undimix_uncertainty") and self.sampler_options["undimix_uncertainty"] == "literal":
            raise UsageError(QUEUE_AND_AUTOGRAD)

    def params(self) -> dict[str, Any]:
        return {name: self.sampler_options[name] if name in self.sampler_options else getattr(self, name) for name in self.param_names()}

    @property
    def scheduled(self) -> bool:
        """Whether the learning rate changes over the run (a warm-up, or a schedule other than constant)."""
        return self.lr_schedule != "constant" or self.warmup_epochs > 0

    @property
    def spec(self) -> Sampler:
        """The registry entry of ``sampler``."""
        return SAMPLERS[self.sampler]

    @property
    def needs_labels(self) -> bool:
        """Whether the loss reads labels: a supervised sampler, or same-label positives (``positives=labels``)."""
        return self.spec.label_positives(self.sampler_options)

    @property
    def transductive(self) -> bool:
        """Whether pretraining on graphs reads the test graphs' labels (:func:`label_protocol_of`)."""
        return label_protocol_of(self.params()) == "transductive"

    def reads(self, option: str) -> bool:
        """Whether this run's sampler reads the loss or sampler option ``option``."""
        return self.sampler in users_of(option)

    @classmethod
    def read_params(cls, values: Mapping[str, Any], modality: str | None) -> list[str]:
        """The training parameters of ``modality`` (:meth:`StageConfig.read_params`), and of the loss and sampler options
        those the run's sampler reads (:func:`~hcl_cli.objectives.registry.users_of`)."""
        sampler = values.get("sampler", cls.sampler)
        options = {option.name for option in sampler_options()}
        return [name for name in super().read_params(values, modality) if name not in options or sampler in users_of(name)]

    def ignored_changes(self, world_size: int = 1) -> list[str]:
        """Warnings for the options set away from their defaults that a run in ``world_size`` processes does not read:
        the sampler options its sampler does not read (a sweep over ``pretrain.beta`` under ``ucl`` trains the same model
        every time), the momentum without a queue, SyncBatchNorm in a single process, the label protocol of a run that reads
        no label."""
        momentum = next(option for option in self.declared_options() if option.name == "momentum")
        unread = (
            [f"momentum = {self.momentum!r} is not read without a queue (queue_size 0)"]
            if not self.queue_size and self.momentum != momentum.default
            else []
        )
        if self.sync_batchnorm and world_size == 1:
            unread.append("sync_batchnorm = true is not read in a single process (it spans the GPUs of a torchrun run)")
        if self.label_protocol != "inductive" and not self.needs_labels:
            unread.append(f"label_protocol = {self.label_protocol!r} is not read: the {self.sampler} sampler reads no label")
        return unread + [
            f"{option.name} = {self.sampler_options[option.name]!r} is not read by the {self.sampler} sampler ({users_label(option.name)})"
            for option in sampler_options()
            if self.sampler_options[option.name] != option.default and not self.reads(option.name)
        ]

    def loss_options(self, epoch: int) -> SamplerOptions:
        """The sampler's options in ``epoch`` (0-based), its scheduled values (beta, threshold) of that epoch:
        built from the values checked at construction, checking nothing (the training loop calls it once per epoch).

        As a mapping, the options the sampler reads: ``contrastive_loss(..., sampler=self.sampler, **options)``
        is the training's loss."""
        return self._resolved.at_epoch(self.spec, epoch, self.epochs)


def label_protocol_of(config: Mapping[str, Any]) -> str | None:
    """How an encoder pretrained on graphs with the recorded pretrain ``config`` met the labels: None when its sampler
    read none, else its ``label_protocol`` (:data:`RECORDED_BEFORE` for a config recorded before the option)."""
    sampler = SAMPLERS.get(str(config.get("sampler")))
    if sampler is None or not sampler.label_positives(config):
        return None
    return str(config.get("label_protocol", RECORDED_BEFORE))
