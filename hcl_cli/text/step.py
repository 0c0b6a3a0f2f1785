"""One optimisation step of quick-thought with a negative sampler, and the model and optimizer it trains.

A batch of consecutive sentences (:class:`~hcl_cli.text.modality.TextSamples`) through f and g, QT's loss under the
sampler (:func:`~hcl_cli.objectives.quick_thought.quick_thought_loss`: positives the neighbours within ``--context``
in one document, the batch's other sentences the negatives), backward, Adam (UnDiMix App. A: lr 5e-4, batch 400)
or ``--optimizer``'s, the update applied only where the loss and the gradients are finite. Float32, no autocast.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from hcl_cli.errors import UsageError
from hcl_cli.modality import StepResult
from hcl_cli.objectives.quick_thought import check_sentence_sampler, quick_thought_loss
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.optimizer import OptimizerSettings, SkipNonFinite, update_where_finite
from hcl_cli.text.encoder import QT_GRU, QtModel
from hcl_cli.text.modality import SentenceWindow

if TYPE_CHECKING:
    from hcl_cli.config.pretrain import PretrainConfig
    from hcl_cli.distributed import DistributedContext
    from hcl_cli.text.prepared import TextCard


@dataclass
class TextTrainingStep:
    """One step on a :class:`~hcl_cli.text.modality.SentenceWindow`: f and g, QT's loss, backward, the update where finite."""

    model: QtModel
    optimizer: SkipNonFinite
    sampler: str
    context: int
    learned: nn.ParameterDict = field(default_factory=nn.ParameterDict)
    """Tensors the loss learns with the encoder (UnDiMix's learned weights), passed to it by name."""

    @property
    def state(self) -> nn.Module:
        """What a checkpoint holds besides the optimizer: the model, and the learned tensors where there are some."""
        return nn.ModuleDict({"model": self.model, "learned": self.learned}) if len(self.learned) else self.model

    def __call__(self, batch: SentenceWindow, labels: Tensor, loss_options: SamplerOptions) -> StepResult:
        """Train on ``batch`` with the sampler options of the current epoch; checks nothing."""
        self.optimizer.zero_grad()
        f = self.model.f(batch.tokens, batch.lengths)
        g = self.model.g(batch.tokens, batch.lengths)
        options = loss_options.with_inputs(**self.learned) if len(self.learned) else loss_options
        loss, stats = quick_thought_loss(f, g, batch.documents, sampler=self.sampler, options=options, context=self.context)
        loss.backward()
        return StepResult(update_where_finite(self.optimizer, loss, stats.terms, stats.anchors_without_negatives))


def check_text_training(sampler: str, options: SamplerOptions, *, queue_size: int, world_size: int) -> None:
    """One-line usage errors, before training, for what quick-thought does not run: label samplers and positives, an
    objective but nce (:func:`~hcl_cli.objectives.quick_thought.check_sentence_sampler`), a momentum queue (QT's
    negatives are the batch's sentences), torchrun (one process)."""
    check_sentence_sampler(sampler, options)
    if queue_size:
        raise UsageError(f"sentences train without a momentum queue: use --queue-size 0 (got {queue_size})")
    if world_size > 1:
        raise UsageError(f"sentence pretraining runs in one process, not under torchrun ({world_size} processes)")


def build_text_training(
    sampler: str,
    vocab_size: int,
    word_dim: int,
    hidden: int,
    context: int,
    optimizer: OptimizerSettings,
    device: torch.device,
    learned: Mapping[str, Tensor] | None = None,
) -> tuple[QtModel, TextTrainingStep]:
    """The model (on ``device``, initialised from torch's RNG) and the step that trains it with ``optimizer``."""
    model = QtModel(vocab_size, word_dim, hidden).to(device)
    parameters = nn.ParameterDict({name: nn.Parameter(value) for name, value in (learned or {}).items()}).to(device)
    step = TextTrainingStep(model, optimizer.build([*model.parameters(), *parameters.parameters()]), sampler, context, parameters)
    return model, step


def build_training(config: PretrainConfig, card: TextCard, context: DistributedContext) -> tuple[QtModel, TextTrainingStep]:
    """QT's f and g of ``--qt-hidden`` on ``--word-dim`` embeddings and their step for ``hcl pretrain``, after the checks of
    :func:`check_text_training`; ``arch`` must be ``qt-gru`` or ``auto``, and ``eval_every`` 0 or its default (kNN monitoring reads
    labels)."""
    if config.arch not in ("auto", QT_GRU):
        raise UsageError(f"{config.data} holds sentences: use --arch {QT_GRU} (or auto), not {config.arch}")
    if config.eval_every not in (0, type(config).eval_every):  # the default, from a params.yaml of every modality, probes nothing here
        raise UsageError(f"--eval-every {config.eval_every} monitors kNN on labelled test samples, and a text corpus has none: use 0")
    check_text_training(config.sampler, config.loss_options(0), queue_size=config.queue_size, world_size=context.world_size)
    learned = config.spec.learned_tensors(config.sampler_options)
    return build_text_training(
        config.sampler,
        card.vocab_size,
        config.word_dim,
        config.qt_hidden,
        config.context,
        OptimizerSettings.of(config),
        context.device,
        learned,
    )
