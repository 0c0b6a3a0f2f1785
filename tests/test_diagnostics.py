"""The diagnostics against hand computations on tiny batches: H-SCL Assumption 1, the four losses,
same/different-label similarity pairs, anchor choice, and the hardest negatives of a sampler."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from hcl_cli.diagnostics import (
    ASSUMPTION1_KEY,
    LOSS_SAMPLERS,
    assumption1_fraction,
    hardest_negatives,
    hscl_diagnostics,
    label_pair_similarities,
    loss_key,
    pick_anchors,
)
from hcl_cli.objectives import negative_weights


def on_circle(degrees: list[float]) -> Tensor:
    """Unit vectors in the plane at the given angles."""
    radians = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([radians.cos(), radians.sin()], dim=1)


def random_batch(seed: int, batch: int = 6, dim: int = 4, classes: int = 3) -> tuple[Tensor, Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    base = torch.randn(batch, dim, generator=generator, dtype=torch.float64)
    z1 = base + 0.5 * torch.randn(batch, dim, generator=generator, dtype=torch.float64)
    z2 = base + 0.5 * torch.randn(batch, dim, generator=generator, dtype=torch.float64)
    labels = torch.arange(batch) % classes
    return z1, z2, labels


def candidates(i: int, batch: int) -> list[int]:
    """Anchor i's candidates among the 2B views: all but itself and its partner."""
    return [j for j in range(2 * batch) if j not in (i, (i + batch) % (2 * batch))]


def tilted_mean_exp(s: dict[int, float], pool: list[int], beta: float) -> float:
    """The exp(beta s)-tilted mean of e^s over ``pool``."""
    weights = [math.exp(beta * s[j]) for j in pool]
    return sum(w * math.exp(s[j]) for w, j in zip(weights, pool)) / sum(weights)


def assumption1_per_anchor(z1: Tensor, z2: Tensor, labels: Tensor, t: float, beta: float) -> list[bool | None]:
    """H-SCL Assumption 1 one anchor at a time, E_{q_Hcol}[e^s] >= E_{q_H-SCL}[e^s] with q ~ exp(beta s);
    None for an anchor without a same-label or a different-label candidate."""
    z, batch = F.normalize(torch.cat([z1, z2]), dim=1), len(z1)
    y = torch.cat([labels, labels]).tolist()
    flags: list[bool | None] = []
    for i in range(2 * batch):
        s = {j: float(z[i] @ z[j]) / t for j in candidates(i, batch)}
        same = [j for j in s if y[j] == y[i]]
        different = [j for j in s if y[j] != y[i]]
        flags.append(tilted_mean_exp(s, same, beta) >= tilted_mean_exp(s, different, beta) if same and different else None)
    return flags


def reference_assumption1(z1: Tensor, z2: Tensor, labels: Tensor, t: float, beta: float) -> float:
    """The share of the anchors with both kinds of candidate that meet Assumption 1."""
    flags = [flag for flag in assumption1_per_anchor(z1, z2, labels, t, beta) if flag is not None]
    return sum(flags) / len(flags)


def reference_infonce(
    z1: Tensor, z2: Tensor, labels: Tensor, t: float, beta: float, supervised: bool, label_positives: bool = True
) -> float:
    """H-SCL Eq. (3) with M = 2B - 2: mean over positive pairs of log(1 + M e^{-s_ip} E_i), E_i the
    exp(beta s)-tilted mean of e^{s_ij} over the negatives (different-label ones if supervised);
    positives: every other sample of the anchor's label (Sec. V-B), or the partner alone."""
    z, batch = F.normalize(torch.cat([z1, z2]), dim=1), len(z1)
    y = torch.cat([labels, labels]).tolist()
    m = 2 * batch - 2
    terms = []
    for i in range(2 * batch):
        s = [float(z[i] @ z[j]) / t for j in range(2 * batch)]
        negatives = [j for j in candidates(i, batch) if not supervised or y[j] != y[i]]
        weights = [math.exp(beta * s[j]) for j in negatives]
        expected = sum(w * math.exp(s[j]) for w, j in zip(weights, negatives)) / sum(weights)
        positives = [j for j in range(2 * batch) if j != i and y[j] == y[i]] if label_positives else [(i + batch) % (2 * batch)]
        terms += [math.log(1 + m * math.exp(-s[p]) * expected) for p in positives]
    return sum(terms) / len(terms)


