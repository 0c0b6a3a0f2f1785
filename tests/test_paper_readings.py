"""The readings of the papers that the loss makes exact, each against a direct transcription of the
paper's formula (float64, plain loops), or of the official code where that is the source:

1. beta annealing: HCL App. D.1 as written (``anneal="paper"``) and HCL's code (``"official"``);
2. H-SCL Lemma 1: on the same positives, every anchor meeting Assumption 1 has H-UCL >= H-SCL;
3. HCL-OT: kappa 1 by default, and Eq. (5)'s epsilon is half of ``ot_epsilon``;
4. the basic contrastive loss of HCL-OT Eq. (9) for every sampler (``objective="bcl"``);
5. detached negative weights (H-SCL's code): same value, other gradient;
6. UnDiMix: learned weights (and the direction descent moves them), Eq. (2)'s posterior over all
   N rows, the literal Eq. (3) gradient by autograd, Eq. (4)'s diversity over the negative's view,
   convex mixing weights;
7. HCL Fig. 4's oracle: the unsupervised losses with same-label positives (``positives="labels"``).
"""

from __future__ import annotations

import math

import numpy as np
import ot as pot
import pytest
import torch
import torch.nn.functional as F
from test_diagnostics import assumption1_per_anchor
from test_objectives import (
    HIDDEN,
    B,
    T,
    assert_same_loss,
    closed_form_gradients,
    partner,
    pot_coupling,
    reference_diversity,
    reference_hcl,
    reference_hscl,
    reference_undimix,
    undimix_weights,
    unit_rows,
    views,
)
from torch import Tensor, nn

from hcl_cli.diagnostics import assumption1_fraction, hscl_diagnostics
from hcl_cli.errors import UsageError
from hcl_cli.objectives import SAMPLERS, beta_at, check_sampler_inputs, contrastive_loss, negative_weights
from hcl_cli.objectives.core import PairBatch
from hcl_cli.objectives.registry import UNDIMIX_DIVERSITY, supervised_samplers, users_of
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.undimix import (
    SCORES,
    diversity_scores,
    importance,
    initial_attention,
    last_layer_gradients,
    mixing_weights,
    pseudo_label_gradients,
)
from hcl_cli.objectives.undimix_diversity import DIVERSITY_READINGS

LABELS = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
BETA, THRESHOLD = 1.5, 0.0
UNSUPERVISED = tuple(name for name in SAMPLERS if name not in supervised_samplers())


def head(seed: int, bias: bool = True) -> tuple[nn.Linear, Tensor, Tensor, Tensor, Tensor]:
    """A float64 last head layer, its inputs h1, h2 and its outputs z1, z2 (leaves that require gradients)."""
    torch.manual_seed(seed)
    layer = nn.Linear(HIDDEN, 6, bias=bias).double()
    h1, h2 = (torch.randn(B, HIDDEN, dtype=torch.float64) for _ in range(2))
    z1, z2 = (layer(h).detach().requires_grad_() for h in (h1, h2))
    return layer, h1, h2, z1, z2


# --- 1. beta annealing -------------------------------------------------------------------------


def paper_anneal(beta: float, epochs: int, changes: int) -> list[float]:
    """HCL App. D.1: "We initialize beta_1 = beta, then once every e/l epochs we reduce beta_i by
    beta/l ... we switch from beta_i to beta_{i+1} in epoch number i e/l" (epochs 0 .. e - 1)."""
    schedule, current, i = [], beta, 1
    for epoch in range(epochs):
        while epoch >= i * epochs / changes:
            current -= beta / changes
            i += 1
        schedule.append(current)
    return schedule


def official_anneal(beta: float, epochs: int, n_steps: int) -> list[float]:
    """HCL's image/main.py: the beta each epoch trains with."""
    betas = iter(np.linspace(beta, 0, n_steps))
    used = []
    for epoch in range(1, epochs + 1):
        used.append(beta)  # train(model, ..., beta)
        if epoch % (int(epochs / n_steps)) == 0:
            beta = next(betas)
    return used


