"""UnDiMix on nodes against graphs (UnDiMix Sec. 4.3, App. A): the weights and both losses against a plain transcription
of hcl's reading (:mod:`hcl_cli.objectives.undimix_graph`), the learned weights' direction under descent, and
``hcl pretrain --sampler undimix`` on MUTAG."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from test_config import run_hcl
from torch import Tensor

from hcl_cli.graph.gin import FF
from hcl_cli.objectives import undimix_graph
from hcl_cli.objectives.infograph import local_global_loss
from hcl_cli.objectives.undimix import initial_attention

ROOT = Path(__file__).resolve().parents[1]
NODES_PER_GRAPH = (3, 2, 4, 1, 3, 2)
NODE_GRAPH = torch.repeat_interleave(torch.arange(len(NODES_PER_GRAPH)), torch.tensor(NODES_PER_GRAPH))
DIM = 5


def tiny_batch(seed: int) -> tuple[FF, Tensor, Tensor, Tensor]:
    """A float64 local head, the nodes' encoder outputs x, their local embeddings ff(x) (a leaf) and the graphs' (a leaf)."""
    torch.manual_seed(seed)
    head = FF(DIM).double()
    x = torch.randn(len(NODE_GRAPH), DIM, dtype=torch.float64)
    local = head(x).detach().requires_grad_()
    graphs = torch.randn(len(NODES_PER_GRAPH), DIM, dtype=torch.float64, requires_grad=True)
    return head, x, local, graphs


def options_of(head: FF, x: Tensor, **options: object) -> dict[str, object]:
    return {"head_layer": head.last_layer, "head_inputs": head.with_last_inputs(x)[1].detach(), **options}


def eq3_gradients(head: FF, x: Tensor, graphs: Tensor, bias: bool) -> list[Tensor]:
    """UnDiMix Eq. (3) by autograd, one node at a time: d CE(p(. | i), argmax) / d theta_last, p(k | i) the softmax of
    cos(l_i, g_k) over every graph, theta_last the local head's last Linear (weight, and bias when ``bias``)."""
    layer = head.last_layer
    parameters = [layer.weight, layer.bias] if bias else [layer.weight]
    gradients = []
    for i in range(len(x)):
        local = head(x[i : i + 1])[0]
        logits = torch.stack([F.cosine_similarity(local, g.detach(), dim=0) for g in graphs])
        cross_entropy = -torch.log_softmax(logits, dim=0)[int(logits.argmax())]
        gradients.append(torch.cat([g.flatten() for g in torch.autograd.grad(cross_entropy, parameters)]))
    return gradients


def transcribed_weights(head: FF, x: Tensor, local: Tensor, graphs: Tensor, mix: list[Tensor | float], bias: bool) -> list[list]:
    """Per node, w_ij over the G graphs (0 on its own), as the module docstring reads Eq. (2)-(5), in plain loops."""
    node_gradients = eq3_gradients(head, x, graphs, bias)
    own = NODE_GRAPH.tolist()
    count = len(NODES_PER_GRAPH)
    graph_gradients = [torch.stack([node_gradients[v] for v in range(len(own)) if own[v] == j]).mean(0) for j in range(count)]
    local, graphs = local.detach(), graphs.detach()
    rows = []
    for i in range(len(own)):
        negatives = [j for j in range(count) if j != own[i]]
        s = [float(local[i] @ graphs[j]) for j in negatives]
        u = [float(node_gradients[i] @ graph_gradients[j]) for j in negatives]
        r = [
            sum(1 - float(F.cosine_similarity(graphs[j], graphs[k], dim=0)) for k in range(count) if k not in (own[i], j)) / (count - 2)
            for j in negatives
        ]
        parts = [[(v - min(p)) / (max(p) - min(p)) if max(p) > min(p) else 0.0 for v in p] for p in (s, u, r)]
        row: list = [0.0] * count
        for position, j in enumerate(negatives):
            row[j] = sum(mix[k] * parts[k][position] for k in range(3))
        rows.append(row)
    return rows


