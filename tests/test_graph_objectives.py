"""The objectives on nodes against graphs: InfoGraph's Jensen-Shannon loss with every sampler, and
the two readings of HCL's hard graph objective, each against a float64 transcription (values and
gradients):

- InfoGraph (``ucl``): ``local_global_loss_`` of HCL's graph code, losses.py lines 16-33, with
  ``measure="JSD"``, gan_losses.py lines 33-34 and 74-75;
- ``graph_weights="official"``: ``measure="JSD_hard"``, gan_losses.py lines 35-36 and 76-89, tau+ the
  default 0.5 of lines 17 and 58;
- ``graph_weights="paper"``: HCL App. B (``q_beta(G') ~ exp(beta T(h_u, H(G'))) p(G')``), App. D.2
  and Fig. 14 (scores scaled into [-2, 2] for the weights), the debiasing of Eq. (2)-(4).

The transcriptions build the masks with the code's loop over nodes; the loss builds them without.
"""

from __future__ import annotations

import math

import numpy as np
import ot as pot
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives import SAMPLERS, contrastive_loss, jsd_hard
from hcl_cli.objectives.core import negative_distribution
from hcl_cli.objectives.infograph import local_global_loss
from hcl_cli.objectives.node_graph import NodeGraphBatch
from hcl_cli.objectives.registry import lookup, supervised_samplers
from hcl_cli.objectives.sampler_options import SamplerOptions

LOG_2 = math.log(2.0)
NODES_PER_GRAPH = (3, 4, 2, 5, 3, 1)
GRAPH_LABELS = torch.tensor([0, 1, 0, 1, 2, 0])
NODE_GRAPH = torch.repeat_interleave(torch.arange(len(NODES_PER_GRAPH)), torch.tensor(NODES_PER_GRAPH))
GRAPH_SAMPLERS = tuple(name for name in SAMPLERS if not SAMPLERS[name].head_inputs)