def test_assumption1_on_a_batch_drawn_by_hand() -> None:
    # Images a (0 deg), b (10 deg) of label 0 and c (90 deg), d (180 deg) of label 1, both views equal.
    # a: same-label cos(10) beats every different-label cosine (0, -1): met. b: cos(10) vs cos(80), cos(170): met.
    # c: same-label cos(90) = 0 against different-label cos(90) = 0 and cos(80) > 0: the tilted mean of
    # exp(s) over {a, b} exceeds exp(0) for any beta: not met.
    # d: cos(90) = 0 beats cos(180) and cos(170): met. Three of four images, each in both views.
    z = on_circle([0, 10, 90, 180])
    labels = torch.tensor([0, 0, 1, 1])
    for beta in (0.0, 1.0, 5.0):
        assert assumption1_fraction(z, z.clone(), labels, temperature=0.5, beta=beta) == 0.75


def test_assumption1_depends_on_the_tilt_as_the_paper_defines_it() -> None:
    # a, b of label 0 and c, d of label 1 with cos(a, b) = 0.5, cos(a, c) = 0.6, cos(a, d) = -0.9,
    # cos(b, c) = 0.993, cos(b, d) = -0.072, cos(c, d) = -0.191; t = 0.5, so s = 2 cos.
    # beta = 0 (plain means): a: e^1 = 2.72 >= mean(e^1.2, e^-1.8) = 1.74, met; b: e^1 < mean(e^1.99, e^-0.14) = 4.07;
    # c: e^-0.38 < e^1.2; d: e^-0.38 = 0.68 >= mean(e^-1.8, e^-0.14) = 0.52, met. Two of four: 0.5.
    # beta = 10 puts the different-label weight on the nearest one: a: e^1 < e^1.2; d: e^-0.38 < e^-0.14. None: 0.
    a = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    others = on_circle([math.degrees(math.acos(c)) for c in (0.5, 0.6, -0.9)])
    z = torch.cat([a, others])
    labels = torch.tensor([0, 0, 1, 1])
    assert assumption1_fraction(z, z.clone(), labels, temperature=0.5, beta=0.0) == 0.5
    assert assumption1_fraction(z, z.clone(), labels, temperature=0.5, beta=10.0) == 0.0


@pytest.mark.parametrize(("seed", "temperature", "beta"), [(0, 0.5, 1.0), (1, 0.2, 2.0), (2, 1.0, 0.0), (3, 0.1, 5.0)])
def test_assumption1_equals_the_per_anchor_reference(seed: int, temperature: float, beta: float) -> None:
    z1, z2, labels = random_batch(seed)
    assert assumption1_fraction(z1, z2, labels, temperature=temperature, beta=beta) == reference_assumption1(
        z1, z2, labels, temperature, beta
    )


def test_assumption1_is_nan_when_no_anchor_has_both_kinds_of_candidate() -> None:
    z1, z2, _ = random_batch(0)
    assert math.isnan(assumption1_fraction(z1, z2, torch.zeros(6, dtype=torch.int64), temperature=0.5, beta=1.0))


