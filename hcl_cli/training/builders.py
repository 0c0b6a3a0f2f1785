"""The training step of each modality: the one place that joins a :class:`~hcl_cli.modality.Modality`
to the code that trains on it.

The modalities themselves only read, store and run encoders, so ``embed`` and ``report`` (which
import them) do not depend on the training code, and a change to a training step reruns
``pretrain`` alone. A new modality adds its builder here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.graph import step as graph_step
from hcl_cli.image import step as image_step
from hcl_cli.modality import Modality, Step
from hcl_cli.text import step as text_step

Builder = Callable[[PretrainConfig, Any, DistributedContext], tuple[nn.Module, Step]]

TRAINING_BUILDERS: dict[str, Builder] = {
    "image": image_step.build_training,  # SimCLR-style two views: hcl_cli/image/step.py
    "graph": graph_step.build_training,  # InfoGraph, nodes against graphs: hcl_cli/graph/step.py
    "text": text_step.build_training,  # quick-thought, consecutive sentences: hcl_cli/text/step.py
}


def build_training(modality: Modality, config: PretrainConfig, card: Any, context: DistributedContext) -> tuple[nn.Module, Step]:
    """The model (on ``context.device``) and the step that trains it, for data of ``modality`` described by ``card``."""
    return TRAINING_BUILDERS[modality.name](config, card, context)