@pytest.mark.parametrize(("beta", "epochs", "steps"), [(1.0, 400, 9), (8.0, 18, 9), (2.0, 10, 3), (0.5, 7, 4), (1.0, 200, 7), (3.0, 5, 1)])
def test_paper_annealing_is_app_d1(beta: float, epochs: int, steps: int) -> None:
    schedule = [beta_at(beta, epoch, epochs, "paper", steps) for epoch in range(epochs)]
    assert schedule == pytest.approx(paper_anneal(beta, epochs, steps), abs=1e-12)
    assert schedule[0] == beta and schedule[-1] == pytest.approx(beta / steps), "steps of beta/l, never reaching 0"


@pytest.mark.parametrize(("beta", "epochs", "steps"), [(1.0, 400, 9), (8.0, 18, 9), (1.0, 100, 9), (2.0, 10, 3), (1.0, 27, 4)])
def test_official_annealing_is_hcl_code(beta: float, epochs: int, steps: int) -> None:
    schedule = [beta_at(beta, epoch, epochs, "official", steps) for epoch in range(epochs)]
    assert schedule == pytest.approx(official_anneal(beta, epochs, steps), abs=1e-12)


def test_official_annealing_where_the_code_would_fail() -> None:
    # e < l: int(e / l) = 0 is a modulo by zero in the code; read as a period of one epoch.
    assert [beta_at(8.0, epoch, 5, "official", 9) for epoch in range(5)] == [8.0, 8.0, 7.0, 6.0, 5.0]
    # e = 17, l = 9: period 1, so the code's tenth next() raises StopIteration; read as staying at 0.
    assert [beta_at(8.0, epoch, 17, "official", 9) for epoch in range(17)] == [8.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0] + [0.0] * 8


def test_schedules_reach_the_trainer_through_the_registry() -> None:
    options = {"beta": 3.0, "anneal": "paper", "anneal_steps": 3}

    def betas(sampler: str, anneal: str) -> list[float]:
        return [SAMPLERS[sampler].schedule({**options, "anneal": anneal}, epoch, 6)["beta"] for epoch in range(6)]

    assert betas("hucl", "paper") == [3.0, 3.0, 2.0, 2.0, 1.0, 1.0]
    assert betas("hscl", "official") == [3.0, 3.0, 3.0, 3.0, 1.5, 1.5]
    assert betas("hucl", "none") == [3.0] * 6


# --- 2. H-SCL Lemma 1 on the same positives ------------------------------------------------------


def gram_vectors(gram: Tensor) -> Tensor:
    """Unit vectors with the given (positive definite, unit-diagonal) inner products."""
    return torch.linalg.cholesky(gram)


