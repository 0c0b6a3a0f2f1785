"""The modality seam: what a kind of data (images, graphs) provides to the modality-free pipeline.

Everything above this seam — the objectives (:mod:`hcl_cli.objectives`), the training loop
(:mod:`hcl_cli.training.loop`), ``embed``'s artifact, kNN, the linear and SVM readouts and the
report — works on tensors of scores, embeddings and labels and never asks what the samples are.
Everything below it is one :class:`Modality`: how a prepared dataset is read, how one training
step turns a batch of samples into what the loss scores (two augmented views of images; nodes
against graphs for InfoGraph), how its encoder is built, stored and run. Like torch-geometric's
``MessagePassing`` for its layers, it is the one interface a second modality implements:
:mod:`hcl_cli.image.modality` for images (the first user), :mod:`hcl_cli.graph.modality` for TU graphs and
:mod:`hcl_cli.text.modality` for sentences.

A prepared folder says which modality wrote it: ``card.json``'s ``modality`` key (``image`` when
absent, as in cards written before graphs existed). :func:`modality_of` reads only that key and
imports the modality's module on first use, so that a torch-free caller stays torch-free.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hcl_cli.errors import InputError

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

    from hcl_cli.objectives.sampler_options import SamplerOptions


MODALITIES: dict[str, str] = {
    "image": "hcl_cli.image.modality:IMAGES",  # hcl_cli/image/modality.py
    "graph": "hcl_cli.graph.modality:GRAPHS",  # hcl_cli/graph/modality.py
    "text": "hcl_cli.text.modality:TEXT",  # hcl_cli/text/modality.py
}
"""Each modality's name, as ``card.json`` records it, and where its :class:`Modality` object lives."""


class Samples(Sized, Protocol):
    """A split's samples resident on a device: ``len()``, and ``samples[index]`` for a batch.

    A uint8 image tensor is one as it is; graphs are a container whose ``[index]`` gathers a batch
    of graphs (:class:`hcl_cli.graph.modality.GraphSamples`).
    """

    def __getitem__(self, index: Tensor) -> Any: ...

    @property
    def device(self) -> torch.device: ...


@dataclass(frozen=True)
class StepValues:
    """What one step reports, read on the host: the loss, the gradients' total L2 norm, and the batch's positives.

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
        """Whether the step applied its update: its loss and gradients were finite."""
        return math.isfinite(self.loss) and math.isfinite(self.grad_norm)


@dataclass(frozen=True)
class StepResult:
    """What one step returns, left on the training device so that the step makes no host sync: ``values``, a (4,)
    float32 tensor of :class:`StepValues`' fields in order (:func:`hcl_cli.optimizer.update_where_finite` makes it).

    A step applies its update only where the loss and the gradients are finite, deciding so on the
    device; reading the values waits for the device, so the epoch loop reads a log interval's
    results at once (:func:`hcl_cli.training.loop.read_results`) and stops there on a non-finite one.
    """

    values: Tensor

    def read(self) -> StepValues:
        """The values on the host (a host sync)."""
        return StepValues(*self.values.tolist())

    @property
    def finite(self) -> Tensor:
        """0-d bool on the device: the loss and the gradients' norm were finite, so the step applied its update."""
        return self.values[:2].isfinite().all()


class Step(Protocol):
    """One optimisation step on a batch of samples (:class:`hcl_cli.image.step.TrainingStep` for images)."""

    optimizer: torch.optim.Optimizer
    learned: nn.ParameterDict
    """Tensors the loss learns with the encoder (UnDiMix's learned weights), recorded in the encoder's sidecar."""

    @property
    def state(self) -> nn.Module:
        """What a checkpoint holds besides the optimizer."""

    def __call__(self, batch: Any, labels: Tensor, loss_options: SamplerOptions) -> StepResult: ...


