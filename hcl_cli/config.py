"""Every stage's options in one place: name, type, default, help text and allowed values.

One dataclass per stage. Its *parameters* (``param(...)``) are exactly the keys of that stage's
group in ``params.yaml``; its *runtime* options (``runtime(...)``: input and output paths, the
device) are command-line only. ``hcl_cli.cli`` builds each subcommand's options from these
fields, so the CLI, ``params.yaml`` and validation cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hcl_cli.errors import UsageError

SAMPLERS = ("ucl", "debiased", "hucl", "scl", "hscl", "hscl-threshold", "ot", "undimix")
SUPERVISED_SAMPLERS = ("scl", "hscl", "hscl-threshold")
DATASETS = ("digits", "cifar10", "cifar100", "stl10", "imagefolder")
ARCHS = ("auto", "small_cnn", "resnet18", "resnet50")
DEVICES = ("auto", "cpu", "cuda")
FEATURES = ("backbone", "projection")


def param(
    default: Any,
    help: str,
    *,
    choices: tuple[str, ...] | None = None,
    min: float | None = None,
    max: float | None = None,
    min_exclusive: bool = False,
    max_exclusive: bool = False,
) -> Any:
    """A tunable parameter: a key of the stage's group in params.yaml and a CLI option."""
    meta = {"help": help, "choices": choices, "min": min, "max": max, "min_exclusive": min_exclusive, "max_exclusive": max_exclusive, "param": True}
    return field(default=default, metadata=meta)


def runtime(default: Any, help: str, *, choices: tuple[str, ...] | None = None) -> Any:
    """A command-line-only option: an input or output path, or where to run."""
    return field(default=default, metadata={"help": help, "choices": choices, "param": False})


def option_name(name: str) -> str:
    """The CLI spelling of a field: ``tau_plus`` -> ``--tau-plus``."""
    return "--" + name.replace("_", "-")


@dataclass
class StageConfig:
    """Shared validation: choices and numeric ranges from field metadata, then ``check()``."""

    group: ClassVar[str]

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            self._check_field(f, getattr(self, f.name))
        self.check()

    def check(self) -> None:
        """Cross-field rules; subclasses override."""

    @classmethod
    def param_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.metadata.get("param")]

    def params(self) -> dict[str, Any]:
        """The values of this stage's params.yaml group."""
        return {name: getattr(self, name) for name in self.param_names()}

    @staticmethod
    def _check_field(f: dataclasses.Field[Any], value: Any) -> None:
        opt = option_name(f.name)
        choices = f.metadata.get("choices")
        if choices is not None and value not in choices:
            raise UsageError(f"{opt} must be one of {', '.join(choices)} (got {value!r})")
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{opt} must be a finite number (got {value})")
        low, high = f.metadata.get("min"), f.metadata.get("max")
        if low is not None and (value < low or (f.metadata.get("min_exclusive") and value == low)):
            bound = ">" if f.metadata.get("min_exclusive") else ">="
            raise UsageError(f"{opt} must be {bound} {low} (got {value})")
        if high is not None and (value > high or (f.metadata.get("max_exclusive") and value == high)):
            bound = "<" if f.metadata.get("max_exclusive") else "<="
            raise UsageError(f"{opt} must be {bound} {high} (got {value})")


@dataclass
class PrepareConfig(StageConfig):
    """Decode a dataset once into uint8 tensors, labels and a fixed split."""

    group: ClassVar[str] = "prepare"
    dataset: str = param("digits", "Dataset: digits (bundled with scikit-learn, offline), cifar10, cifar100, stl10, or imagefolder (your own train/ and test/ class folders).", choices=DATASETS)
    path: str = param("data/raw", "Source folder: the download root for cifar10/cifar100/stl10, or the root holding train/ and test/ for imagefolder.")
    image_size: int = param(0, "Resize every image to this many pixels square (0 keeps the native size; imagefolder needs it when sizes differ).", min=0)
    test_fraction: float = param(0.25, "Share of digits held out as the stratified test split (other datasets ship their own split).", min=0.0, max=1.0, min_exclusive=True, max_exclusive=True)
    seed: int = param(0, "Seed of the train/test split.", min=0)
    out: str = runtime("data/prepared", "Output folder for train/test(/unlabeled).safetensors and card.json.")


