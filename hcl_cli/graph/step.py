"""One optimisation step of InfoGraph with a negative sampler, and the model and optimizer it trains.

HCL App. D.2 (graph/deepinfomax.py's training loop): a batch of graphs through the GIN, the local
head on every node and the global head on every graph, the Jensen-Shannon local-global loss of
:mod:`hcl_cli.objectives.infograph` with the sampler's negatives (nodes against the other graphs
of the batch), backward, Adam (the papers' lr 1e-3, weight decay 1e-6; H-SCL and HCL-OT use lr
0.01) or ``--optimizer``'s. The loss is :func:`~hcl_cli.objectives.infograph.node_graph_loss`, which checks nothing:
the options were checked once at the stage's entry (:func:`check_graph_training`) and are resolved
once per epoch, as the image step does with :func:`~hcl_cli.objectives.loss.sampler_loss`.
Everything runs in float32 (no autocast: the official code has none).
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from hcl_cli.errors import UsageError
from hcl_cli.graph.batch import GraphBatch
from hcl_cli.graph.encoder import GinModel
from hcl_cli.modality import StepResult
from hcl_cli.objectives.infograph import check_graph_sampler, node_graph_loss, reads_officially
from hcl_cli.objectives.registry import SAMPLERS
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.optimizer import OptimizerSettings, SkipNonFinite, update_where_finite

if TYPE_CHECKING:
    from hcl_cli.config.pretrain import PretrainConfig
    from hcl_cli.distributed import DistributedContext
    from hcl_cli.graph.card import GraphCard


@dataclass
class GraphTrainingStep:
    """One step on a :class:`~hcl_cli.graph.batch.GraphBatch`: forward, loss, backward, and the update where it is finite.

    The update is applied only where the loss and the gradients' norm are finite, decided on the
    device as the image step does (:func:`~hcl_cli.optimizer.update_where_finite`); the loop reads
    the :class:`StepResult` later and stops, naming the last checkpoint.
    ``same_label_pairs`` reports the loss's positive (node, graph) pairs and ``anchors_left_out``
    the nodes without a negative graph (supervised samplers, when every other graph of the batch
    shares the node's label), from :class:`~hcl_cli.objectives.core.LossStats` as the image step does.
    """

    model: GinModel
    optimizer: SkipNonFinite
    sampler: str
    learned: nn.ParameterDict = field(default_factory=nn.ParameterDict)
    """Tensors the loss learns with the encoder (UnDiMix's learned weights), passed to it by name."""

    @property
    def state(self) -> nn.Module:
        """What a checkpoint holds besides the optimizer: the model, and the learned tensors where there are some."""
        return nn.ModuleDict({"model": self.model, "learned": self.learned}) if len(self.learned) else self.model

    def __call__(self, batch: GraphBatch, labels: Tensor, loss_options: SamplerOptions) -> StepResult:
        """Train on ``batch`` (at least 2 graphs) with the sampler options of the current epoch; checks nothing."""
        spec = SAMPLERS[self.sampler]
        self.optimizer.zero_grad()
        graphs, nodes = self.model.encoder(batch.x, batch.edges, batch.batch, batch.num_graphs)
        node_graph, counts = batch.batch, None
        merged = merge_duplicate_nodes(nodes, node_graph) if reads_officially(self.sampler, loss_options) else None
        if merged is not None:  # decided by the batch alone, so a resumed run rounds as an uninterrupted one
            nodes, node_graph, counts = merged
        if spec.head_inputs:  # undimix: the local head's last layer and its inputs (Eq. 3 on graphs)
            local, inputs = self.model.local_d.with_last_inputs(nodes)
            loss_options = loss_options.with_inputs(head_inputs=inputs, head_layer=self.model.local_d.last_layer, **self.learned)
        else:
            local = self.model.local_d(nodes)
        global_ = self.model.global_d(graphs)
        graph_labels = batch.labels if spec.label_positives(loss_options) else None  # ``labels``, on the device
        loss, stats = node_graph_loss(local, global_, node_graph, graph_labels, sampler=self.sampler, options=loss_options, counts=counts)
        loss.backward()
        return StepResult(update_where_finite(self.optimizer, loss, stats.terms, stats.anchors_without_negatives))


MERGE_BELOW = 0.8
"""Rows are merged when at most this share of them is distinct (REDDIT-BINARY: 0.38, DD: 0.99)."""


class _MergeRows(torch.autograd.Function):
    """``x[first]``, whose gradient reaches each row as its group's gradient over the group's size."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, first: Tensor, group: Tensor, counts: Tensor) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(group, counts)
        return x.index_select(0, first)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:  # type: ignore[override]
        group, counts = ctx.saved_tensors
        return (grad / counts.to(grad.dtype)[:, None]).index_select(0, group), None, None, None


def merge_duplicate_nodes(nodes: Tensor, node_graph: Tensor) -> tuple[Tensor, Tensor, Tensor] | None:
    """The distinct (graph, embedding) rows of ``nodes``, their graphs and how many nodes each stands for; None when few repeat.

    Nodes of one graph with equal GIN embeddings (the leaves around one post of a REDDIT-BINARY
    thread: 62% of a batch's rows) have equal local embeddings and equal rows of the official
    loss, so the local head and the loss run once per distinct row, weighted by its count
    (:func:`~hcl_cli.objectives.jsd_hard.official_jsd_hard`), and each node's gradient is its
    row's over the count: the same loss and gradients up to float32 rounding. Rows are grouped by
    the bits of two random projections and the graph; a row unequal to its group's first (the
    projections collide on rows a rounding apart) is left alone.
    """
    with torch.no_grad():
        values = nodes.detach()
        generator = torch.Generator().manual_seed(0)
        bits = torch.stack([values @ torch.randn(values.shape[1], generator=generator).to(values) for _ in range(2)], dim=1)
        bits = bits.view(torch.int32).to(torch.int64)
        keys = torch.unique((bits[:, 0] << 32) | (bits[:, 1] & 0xFFFFFFFF), return_inverse=True)[1]
        rows = torch.arange(len(values), device=values.device)
        group, counts = torch.unique(node_graph * len(values) + keys, return_inverse=True, return_counts=True)[1:]
        if len(counts) > MERGE_BELOW * len(values):
            return None
        first = torch.full_like(counts, len(values)).scatter_reduce_(0, group, rows, "amin")
        unequal = torch.sub(values.index_select(0, first.index_select(0, group)), values).abs_().amax(dim=1) != 0
        if bool(unequal.any()):
            group, counts = torch.unique(torch.where(unequal, len(values) + rows, group), return_inverse=True, return_counts=True)[1:]
            first = torch.full_like(counts, len(values)).scatter_reduce_(0, group, rows, "amin")
    merged = _MergeRows.apply(nodes, first, group, counts)
    assert isinstance(merged, Tensor)
    return merged, node_graph.index_select(0, first), counts


def check_graph_training(sampler: str, options: SamplerOptions, *, queue_size: int, world_size: int) -> None:
    """One-line usage errors, before training, for what graph pretraining does not run.

    The sampler and objective (:func:`~hcl_cli.objectives.infograph.check_graph_sampler`: nce and bcl
    are refused); a momentum queue (InfoGraph's negatives are the batch's other graphs);
    torchrun (a graph epoch keeps its last partial batch, which ranks cannot split evenly).
    """
    check_graph_sampler(sampler, options)
    if queue_size:
        raise UsageError(f"graphs train without a momentum queue: use --queue-size 0 (got {queue_size})")
    if world_size > 1:
        raise UsageError(f"graph pretraining runs in one process, not under torchrun ({world_size} processes)")


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc's ``mallopt`` parameters (malloc.h)."""
MMAP_THRESHOLD = 32 << 20
"""The largest threshold glibc accepts on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``)."""


@functools.cache
def keep_freed_memory() -> bool:
    """Have glibc serve allocations up to 32 MiB from its heap and never give freed memory back to the system.

    A CPU step on a batch of DD (36K nodes) allocates and frees the same tensors of up to 19 MB
    (the nodes' 96-d activations, the scores of nodes against graphs) in every step; glibc maps each
    anew (above its threshold, or after trimming the heap) and every page of it faults on first touch;
    kept, those pages are reused (DD's epochs against the official code's: benchmarks/results/graph_peer.json).
    Done once per process, on Linux with glibc; True when it was applied.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, -1))
    except (OSError, AttributeError):
        return False


def build_graph_training(
    sampler: str,
    in_dim: int,
    hidden: int,
    layers: int,
    optimizer: OptimizerSettings,
    device: torch.device,
    learned: Mapping[str, Tensor] | None = None,
) -> tuple[GinModel, GraphTrainingStep]:
    """The model (on ``device``, initialised from torch's RNG) and the step that trains it, and the tensors ``learned``
    the loss learns with it (UnDiMix's learned weights), with ``optimizer`` (on a CPU, after :func:`keep_freed_memory`)."""
    if device.type == "cpu":
        keep_freed_memory()
    model = GinModel(in_dim, hidden, layers).to(device)
    parameters = nn.ParameterDict({name: nn.Parameter(value) for name, value in (learned or {}).items()}).to(device)
    return model, GraphTrainingStep(model, optimizer.build([*model.parameters(), *parameters.parameters()]), sampler, parameters)


def build_training(config: PretrainConfig, card: GraphCard, context: DistributedContext) -> tuple[GinModel, GraphTrainingStep]:
    """InfoGraph's GIN of ``gin_layers`` x ``gin_hidden`` and its step for ``hcl pretrain``, after the
    checks of :func:`check_graph_training`; ``arch`` must be ``gin`` or ``auto``."""
    if config.arch not in ("auto", "gin"):
        raise UsageError(f"{config.data} holds graphs: use --arch gin (or auto), not {config.arch}")
    check_graph_training(config.sampler, config.loss_options(0), queue_size=config.queue_size, world_size=context.world_size)
    learned = config.spec.learned_tensors(config.sampler_options)
    return build_graph_training(
        config.sampler, card.feature_dim, config.gin_hidden, config.gin_layers, OptimizerSettings.of(config), context.device, learned
    )