class Modality(Protocol):
    """What one kind of data provides. Implementations are stateless singletons."""

    name: str
    """``image`` or ``graph``: the ``modality`` key of the prepared card."""
    sample_noun: str
    """What one sample is called in messages (``image``, ``graph``)."""
    encoder_kind: str
    """The ``kind`` its encoder artifact's sidecar records (``encoder``, ``graph encoder``)."""
    keep_last_batch: bool
    """Whether an epoch keeps its last partial batch (graphs, as the official DataLoader; a tail of one sample is
    dropped) or drops it (images, and every torchrun run)."""
    two_views: bool
    """Whether a training sample gives two augmented views (images): what H-SCL's diagnostics probe and the report's
    view and hard-negative figures need."""
    objectives: tuple[str, ...]
    """The ``objective`` values this modality trains with; the first is what ``auto`` means."""
    loss_note: str
    """What a person watching this modality's training loss should know, said once as a run starts ("" for nothing)."""
    raw_name: str
    """What :meth:`raw_features` are, in the report (``raw pixels``, ``summed node features``)."""
    raw_feature: str
    """Their short name in the report's Feature column (``pixels``, ``node features``)."""
    eval_inputs: str
    """What the encoder reads when a split is embedded, in the report (``images under the run's eval transform ...``)."""
    raw_description: str
    """How :meth:`raw_features` are made, in the report's protocol section."""

    def load_card(self, folder: str | Path) -> Any:
        """The prepared folder's validated card (its counts per split, classes, source, ...)."""

    def describe(self, card: Any, count: int) -> str:
        """``count`` samples of this dataset in one phrase: ``1347 images of 1x8x8``, ``188 graphs of 17.9 nodes on average``."""

    def check_trainable(self, card: Any, folder: str) -> None:
        """One-line :class:`~hcl_cli.errors.UsageError` when ``pretrain`` cannot train on this dataset."""

    def training_splits(self, card: Any | None, labelled: bool, transductive: bool = False) -> list[str]:
        """The splits ``pretrain`` trains on (``labelled``: the run reads labels, so every sample needs one; a
        labelled run's splits are known without the card, which may be None then; ``transductive``: a labelled run
        under ``label_protocol transductive``, which on graphs reads the test split with its labels)."""

    def encoder_data(self, folder: str | Path, card: Any) -> dict[str, str]:
        """The sha256 of the prepared files that an encoder which embeds ``folder`` trained on: the folder's own (images,
        graphs), or for a SentEval task the corpus whose vocabulary it reads (``embed`` refuses an encoder of other data)."""

    def load_samples(self, folder: str | Path, splits: Sequence[str], device: torch.device | str = "cpu") -> tuple[Samples, Tensor]:
        """The samples of ``splits``, in that order, on ``device``, and their int64 labels (-1: unlabelled)."""

    def save_encoder(self, path: str | Path, model: nn.Module, card: Any, meta: dict[str, Any]) -> None:
        """Write the trained encoder artifact (atomic) with ``meta`` and what the modality needs to read it back."""

    def load_encoder(self, path: str | Path, device: torch.device | str = "cpu") -> tuple[nn.Module, Any]:
        """A trained encoder artifact and its validated sidecar (which records ``mean``, ``std``, ``config``, ...)."""

    def check_fits(self, model: nn.Module, card: Any, model_path: str, data_path: str) -> None:
        """One-line :class:`~hcl_cli.errors.HclError` when the encoder cannot read this dataset."""

    def embed(self, model: nn.Module, stats: Any, samples: Samples, batch_size: int, description: str) -> tuple[Tensor, Tensor]:
        """The frozen encoder's representations and projections (float32, CPU) of every sample, in order.

        ``stats``: the encoder's sidecar or the training card, whose input statistics the modality
        may need (images: the per-channel ``mean`` and ``std``).
        """

    def untrained(self, model: nn.Module, seed: int) -> nn.Module:
        """``model``'s architecture freshly initialised from torch's RNG seeded with ``seed`` (the RNG is forked), in eval
        mode on ``model``'s device: the report's untrained baseline."""

    def card_summary(self, card: Any) -> str:
        """The prepared dataset in one plain-text phrase for the report: splits, classes, sample shape."""

    def recorded_prepare(self, card: Any) -> dict[str, Any]:
        """The ``prepare`` parameters the card records (dataset, and its name where the dataset has several)."""

    def raw_features(self, samples: Samples) -> Tensor:
        """Fixed input-space features of every sample (the report's no-training baseline)."""


def modality_named(name: str) -> Modality:
    """The :class:`Modality` registered as ``name``."""
    module, attribute = MODALITIES[name].split(":")
    return getattr(importlib.import_module(module), attribute)


def encoder_kinds() -> tuple[str, ...]:
    """The encoder kinds of every modality: what ``hcl pretrain`` may replace in its output folder."""
    return tuple(modality_named(name).encoder_kind for name in MODALITIES)


def modality_of(folder: str | Path) -> Modality:
    """The modality that wrote the prepared ``folder``, from its ``card.json`` (``image`` when unnamed)."""
    card = Path(folder) / "card.json"
    if card.exists() and not card.is_file():  # a FIFO would block the read forever
        raise InputError(f"{card}: not a regular file")
    try:
        name = json.loads(card.read_text(encoding="utf-8")).get("modality", "image")
    except FileNotFoundError:
        raise InputError(f"{folder} is not a prepared dataset (no card.json): run hcl prepare first") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as error:
        raise InputError(f"{card}: not a readable dataset card ({error.__class__.__name__})") from None
    if name not in MODALITIES:
        raise InputError(f"{card}: unknown modality {name!r} (known: {', '.join(MODALITIES)})")
    return modality_named(name)