def embeddings(seed: int = 0, scale: float = 0.7, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    """Leaf local (n, d) and global (G, d) embeddings, not normalised (as InfoGraph's FF heads give them)."""
    generator = torch.Generator().manual_seed(seed)
    local = (scale * torch.randn(len(NODE_GRAPH), 6, generator=generator, dtype=torch.float64)).to(dtype)
    global_ = (scale * torch.randn(len(NODES_PER_GRAPH), 6, generator=generator, dtype=torch.float64)).to(dtype)
    return local.requires_grad_(), global_.requires_grad_()


def code_masks(node_graph: Tensor, num_graphs: int) -> tuple[Tensor, Tensor]:
    """``pos_mask`` and ``neg_mask`` as losses.py lines 20-24 build them (a loop over nodes)."""
    pos_mask = torch.zeros((len(node_graph), num_graphs), dtype=torch.float64)
    neg_mask = torch.ones((len(node_graph), num_graphs), dtype=torch.float64)
    for nodeidx, graphidx in enumerate(node_graph.tolist()):
        pos_mask[nodeidx][graphidx] = 1.0
        neg_mask[nodeidx][graphidx] = 0.0
    return pos_mask, neg_mask


def official_code(local: Tensor, global_: Tensor, node_graph: Tensor, measure: str, beta: float = 0.0, tau_plus: float = 0.5) -> Tensor:
    """losses.py ``local_global_loss_`` (lines 16-33) with gan_losses.py's ``JSD`` (lines 34, 75) or ``JSD_hard`` (lines 36, 76-89)."""
    num_graphs, num_nodes = global_.shape[0], local.shape[0]
    pos_mask, neg_mask = code_masks(node_graph, num_graphs)
    res = torch.mm(local, global_.t())
    p_samples = res * pos_mask
    if measure == "JSD":
        ep = LOG_2 - F.softplus(-p_samples)
    else:
        ep = LOG_2 - F.softplus(-p_samples) - (tau_plus / (1 - tau_plus)) * (F.softplus(-p_samples) + p_samples)
    e_pos = ep.sum() / num_nodes
    q_samples = res * neg_mask
    if measure == "JSD":
        eq = F.softplus(-q_samples) + q_samples - LOG_2
    elif beta == 0:
        eq = (F.softplus(-q_samples) + q_samples - LOG_2) / (1 - tau_plus)
    else:
        eq = F.softplus(-q_samples) + q_samples
        reweight = -2 * q_samples / max(q_samples.max(), q_samples.min().abs())
        reweight = (beta * reweight).exp()
        reweight = reweight / reweight.mean(dim=1).view(-1, 1)
        eq = reweight * eq / (1 - tau_plus) - LOG_2
    e_neg = eq.sum() / (num_nodes * (num_graphs - 1))
    return e_neg - e_pos


def paper_loss(local: Tensor, global_: Tensor, node_graph: Tensor, *, beta: float, tau_plus: float, labels: Tensor | None = None) -> Tensor:
    """HCL App. B / D.2 on nodes against graphs, one node at a time.

    Negatives of node i: the other graphs (with ``labels``: the graphs of another label, and the
    positives every graph of i's label). Weights ``exp(beta * 2 s_ij / max |s|)``, the max over
    every negative pair of the batch (Fig. 14); ``N_i = max((E_q sp(s_ij) - tau+ mean_p sp(s_ip)) /
    (1 - tau+), 0)``; loss ``mean_i N_i - log 2 - mean_(i,p) (log 2 - sp(-s_ip))``.
    """
    scores = local @ global_.T
    graphs = range(global_.shape[0])
    own = node_graph.tolist()
    positives = [[j for j in graphs if (j == own[i] if labels is None else labels[j] == labels[own[i]])] for i in range(len(own))]
    negatives = [[j for j in graphs if j not in positives[i] and (labels is None or labels[j] != labels[own[i]])] for i in range(len(own))]
    largest = max(scores[i, j].abs() for i in range(len(own)) for j in negatives[i])
    negative_terms, positive_terms = [], []
    for i in range(len(own)):
        weights = [torch.exp(beta * 2 * scores[i, j] / largest) for j in negatives[i]]
        expected = sum(w * F.softplus(scores[i, j]) for w, j in zip(weights, negatives[i], strict=True)) / sum(weights)
        if tau_plus:
            positive = sum(F.softplus(scores[i, p]) for p in positives[i]) / len(positives[i])
            expected = torch.clamp((expected - tau_plus * positive) / (1 - tau_plus), min=0.0)
        negative_terms.append(expected - LOG_2)
        positive_terms += [LOG_2 - F.softplus(-scores[i, p]) for p in positives[i]]
    return torch.stack(negative_terms).mean() - torch.stack(positive_terms).mean()


def assert_same(ours: Tensor, reference: Tensor, inputs: tuple[Tensor, ...], rtol: float = 1e-10) -> None:
    """Same value and same gradients with respect to ``inputs`` (float64)."""
    torch.testing.assert_close(ours, reference, rtol=rtol, atol=1e-12)
    for mine, theirs in zip(torch.autograd.grad(ours, inputs), torch.autograd.grad(reference, inputs), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=rtol, atol=1e-12)


def test_ucl_is_infograph() -> None:
    """``ucl`` with ``objective="jsd"`` is InfoGraph's ``local_global_loss_`` with ``measure="JSD"``, value and gradients."""
    local, global_ = embeddings()
    ours = local_global_loss(local, global_, NODE_GRAPH, sampler="ucl")
    assert_same(ours, official_code(local, global_, NODE_GRAPH, "JSD"), (local, global_))


@pytest.mark.parametrize("beta", [0.0, 1.0, 2.0, 10.0, 50.0])
@pytest.mark.parametrize("block_entries", [None, 5])
def test_official_reading_is_the_codes_jsd_hard(beta: float, block_entries: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``hucl`` with ``graph_weights="official"`` is ``JSD_hard`` at that beta (tau+ 0.5 whatever tau_plus says), values and gradients,
    in one block of rows and in blocks of a row or two (the largest |score|, whose gradient amax shares, then in one block of several)."""
    if block_entries:
        monkeypatch.setattr(jsd_hard, "OFFICIAL_CHUNK_ELEMENTS", block_entries)
    local, global_ = embeddings(seed=1)
    ours = local_global_loss(local, global_, NODE_GRAPH, sampler="hucl", graph_weights="official", beta=beta, tau_plus=0.1)
    assert_same(ours, official_code(local, global_, NODE_GRAPH, "JSD_hard", beta=beta), (local, global_))
    if beta:
        official = {"sampler": "hucl", "graph_weights": "official", "beta": beta}
        attached = local_global_loss(local, global_, NODE_GRAPH, **official)
        detached = local_global_loss(local, global_, NODE_GRAPH, **official, detach_weights=True)
        torch.testing.assert_close(detached, attached, rtol=1e-12, atol=0.0)
        assert not torch.allclose(torch.autograd.grad(detached, local)[0], torch.autograd.grad(attached, local)[0])


def test_official_beta_zero_is_debiased_not_infograph() -> None:
    """The code's beta 0 is its tau+ 0.5 branch: ``debiased`` under ``official``, and not InfoGraph (peers/README.md)."""
    local, global_ = embeddings(seed=2)
    debiased = local_global_loss(local, global_, NODE_GRAPH, sampler="debiased", graph_weights="official")
    assert_same(debiased, official_code(local, global_, NODE_GRAPH, "JSD_hard", beta=0.0), (local, global_))
    hucl = local_global_loss(local, global_, NODE_GRAPH, sampler="hucl", graph_weights="official", beta=0.0)
    info_graph = local_global_loss(local, global_, NODE_GRAPH, sampler="ucl")
    torch.testing.assert_close(hucl, debiased, rtol=1e-12, atol=0.0)
    assert not torch.isclose(debiased, info_graph)


def test_official_weights_fall_as_the_score_rises() -> None:
    """The code's weights favour easy negatives, the paper's hard ones (peers/README.md).

    The loss's derivative in a node's hardest negative score: under the paper's reading that
    negative's weight rises with its score, so the derivative exceeds beta 0's (uniform weights);
    under the code's its weight falls, so the derivative is below the code's beta 0 branch.
    """
    local, global_ = embeddings(seed=3)
    scores = (local @ global_.T).detach()
    node = 0
    negatives = [j for j in range(len(NODES_PER_GRAPH)) if j != NODE_GRAPH[node]]
    hardest = max(negatives, key=lambda j: float(scores[node, j]))

    def gradient_at_hardest(**options: object) -> float:
        logits = scores.clone().requires_grad_()
        batch_local = torch.eye(len(NODE_GRAPH), dtype=torch.float64)
        loss = local_global_loss(batch_local, logits.T.contiguous(), NODE_GRAPH, **options)  # l_i = e_i: s = logits
        return float(torch.autograd.grad(loss, logits)[0][node, hardest])

    assert float(scores[node, hardest]) > 0
    paper_hard, paper_flat = gradient_at_hardest(sampler="hucl", beta=2.0), gradient_at_hardest(sampler="hucl", beta=0.0)
    code_hard = gradient_at_hardest(sampler="hucl", beta=2.0, graph_weights="official")
    code_flat = gradient_at_hardest(sampler="hucl", beta=0.0, graph_weights="official")
    assert paper_hard > paper_flat
    assert code_hard < code_flat


@pytest.mark.parametrize(("beta", "tau_plus"), [(0.0, 0.1), (1.0, 0.1), (2.0, 0.5), (10.0, 0.0)])
def test_paper_reading_hucl(beta: float, tau_plus: float) -> None:
    """``hucl`` (``graph_weights="paper"``, the default) is HCL App. B / D.2 with the Eq. (2)-(4) debiasing; beta 0 is ``debiased``."""
    local, global_ = embeddings(seed=4, scale=1.5)
    ours = local_global_loss(local, global_, NODE_GRAPH, sampler="hucl", beta=beta, tau_plus=tau_plus)
    assert_same(ours, paper_loss(local, global_, NODE_GRAPH, beta=beta, tau_plus=tau_plus), (local, global_))
    if beta == 0:
        debiased = local_global_loss(local, global_, NODE_GRAPH, sampler="debiased", tau_plus=tau_plus)
        torch.testing.assert_close(debiased, ours, rtol=1e-12, atol=0.0)


def test_paper_debiasing_floor() -> None:
    """A node whose debiased negative term would be negative is held at the floor 0 (no NaN, no gradient through it)."""
    local, global_ = embeddings(seed=5, scale=2.5)
    ours = local_global_loss(local, global_, NODE_GRAPH, sampler="debiased", tau_plus=0.9)
    reference = paper_loss(local, global_, NODE_GRAPH, beta=0.0, tau_plus=0.9)
    scores = (local @ global_.T).detach()
    own = F.softplus(scores[torch.arange(len(NODE_GRAPH)), NODE_GRAPH])
    negative_mean = (F.softplus(scores) * (NODE_GRAPH[:, None] != torch.arange(len(NODES_PER_GRAPH)))).sum(dim=1) / (
        len(NODES_PER_GRAPH) - 1
    )
    assert bool((negative_mean < 0.9 * own).any()), "the batch should hit the floor"
    assert_same(ours, reference, (local, global_))


@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_hscl_on_graphs(beta: float) -> None:
    """H-SCL(beta) on nodes: negatives the graphs of other labels, positives every graph of the node's label."""
    local, global_ = embeddings(seed=6)
    sampler = "hscl" if beta else "scl"
    ours = local_global_loss(local, global_, NODE_GRAPH, GRAPH_LABELS, sampler=sampler, beta=beta)
    reference = paper_loss(local, global_, NODE_GRAPH, beta=beta, tau_plus=0.0, labels=GRAPH_LABELS)
    assert_same(ours, reference, (local, global_))


def graph_weights(sampler: str, local: Tensor, global_: Tensor, **options: object) -> Tensor:
    """q(j|i), (n, G), of ``sampler`` on the node-graph batch (the paper reading's weights)."""
    spec = lookup(sampler)
    values = SamplerOptions.resolve(spec, {"objective": "jsd", **options})
    labels = GRAPH_LABELS if spec.label_positives(values) else None
    batch = NodeGraphBatch(local.detach(), global_.detach(), NODE_GRAPH, labels)
    return negative_distribution(spec.load()(batch, values.replaced({"clip": True}, {})))


@pytest.mark.parametrize("sampler", GRAPH_SAMPLERS)
def test_every_sampler_on_a_graph_batch(sampler: str) -> None:
    """Finite loss and gradients for every sampler; q sums to 1 per node, is 0 on the node's own graph,
    and, for the supervised samplers, on every graph of the node's label."""
    local, global_ = embeddings(seed=7)
    options = {"threshold": -0.2} if sampler == "hscl-threshold" else {}
    loss = local_global_loss(local, global_, NODE_GRAPH, GRAPH_LABELS, sampler=sampler, **options)
    gradients = torch.autograd.grad(loss, (local, global_))
    assert torch.isfinite(loss)
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in gradients)
    q = graph_weights(sampler, local, global_, **options)
    torch.testing.assert_close(q.sum(dim=1), torch.ones(len(NODE_GRAPH), dtype=torch.float64))
    own = NODE_GRAPH[:, None] == torch.arange(len(NODES_PER_GRAPH))
    assert bool((q[own] == 0).all())
    if sampler in supervised_samplers():
        same_label = GRAPH_LABELS[NODE_GRAPH][:, None] == GRAPH_LABELS[None, :]
        assert bool((q[same_label] == 0).all())


def test_float32_graph_loss_is_finite() -> None:
    """float32 embeddings of a trained-looking scale (large scores) give finite losses and gradients under both readings."""
    local, global_ = embeddings(seed=8, scale=4.0, dtype=torch.float32)
    for options in ({"sampler": "hucl", "beta": 10.0}, {"sampler": "hucl", "beta": 50.0, "graph_weights": "official"}):
        loss = local_global_loss(local, global_, NODE_GRAPH, **options)
        assert loss.dtype == torch.float32 and torch.isfinite(loss)
        assert all(torch.isfinite(g).all() for g in torch.autograd.grad(loss, (local, global_)))


def test_ot_couples_nodes_with_graphs(sinkhorn_path: str) -> None:
    """``ot``'s q, on each Sinkhorn path, is n P of the entropic coupling of the nodes (1/n) with the graphs (1/G) under
    ``||l_i - g_j||^2`` (POT's Sinkhorn on the full distance), the node's own graph excluded."""
    local, global_ = embeddings(seed=9)
    epsilon = 0.5
    q = graph_weights("ot", local, global_, ot_epsilon=epsilon, ot_iterations=5000)
    cost = torch.cdist(local.detach(), global_.detach()) ** 2
    own = NODE_GRAPH[:, None] == torch.arange(len(NODES_PER_GRAPH))
    cost = cost.masked_fill(own, 1e4).numpy()
    nodes, graphs = cost.shape
    coupling = pot.sinkhorn(np.full(nodes, 1 / nodes), np.full(graphs, 1 / graphs), cost, epsilon, numItermax=100_000, stopThr=1e-13)
    expected = torch.from_numpy(nodes * coupling)
    torch.testing.assert_close(q, expected / expected.sum(dim=1, keepdim=True), rtol=1e-5, atol=1e-9)


def test_supervised_batch_of_one_label_is_left_out() -> None:
    """All graphs of one label: no node has a negative, every node is counted as such, the loss is 0."""
    local, global_ = embeddings(seed=10)
    loss, stats = local_global_loss(
        local, global_, NODE_GRAPH, torch.zeros(len(NODES_PER_GRAPH), dtype=torch.int64), sampler="scl", return_stats=True
    )
    assert loss.item() == 0.0
    assert int(stats.anchors_without_negatives) == len(NODE_GRAPH) and int(stats.terms) == 0


@pytest.mark.parametrize(
    ("arguments", "options", "message"),
    [
        ({}, {"sampler": "undimix"}, "undimix on graphs needs head_layer, the local head's last linear layer"),
        ({}, {"sampler": "undimix", "graph_weights": "official", "positives": "labels"}, "graph-weights official has one positive"),
        ({}, {"sampler": "ot", "ot_cost": "exp"}, "--ot-cost exp needs unit embeddings"),
        ({}, {"sampler": "hucl", "graph_weights": "official", "positives": "labels"}, "graph-weights official has one positive"),
        ({}, {"sampler": "ucl", "objective": "nce"}, "--objective jsd"),
        ({}, {"sampler": "scl"}, "graph_labels must have shape (6,)"),
        ({"global_": 1}, {"sampler": "ucl"}, "at least 2 graphs"),
        ({"node_graph": torch.full((len(NODE_GRAPH),), 6)}, {"sampler": "ucl"}, "node_graph must index the 6 graphs"),
        ({"node_graph": torch.zeros(3, dtype=torch.int64)}, {"sampler": "ucl"}, "node_graph must be int64 of shape (18,)"),
    ],
)
def test_bad_graph_inputs(arguments: dict[str, object], options: dict[str, object], message: str) -> None:
    """Inputs that cannot form the loss get one-line usage errors."""
    local, global_ = embeddings()
    global_ = global_[: arguments.get("global_", len(NODES_PER_GRAPH))]
    node_graph = arguments.get("node_graph", NODE_GRAPH)
    labels = GRAPH_LABELS if options["sampler"] not in ("scl",) else None
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        local_global_loss(local, global_, node_graph, labels, **options)


def test_jsd_is_not_an_image_objective() -> None:
    """Two views refuse ``objective="jsd"`` with a one-line usage error instead of computing nce silently."""
    z1, z2 = torch.randn(4, 3), torch.randn(4, 3)
    with pytest.raises(UsageError, match="objective jsd is InfoGraph's loss"):
        contrastive_loss(z1, z2, sampler="ucl", objective="jsd")


@pytest.mark.parametrize("block_entries", [None, 5])
def test_official_reading_shares_the_largest_scores_gradient_among_its_ties(
    block_entries: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two graphs with one embedding tie the largest |score| of the weights' scale: amax's gradient goes half to each."""
    if block_entries:
        monkeypatch.setattr(jsd_hard, "OFFICIAL_CHUNK_ELEMENTS", block_entries)
    local, global_ = embeddings(seed=1)
    with torch.no_grad():
        negatives = (local @ global_.T).masked_fill(NODE_GRAPH[:, None] == torch.arange(len(global_)), 0.0).abs()
        hardest = int(negatives.max(dim=0).values.argmax())
        twin = next(g for g in range(len(global_)) if g != hardest and not (NODE_GRAPH[negatives[:, hardest].argmax()] == g))
        global_[twin] = global_[hardest]
        ties = (local @ global_.T).masked_fill(NODE_GRAPH[:, None] == torch.arange(len(global_)), 0.0).abs()
    assert int((ties == ties.max()).sum()) == 2
    for beta in (1.0, 10.0):
        ours = local_global_loss(local, global_, NODE_GRAPH, sampler="hucl", graph_weights="official", beta=beta)
        assert_same(ours, official_code(local, global_, NODE_GRAPH, "JSD_hard", beta=beta), (local, global_))