def transcribed_loss(local: Tensor, graphs: Tensor, rows: list[list], reading: str) -> Tensor:
    """``official``: gan_losses.py's JSD_hard (tau+ 0.5) with ``reweight`` replaced by the weights, over the masked (n, G)
    matrix as losses.py builds it; ``paper``: InfoGraph's JSD with q(j|i) = w_ij / sum_j w_ij."""
    nodes, count = len(NODE_GRAPH), len(NODES_PER_GRAPH)
    weights = torch.stack([torch.stack([torch.as_tensor(w, dtype=torch.float64) for w in row]) for row in rows])
    pos_mask = F.one_hot(NODE_GRAPH, count).double()
    res = local @ graphs.T
    if reading == "paper":
        q = weights / weights.sum(dim=1, keepdim=True)
        positive = (res * pos_mask).sum(dim=1)
        return ((q * F.softplus(res)).sum(dim=1) - math.log(2)).mean() - (math.log(2) - F.softplus(-positive)).mean()
    tau = 0.5
    p = res * pos_mask
    e_pos = (math.log(2) - F.softplus(-p) - tau / (1 - tau) * (F.softplus(-p) + p)).sum() / nodes
    q = res * (1 - pos_mask)
    reweight = weights / weights.mean(dim=1, keepdim=True)
    e_neg = (reweight * (F.softplus(-q) + q) / (1 - tau) - math.log(2)).sum() / (nodes * (count - 1))
    return e_neg - e_pos


@pytest.mark.parametrize("block_rows", [None, 4])
@pytest.mark.parametrize("reading", ["official", "paper"])
@pytest.mark.parametrize("uncertainty", ["literal", "badge"])
def test_the_weights_and_the_loss_are_the_transcription(
    reading: str, uncertainty: str, block_rows: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On one block of the nodes' Gram, and on blocks of 4 rows (the symmetric blocks, 15 nodes: a partial last one)."""
    if block_rows is not None:
        monkeypatch.setattr(undimix_graph, "GRAM_BLOCK_ROWS", block_rows)
    head, x, local, graphs = tiny_batch(1)
    options = options_of(head, x, graph_weights=reading, undimix_uncertainty=uncertainty, undimix_weights="1,2,3")
    loss = local_global_loss(local, graphs, NODE_GRAPH, sampler="undimix", **options)
    rows = transcribed_weights(head, x, local, graphs, [1 / 6, 2 / 6, 3 / 6], bias=uncertainty == "literal")
    expected = transcribed_loss(local, graphs, rows, reading)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-10)
    got = torch.autograd.grad(loss, (local, graphs))
    for a, b in zip(got, torch.autograd.grad(expected, (local, graphs))):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_the_uncertainty_part_changes_the_weights_and_literal_differs_from_badge_by_the_bias() -> None:
    """The part is no constant: with the uncertainty alone the two readings give different losses, and each its transcription."""
    head, x, local, graphs = tiny_batch(2)
    losses = {}
    for uncertainty in ("literal", "badge"):
        options = options_of(head, x, graph_weights="official", undimix_uncertainty=uncertainty, undimix_weights="0,1,0")
        losses[uncertainty] = local_global_loss(local, graphs, NODE_GRAPH, sampler="undimix", **options).item()
        rows = transcribed_weights(head, x, local, graphs, [0.0, 1.0, 0.0], bias=uncertainty == "literal")
        assert losses[uncertainty] == pytest.approx(transcribed_loss(local, graphs, rows, "official").item(), rel=1e-10)
    uniform = local_global_loss(local, graphs, NODE_GRAPH, sampler="undimix", **options_of(head, x, undimix_weights="0,0,1"))
    assert losses["literal"] != pytest.approx(losses["badge"], rel=1e-6)
    assert len({round(v, 9) for v in (*losses.values(), uniform.item())}) == 3


