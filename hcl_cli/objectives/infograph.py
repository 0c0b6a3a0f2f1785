"""InfoGraph's local-global objective (Sun et al., ICLR 2020) with every negative sampler, and the
two readings of HCL's hard graph objective (Robinson et al., ICLR 2021, App. B and D.2): the public entry.

A batch of graphs is nodes against graphs (:class:`~hcl_cli.objectives.node_graph.NodeGraphBatch`:
each node's positive is its own graph, its negatives the other graphs of the batch, scored by the
raw inner product of the local and global embeddings). The samplers of :mod:`hcl_cli.objectives`
run on it unchanged and give q(j|i) over the graphs: ``ucl`` uniform (InfoGraph itself),
``debiased``/``hucl`` HCL's tilt, ``scl``/``hscl``/``hscl-threshold`` the graphs of other labels (a
node's label is its graph's; its positives are then every graph of its label, its own included),
``ot`` the entropic coupling of nodes with graphs, ``undimix`` UnDiMix's importance with its parts read on nodes
against graphs (:mod:`~hcl_cli.objectives.undimix_graph`; it needs the local head's last layer and its inputs).

Two readings (``graph_weights``): ``paper`` (every sampler) is InfoGraph's Jensen-Shannon loss
weighted by the sampler's q, with HCL App. B and D.2's tilt and the tau+ debiasing of the image
Eq. (2)-(4), which App. B does not have (:func:`~hcl_cli.objectives.jsd.jsd_objective`);
``official`` (debiased and hucl) is ``JSD_hard`` as HCL's graph code computes it (:func:`~hcl_cli.objectives.jsd_hard.official_jsd_hard`),
and for undimix ``JSD_hard`` with UnDiMix's weights in place of its own (:func:`~hcl_cli.objectives.undimix_graph.official_undimix_jsd`).
:func:`local_global_loss` checks its inputs and options; :func:`node_graph_loss` is the training
step's entry, which checks nothing.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import torch
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.core import LossStats
from hcl_cli.objectives.jsd import jsd_objective
from hcl_cli.objectives.jsd_hard import official_jsd_hard
from hcl_cli.objectives.node_graph import NodeGraphBatch
from hcl_cli.objectives.registry import SAMPLERS, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.undimix_graph import node_graph_undimix, official_undimix_jsd

OFFICIAL_SAMPLERS = ("debiased", "hucl")
"""The samplers whose ``graph_weights="official"`` reading is the official ``JSD_hard``."""
WEIGHTED_OFFICIALLY = (*OFFICIAL_SAMPLERS, "undimix")
"""The samplers that read ``graph_weights``: ``JSD_hard``'s own weights, or UnDiMix's in their place."""


@overload
def local_global_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None = ...,
    *,
    sampler: str,
    return_stats: Literal[False] = ...,
    **options: Any,
) -> Tensor: ...
@overload
def local_global_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None = ...,
    *,
    sampler: str,
    return_stats: Literal[True],
    **options: Any,
) -> tuple[Tensor, LossStats]: ...
def local_global_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None = None,
    *,
    sampler: str,
    return_stats: bool = False,
    **options: Any,
) -> Tensor | tuple[Tensor, LossStats]:
    """InfoGraph's loss of a batch of graphs under ``sampler``'s negative distribution (a scalar).

    ``local``: (n, d) the nodes' local embeddings (InfoGraph's ``local_d(M)``); ``global_``:
    (G, d) the graphs' global embeddings (``global_d(y)``), G >= 2; ``node_graph``: (n,) int64,
    the graph of each node (torch-geometric's ``batch`` vector); ``graph_labels``: (G,), read by
    the supervised samplers and with ``positives="labels"``. ``options`` are those of
    :func:`~hcl_cli.objectives.contrastive_loss` (``beta``, ``tau_plus``, ``graph_weights``, ...),
    ``objective`` ``jsd`` (the default here, and the only one; ``auto`` is ``jsd`` too); ``temperature`` and ``clip`` are
    not read. The arithmetic runs in float32 (float64 for float64 inputs) with autocast off.
    ``return_stats=True`` also returns the :class:`~hcl_cli.objectives.core.LossStats`.
    """
    spec = lookup(sampler)
    values = SamplerOptions.resolve(spec, {"objective": "jsd", **options})
    check_graph_sampler(sampler, values)
    if values.momentum_keys is not None:
        raise UsageError("a momentum queue (momentum_keys) is not defined for nodes against graphs")
    check_graph_batch(local, global_, node_graph)
    if spec.label_positives(values) and (graph_labels is None or graph_labels.shape != (global_.shape[0],)):
        got = None if graph_labels is None else tuple(graph_labels.shape)
        raise UsageError(f"--sampler {sampler} reads labels: graph_labels must have shape ({global_.shape[0]},) (got {got})")
    loss, stats = node_graph_loss(local, global_, node_graph, graph_labels, sampler=sampler, options=values)
    return (loss, stats) if return_stats else loss


def check_graph_sampler(sampler: str, options: SamplerOptions) -> None:
    """One-line usage errors for a sampler or options that nodes against graphs cannot train with.

    The objective must be ``jsd`` (or ``auto``, which is ``jsd`` on graphs); ``graph_weights="official"`` has one
    positive per node. The public :func:`local_global_loss` calls it on every call, a stage once at its entry.
    """
    if options.objective not in ("auto", "jsd"):
        raise UsageError(f"nodes against graphs train with --objective jsd (InfoGraph's loss), not {options.objective}")
    spec = lookup(sampler)
    if options.graph_weights == "official" and sampler in WEIGHTED_OFFICIALLY and spec.label_positives(options):
        raise UsageError("--graph-weights official has one positive per node, its own graph: use --positives partner")


def reads_officially(sampler: str, options: SamplerOptions) -> bool:
    """Whether ``sampler`` under ``options`` is the official ``JSD_hard`` (:func:`official_jsd_hard`)."""
    return options.graph_weights == "official" and sampler in OFFICIAL_SAMPLERS


def node_graph_loss(
    local: Tensor,
    global_: Tensor,
    node_graph: Tensor,
    graph_labels: Tensor | None,
    *,
    sampler: str,
    options: SamplerOptions,
    counts: Tensor | None = None,
) -> tuple[Tensor, LossStats]:
    """:func:`local_global_loss` with its statistics, for inputs and options checked beforehand: it checks nothing.

    The graph training step's entry (:class:`~hcl_cli.graph.step.GraphTrainingStep`), as
    :func:`~hcl_cli.objectives.loss.sampler_loss` is the image step's: ``options`` are the stage's
    configuration, checked once (:func:`check_graph_sampler`) and resolved once per epoch.
    ``counts``: the nodes each row of ``local`` stands for, read by the official reading only
    (:func:`reads_officially`; :func:`official_jsd_hard`).
    """
    spec = SAMPLERS[sampler]
    label_positives = spec.label_positives(options)
    official = reads_officially(sampler, options)
    if counts is not None and not official:
        raise ValueError("merged node rows (counts) are read by the official reading only")
    with torch.autocast(device_type=local.device.type, enabled=False):
        if official:
            beta = options.beta if sampler == "hucl" else 0.0
            compute_dtype = torch.float64 if local.dtype == torch.float64 else torch.float32
            loss = official_jsd_hard(
                local.to(compute_dtype),
                global_.to(compute_dtype),
                node_graph,
                beta=beta,
                detach_weights=options.detach_weights,
                counts=counts,
            )
            count = torch.tensor(local.shape[0] if counts is None else int(counts.sum()), device=loss.device)
            return loss, LossStats(terms=count, anchors_without_negatives=torch.zeros_like(count))
        batch = NodeGraphBatch(local, global_, node_graph, graph_labels if label_positives else None)
        if sampler == "undimix":
            negatives = node_graph_undimix(batch, options)
            if options.graph_weights == "official":
                return official_undimix_jsd(batch, negatives)
        else:
            negatives = spec.load()(batch, options.replaced({"clip": True}, {}))
        return jsd_objective(batch, negatives, label_positives=label_positives, tau_plus=options.tau_plus)


def check_graph_batch(local: Tensor, global_: Tensor, node_graph: Tensor) -> None:
    """One-line usage errors for embeddings and a ``node_graph`` vector that do not form a batch of G >= 2 graphs."""
    if local.ndim != 2 or global_.ndim != 2 or local.shape[1] != global_.shape[1] or local.shape[0] < 1:
        raise UsageError(f"local and global_ must be (n, d) and (G, d) with n >= 1 (got {tuple(local.shape)} and {tuple(global_.shape)})")
    if global_.shape[0] < 2:
        raise UsageError(f"a batch needs at least 2 graphs, each node's negatives being the other graphs (got {global_.shape[0]})")
    if node_graph.shape != (local.shape[0],) or node_graph.dtype != torch.int64:
        raise UsageError(
            f"node_graph must be int64 of shape ({local.shape[0]},), one graph index per node (got {node_graph.dtype} {tuple(node_graph.shape)})"
        )
    if int(node_graph.min()) < 0 or int(node_graph.max()) >= global_.shape[0]:
        raise UsageError(
            f"node_graph must index the {global_.shape[0]} graphs (got values in [{int(node_graph.min())}, {int(node_graph.max())}])"
        )
