"""Every stage's options, each declared once: name, type, default, help, allowed values, range.

One class per stage. Its *parameters* (``param(...)``) are the keys of that stage's group in
``params.yaml``; its *runtime* options (``runtime(...)``: input and output paths, the device) are
command-line only. ``pretrain`` adds the loss and sampler options declared in
:mod:`hcl_cli.objectives.registry`. ``hcl_cli.cli`` builds each subcommand from
:meth:`StageConfig.declared_options`, ``hcl params`` writes the params.yaml groups from it, and
the constructor validates every value against it, so none of them can drift apart.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hcl_cli.errors import UsageError
from hcl_cli.objectives.registry import QUEUE_AND_AUTOGRAD, SAMPLERS, Sampler, sampler_options, users_label, users_of
from hcl_cli.options import SEED_LIMIT, Option

DATASETS = ("digits", "cifar10", "cifar100", "stl10", "imagefolder")
ARCHS = ("auto", "small_cnn", "resnet18", "resnet50")
DEVICES = ("auto", "cpu", "cuda")
FEATURES = ("backbone", "projection")
PREPARED = "data/prepared"
"""The prepared dataset, by default: the one input that hand runs and the pipeline share."""
RUNS = "runs"
"""Where a stage run by hand writes what it trains and measures by default: the pipeline's layout
under ``runs/``, so that hand runs never touch the models, embeddings, metrics and reports that
``dvc repro`` owns (dvc.yaml passes every path explicitly)."""


def param(default: Any, help: str, **rules: Any) -> Any:
    """A tunable parameter: a key of the stage's params.yaml group and a command-line option.

    ``rules`` are :class:`~hcl_cli.options.Option`'s (``choices``, ``minimum``, ``maximum``, ...).
    """
    return field(default=default, metadata={"option": {"help": help, **rules}})


def runtime(default: Any, help: str, **rules: Any) -> Any:
    """A command-line-only option: an input or output path, or where to run."""
    return field(default=default, metadata={"option": {"help": help, "runtime": True, **rules}})


@dataclass(init=False)
class StageConfig:
    """A stage's validated options. ``Config(**values)`` checks every value; an unknown name or a
    bad value is a one-line :class:`~hcl_cli.errors.UsageError`; omitted ones take their defaults."""

    group: ClassVar[str]
    """The stage's params.yaml group."""
    command: ClassVar[str]
    """The stage's ``hcl`` subcommand and its dvc.yaml stage name."""

    def __init__(self, **values: Any) -> None:
        declared = {option.name: option for option in self.declared_options()}
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise UsageError(f"hcl {self.command} has no option(s) {', '.join(unknown)}")
        checked = {name: option.check(values.get(name, option.default)) for name, option in declared.items()}
        own = {f.name for f in dataclasses.fields(self)}
        for name in own & checked.keys():
            setattr(self, name, checked[name])
        self.keep_extra({name: value for name, value in checked.items() if name not in own})
        self.check()

    @classmethod
    def declared_options(cls) -> tuple[Option, ...]:
        """Every option of the stage: its fields', then :meth:`extra_options`."""
        fields = tuple(Option(f.name, f.default, **f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata)
        return fields + cls.extra_options()

    @classmethod
    def extra_options(cls) -> tuple[Option, ...]:
        """Options declared elsewhere that this stage also takes (none by default)."""
        return ()

    def keep_extra(self, values: dict[str, Any]) -> None:
        """Store the checked values of :meth:`extra_options`."""

    def check(self) -> None:
        """Cross-field rules; subclasses override."""

    @classmethod
    def param_names(cls) -> list[str]:
        return [option.name for option in cls.declared_options() if not option.runtime]

    def params(self) -> dict[str, Any]:
        """The values of this stage's params.yaml group."""
        return {name: getattr(self, name) for name in self.param_names()}


@dataclass(init=False)
class PrepareConfig(StageConfig):
    """Decode a dataset once into uint8 tensors, labels and a fixed split."""

    group: ClassVar[str] = "prepare"
    command: ClassVar[str] = "prepare"
    dataset: str = param(
        "digits",
        "Dataset: digits (bundled with scikit-learn, offline), cifar10, cifar100, stl10, or imagefolder (your own train/ and test/ class folders).",
        choices=DATASETS,
    )
    path: str = param(
        "data/raw", "Source folder: the download root for cifar10/cifar100/stl10, or the root holding train/ and test/ for imagefolder."
    )
    image_size: int = param(
        0,
        "Resize every image to this many pixels square (0 keeps the native size; imagefolder needs it when sizes differ).",
        minimum=0,
        maximum=4096,
    )
    test_fraction: float = param(
        0.25,
        "Share of digits held out as the stratified test split (other datasets ship their own split).",
        minimum=0.0,
        maximum=1.0,
        min_exclusive=True,
        max_exclusive=True,
    )
    seed: int = param(0, "Seed of the train/test split.", minimum=0, maximum=SEED_LIMIT)
    out: str = runtime(PREPARED, "Output folder for train/test(/unlabeled).safetensors and card.json.")


@dataclass(init=False)
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
        "auto", "Encoder: small_cnn, resnet18, resnet50, or auto (small_cnn for images of 16 px or less, else resnet18).", choices=ARCHS
    )
    projection_dim: int = param(128, "Output size of the projection head.", minimum=1, maximum=65536)
    epochs: int = param(60, "Training epochs.", minimum=1, maximum=1_000_000)
    batch_size: int = param(256, "Images per batch (each gives two views).", minimum=2)
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
        "Momentum m of the key encoder, theta_k <- m theta_k + (1 - m) theta_q every step (MoCo-v2: 0.99 for CIFAR-sized runs; read only with a queue).",
        minimum=0.0,
        maximum=1.0,
        max_exclusive=True,
    )
    lr: float = param(1e-3, "Adam learning rate.", minimum=0.0, min_exclusive=True, maximum=10.0)
    weight_decay: float = param(1e-6, "Adam weight decay (L2).", minimum=0.0, maximum=1.0)
    blur: bool = param(False, "Add Gaussian blur to the augmentations.")
    seed: int = param(0, "Seed of initialisation, shuffling and augmentation.", minimum=0, maximum=SEED_LIMIT)
    eval_every: int = param(
        0,
        "Every N epochs, log kNN top-1 of up to 2,000 test images against up to 10,000 train images (monitoring only; 0 disables).",
        minimum=0,
    )
    max_steps: int = param(
        0,
        "Stop after this many optimisation steps in total (0: no limit); the checkpoint, the log and the encoder are written as at the end of an epoch.",
        minimum=0,
    )
    checkpoint_every: int = param(0, "Also save a resumable checkpoint every N steps (0: only at the end of each epoch).", minimum=0)
    compile: bool = param(False, "torch.compile the encoder (CUDA).")
    sync_batchnorm: bool = param(False, "Under torchrun, convert BatchNorm to SyncBatchNorm so its statistics span all GPUs (CUDA only).")
    data: str = runtime(PREPARED, "Prepared dataset folder (from hcl prepare).")
    out: str = runtime(f"{RUNS}/models", "Output folder: encoder.safetensors, its sidecar, and checkpoints/.")
    live_dir: str = runtime(
        f"{RUNS}/dvclive/pretrain", "Folder of the per-epoch training log (metrics.json and plots/metrics/*.tsv, as dvclive lays them out)."
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
    sampler_options: dict[str, Any] = field(default_factory=dict)
    """The loss and sampler options (temperature, beta, ...), checked, by name; declared in :mod:`hcl_cli.objectives.registry`."""

    @classmethod
    def extra_options(cls) -> tuple[Option, ...]:
        """The loss and sampler options, with the samplers that read each named in the help."""
        return tuple(dataclasses.replace(option, help=f"{option.help} ({users_label(option.name)})") for option in sampler_options())

    def keep_extra(self, values: dict[str, Any]) -> None:
        self.sampler_options = values

    def check(self) -> None:
        if self.queue_size % 2:
            raise UsageError(f"--queue-size must be even: both views of every image enter the queue (got {self.queue_size})")
        if self.queue_size and self.reads("undimix_uncertainty") and self.sampler_options["undimix_uncertainty"] == "autograd":
            raise UsageError(QUEUE_AND_AUTOGRAD)

    def params(self) -> dict[str, Any]:
        return {name: self.sampler_options[name] if name in self.sampler_options else getattr(self, name) for name in self.param_names()}

    @property
    def spec(self) -> Sampler:
        """The registry entry of ``sampler``."""
        return SAMPLERS[self.sampler]

    @property
    def needs_labels(self) -> bool:
        """Whether the loss reads labels: a supervised sampler, or same-label positives (``positives=labels``)."""
        return self.spec.label_positives(self.sampler_options)

    def reads(self, option: str) -> bool:
        """Whether this run's sampler reads the loss or sampler option ``option``."""
        return self.sampler in users_of(option)

    def used_params(self) -> dict[str, Any]:
        """The parameters this run's sampler reads: the training ones, the loss's and the sampler's own."""
        return {name: value for name, value in self.params().items() if name not in self.sampler_options or self.reads(name)}

    def ignored_changes(self) -> list[str]:
        """Warnings for the sampler options set away from their defaults that this run's sampler does not read
        (a sweep over ``pretrain.beta`` under ``ucl`` trains the same model every time)."""
        momentum = next(option for option in self.declared_options() if option.name == "momentum")
        unread = (
            [f"momentum = {self.momentum!r} is not read without a queue (queue_size 0)"]
            if not self.queue_size and self.momentum != momentum.default
            else []
        )
        return unread + [
            f"{option.name} = {self.sampler_options[option.name]!r} is not read by the {self.sampler} sampler ({users_label(option.name)})"
            for option in sampler_options()
            if self.sampler_options[option.name] != option.default and not self.reads(option.name)
        ]

    def loss_options(self, epoch: int) -> dict[str, Any]:
        """The keyword options of :func:`~hcl_cli.objectives.contrastive_loss` in ``epoch`` (0-based):
        the options the sampler reads, with its scheduled values (beta, threshold) of that epoch."""
        used = {name: value for name, value in self.sampler_options.items() if self.reads(name)}
        schedule = self.spec.schedule
        return used | (schedule(self.sampler_options, epoch, self.epochs) if schedule else {})


@dataclass(init=False)
class EmbedConfig(StageConfig):
    """Frozen-encoder features of the train and test splits."""

    group: ClassVar[str] = "embed"
    command: ClassVar[str] = "embed"
    batch_size: int = param(512, "Images per forward pass.", minimum=1)
    data: str = runtime(PREPARED, "Prepared dataset folder.")
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Encoder from hcl pretrain.")
    out: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Output embeddings file.")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)


@dataclass(init=False)
class LinearConfig(StageConfig):
    """Linear readout of the frozen encoder: on its fixed, standardised embeddings, or the papers' protocol on augmented views."""

    group: ClassVar[str] = "linear"
    command: ClassVar[str] = "linear-eval"
    protocol: str = param(
        "fixed",
        "fixed: one linear layer fitted on the standardised embeddings of hcl embed (--embeddings), quick; "
        "paper: the linear evaluation of HCL's code that H-SCL, HCL-OT and UnDiMix reuse: minibatch Adam on the raw features "
        "of freshly augmented train images through the frozen encoder, every epoch (--model, --data; needs optimizer adam; "
        "the papers use epochs 100, batch_size 512, lr 0.001, weight_decay 1e-6).",
        choices=("fixed", "paper"),
    )
    feature: str = param("backbone", "Which embedding to read out: backbone or projection.", choices=FEATURES)
    optimizer: str = param("lbfgs", "Full-batch lbfgs, or adam (minibatch under protocol paper).", choices=("lbfgs", "adam"))
    epochs: int = param(100, "Iterations of L-BFGS, or epochs of Adam.", minimum=1)
    batch_size: int = param(512, "Train images per Adam step under protocol paper (fixed fits the whole split at once).", minimum=1)
    lr: float = param(1.0, "Learning rate (L-BFGS step size, or Adam lr).", minimum=0.0, min_exclusive=True, maximum=100.0)
    weight_decay: float = param(
        1e-3,
        "L2 penalty (weight_decay / 2) * ||W||^2 added to the mean cross-entropy (protocol paper: Adam's weight_decay, on W and the bias, as the papers' code).",
        minimum=0.0,
        maximum=1000.0,
    )
    seed: int = param(0, "Seed of the initialisation (protocol paper: also of shuffling and augmentation).", minimum=0, maximum=SEED_LIMIT)
    embeddings: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Embeddings from hcl embed (read by protocol fixed).")
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Encoder from hcl pretrain (read by protocol paper).")
    data: str = runtime(PREPARED, "Prepared dataset folder (read by protocol paper).")
    out: str = runtime(f"{RUNS}/metrics/linear.json", "Metrics JSON (top-1, top-5).")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)

    def check(self) -> None:
        if self.protocol == "paper" and self.optimizer != "adam":
            raise UsageError("linear protocol paper trains by minibatch Adam: set optimizer adam (--optimizer adam)")


