"""The official reading's speed-ups change nothing but rounding: repeated node rows merged
(:func:`~hcl_cli.graph.step.merge_duplicate_nodes`, the loss's ``counts``) and the float32 log1p."""

from __future__ import annotations

import pytest
import torch

from hcl_cli.graph.gin import GINEncoder, InfoGraphModel
from hcl_cli.graph.step import merge_duplicate_nodes
from hcl_cli.objectives import jsd_hard
from hcl_cli.objectives.jsd_hard import official_jsd_hard


def star_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three stars (a hub and 4, 3, 5 leaves, the leaves' features equal within a star) and a path of 3: ``x``, edges, node graph."""
    sizes, edges, graph, features = (4, 3, 5), [], [], []
    first = 0
    for g, leaves in enumerate(sizes):
        features += [[1.0, 0.0, float(g)]] + [[0.0, 1.0, 0.5 * g]] * leaves
        edges += [(first, first + i) for i in range(1, leaves + 1)]
        graph += [g] * (leaves + 1)
        first += leaves + 1
    features += [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    edges += [(first, first + 1), (first + 1, first + 2)]
    graph += [3] * 3
    pairs = torch.tensor(edges).T
    return torch.tensor(features, dtype=torch.float64), torch.cat([pairs, pairs.flip(0)], dim=1), torch.tensor(graph)


def test_merge_finds_each_stars_leaves_and_nothing_else() -> None:
    x, edges, graph = star_batch()
    _, nodes = GINEncoder(3).double()(x, edges, graph, 4)
    merged = merge_duplicate_nodes(nodes, graph)
    assert merged is not None
    rows, row_graph, counts = merged
    assert sorted(zip(row_graph.tolist(), counts.tolist())) == sorted(
        [(0, 1), (0, 4), (1, 1), (1, 3), (2, 1), (2, 5), (3, 1), (3, 1), (3, 1)]
    )
    assert int(counts.sum()) == len(nodes)


@pytest.mark.parametrize("beta", [0.0, 1.0, 50.0])
def test_merged_rows_give_the_loss_and_gradients_of_all_nodes(beta: float) -> None:
    """The step's path (GIN, merge, local head, loss with counts) against every node through the head and the loss, float64."""
    x, edges, graph = star_batch()
    torch.manual_seed(0)
    model = InfoGraphModel(3).double()
    graphs, nodes = model.encoder(x, edges, graph, 4)
    merged = merge_duplicate_nodes(nodes, graph)
    assert merged is not None
    rows, row_graph, counts = merged
    ours = official_jsd_hard(model.local_d(rows), model.global_d(graphs), row_graph, beta=beta, counts=counts)
    theirs = official_jsd_hard(model.local_d(nodes), model.global_d(graphs), graph, beta=beta)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    parameters = list(model.parameters())
    mine_all = torch.autograd.grad(ours, parameters, retain_graph=True)
    for mine, reference in zip(mine_all, torch.autograd.grad(theirs, parameters), strict=True):
        torch.testing.assert_close(mine, reference, rtol=1e-10, atol=1e-12)


def test_merged_rows_share_the_largest_scores_gradient_by_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counts weight the ties of amax too: two rows standing for 3 and 1 nodes tie the largest |score| (one block of a row each)."""
    monkeypatch.setattr(jsd_hard, "OFFICIAL_CHUNK_ELEMENTS", 3)
    generator = torch.Generator().manual_seed(3)
    unique = torch.randn(4, 5, generator=generator, dtype=torch.float64)
    unique[2] = unique[0]
    graph = torch.tensor([0, 1, 1, 2])
    global_ = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    global_[2] = 4 * global_[1]  # the largest |score|: rows 0 and 2 against graph 2
    counts = torch.tensor([3, 2, 1, 2])
    full = unique.repeat_interleave(counts, dim=0).requires_grad_()
    rows = unique.clone().requires_grad_()
    for beta in (1.0, 10.0):
        ours = official_jsd_hard(rows, global_, graph, beta=beta, counts=counts)
        theirs = official_jsd_hard(full, global_, graph.repeat_interleave(counts), beta=beta)
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
        (mine,), (reference,) = torch.autograd.grad(ours, [rows]), torch.autograd.grad(theirs, [full])
        summed = torch.zeros_like(mine).index_add_(0, torch.arange(4).repeat_interleave(counts), reference)
        torch.testing.assert_close(mine, summed, rtol=1e-10, atol=1e-12)


def test_few_repeats_are_not_merged() -> None:
    nodes = torch.randn(50, 6)
    assert merge_duplicate_nodes(nodes, torch.zeros(50, dtype=torch.int64)) is None


def test_float32_official_loss_is_the_float64_one_to_rounding() -> None:
    """The float32 path's log1p (jsd_hard._log1p) against float64's torch.log1p, scores over the softplus threshold included."""
    generator = torch.Generator().manual_seed(5)
    local = 6 * torch.randn(300, 8, generator=generator, dtype=torch.float64)
    global_ = torch.randn(7, 8, generator=generator, dtype=torch.float64)
    graph = torch.randint(0, 7, (300,), generator=generator)
    for beta in (0.0, 1.0):
        ours = official_jsd_hard(local.float(), global_.float(), graph, beta=beta)
        torch.testing.assert_close(ours.double(), official_jsd_hard(local, global_, graph, beta=beta), rtol=2e-6, atol=1e-6)
    entries = torch.logspace(-12, 0, 1000, dtype=torch.float64)
    out, scratch = torch.empty(1000), torch.empty(1000)
    torch.testing.assert_close(
        jsd_hard._log1p(entries.float(), out=out, scratch=scratch).double(), torch.log1p(entries), rtol=3e-7, atol=0.0
    )
