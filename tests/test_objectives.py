"""Every sampler against a plain transcription of its paper's formula (float64, gradients included),
the identities between samplers, the OT coupling against POT, anchor masks, stability under bf16
autocast at low temperature, schedules, and one-line errors for bad inputs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import ot as pot
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hcl_cli.errors import UsageError
from hcl_cli.objectives import SAMPLERS, check_sampler_inputs, contrastive_loss, negative_weights, threshold_at
from hcl_cli.objectives.ot import sinkhorn_log_coupling
from hcl_cli.objectives.registry import supervised_samplers

B, D, HIDDEN = 8, 6, 5
T = 0.5


def views(seed: int, batch: int = B, dim: int = D, noise: float = 0.7) -> tuple[Tensor, Tensor]:
    """Two correlated float64 views that require gradients."""
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(batch, dim, generator=generator, dtype=torch.float64)
    z1 = base + noise * torch.randn(batch, dim, generator=generator, dtype=torch.float64)
    z2 = base + noise * torch.randn(batch, dim, generator=generator, dtype=torch.float64)
    return z1.requires_grad_(), z2.requires_grad_()


def assert_same_loss(actual: Tensor, expected: Tensor, inputs: tuple[Tensor, ...]) -> None:
    """Equal values and equal gradients with respect to ``inputs``, to 1e-6."""
    torch.testing.assert_close(actual, expected, rtol=0, atol=1e-6)
    for got, want in zip(torch.autograd.grad(actual, inputs, retain_graph=True), torch.autograd.grad(expected, inputs, retain_graph=True)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def unit_rows(z1: Tensor, z2: Tensor) -> Tensor:
    return F.normalize(torch.cat([z1, z2]), dim=1)


def partner(i: int, batch: int) -> int:
    return (i + batch) % (2 * batch)


# --- direct transcriptions of the papers' formulas, one anchor at a time -----------------------


def reference_nt_xent(z1: Tensor, z2: Tensor, t: float) -> Tensor:
    """SimCLR: -log(exp(s_ip) / sum_{k != i} exp(s_ik))."""
    z, batch = unit_rows(z1, z2), len(z1)
    losses = []
    for i in range(2 * batch):
        others = [k for k in range(2 * batch) if k != i]
        losses.append(-(z[i] @ z[partner(i, batch)] / t) + torch.logsumexp(z[others] @ z[i] / t, 0))
    return torch.stack(losses).mean()


def reference_hcl(
    z1: Tensor,
    z2: Tensor,
    t: float,
    beta: float,
    tau_plus: float,
    clip: bool = False,
    clamp: bool = True,
    detach: bool = False,
    labels: Tensor | None = None,
) -> Tensor:
    """HCL Fig. 13 / official code: reweight, debias, clamp, -log(pos / (pos + Ng)); ``detach``:
    the weights as constants (H-SCL's code, ``imp.detach()``); ``labels``: "true positive pairs"
    (Fig. 4, Sec. 6.1), every other sample of the anchor's label a positive, the negatives kept."""
    z, batch = unit_rows(z1, z2), len(z1)
    y = None if labels is None else torch.cat([labels, labels]).tolist()
    n = 2 * batch - 2
    clip_scale = 1.0
    if clip:
        clip_scale = 2.0 / max(abs(z[i] @ z[j] / t) for i in range(2 * batch) for j in range(2 * batch) if j not in (i, partner(i, batch)))
    losses = []
    for i in range(2 * batch):
        negatives = [j for j in range(2 * batch) if j not in (i, partner(i, batch))]
        similarity = z[negatives] @ z[i] / t
        weights = torch.exp(beta * similarity * clip_scale)
        weights = weights.detach() if detach else weights
        reweighted = (weights * torch.exp(similarity)).sum() / weights.mean()
        positives = [partner(i, batch)] if labels is None else [p for p in range(2 * batch) if p != i and y[p] == y[i]]
        for p in positives:
            pos = torch.exp(z[i] @ z[p] / t)
            ng = (reweighted - tau_plus * n * pos) / (1 - tau_plus)
            if clamp:
                ng = torch.clamp(ng, min=n * math.exp(-1 / t))
            losses.append(-torch.log(pos / (pos + ng)))
    return torch.stack(losses).mean()


def reference_hscl(
    z1: Tensor, z2: Tensor, labels: Tensor, t: float, beta: float, threshold: float | None = None, detach: bool = False
) -> Tensor:
    """H-SCL Eq. (3): mean over positive pairs of log(1 + M exp(-s_ip) E_i), E_i under eta_exp or
    eta_thresh; ``detach``: eta as a constant (H-SCL's code)."""
    z, batch = unit_rows(z1, z2), len(z1)
    y = torch.cat([labels, labels])
    m = 2 * batch - 2
    terms = []
    for i in range(2 * batch):
        negatives = [j for j in range(2 * batch) if y[j] != y[i]]
        if threshold is not None:
            negatives = [j for j in negatives if z[i] @ z[j] >= threshold] or negatives
        similarity = z[negatives] @ z[i] / t
        weights = torch.exp(beta * similarity) if threshold is None else torch.ones_like(similarity)
        weights = weights.detach() if detach else weights
        expectation = (weights * torch.exp(similarity)).sum() / weights.sum()
        for p in range(2 * batch):
            if p != i and y[p] == y[i]:
                terms.append(torch.log(1 + m * torch.exp(-(z[i] @ z[p]) / t) * expectation))
    return torch.stack(terms).mean()


def pot_coupling(z1: Tensor, z2: Tensor, epsilon: float, iterations: int, cost: str = "sq", kappa: float = 1.0) -> np.ndarray:
    """POT's Sinkhorn coupling of the batch with itself; forbidden pairs get a cost exp(-cost/eps) = 0."""
    z = unit_rows(z1, z2).detach().numpy()
    batch = len(z1)
    squared = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    matrix = squared if cost == "sq" else np.exp(squared - kappa)
    for i in range(2 * batch):
        matrix[i, i] = matrix[i, partner(i, batch)] = 1e4
    marginal = np.full(2 * batch, 1 / (2 * batch))
    return pot.sinkhorn(marginal, marginal, matrix, epsilon, numItermax=iterations, stopThr=0.0, warn=False)


def reference_ot(z1: Tensor, z2: Tensor, t: float, tau_plus: float, coupling: np.ndarray, loss: str) -> Tensor:
    """HCL-OT: q = 2B P; Eq. (8) with HCL's debiasing and clamp, or the BCL of Eq. (9)."""
    z, batch = unit_rows(z1, z2), len(z1)
    q = torch.from_numpy(coupling) * 2 * batch
    n = 2 * batch - 2
    losses = []
    for i in range(2 * batch):
        cosine = z @ z[i]
        if loss == "bcl":
            losses.append((q[i] * cosine).sum() - cosine[partner(i, batch)])
            continue
        pos = torch.exp(cosine[partner(i, batch)] / t)
        ng = torch.clamp((n * (q[i] * torch.exp(cosine / t)).sum() - tau_plus * n * pos) / (1 - tau_plus), min=n * math.exp(-1 / t))
        losses.append(-torch.log(pos / (pos + ng)))
    return torch.stack(losses).mean()


def closed_form_gradients(z1: Tensor, z2: Tensor, layer: nn.Linear, h1: Tensor, h2: Tensor) -> list[Tensor]:
    """UnDiMix Eq. (3) as BADGE reads it, by autograd one row at a time: the gradient of the
    pseudo-labelling cross-entropy (Eq. 2) with respect to the last layer's weight, the other
    view's embeddings held fixed."""
    z, batch = unit_rows(z1, z2).detach(), len(z1)
    hidden = torch.cat([h1, h2])
    gradients = []
    for j in range(2 * batch):
        candidates = z[batch:] if j < batch else z[:batch]
        logits = F.normalize(layer(hidden[j]), dim=0) @ candidates.T
        cross_entropy = F.cross_entropy(logits[None], logits.argmax()[None])
        gradients.append(torch.autograd.grad(cross_entropy, layer.weight)[0].flatten())
    return gradients


def reference_diversity(z: Tensor, i: int, j: int) -> Tensor:
    """UnDiMix Eq. (4) for anchor row i and negative row j: the mean of 1 - cos(z_j, z_j') over the
    rows j' of the images other than i's and j's (both views of each)."""
    batch = len(z) // 2
    others = [k for k in range(2 * batch) if k % batch not in (i % batch, j % batch)]
    return sum(1 - z[j] @ z[k] for k in others) / len(others)


def undimix_weights(z1: Tensor, z2: Tensor, gradients: list[Tensor], mix: Sequence[Tensor | float]) -> list[Tensor]:
    """Per anchor, the UnDiMix weights of its negatives (Algorithm 1, Eq. 5): each part min-max
    normalised over the negatives, mixed with ``mix``, scaled to mean 1 (parts of weight 0 left out)."""
    z, batch = unit_rows(z1, z2).detach(), len(z1)
    rows = []
    for i in range(2 * batch):
        negatives = [j for j in range(2 * batch) if j not in (i, partner(i, batch))]
        similarity = torch.stack([z[i] @ z[j] for j in negatives])
        uncertainty = torch.stack([gradients[i] @ gradients[j] for j in negatives])
        diversity = torch.stack([reference_diversity(z, i, j) for j in negatives])
        parts = [
            w * (c - c.min()) / (c.max() - c.min())
            for w, c in zip(mix, (similarity, uncertainty, diversity))
            if torch.as_tensor(w).detach().item() > 0
        ]
        score = sum(parts)
        rows.append(score / score.mean())
    return rows


def reference_undimix(
    z1: Tensor,
    z2: Tensor,
    layer: nn.Linear,
    h1: Tensor,
    h2: Tensor,
    t: float,
    mix: Sequence[Tensor | float],
    gradients: list[Tensor] | None = None,
) -> Tensor:
    """UnDiMix Algorithm 1: NT-Xent with the negatives' exp(s_ij) weighted by w_ij; ``gradients``
    default to the BADGE reading's (:func:`closed_form_gradients`)."""
    batch = len(z1)
    gradients = closed_form_gradients(z1, z2, layer, h1, h2) if gradients is None else gradients
    zz = unit_rows(z1, z2)
    losses = []
    for i, weights in enumerate(undimix_weights(z1, z2, gradients, mix)):
        negatives = [j for j in range(2 * batch) if j not in (i, partner(i, batch))]
        pos = torch.exp(zz[i] @ zz[partner(i, batch)] / t)
        losses.append(-torch.log(pos / (pos + (weights * torch.exp(zz[negatives] @ zz[i] / t)).sum())))
    return torch.stack(losses).mean()


# --- each sampler equals its formula ------------------------------------------------------------


def test_ucl_is_nt_xent() -> None:
    z1, z2 = views(0)
    assert_same_loss(contrastive_loss(z1, z2, sampler="ucl", temperature=T), reference_nt_xent(z1, z2, T), (z1, z2))


@pytest.mark.parametrize("tau_plus", [0.0, 0.1, 0.9])
def test_debiased_is_hcl_with_beta_zero(tau_plus: float) -> None:
    z1, z2 = views(1)
    loss = contrastive_loss(z1, z2, sampler="debiased", temperature=T, beta=3.0, tau_plus=tau_plus)
    assert_same_loss(loss, reference_hcl(z1, z2, T, beta=0.0, tau_plus=tau_plus), (z1, z2))


@pytest.mark.parametrize(("beta", "tau_plus", "clip"), [(1.0, 0.0, False), (2.0, 0.1, False), (0.5, 0.9, False), (1.0, 0.1, True)])
def test_hucl_matches_hcl_formula(beta: float, tau_plus: float, clip: bool) -> None:
    z1, z2 = views(2)
    loss = contrastive_loss(z1, z2, sampler="hucl", temperature=T, beta=beta, tau_plus=tau_plus, clip=clip)
    assert_same_loss(loss, reference_hcl(z1, z2, T, beta, tau_plus, clip), (z1, z2))


def test_debiasing_clamp_is_exercised() -> None:
    """With tau+ = 0.9 and aligned views some anchors hit HCL's floor N exp(-1/t); both sides agree there."""
    z1, z2 = views(3, noise=0.05)
    assert not torch.isclose(reference_hcl(z1, z2, T, 1.0, 0.9, clamp=False), reference_hcl(z1, z2, T, 1.0, 0.9))
    loss = contrastive_loss(z1, z2, sampler="hucl", temperature=T, beta=1.0, tau_plus=0.9)
    assert_same_loss(loss, reference_hcl(z1, z2, T, 1.0, 0.9), (z1, z2))


@pytest.mark.parametrize(("sampler", "beta"), [("scl", 0.0), ("hscl", 1.5)])
def test_scl_and_hscl_match_hscl_formula(sampler: str, beta: float) -> None:
    z1, z2 = views(4)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
    loss = contrastive_loss(z1, z2, labels, sampler=sampler, temperature=T, beta=beta)
    assert_same_loss(loss, reference_hscl(z1, z2, labels, T, beta), (z1, z2))


@pytest.mark.parametrize("threshold", [-0.3, 0.2, 0.9])
def test_hscl_threshold_matches_formula_with_fallback(threshold: float) -> None:
    z1, z2 = views(5)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
    loss = contrastive_loss(z1, z2, labels, sampler="hscl-threshold", temperature=T, threshold=threshold)
    assert_same_loss(loss, reference_hscl(z1, z2, labels, T, 0.0, threshold), (z1, z2))


@pytest.mark.parametrize(("tau_plus", "cost", "loss_kind"), [(0.0, "sq", "nce"), (0.1, "exp", "nce"), (0.0, "sq", "bcl")])
def test_ot_matches_pot_coupling_and_formula(tau_plus: float, cost: str, loss_kind: str) -> None:
    z1, z2 = views(6)
    options = {"ot_epsilon": 0.3, "ot_iterations": 50, "ot_cost": cost, "ot_kappa": 1.5, "objective": loss_kind}
    loss = contrastive_loss(z1, z2, sampler="ot", temperature=T, tau_plus=tau_plus, **options)
    coupling = pot_coupling(z1, z2, 0.3, 50, cost, 1.5)
    assert_same_loss(loss, reference_ot(z1, z2, T, tau_plus, coupling, loss_kind), (z1, z2))


def test_undimix_matches_algorithm_with_autograd_gradients() -> None:
    generator = torch.Generator().manual_seed(7)
    layer = nn.Linear(HIDDEN, D).double()
    h1, h2 = (torch.randn(B, HIDDEN, generator=generator, dtype=torch.float64) for _ in range(2))
    z1, z2 = (layer(h).detach().requires_grad_() for h in (h1, h2))
    for mix in [(1.0, 1.0, 1.0), (0.2, 0.5, 0.3)]:
        options = {"undimix_weights": mix, "undimix_diversity": "both-views"}  # reference_diversity reads Eq. (4) over both views
        loss = contrastive_loss(z1, z2, sampler="undimix", temperature=T, head_inputs=(h1, h2), **options)
        assert_same_loss(loss, reference_undimix(z1, z2, layer, h1, h2, T, mix), (z1, z2))


# --- identities between samplers -----------------------------------------------------------------


def test_hscl_with_distinct_labels_is_hucl_without_debiasing() -> None:
    z1, z2 = views(8)
    labels = torch.arange(B)
    for clip in (False, True):
        hscl = contrastive_loss(z1, z2, labels, sampler="hscl", temperature=T, beta=2.0, clip=clip)
        hucl = contrastive_loss(z1, z2, sampler="hucl", temperature=T, beta=2.0, tau_plus=0.0, clip=clip)
        assert_same_loss(hscl, hucl, (z1, z2))


def test_hscl_threshold_minus_one_is_scl() -> None:
    z1, z2 = views(9)
    labels = torch.tensor([0, 1, 1, 0, 2, 2, 0, 1])
    threshold = contrastive_loss(z1, z2, labels, sampler="hscl-threshold", temperature=T, threshold=-1.0)
    assert_same_loss(threshold, contrastive_loss(z1, z2, labels, sampler="scl", temperature=T), (z1, z2))


@pytest.mark.parametrize(("tau_plus", "baseline"), [(0.1, "debiased"), (0.0, "ucl")])
def test_ot_with_large_epsilon_is_uniform(tau_plus: float, baseline: str) -> None:
    z1, z2 = views(10)
    loss = contrastive_loss(z1, z2, sampler="ot", temperature=T, tau_plus=tau_plus, ot_epsilon=1e9)
    assert_same_loss(loss, contrastive_loss(z1, z2, sampler=baseline, temperature=T, tau_plus=tau_plus), (z1, z2))


def test_sinkhorn_marginals_and_pot_agreement(sinkhorn_path: str) -> None:
    z1, z2 = views(11, batch=16)
    z = unit_rows(z1, z2).detach()
    cost = (2 - 2 * z @ z.T).clamp(min=0)
    forbidden = torch.eye(32, dtype=torch.bool) | torch.eye(32, dtype=torch.bool).roll(16, dims=1)
    coupling = sinkhorn_log_coupling(cost.masked_fill(forbidden, math.inf), epsilon=0.5, iterations=50).exp()
    torch.testing.assert_close(coupling.sum(1) * 32, torch.ones(32, dtype=torch.float64), rtol=0, atol=1e-4)
    torch.testing.assert_close(coupling.sum(0) * 32, torch.ones(32, dtype=torch.float64), rtol=0, atol=1e-4)
    assert coupling[forbidden].max() == 0
    converged = pot.sinkhorn(
        np.full(32, 1 / 32), np.full(32, 1 / 32), cost.masked_fill(forbidden, 1e4).numpy(), 0.5, numItermax=5000, stopThr=1e-12
    )
    np.testing.assert_allclose(coupling.numpy() * 32, converged * 32, atol=1e-4)


def test_sinkhorn_ends_early_once_settled_as_running_every_round_would(monkeypatch: pytest.MonkeyPatch, host_reads: list[object]) -> None:
    """The device path (log-domain, run on the CPU by ``DEVICE_PATH_ON_CPU``): rounds after the stopping test holds add
    exact zeros: the loop that ends at the first read after it (every ``SETTLED_READ_EVERY`` rounds) gives the coupling of
    all 1000 rounds bit for bit, and reads nothing within 50."""
    from hcl_cli.objectives import ot as ot_module

    monkeypatch.setattr(ot_module, "DEVICE_PATH_ON_CPU", True)
    z1, z2 = views(21, batch=16)
    z = unit_rows(z1, z2).detach().float()
    forbidden = torch.eye(32, dtype=torch.bool) | torch.eye(32, dtype=torch.bool).roll(16, dims=1)
    cost = (2 - 2 * z @ z.T).clamp(min=0).masked_fill(forbidden, math.inf)
    reads = host_reads
    every = ot_module.SETTLED_READ_EVERY
    early = sinkhorn_log_coupling(cost, epsilon=0.5, iterations=1000)
    assert 0 < len(reads) < 1000 // every, "it settled and ended early"
    reads.clear()
    sinkhorn_log_coupling(cost, epsilon=0.5, iterations=every)
    assert reads == [], "no read within the image presets' rounds"
    monkeypatch.setattr(ot_module, "SETTLED_READ_EVERY", 10**9)  # never read: all 1000 rounds run
    assert torch.equal(sinkhorn_log_coupling(cost, epsilon=0.5, iterations=1000), early)


def test_cpu_sinkhorn_ends_at_the_round_its_stopping_test_first_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU path reads its stopping test every round: it runs the rounds up to the first whose change of the row
    potentials is below sqrt(float32 eps), no more, and its coupling is that of a budget of exactly those rounds."""
    from hcl_cli.objectives import ot as ot_module

    z1, z2 = views(21, batch=16)
    z = unit_rows(z1, z2).detach().float()
    forbidden = torch.eye(32, dtype=torch.bool) | torch.eye(32, dtype=torch.bool).roll(16, dims=1)
    cost = (2 - 2 * z @ z.T).clamp(min=0).masked_fill(forbidden, math.inf)
    potentials = [torch.zeros(32, dtype=torch.float64)]
    update_rows = ot_module.StabilisedKernel.update_rows

    def recorded(kernel: ot_module.StabilisedKernel) -> torch.Tensor:
        potentials.append(update_rows(kernel))
        return potentials[-1]

    monkeypatch.setattr(ot_module.StabilisedKernel, "update_rows", recorded)
    early = sinkhorn_log_coupling(cost, epsilon=0.5, iterations=1000)
    changes = [float((after - before).abs().max()) for before, after in zip(potentials, potentials[1:])]
    tolerance = math.sqrt(torch.finfo(torch.float32).eps)
    rounds = next(index for index, change in enumerate(changes, start=1) if change < tolerance)
    assert len(changes) == rounds < 1000
    assert torch.equal(sinkhorn_log_coupling(cost, epsilon=0.5, iterations=rounds), early)
    assert not torch.equal(sinkhorn_log_coupling(cost, epsilon=0.5, iterations=rounds - 1), early)


def test_sinkhorn_with_tiny_epsilon_matches_pot_log_domain(sinkhorn_path: str) -> None:
    """At epsilon = 1e-4 the kernel spans exp(-40000): the log-domain rounds never underflow."""
    z1, z2 = views(20)
    z = unit_rows(z1, z2).detach()
    forbidden = torch.eye(2 * B, dtype=torch.bool) | torch.eye(2 * B, dtype=torch.bool).roll(B, dims=1)
    cost = (2 - 2 * z @ z.T).clamp(min=0).masked_fill(forbidden, math.inf)
    coupling = sinkhorn_log_coupling(cost, epsilon=1e-4, iterations=50).exp()
    marginal = np.full(2 * B, 1 / (2 * B))
    expected = pot.sinkhorn(
        marginal, marginal, cost.masked_fill(forbidden, 1e5).numpy(), 1e-4, method="sinkhorn_log", numItermax=50, stopThr=0.0, warn=False
    )
    np.testing.assert_allclose(coupling.numpy(), expected, atol=1e-10)
    torch.testing.assert_close(coupling.sum(1) * 2 * B, torch.ones(2 * B, dtype=torch.float64))


# --- distributed anchor masks, label edge cases, the negative distribution -----------------------


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_anchor_masks_add_up_to_the_full_loss(sampler: str) -> None:
    z1, z2 = views(12)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
    head_inputs = (z1.detach() * 2, z2.detach() - 1)
    options = {"temperature": T, "tau_plus": 0.1, "threshold": 0.0, "head_inputs": head_inputs}
    full = contrastive_loss(z1, z2, labels, sampler=sampler, **options)
    rank = torch.arange(2 * B) % 3
    parts = [contrastive_loss(z1, z2, labels, sampler=sampler, anchor_mask=rank == r, **options) for r in range(3)]
    assert_same_loss(sum(parts), full, (z1, z2))


@pytest.mark.parametrize("sampler", supervised_samplers())
def test_anchors_without_negatives_are_left_out_and_counted(sampler: str) -> None:
    z1, z2 = views(13)
    loss, stats = contrastive_loss(z1, z2, torch.zeros(B, dtype=torch.int64), sampler=sampler, threshold=0.0, return_stats=True)
    assert stats.anchors_without_negatives.item() == 2 * B and stats.terms.item() == 0
    assert loss.item() == 0
    assert all(torch.isfinite(g).all() for g in torch.autograd.grad(loss, (z1, z2), allow_unused=True) if g is not None)
    _, stats = contrastive_loss(z1, z2, torch.tensor([0, 1, 0, 0, 0, 0, 0, 0]), sampler=sampler, threshold=0.0, return_stats=True)
    assert stats.anchors_without_negatives.item() == 0 and stats.terms.item() == 14 * 13 + 2


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_negative_weights_are_distributions_over_negatives(sampler: str) -> None:
    z1, z2 = views(14)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
    q = negative_weights(z1, z2, labels, sampler=sampler, threshold=0.0, head_inputs=(z1.detach(), z2.detach()))
    torch.testing.assert_close(q.sum(1), torch.ones(2 * B, dtype=torch.float64))
    index = torch.arange(2 * B)
    assert q[index, index].max() == 0 and q[index, (index + B) % (2 * B)].max() == 0
    if sampler in supervised_samplers():
        y = torch.cat([labels, labels])
        assert q[y[:, None] == y[None, :]].max() == 0


def test_negative_weights_of_hucl_are_the_tilted_softmax() -> None:
    z1, z2 = views(15)
    z = unit_rows(z1, z2).detach()
    forbidden = torch.eye(2 * B, dtype=torch.bool) | torch.eye(2 * B, dtype=torch.bool).roll(B, dims=1)
    expected = torch.softmax((3.0 * z @ z.T / T).masked_fill(forbidden, -math.inf), dim=1)
    torch.testing.assert_close(negative_weights(z1, z2, sampler="hucl", temperature=T, beta=3.0), expected)


def test_labels_are_ignored_by_unsupervised_samplers() -> None:
    z1, z2 = views(16)
    with_labels = contrastive_loss(z1, z2, torch.zeros(B, dtype=torch.int64), sampler="hucl", tau_plus=0.0)
    assert with_labels.item() == contrastive_loss(z1, z2, sampler="hucl", tau_plus=0.0).item()


# --- stability: bf16 autocast, t = 0.05, beta = 10, B = 512 ---------------------------------------


@pytest.mark.parametrize(
    "device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))]
)
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_stable_under_bf16_autocast_at_low_temperature(sampler: str, device: str) -> None:
    """Finite loss and gradients within 2% of float64 on the same bf16-rounded inputs."""
    generator = torch.Generator().manual_seed(17)
    batch, dim = 512, 64
    base = torch.randn(batch, dim, generator=generator)
    rounded = [(base + torch.randn(batch, dim, generator=generator)).bfloat16().to(device) for _ in range(2)]
    hidden = tuple(torch.randn(batch, 32, generator=generator).bfloat16().to(device) for _ in range(2))
    labels = torch.randint(0, 10, (batch,), generator=generator).to(device)
    options = {"temperature": 0.05, "beta": 10.0, "tau_plus": 0.1, "threshold": 0.0}
    low = [z.clone().requires_grad_() for z in rounded]
    with torch.autocast(device, dtype=torch.bfloat16):
        loss = contrastive_loss(*low, labels, sampler=sampler, head_inputs=hidden, **options)
    grads = torch.autograd.grad(loss, low)
    high = [z.double().requires_grad_() for z in rounded]
    exact = contrastive_loss(*high, labels, sampler=sampler, head_inputs=tuple(h.double() for h in hidden), **options)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    assert all(torch.isfinite(g).all() for g in grads)
    assert loss.item() == pytest.approx(exact.item(), rel=0.02)
    for grad, exact_grad in zip(grads, torch.autograd.grad(exact, high)):
        assert (grad.double() - exact_grad).norm() <= 0.02 * exact_grad.norm()


# --- schedules ----------------------------------------------------------------------------------


def test_threshold_runs_linearly_from_start_to_end() -> None:
    assert threshold_at(-0.3, 0.1, 0, 5) == -0.3
    assert threshold_at(-0.3, 0.1, 4, 5) == pytest.approx(0.1)
    assert threshold_at(-0.3, 0.1, 2, 5) == pytest.approx(-0.1)
    assert threshold_at(-0.5, 0.0, 0, 1) == -0.5


# --- registry and bad inputs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sampler", "labelled", "options", "message"),
    [
        ("scl", False, {}, "--sampler scl needs labels"),
        ("hscl-threshold", False, {}, "needs labels"),
        ("hucl", True, {"tau_plus": 1.0}, "--tau-plus"),
        ("debiased", True, {"tau_plus": -0.1}, "--tau-plus"),
        ("ot", True, {"ot_epsilon": 0.0}, "--ot-epsilon"),
        ("ot", True, {"ot_epsilon": -1.0}, "--ot-epsilon"),
        ("undimix", True, {"undimix_weights": (1.0, 1.0)}, "--undimix-weights"),
        ("undimix", True, {"undimix_weights": (1.0, -1.0, 1.0)}, "--undimix-weights"),
        ("undimix", True, {"undimix_weights": (0.0, 0.0, 0.0)}, "--undimix-weights"),
        ("undimix", True, {"undimix_weights": "1,1"}, "--undimix-weights"),
        ("simclr", True, {}, "--sampler must be one of"),
        ("hucl", True, {"betta": 2.0}, "unknown sampler option"),
        ("hucl", True, {"anneal": "down"}, "--anneal must be one of none, paper, official"),
        ("hucl", True, {"anneal_steps": 0}, "--anneal-steps"),
        ("hucl", False, {"positives": "labels"}, "--positives labels needs labels"),
        ("ucl", True, {"objective": "infonce"}, "--objective must be one of auto, nce, bcl, jsd"),
        ("undimix", True, {"undimix_uncertainty": "closed-form"}, "--undimix-uncertainty"),
    ],
)
def test_bad_inputs_are_one_line_usage_errors(sampler: str, labelled: bool, options: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message) as error:
        check_sampler_inputs(sampler, labelled=labelled, **options)
    assert "\n" not in str(error.value)


def test_bad_loss_calls_are_usage_errors() -> None:
    z1, z2 = views(18)
    with pytest.raises(UsageError, match="needs labels"):
        contrastive_loss(z1, z2, sampler="hscl")
    with pytest.raises(UsageError, match="head_inputs"):
        contrastive_loss(z1, z2, sampler="undimix")
    with pytest.raises(UsageError, match="--threshold-start must be >= -1"):
        contrastive_loss(z1, z2, torch.arange(B), sampler="hscl-threshold", threshold_start=-2.0)
    with pytest.raises(UsageError, match="B >= 2"):
        contrastive_loss(z1[:1], z2[:1], sampler="ucl")