@dataclass(init=False)
class KnnConfig(StageConfig):
    """Weighted kNN on L2-normalised features, votes weighted exp(cos / T)."""

    group: ClassVar[str] = "knn"
    command: ClassVar[str] = "knn-eval"
    k: int = param(200, "Neighbours that vote.", minimum=1)
    temperature: float = param(0.5, "Vote weight exp(cos / T).", minimum=0.0, min_exclusive=True)
    feature: str = param("backbone", "Which embedding: backbone or projection.", choices=FEATURES)
    chunk_size: int = param(
        1024, "Queries compared per chunk; with --bank-chunk-size it bounds the memory kNN needs beyond the embeddings.", minimum=1
    )
    bank_chunk_size: int = param(
        32768, "Bank (train) embeddings compared per chunk; the similarity block is chunk-size x bank-chunk-size.", minimum=1
    )
    embeddings: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Embeddings from hcl embed.")
    out: str = runtime(f"{RUNS}/metrics/knn.json", "Metrics JSON (top-1, top-5).")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)


@dataclass(init=False)
class ReportConfig(StageConfig):
    """reports/report.md with parameters, metrics and figures."""

    group: ClassVar[str] = "report"
    command: ClassVar[str] = "report"
    title: str = param("hcl run", "Heading of the report.")
    anchors: int = param(4, "Test anchors in the hardest-negatives figure.", minimum=0)
    params_file: str = runtime(
        "", "A params.yaml whose planned values to tabulate beside the recorded ones (dvc.yaml passes params.yaml; by hand: none)."
    )
    metrics: str = runtime(f"{RUNS}/metrics", "Folder of metrics JSON files.")
    plots: str = runtime(f"{RUNS}/dvclive", "Folder of dvclive logs (curves).")
    embeddings: str = runtime(f"{RUNS}/data/embeddings.safetensors", "Embeddings for the similarity histograms.")
    data: str = runtime(PREPARED, "Prepared dataset (images for the hard-negative grid).")
    model: str = runtime(f"{RUNS}/models/encoder.safetensors", "Encoder, for the sampler's weights in the hard-negative grid.")
    out: str = runtime(f"{RUNS}/reports/report.md", "Report file; figures go beside it.")


STAGE_CONFIGS: tuple[type[StageConfig], ...] = (PrepareConfig, PretrainConfig, EmbedConfig, LinearConfig, KnnConfig, ReportConfig)