@dataclass
class PretrainConfig(StageConfig):
    """Contrastive pretraining of an encoder with a chosen negative sampler."""

    group: ClassVar[str] = "pretrain"
    sampler: str = param("hucl", "Negative sampler q(x-|x): ucl (SimCLR), debiased, hucl (HCL), scl, hscl, hscl-threshold (H-SCL), ot (HCL-OT), undimix.", choices=SAMPLERS)
    temperature: float = param(0.5, "Softmax temperature t of the similarities s_ij = z_i.z_j / t.", min=0.0, min_exclusive=True)
    beta: float = param(1.0, "Hardness concentration: negatives are tilted by exp(beta * s_ij) (hucl, hscl).", min=0.0)
    tau_plus: float = param(0.1, "Class prior tau+ for debiasing (debiased, hucl, ot); 0 disables debiasing.", min=0.0, max=1.0, max_exclusive=True)
    anneal: str = param("none", "Beta schedule: none, or down (beta steps through linspace(beta, 0, 9) over training).", choices=("none", "down"))
    threshold_start: float = param(-0.3, "hscl-threshold: cosine threshold at the first epoch.", min=-1.0, max=1.0)
    threshold_end: float = param(0.0, "hscl-threshold: cosine threshold at the last epoch.", min=-1.0, max=1.0)
    ot_epsilon: float = param(0.5, "ot: entropic regularisation of the coupling.", min=0.0, min_exclusive=True)
    ot_cost: str = param("sq", "ot: cost, sq (||z_i - z_j||^2) or exp (exp(||z_i - z_j||^2 - kappa)).", choices=("sq", "exp"))
    ot_kappa: float = param(2.0, "ot: offset kappa of the exp cost.")
    ot_iterations: int = param(50, "ot: maximum Sinkhorn iterations (log domain; stops early at convergence).", min=1)
    ot_loss: str = param("nce", "ot: nce (debiased InfoNCE with OT negatives) or bcl (the basic contrastive loss).", choices=("nce", "bcl"))
    undimix_weights: str = param("1,1,1", "undimix: weights of similarity, uncertainty and diversity, comma-separated.")
    clip: bool = param(False, "Scale the inner products used for negative weights into [-2, 2] (for unnormalised embeddings, HCL Fig. 14).")
    arch: str = param("auto", "Encoder: small_cnn, resnet18, resnet50, or auto (small_cnn for images of 16 px or less, else resnet18).", choices=ARCHS)
    projection_dim: int = param(128, "Output size of the projection head.", min=1)
    epochs: int = param(60, "Training epochs.", min=1)
    batch_size: int = param(256, "Images per batch (each gives two views).", min=2)
    lr: float = param(1e-3, "Adam learning rate.", min=0.0, min_exclusive=True)
    weight_decay: float = param(1e-6, "Adam weight decay.", min=0.0)
    blur: bool = param(False, "Add Gaussian blur to the augmentations.")
    seed: int = param(0, "Seed of initialisation, shuffling and augmentation.", min=0)
    eval_every: int = param(0, "Every N epochs, log kNN top-1 of up to 2,000 test images against up to 10,000 train images (monitoring only; 0 disables).", min=0)
    checkpoint_every: int = param(0, "Also save a resumable checkpoint every N steps (0: only at the end of each epoch).", min=0)
    compile: bool = param(False, "torch.compile the encoder (CUDA).")
    sync_batchnorm: bool = param(False, "Under torchrun, convert BatchNorm to SyncBatchNorm so its statistics span all GPUs (CUDA only).")
    data: str = runtime("data/prepared", "Prepared dataset folder (from hcl prepare).")
    out: str = runtime("models", "Output folder: encoder.safetensors, its sidecar, and checkpoints/.")
    live_dir: str = runtime("dvclive/pretrain", "dvclive folder for per-epoch metrics and plots.")
    resume: bool = runtime(False, "Continue from the last checkpoint in OUT/checkpoints (if any); only --epochs may differ from that run. Without it a run starts over and replaces OUT/checkpoints.")
    restart_on_change: bool = runtime(False, "With --resume: a checkpoint of other parameters, or of a finished run, starts a fresh run instead of an error or a no-op (for dvc.yaml).")
    device: str = runtime("auto", "Where to train: auto (CUDA when present), cpu or cuda.", choices=DEVICES)

    def loss_options(self) -> dict[str, Any]:
        """The options of ``contrastive_loss`` that stay fixed over training."""
        return {
            "temperature": self.temperature,
            "tau_plus": self.tau_plus,
            "clip": self.clip,
            "ot_epsilon": self.ot_epsilon,
            "ot_cost": self.ot_cost,
            "ot_kappa": self.ot_kappa,
            "ot_iterations": self.ot_iterations,
            "ot_loss": self.ot_loss,
            "undimix_weights": self.undimix_weight_values(),
        }

    def sampler_state(self, epoch: int) -> dict[str, float]:
        """beta and the hscl-threshold cosine threshold in ``epoch`` (0-based), following their schedules."""
        from hcl_cli.objectives.schedules import beta_at, threshold_at  # lazy: keeps `hcl --help` free of torch

        return {
            "beta": beta_at(self.beta, epoch, self.epochs, self.anneal),
            "threshold": threshold_at(self.threshold_start, self.threshold_end, epoch, self.epochs),
        }

    def check(self) -> None:
        weights = self.undimix_weight_values()
        if len(weights) != 3 or any(w < 0 for w in weights) or sum(weights) == 0:
            raise UsageError(f"--undimix-weights must be three non-negative numbers, not all zero (got {self.undimix_weights!r})")

    def undimix_weight_values(self) -> list[float]:
        try:
            return [float(part) for part in self.undimix_weights.split(",")]
        except ValueError:
            raise UsageError(f"--undimix-weights must be three comma-separated numbers (got {self.undimix_weights!r})") from None