def test_learned_weights_descend_away_from_similarity() -> None:
    """As on images (tests/test_paper_readings.py), descent on the loss moves lambda away from similarity toward easier
    negatives: the gradient with respect to the logits is positive for similarity (summing to 0, a softmax), through hcl's
    loss and the transcription alike, and a descent step lowers the weights' mass on high critic scores."""
    for seed, reading, uncertainty in (
        (60, "official", "literal"),
        (61, "official", "badge"),
        (62, "paper", "literal"),
        (63, "paper", "badge"),
    ):
        head, x, local, graphs = tiny_batch(seed)
        attention = initial_attention("1,1,1").to(torch.float64).requires_grad_()
        options = options_of(head, x, graph_weights=reading, undimix_uncertainty=uncertainty, undimix_learned=True)
        loss = local_global_loss(local, graphs, NODE_GRAPH, sampler="undimix", undimix_attention=attention, **options)
        gradient = torch.autograd.grad(loss, attention)[0]
        assert gradient[0] > 0, f"descent shrinks the similarity weight (gradient {gradient.tolist()})"
        assert gradient.sum().item() == pytest.approx(0.0, abs=1e-12)
        mix = list(torch.softmax(attention, dim=0))
        expected = transcribed_loss(local, graphs, transcribed_weights(head, x, local, graphs, mix, uncertainty == "literal"), reading)
        transcribed = torch.autograd.grad(expected, attention)[0]
        torch.testing.assert_close(gradient, transcribed, rtol=1e-9, atol=1e-12)
        scores = (local @ graphs.T).detach()
        masses = []
        for logits in (attention.detach(), attention.detach() - 0.5 * gradient / gradient.norm()):
            rows = transcribed_weights(head, x, local, graphs, list(torch.softmax(logits, dim=0)), uncertainty == "literal")
            weights = torch.tensor([[float(w) for w in row] for row in rows], dtype=torch.float64)
            masses.append(((weights / weights.sum(dim=1, keepdim=True)) * scores).sum())
        assert masses[1] < masses[0], "a descent step puts q on negatives the critic scores lower"


def test_undimix_official_with_label_positives_and_without_the_head_is_refused_in_one_line() -> None:
    head, x, local, graphs = tiny_batch(3)
    labels = torch.tensor([0, 1, 0, 1, 0, 1])
    with pytest.raises(Exception, match="graph-weights official has one positive per node"):
        local_global_loss(
            local, graphs, NODE_GRAPH, labels, sampler="undimix", graph_weights="official", positives="labels", **options_of(head, x)
        )
    with pytest.raises(Exception, match="needs head_layer"):
        local_global_loss(local, graphs, NODE_GRAPH, sampler="undimix")


def test_hcl_pretrain_undimix_trains_on_mutag_and_resumes_as_it_ran(tmp_path: Path) -> None:
    """``hcl pretrain --sampler undimix`` on the shipped MUTAG: the Fig. 7 reading (official, learned literal) trains, its
    learned weights are recorded beside the encoder and have moved from their start; 1 epoch resumed to 2 is the same run."""
    assert (
        run_hcl(
            ["prepare", "--dataset", "tu", "--name", "MUTAG", "--path", str(ROOT / "data" / "raw"), "--out", "prep"], tmp_path
        ).returncode
        == 0
    )
    arguments = ["pretrain", "--data", "prep", "--out", "run", "--epochs", "2", "--threads", "1", "--sampler", "undimix"]
    options = ["--graph-weights", "official", "--undimix-learned", "true", "--undimix-uncertainty", "literal"]
    result = run_hcl(arguments + options, tmp_path)
    assert result.returncode == 0, result.stderr
    sidecar = json.loads((tmp_path / "run" / "encoder.json").read_text())
    assert sidecar["config"]["sampler"] == "undimix" and sidecar["epoch"] == 2
    learned = torch.tensor(sidecar["learned"]["undimix_attention"])
    assert learned.isfinite().all() and not torch.allclose(learned, initial_attention("1,1,1"))
    resumed = [*arguments[:4], "resumed", *arguments[5:], *options]
    assert run_hcl([*resumed[:6], "1", *resumed[7:]], tmp_path).returncode == 0
    assert run_hcl([*resumed, "--resume"], tmp_path).returncode == 0
    again = json.loads((tmp_path / "resumed" / "encoder.json").read_text())
    assert again["learned"] == sidecar["learned"], "the learned weights are in the checkpoint: a resumed run ends where one run does"
    assert (tmp_path / "resumed" / "encoder.safetensors").read_bytes() == (tmp_path / "run" / "encoder.safetensors").read_bytes()
