"""One optimisation step of InfoGraph with a negative sampler, and the model and optimizer it trains.

HCL App. D.2 (graph/deepinfomax.py's training loop): a batch of graphs through the GIN, the local
head on every node and the global head on every graph, the Jensen-Shannon local-global loss of
:mod:`hcl_cli.objectives.infograph` with the sampler's negatives (nodes against the other graphs
of the batch), backward, Adam (the papers' lr 1e-3, weight decay 1e-6; H-SCL and HCL-OT use lr
0.01). The loss is :func:`~hcl_cli.objectives.infograph.node_graph_loss`, which checks nothing:
the options were checked once at the stage's entry (:func:`check_graph_training`) and are resolved
once per epoch, as the image step does with :func:`~hcl_cli.objectives.loss.sampler_loss`.
Everything runs in float32 (no autocast: the official code has none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from hcl_cli.errors import UsageError
from hcl_cli.graph.data import GraphBatch
from hcl_cli.graph.encoder import GinModel
from hcl_cli.modality import StepResult
from hcl_cli.objectives.infograph import check_graph_sampler, node_graph_loss
from hcl_cli.objectives.registry import SAMPLERS
from hcl_cli.objectives.sampler_options import SamplerOptions

if TYPE_CHECKING:
    from hcl_cli.config.pretrain import PretrainConfig
    from hcl_cli.distributed import DistributedContext
    from hcl_cli.graph.data import GraphCard


@dataclass
class GraphTrainingStep:
    """One step on a :class:`~hcl_cli.graph.data.GraphBatch`: forward, loss, backward, and Adam where it is finite.

    The update is applied only when the loss and the gradients' norm are finite;
    :attr:`StepResult.finite` tells the caller (the loop stops, naming the last checkpoint).
    ``same_label_pairs`` reports the loss's positive (node, graph) pairs and ``anchors_left_out``
    the nodes without a negative graph (supervised samplers, when every other graph of the batch
    shares the node's label), from :class:`~hcl_cli.objectives.core.LossStats` as the image step does.
    """

    model: GinModel
    optimizer: torch.optim.Optimizer
    sampler: str
    learned: nn.ParameterDict = field(default_factory=nn.ParameterDict)
    """Tensors the loss learns with the encoder: none on graphs (UnDiMix's learned weights need two views; it is refused)."""

    @property
    def state(self) -> nn.Module:
        """What a checkpoint holds besides the optimizer: the model."""
        return self.model

    def __call__(self, batch: GraphBatch, labels: Tensor, loss_options: SamplerOptions) -> StepResult:
        """Train on ``batch`` (at least 2 graphs) with the sampler options of the current epoch; checks nothing."""
        spec = SAMPLERS[self.sampler]
        self.optimizer.zero_grad(set_to_none=True)
        local, global_, _ = self.model(batch.x, batch.edges, batch.batch, batch.num_graphs)
        graph_labels = labels if spec.label_positives(loss_options) else None
        loss, stats = node_graph_loss(local, global_, batch.batch, graph_labels, sampler=self.sampler, options=loss_options)
        loss.backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in self.model.parameters() if p.grad is not None])
        values = torch.stack([loss.detach(), grad_norm, stats.terms.float(), stats.anchors_without_negatives.float()]).tolist()
        result = StepResult(*values)
        if result.finite:
            self.optimizer.step()
        return result


def check_graph_training(sampler: str, options: SamplerOptions, *, queue_size: int, world_size: int) -> None:
    """One-line usage errors, before training, for what graph pretraining does not run.

    The sampler and objective (:func:`~hcl_cli.objectives.infograph.check_graph_sampler`: undimix,
    nce and bcl are refused); a momentum queue (InfoGraph's negatives are the batch's other graphs);
    torchrun (a graph epoch keeps its last partial batch, which ranks cannot split evenly).
    """
    check_graph_sampler(sampler, options)
    if queue_size:
        raise UsageError(f"graphs train without a momentum queue: use --queue-size 0 (got {queue_size})")
    if world_size > 1:
        raise UsageError(f"graph pretraining runs in one process, not under torchrun ({world_size} processes)")


def build_graph_training(
    sampler: str, in_dim: int, hidden: int, layers: int, lr: float, weight_decay: float, device: torch.device
) -> tuple[GinModel, GraphTrainingStep]:
    """The model (on ``device``, initialised from torch's RNG) and the step that trains it with Adam."""
    model = GinModel(in_dim, hidden, layers).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    return model, GraphTrainingStep(model, optimizer, sampler)


def build_training(config: PretrainConfig, card: GraphCard, context: DistributedContext) -> tuple[GinModel, GraphTrainingStep]:
    """InfoGraph's GIN of ``gin_layers`` x ``gin_hidden`` and its step for ``hcl pretrain``, after the
    checks of :func:`check_graph_training`; ``arch`` must be ``gin`` or ``auto``."""
    if config.arch not in ("auto", "gin"):
        raise UsageError(f"{config.data} holds graphs: use --arch gin (or auto), not {config.arch}")
    check_graph_training(config.sampler, config.loss_options(0), queue_size=config.queue_size, world_size=context.world_size)
    return build_graph_training(
        config.sampler, card.feature_dim, config.gin_hidden, config.gin_layers, config.lr, config.weight_decay, context.device
    )