def test_lemma1_ordering_on_a_constructed_batch() -> None:
    # Three labels of two images; both views of an image equal. cos = 0.3 within a label, 0.1 across.
    # Assumption 1 holds at every anchor: E_Hcol[e^s] = e^0.6 > E_H-SCL[e^s] = e^0.2.
    t, beta, within, across = 0.5, 1.0, 0.3, 0.1
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    same = labels[:, None] == labels[None, :]
    gram = torch.full((6, 6), across, dtype=torch.float64).masked_fill(same, within).fill_diagonal_(1.0)
    z = gram_vectors(gram)
    assert assumption1_fraction(z, z.clone(), labels, temperature=t, beta=beta) == 1.0

    # H-SCL Eq. (3), M = 10, by hand: an anchor's positives are its partner (s = 2) and the two views
    # of the other image of its label (s = 0.6); the negatives of H-SCL are the 8 views across labels
    # (s = 0.2), those of H-UCL also the two same-label views, tilted by e^{beta s}.
    m, s_partner, s_within, s_across = 10, 1 / t, within / t, across / t
    e_hscl = math.exp(s_across)
    w_within, w_across = math.exp(beta * s_within), math.exp(beta * s_across)
    e_hucl = (2 * w_within * math.exp(s_within) + 8 * w_across * math.exp(s_across)) / (2 * w_within + 8 * w_across)

    def term(s_positive: float, expectation: float) -> float:
        return math.log(1 + m * math.exp(-s_positive) * expectation)

    hscl = (term(s_partner, e_hscl) + 2 * term(s_within, e_hscl)) / 3
    hucl_labels = (term(s_partner, e_hucl) + 2 * term(s_within, e_hucl)) / 3
    hucl_partner = term(s_partner, e_hucl)
    assert hucl_partner < hscl < hucl_labels, "the partner alone is an easier positive: a false violation"

    diagnostics = hscl_diagnostics(z, z.clone(), labels, temperature=t, beta=beta)
    assert diagnostics["loss_hscl"] == pytest.approx(hscl, rel=1e-12)
    assert diagnostics["loss_hucl"] == pytest.approx(hucl_labels, rel=1e-12)
    assert diagnostics["loss_hucl"] >= diagnostics["loss_hscl"]
    partner_only = contrastive_loss(z, z.clone(), labels, sampler="hucl", temperature=t, beta=beta, tau_plus=0.0)
    assert partner_only.item() == pytest.approx(hucl_partner, rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_lemma1_holds_at_every_anchor_meeting_assumption1(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    batch, t, beta = 9, 0.5, 2.0
    labels = torch.arange(batch) % 3
    centres = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    z1, z2 = (centres[labels] + 0.8 * torch.randn(batch, 5, generator=generator, dtype=torch.float64) for _ in range(2))
    flags = assumption1_per_anchor(z1, z2, labels, t, beta)
    options = {"temperature": t, "beta": beta, "tau_plus": 0.0, "positives": "labels"}
    for anchor, meets in enumerate(flags):
        if meets:
            mask = torch.arange(2 * batch) == anchor
            hucl = contrastive_loss(z1, z2, labels, sampler="hucl", anchor_mask=mask, **options)
            hscl = contrastive_loss(z1, z2, labels, sampler="hscl", anchor_mask=mask, **options)
            assert hucl.item() >= hscl.item(), anchor
    assert any(flags), "the batch has anchors meeting Assumption 1"
    if all(flags):
        diagnostics = hscl_diagnostics(z1, z2, labels, temperature=t, beta=beta)
        assert diagnostics["loss_hucl"] >= diagnostics["loss_hscl"]


# --- 3. HCL-OT: kappa and epsilon ---------------------------------------------------------------


def test_ot_kappa_defaults_to_the_official_one() -> None:
    z1, z2 = views(30)
    loss = contrastive_loss(z1, z2, sampler="ot", temperature=T, tau_plus=0.0, ot_cost="exp", ot_epsilon=0.3)
    explicit = contrastive_loss(z1, z2, sampler="ot", temperature=T, tau_plus=0.0, ot_cost="exp", ot_epsilon=0.3, ot_kappa=1.0)
    assert loss.item() == explicit.item()
    q = negative_weights(z1, z2, sampler="ot", ot_cost="exp", ot_epsilon=0.3, ot_iterations=2000)
    np.testing.assert_allclose(q.numpy(), pot_coupling(z1, z2, 0.3, 2000, "exp", 1.0) * 2 * B, atol=1e-6)


@pytest.mark.parametrize("epsilon", [0.3, 1.0])
def test_ot_epsilon_is_twice_the_epsilon_of_eq5(epsilon: float) -> None:
    """Eq. (5): c = 0.5 ||f(x) - f(x-)||^2 at eps / 2 gives the coupling of ours at eps."""
    z1, z2 = views(31)
    z = unit_rows(z1, z2).detach().numpy()
    cost = 0.5 * ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    for i in range(2 * B):
        cost[i, i] = cost[i, partner(i, B)] = 1e4
    marginal = np.full(2 * B, 1 / (2 * B))
    paper = pot.sinkhorn(marginal, marginal, cost, epsilon / 2, numItermax=5000, stopThr=1e-13)
    q = negative_weights(z1, z2, sampler="ot", ot_epsilon=epsilon, ot_iterations=5000)
    np.testing.assert_allclose(q.numpy(), paper * 2 * B, atol=1e-6)


# --- 4. the basic contrastive loss for every sampler --------------------------------------------


def reference_negative_distribution(
    sampler: str, z1: Tensor, z2: Tensor, labels: Tensor, hidden: tuple[Tensor, Tensor], layer: nn.Linear
) -> list[Tensor]:
    """Per anchor row, q(.|i) over the 2B rows, as each paper defines it (differentiable where the sampler is)."""
    z, batch = unit_rows(z1, z2), len(z1)
    y = torch.cat([labels, labels]).tolist()
    coupling = torch.from_numpy(pot_coupling(z1, z2, 0.5, 50)) * 2 * batch if sampler == "ot" else None
    mixed = undimix_weights(z1, z2, closed_form_gradients(z1, z2, layer, *hidden), (1.0, 1.0, 1.0)) if sampler == "undimix" else None
    rows = []
    for i in range(2 * batch):
        negatives = [j for j in range(2 * batch) if j not in (i, partner(i, batch))]
        if sampler in supervised_samplers():
            negatives = [j for j in negatives if y[j] != y[i]]
        if sampler == "hscl-threshold":
            negatives = [j for j in negatives if z[i] @ z[j] >= THRESHOLD] or negatives
        similarity = z[negatives] @ z[i] / T
        if sampler in ("hucl", "hscl"):
            weights = torch.exp(BETA * similarity)
        elif sampler == "ot":
            weights = coupling[i, negatives]
        elif sampler == "undimix":
            weights = mixed[i]
        else:
            weights = torch.ones_like(similarity)
        rows.append(torch.zeros(2 * batch, dtype=z.dtype).index_put((torch.tensor(negatives),), weights / weights.sum()))
    return rows


def reference_bcl(q: list[Tensor], z1: Tensor, z2: Tensor, labels: Tensor, label_positives: bool) -> Tensor:
    """HCL-OT Eq. (9), L_BCL = E[f(x).f(x-) - f(x).f(x+)], over every positive pair (i, p)."""
    z, batch = unit_rows(z1, z2), len(z1)
    y = torch.cat([labels, labels]).tolist()
    terms = []
    for i in range(2 * batch):
        positives = [p for p in range(2 * batch) if p != i and y[p] == y[i]] if label_positives else [partner(i, batch)]
        terms += [(q[i] * (z @ z[i])).sum() - z[i] @ z[p] for p in positives]
    return torch.stack(terms).mean()


@pytest.mark.parametrize(("sampler", "positives"), [(name, "partner") for name in UNSUPERVISED] + [(name, "labels") for name in SAMPLERS])
def test_bcl_is_eq9_for_every_sampler(sampler: str, positives: str) -> None:
    layer, h1, h2, z1, z2 = head(32)
    options = {"temperature": T, "beta": BETA, "tau_plus": 0.1, "threshold": THRESHOLD, "ot_epsilon": 0.5, "ot_iterations": 50}
    options["undimix_diversity"] = "both-views"  # the reference's reading of Eq. (4)
    loss = contrastive_loss(z1, z2, LABELS, sampler=sampler, objective="bcl", positives=positives, head_inputs=(h1, h2), **options)
    q = reference_negative_distribution(sampler, z1, z2, LABELS, (h1, h2), layer)
    assert_same_loss(loss, reference_bcl(q, z1, z2, LABELS, positives == "labels" or sampler in supervised_samplers()), (z1, z2))


# --- 5. detached negative weights ---------------------------------------------------------------


@pytest.mark.parametrize("sampler", ["hucl", "hscl"])
def test_detached_weights_keep_the_value_and_change_the_gradient(sampler: str) -> None:
    z1, z2 = views(33)
    options = {"temperature": T, "beta": 2.0, "tau_plus": 0.1}
    attached = contrastive_loss(z1, z2, LABELS, sampler=sampler, **options)
    detached = contrastive_loss(z1, z2, LABELS, sampler=sampler, detach_weights=True, **options)
    if sampler == "hucl":
        reference = reference_hcl(z1, z2, T, 2.0, 0.1, detach=True)
    else:
        reference = reference_hscl(z1, z2, LABELS, T, 2.0, detach=True)
    assert_same_loss(detached, reference, (z1, z2))
    assert detached.item() == pytest.approx(attached.item(), abs=1e-12)
    with_weights = torch.cat([g.flatten() for g in torch.autograd.grad(attached, (z1, z2))])
    without = torch.cat([g.flatten() for g in torch.autograd.grad(detached, (z1, z2))])
    assert (with_weights - without).norm() > 1e-3 * with_weights.norm()


# --- 6. UnDiMix ---------------------------------------------------------------------------------


def test_undimix_learned_weights_are_a_softmax_trained_by_the_loss() -> None:
    layer, h1, h2, z1, z2 = head(34)
    attention = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)
    loss = contrastive_loss(
        z1,
        z2,
        sampler="undimix",
        temperature=T,
        head_inputs=(h1, h2),
        undimix_learned=True,
        undimix_attention=attention,
        undimix_diversity="both-views",
    )
    reference = reference_undimix(z1, z2, layer, h1, h2, T, list(torch.softmax(attention, dim=0)))
    assert_same_loss(loss, reference, (z1, z2, attention))
    assert torch.autograd.grad(loss, attention)[0].abs().min() > 0


def test_undimix_learned_weights_leave_out_the_parts_of_weight_zero() -> None:
    layer, h1, h2, z1, z2 = head(35)
    attention = torch.tensor([0.3, 4.0, -0.5], dtype=torch.float64, requires_grad=True)
    options = {
        "temperature": T,
        "head_inputs": (h1, h2),
        "undimix_weights": "1,0,2",
        "undimix_learned": True,
        "undimix_attention": attention,
        "undimix_diversity": "both-views",
    }
    loss = contrastive_loss(z1, z2, sampler="undimix", **options)
    kept = torch.softmax(attention[[0, 2]], dim=0)
    reference = reference_undimix(z1, z2, layer, h1, h2, T, [kept[0], 0.0, kept[1]])
    assert_same_loss(loss, reference, (z1, z2, attention))
    assert torch.autograd.grad(loss, attention)[0][1] == 0


def test_undimix_learned_weights_start_at_the_fixed_ones() -> None:
    _, h1, h2, z1, z2 = head(36)
    start = initial_attention("1,0,3")
    torch.testing.assert_close(torch.softmax(start[[0, 2]], dim=0), torch.tensor([0.25, 0.75]))
    fixed = contrastive_loss(z1, z2, sampler="undimix", head_inputs=(h1, h2), undimix_weights="1,0,3")
    learned = contrastive_loss(
        z1, z2, sampler="undimix", head_inputs=(h1, h2), undimix_weights="1,0,3", undimix_learned=True, undimix_attention=start
    )
    assert learned.item() == pytest.approx(fixed.item(), abs=1e-7)
    with pytest.raises(UsageError, match="undimix_attention"):
        contrastive_loss(z1, z2, sampler="undimix", head_inputs=(h1, h2), undimix_learned=True)


def test_undimix_learned_weights_descend_from_similarity_toward_diversity() -> None:
    """Descent on the loss (the trainer's optimizer) moves lambda toward easier negatives: on random batches the
    gradient with respect to the logits is positive for similarity and negative for diversity (summing to 0,
    a softmax), through hcl's loss and Algorithm 1's transcription alike, and a descent step lowers E_q[s_ij]."""
    for seed, uncertainty in ((50, "badge"), (51, "badge"), (52, "literal"), (53, "literal")):
        layer, h1, h2, z1, z2 = head(seed)
        attention = initial_attention("1,1,1").to(torch.float64).requires_grad_()
        options = {"temperature": T, "head_inputs": (h1, h2), "head_layer": layer, "undimix_uncertainty": uncertainty}
        learned = {**options, "undimix_learned": True, "undimix_attention": attention}
        gradient = torch.autograd.grad(contrastive_loss(z1, z2, sampler="undimix", **learned), attention)[0]
        assert gradient[0] > 0 > gradient[2], f"descent shrinks similarity and grows diversity (gradient {gradient.tolist()})"
        assert gradient.sum().item() == pytest.approx(0.0, abs=1e-12)
        gradients = list(torch.stack(literal_gradients(layer, h1, h2))) if uncertainty == "literal" else None
        mix = list(torch.softmax(attention, dim=0))
        transcribed = torch.autograd.grad(reference_undimix(z1, z2, layer, h1, h2, T, mix, gradients=gradients), attention)[0]
        assert transcribed[0] > 0 > transcribed[2], f"Algorithm 1 with softmax weights: {transcribed.tolist()}"
        cosine = unit_rows(z1, z2).detach() @ unit_rows(z1, z2).detach().T
        hardness = [
            (negative_weights(z1.detach(), z2.detach(), sampler="undimix", **{**learned, "undimix_attention": logits}) * cosine).sum()
            for logits in (attention.detach(), attention.detach() - 0.5 * gradient / gradient.norm())
        ]
        assert hardness[1] < hardness[0], "a descent step puts q on less similar negatives"


def eq2_posterior(scores: Tensor, match: int, printed: bool) -> Tensor:
    """UnDiMix Eq. (2) for one row x~_j against the N rows x_k of the other view (``scores`` = s(x_k, x~_j), ``match`` = j):
    exp(s(x_k, x~_j)) / sum_i' exp(s(x_i', x~_j)), the sum over every i' (hcl's reading) or, as printed, over i' != j."""
    kept = [k for k in range(len(scores)) if not (printed and k == match)]
    return scores.exp() / scores[kept].exp().sum()


def test_undimix_eq2_posterior_is_a_softmax_over_every_row_of_the_other_view_the_match_included() -> None:
    """hcl's pseudo-labelling gradient (BADGE's delta_j) is the cross-entropy's under Eq. (2) with the match in the
    denominator; as printed (i' != j) the "posterior" sums to more than 1 and its gradient is another."""
    z1, z2 = views(39)
    raw = torch.cat([z1, z2]).detach()
    delta = pseudo_label_gradients(F.normalize(raw, dim=1), raw)
    for printed in (False, True):
        expected, totals = [], []
        for j in range(2 * B):
            row = raw[j].clone().requires_grad_()
            others = F.normalize(raw[B:] if j < B else raw[:B], dim=1)
            posterior = eq2_posterior(others @ F.normalize(row, dim=0), j % B, printed)
            totals.append(posterior.sum().item())
            expected.append(torch.autograd.grad(-posterior[posterior.argmax()].log(), row)[0])
        if printed:
            assert min(totals) > 1.0, "with i' != j in the denominator Eq. (2) is no distribution over the k of its argmax"
            assert not torch.allclose(delta, torch.stack(expected), atol=1e-6)
        else:
            assert totals == pytest.approx([1.0] * 2 * B, abs=1e-12)
            torch.testing.assert_close(delta, torch.stack(expected), rtol=0, atol=1e-12)


def literal_gradients(layer: nn.Linear, h1: Tensor, h2: Tensor) -> list[Tensor]:
    """UnDiMix Eq. (3) by hand, one row at a time: d l_CE(p(y_j | x_j, X_N), y^_j) / d theta_last for
    every parameter of the last layer, through every embedding (Eq. 2's posterior over the other view)."""
    hidden, batch = torch.cat([h1, h2]), len(h1)
    gradients = []
    for j in range(2 * batch):
        z = F.normalize(layer(hidden), dim=1)
        others = z[batch:] if j < batch else z[:batch]
        logits = others @ z[j]
        cross_entropy = -torch.log_softmax(logits, dim=0)[logits.argmax()]
        parameters = [p for p in (layer.weight, layer.bias) if p is not None]
        gradients.append(torch.cat([g.flatten() for g in torch.autograd.grad(cross_entropy, parameters)]))
    return gradients


@pytest.mark.parametrize("bias", [True, False])
def test_undimix_literal_uncertainty_is_eq3_as_written(bias: bool) -> None:
    layer, h1, h2, z1, z2 = head(37, bias)
    expected = torch.stack(literal_gradients(layer, h1, h2))
    batch = PairBatch(z1.detach(), z2.detach(), None, T)
    torch.testing.assert_close(last_layer_gradients(batch, torch.cat([h1, h2]), layer), expected)
    options = {"temperature": T, "head_inputs": (h1, h2), "undimix_diversity": "both-views"}
    loss = contrastive_loss(z1, z2, sampler="undimix", head_layer=layer, undimix_uncertainty="literal", **options)
    reference = reference_undimix(z1, z2, layer, h1, h2, T, (1.0, 1.0, 1.0), gradients=list(expected))
    assert_same_loss(loss, reference, (z1, z2))
    closed = contrastive_loss(z1, z2, sampler="undimix", **options)
    assert closed.item() != pytest.approx(loss.item(), abs=1e-9), "the two readings of Eq. (3) differ"
    with pytest.raises(UsageError, match="head_layer"):
        contrastive_loss(z1, z2, sampler="undimix", head_inputs=(h1, h2), undimix_uncertainty="literal")


def eq4_diversity(z: Tensor, i: int, j: int, view: int) -> Tensor:
    """UnDiMix Eq. (4), r(x~_j, x_i) = 1/(N - 2) sum_{j' not in {i, j}} (1 - s(x~_j, x~_j')), its N - 2 = B - 2
    terms j' the rows of ``view`` (0: the first B rows, 1: the last B) whose images are neither i's nor j's."""
    batch = len(z) // 2
    others = [k for k in range(view * batch, (view + 1) * batch) if k % batch not in (i % batch, j % batch)]
    assert len(others) == batch - 2
    return sum(1 - z[j] @ z[k] for k in others) / (batch - 2)


def test_undimix_diversity_is_eq4_over_the_negatives_view_by_default_and_names_the_other_readings() -> None:
    """As written, x~_j' is in the negative's view (the tilde: Eq. (1)'s negatives x~_j): j' runs over the view of j,
    whatever the anchor's; ``anchor-view`` and ``both-views`` are the mean over the anchor's view and over both."""
    z1, z2 = views(38)
    z = unit_rows(z1, z2).detach()
    batch = PairBatch(z1, z2, None, T)
    resolved = SamplerOptions.resolve(SAMPLERS["undimix"], {})
    assert resolved.undimix_diversity == "negative-view" == UNDIMIX_DIVERSITY.default
    assert set(DIVERSITY_READINGS) == set(UNDIMIX_DIVERSITY.choices), "every choice is computed, and named for what it computes"
    default = diversity_scores(batch, resolved)
    anchor, both = (diversity_scores(batch, resolved.replaced({"undimix_diversity": name}, {})) for name in ("anchor-view", "both-views"))
    gaps = []
    for i in range(2 * B):
        for j in range(2 * B):
            if j not in (i, partner(i, B)):
                assert default[i, j].item() == pytest.approx(eq4_diversity(z, i, j, view=j // B).item(), abs=1e-12)
                assert anchor[i, j].item() == pytest.approx(eq4_diversity(z, i, j, view=i // B).item(), abs=1e-12)
                assert both[i, j].item() == pytest.approx(reference_diversity(z, i, j).item(), abs=1e-12)
                gaps.append(abs(default[i, j] - anchor[i, j]).item())
    assert max(gaps) > 1e-3, "the negative's view and the anchor's differ"


def test_undimix_importance_is_a_convex_combination_in_zero_one_where_the_raw_sum_is_negative() -> None:
    layer, h1, h2, z1, z2 = head(41)
    batch = PairBatch(z1.detach(), z2.detach(), None, T)
    negatives = batch.masks.negatives
    for given in (
        {},
        {"undimix_weights": "2,1,5"},
        {"undimix_learned": True, "undimix_attention": torch.tensor([3.0, -1.0, 0.5], dtype=torch.float64)},
    ):
        options = SamplerOptions.resolve(SAMPLERS["undimix"], {"head_inputs": (h1, h2), "head_layer": layer, **given})
        mix = mixing_weights(batch, options)
        assert mix.min() >= 0 and mix.sum().item() == pytest.approx(1.0, abs=1e-12), "lambda is a convex combination"
        raw = sum(score(batch, options) for score in SCORES)
        assert (raw[negatives] < 0).any(), "raw s + u + r is negative for some pairs"
        weights = importance(batch, options)
        assert weights[negatives].min() >= 0 and weights[negatives].max() <= 1 and (weights[~negatives] == 0).all()
    fixed = mixing_weights(batch, SamplerOptions.resolve(SAMPLERS["undimix"], {"undimix_weights": "2,1,5"}))
    torch.testing.assert_close(fixed, torch.tensor([0.25, 0.125, 0.625], dtype=torch.float64))


# --- 7. HCL Fig. 4's label-positive oracle ------------------------------------------------------


@pytest.mark.parametrize(
    ("sampler", "beta", "tau_plus"), [("ucl", 0.0, 0.0), ("debiased", 0.0, 0.1), ("hucl", 1.0, 0.1), ("hucl", 2.0, 0.0)]
)
def test_label_positive_oracle_is_hcl_with_true_positives(sampler: str, beta: float, tau_plus: float) -> None:
    z1, z2 = views(39)
    loss = contrastive_loss(z1, z2, LABELS, sampler=sampler, temperature=T, beta=beta, tau_plus=tau_plus, positives="labels")
    assert_same_loss(loss, reference_hcl(z1, z2, T, beta, tau_plus, labels=LABELS), (z1, z2))
    distinct = contrastive_loss(z1, z2, torch.arange(B), sampler=sampler, temperature=T, beta=beta, tau_plus=tau_plus, positives="labels")
    assert_same_loss(distinct, reference_hcl(z1, z2, T, beta, tau_plus), (z1, z2))


def test_label_positives_are_declared_for_the_unsupervised_samplers_and_need_labels() -> None:
    assert users_of("positives") == UNSUPERVISED
    assert users_of("objective") == tuple(SAMPLERS)
    assert users_of("detach_weights") == ("hucl", "hscl")
    assert SAMPLERS["hucl"].label_positives({"positives": "labels"}) and not SAMPLERS["hucl"].label_positives({})
    assert SAMPLERS["scl"].label_positives({"positives": "partner"})
    z1, z2 = views(40)
    with pytest.raises(UsageError, match="--positives labels needs labels"):
        contrastive_loss(z1, z2, sampler="hucl", positives="labels")
    with pytest.raises(UsageError, match="needs labels"):
        check_sampler_inputs("ucl", labelled=False, positives="labels")
    check_sampler_inputs("ucl", labelled=False)