@dataclass
class EmbedConfig(StageConfig):
    """Frozen-encoder features of the train and test splits."""

    group: ClassVar[str] = "embed"
    batch_size: int = param(512, "Images per forward pass.", min=1)
    data: str = runtime("data/prepared", "Prepared dataset folder.")
    model: str = runtime("models/encoder.safetensors", "Encoder from hcl pretrain.")
    out: str = runtime("data/embeddings.safetensors", "Output embeddings file.")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)


@dataclass
class LinearConfig(StageConfig):
    """Linear readout on frozen, standardised features."""

    group: ClassVar[str] = "linear"
    feature: str = param("backbone", "Which embedding to read out: backbone or projection.", choices=FEATURES)
    optimizer: str = param("lbfgs", "Full-batch lbfgs, or adam.", choices=("lbfgs", "adam"))
    epochs: int = param(100, "Iterations of L-BFGS, or epochs of Adam.", min=1)
    lr: float = param(1.0, "Learning rate (L-BFGS step size, or Adam lr).", min=0.0, min_exclusive=True)
    weight_decay: float = param(1e-3, "L2 penalty (weight_decay / 2) * ||W||^2 added to the mean cross-entropy.", min=0.0)
    seed: int = param(0, "Seed of the classifier's initialisation.", min=0)
    embeddings: str = runtime("data/embeddings.safetensors", "Embeddings from hcl embed.")
    out: str = runtime("metrics/linear.json", "Metrics JSON (top-1, top-5).")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)


@dataclass
class KnnConfig(StageConfig):
    """Weighted kNN on L2-normalised features, votes weighted exp(cos / T)."""

    group: ClassVar[str] = "knn"
    k: int = param(200, "Neighbours that vote.", min=1)
    temperature: float = param(0.5, "Vote weight exp(cos / T).", min=0.0, min_exclusive=True)
    feature: str = param("backbone", "Which embedding: backbone or projection.", choices=FEATURES)
    chunk_size: int = param(1024, "Queries compared per chunk; with --bank-chunk-size it bounds the memory kNN needs beyond the embeddings.", min=1)
    bank_chunk_size: int = param(32768, "Bank (train) embeddings compared per chunk; the similarity block is chunk-size x bank-chunk-size.", min=1)
    embeddings: str = runtime("data/embeddings.safetensors", "Embeddings from hcl embed.")
    out: str = runtime("metrics/knn.json", "Metrics JSON (top-1, top-5).")
    device: str = runtime("auto", "auto, cpu or cuda.", choices=DEVICES)


@dataclass
class ReportConfig(StageConfig):
    """reports/report.md with parameters, metrics and figures."""

    group: ClassVar[str] = "report"
    title: str = param("hcl run", "Heading of the report.")
    anchors: int = param(4, "Test anchors in the hardest-negatives figure.", min=0)
    params_file: str = runtime("params.yaml", "Parameters to tabulate.")
    metrics: str = runtime("metrics", "Folder of metrics JSON files.")
    plots: str = runtime("dvclive", "Folder of dvclive logs (curves).")
    embeddings: str = runtime("data/embeddings.safetensors", "Embeddings for the similarity histograms.")
    data: str = runtime("data/prepared", "Prepared dataset (images for the hard-negative grid).")
    model: str = runtime("models/encoder.safetensors", "Encoder, for the sampler's weights in the hard-negative grid.")
    out: str = runtime("reports/report.md", "Report file; figures go beside it.")


STAGE_CONFIGS: tuple[type[StageConfig], ...] = (PrepareConfig, PretrainConfig, EmbedConfig, LinearConfig, KnnConfig, ReportConfig)