@pytest.mark.parametrize(("seed", "temperature", "beta"), [(0, 0.5, 1.0), (4, 0.3, 2.0)])
def test_hscl_diagnostics_gives_the_four_losses_on_the_same_positives(seed: int, temperature: float, beta: float) -> None:
    z1, z2, labels = random_batch(seed)
    diagnostics = hscl_diagnostics(z1, z2, labels, temperature=temperature, beta=beta)
    assert set(diagnostics) == {ASSUMPTION1_KEY, *map(loss_key, LOSS_SAMPLERS)}
    expected = {
        "ucl": reference_infonce(z1, z2, labels, temperature, 0.0, supervised=False),
        "hucl": reference_infonce(z1, z2, labels, temperature, beta, supervised=False),
        "scl": reference_infonce(z1, z2, labels, temperature, 0.0, supervised=True),
        "hscl": reference_infonce(z1, z2, labels, temperature, beta, supervised=True),
    }
    for sampler, value in expected.items():
        assert diagnostics[loss_key(sampler)] == pytest.approx(value, rel=1e-9), sampler
    assert diagnostics[ASSUMPTION1_KEY] == reference_assumption1(z1, z2, labels, temperature, beta)
    assert all(isinstance(value, float) for value in diagnostics.values())


def test_label_pairs_fall_on_the_right_side() -> None:
    # Label 0 points along +x, label 1 along -x, label 2 (a single image) along +y.
    embeddings = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [-1.0, 0.0], [-5.0, 0.0], [0.0, 1.0]])
    labels = torch.tensor([0, 0, 0, 1, 1, 2])
    same, different = label_pair_similarities(embeddings, labels, pairs=500)
    assert same.shape == different.shape == (500,)
    torch.testing.assert_close(same, torch.ones(500))
    assert set(different.tolist()) == {-1.0, 0.0}, "different-label pairs: +x vs -x, or anything vs +y"


def test_label_pairs_are_seeded_and_never_pair_an_image_with_itself() -> None:
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(30, 5, generator=generator)
    labels = torch.randint(0, 4, (30,), generator=generator)
    same, different = label_pair_similarities(embeddings, labels, pairs=2000, seed=3)
    again, _ = label_pair_similarities(embeddings, labels, pairs=2000, seed=3)
    torch.testing.assert_close(same, again)
    unit = F.normalize(embeddings, dim=1)
    cosine = unit @ unit.T
    same_label = labels[:, None] == labels[None, :]
    allowed_same = set(cosine[same_label & ~torch.eye(30, dtype=torch.bool)].tolist())
    allowed_different = set(cosine[~same_label].tolist())
    assert all(min(abs(value - c) for c in allowed_same) < 1e-6 for value in same.tolist())
    assert all(min(abs(value - c) for c in allowed_different) < 1e-6 for value in different.tolist())
    assert (same < 0.9999).all(), "no image is paired with itself"


def test_anchors_are_the_first_sample_of_each_label() -> None:
    labels = torch.tensor([2, 0, 2, 1, 0])
    assert pick_anchors(labels, 2) == [1, 3]
    assert pick_anchors(labels, 10) == [1, 3, 0]


def test_hard_negatives_of_hucl_are_the_most_similar_samples() -> None:
    z = on_circle([0, 5, 20, 60, 120, 180]).float()
    labels = torch.tensor([0, 1, 0, 1, 0, 1])
    rows = hardest_negatives(z, labels, [0], count=3, sampler="hucl", temperature=0.5, beta=2.0)
    assert rows[0].anchor == 0
    assert rows[0].indices == [1, 2, 3], "hucl tilts towards the anchor: nearest first"
    q = negative_weights(z, z, labels, sampler="hucl", temperature=0.5, beta=2.0)
    expected = [float(q[0, j] + q[0, j + 6]) for j in (1, 2, 3)]
    assert rows[0].weights == pytest.approx(expected)


def test_hard_negatives_of_hscl_never_share_the_anchors_label() -> None:
    z = on_circle([0, 5, 20, 60, 120, 180]).float()
    labels = torch.tensor([0, 1, 0, 1, 0, 1])
    rows = hardest_negatives(z, labels, [0, 1], count=10, sampler="hscl", temperature=0.5, beta=1.0)
    assert rows[0].indices == [1, 3, 5] and rows[1].indices == [0, 2, 4]
    for row in rows:
        assert sum(row.weights) == pytest.approx(1.0), "all of q's mass is on the listed negatives"
        assert row.weights == sorted(row.weights, reverse=True)
