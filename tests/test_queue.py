"""The momentum queue (MoCo-v2, HCL App. C.1): every sampler over the batch's keys and a queue of earlier keys.

With an empty queue and the queries as their own keys, every sampler gives today's in-batch values
bit for bit. With a queue, each sampler equals a direct transcription of its paper's formula over
the 2B + K candidates (float64, one anchor at a time, gradients included). The key encoder is the
moving average of the model, the queue keeps the last K keys with both views of an image side by
side, the trainer feeds both to the loss, and the encoder artifact stays the query encoder alone.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import ot as pot
import pytest
import torch
import torch.nn.functional as F
from test_objectives import HIDDEN, B, D, T, assert_same_loss, closed_form_gradients, partner
from torch import Tensor, nn

import hcl_cli.stages.pretrain as pretrain
from hcl_cli.artifacts import load_artifact
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.errors import UsageError
from hcl_cli.image import step
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import load_encoder
from hcl_cli.image.momentum import MomentumQueue
from hcl_cli.image.networks import build_model
from hcl_cli.image.prepared import load_split
from hcl_cli.image.step import build_training
from hcl_cli.objectives import SAMPLERS, contrastive_loss, negative_weights
from hcl_cli.objectives.candidates import MomentumKeys
from hcl_cli.objectives.registry import supervised_samplers
from hcl_cli.objectives.undimix import key_features

QUEUED_IMAGES = 5
K = 2 * QUEUED_IMAGES
LABELS = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
QUEUE_LABELS = torch.tensor([1, 4, 0, 2, 3]).repeat_interleave(2)
OPTIONS = {"temperature": T, "beta": 1.5, "tau_plus": 0.1, "threshold": 0.0, "ot_epsilon": 0.5, "ot_iterations": 50}

pytestmark = pytest.mark.usefixtures("one_thread")


def views_side_by_side(rows: Tensor) -> Tensor:
    """``[x1; x2]`` of N images as a queue holds them: ``x1[0], x2[0], x1[1], x2[1], ...``."""
    first, second = rows.chunk(2)
    return torch.stack([first, second], dim=1).flatten(0, 1)


class QueuedBatch:
    """A batch of two views, its keys, and a queue of the keys of an earlier batch, in float64.

    The query projections are ``layer(h)``, the keys ``key_layer(h)`` of the same head inputs (a
    key encoder that has drifted from the model), the queue is the keys of an earlier batch of
    ``QUEUED_IMAGES`` images with both views side by side, as :class:`MomentumQueue` keeps them.
    """

    def __init__(self, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        self.layer, self.key_layer = nn.Linear(HIDDEN, D).double(), nn.Linear(HIDDEN, D).double()
        self.h1, self.h2 = (torch.randn(B, HIDDEN, generator=generator, dtype=torch.float64) for _ in range(2))
        self.old_h1, self.old_h2 = (torch.randn(QUEUED_IMAGES, HIDDEN, generator=generator, dtype=torch.float64) for _ in range(2))
        with torch.no_grad():
            self.k1, self.k2 = self.key_layer(self.h1), self.key_layer(self.h2)
            self.old_k1, self.old_k2 = self.key_layer(self.old_h1), self.key_layer(self.old_h2)
        self.z1, self.z2 = (self.layer(h).detach().requires_grad_() for h in (self.h1, self.h2))
        old_keys = torch.cat([self.old_k1, self.old_k2])
        self.queue = views_side_by_side(old_keys)
        self.queue_features = views_side_by_side(key_features(old_keys, torch.cat([self.old_h1, self.old_h2])))

    def keys(self, **changes: Tensor | None) -> MomentumKeys:
        values = {
            "queue": self.queue,
            "queue_labels": QUEUE_LABELS,
            "head_inputs": (self.h1, self.h2),
            "queue_features": self.queue_features,
        }
        return MomentumKeys(self.k1, self.k2, **(values | changes))

    def loss(self, sampler: str, **options: object) -> Tensor:
        return contrastive_loss(
            self.z1, self.z2, LABELS, sampler=sampler, momentum_keys=self.keys(), head_inputs=(self.h1, self.h2), **(OPTIONS | options)
        )

    @property
    def anchors(self) -> Tensor:
        return F.normalize(torch.cat([self.z1, self.z2]), dim=1)

    @property
    def candidates(self) -> Tensor:
        return F.normalize(torch.cat([self.k1, self.k2, self.queue]), dim=1)


# --- direct transcriptions over the 2B + K candidates ---------------------------------------------


def candidate_labels() -> list[int]:
    return torch.cat([LABELS, LABELS, QUEUE_LABELS]).tolist()


def candidate_images() -> list[int]:
    """The image of each candidate: the batch's keys show images 0 .. B - 1 twice, queue rows 2p and 2p + 1 image B + p."""
    return [j % B for j in range(2 * B)] + [B + p // 2 for p in range(K)]


def undimix_gradients(batch: QueuedBatch) -> tuple[list[Tensor], list[Tensor]]:
    """UnDiMix Eq. (3) by autograd (BADGE's reading), one row at a time: the anchors' gradients under
    the model's layer, the candidates' under the key encoder's, each among the rows of its own batch."""
    anchors = closed_form_gradients(batch.z1, batch.z2, batch.layer, batch.h1, batch.h2)
    keys = closed_form_gradients(batch.k1, batch.k2, batch.key_layer, batch.h1, batch.h2)
    old = closed_form_gradients(batch.old_k1, batch.old_k2, batch.key_layer, batch.old_h1, batch.old_h2)
    queued = [old[index] for p in range(QUEUED_IMAGES) for index in (p, QUEUED_IMAGES + p)]
    return anchors, keys + queued


def undimix_rows(batch: QueuedBatch, mix: tuple[float, float, float]) -> list[Tensor]:
    """Per anchor, Algorithm 1's weights of its negatives among the candidates: similarity, uncertainty
    and Eq. (4)'s diversity (over the candidates of the negative's view of images other than the anchor's and
    the negative's), each min-max normalised over the negatives, mixed, scaled to mean 1."""
    z, c, images = batch.anchors.detach(), batch.candidates.detach(), candidate_images()
    views = [j // B for j in range(2 * B)] + [p % 2 for p in range(K)]
    anchor_gradients, candidate_gradients = undimix_gradients(batch)
    rows = []
    for i in range(2 * B):
        negatives = [j for j in range(len(c)) if j not in (i, partner(i, B))]
        similarity = torch.stack([z[i] @ c[j] for j in negatives])
        uncertainty = torch.stack([anchor_gradients[i] @ candidate_gradients[j] for j in negatives])
        diversity = []
        for j in negatives:
            others = [k for k in range(len(c)) if views[k] == views[j] and images[k] not in (i % B, images[j])]
            diversity.append(sum(1 - c[j] @ c[k] for k in others) / len(others))
        parts = [w * (s - s.min()) / (s.max() - s.min()) for w, s in zip(mix, (similarity, uncertainty, torch.stack(diversity))) if w > 0]
        score = sum(parts)
        rows.append(score / score.mean())
    return rows


def pot_rectangular_coupling(batch: QueuedBatch, epsilon: float, iterations: int, cost: str = "sq", kappa: float = 1.0) -> np.ndarray:
    """POT's Sinkhorn coupling of the 2B anchors (marginal 1/2B) with the 2B + K candidates (marginal 1/(2B + K))."""
    z, c = batch.anchors.detach().numpy(), batch.candidates.detach().numpy()
    squared = ((z[:, None, :] - c[None, :, :]) ** 2).sum(-1)
    matrix = squared if cost == "sq" else np.exp(squared - kappa)
    for i in range(2 * B):
        matrix[i, i] = matrix[i, partner(i, B)] = 1e4
    rows, columns = np.full(len(z), 1 / len(z)), np.full(len(c), 1 / len(c))
    return pot.sinkhorn(rows, columns, matrix, epsilon, numItermax=iterations, stopThr=0.0, warn=False)


def reference_weights(sampler: str, batch: QueuedBatch, options: dict[str, object]) -> list[tuple[list[int], Tensor]]:
    """Per anchor, its negatives among the candidates and their (unnormalised) weights, as each paper defines them."""
    z, c, y = batch.anchors, batch.candidates, candidate_labels()
    t, beta = options["temperature"], options["beta"]
    coupling = (
        torch.from_numpy(pot_rectangular_coupling(batch, options["ot_epsilon"], options["ot_iterations"], options.get("ot_cost", "sq")))
        if sampler == "ot"
        else None
    )
    mixed = undimix_rows(batch, options.get("undimix_weights", (1.0, 1.0, 1.0))) if sampler == "undimix" else None
    every = [(i, j) for i in range(2 * B) for j in range(len(c)) if j not in (i, partner(i, B))]
    clip_scale = 2.0 / max(abs(z[i] @ c[j] / t) for i, j in every) if options.get("clip") else 1.0
    rows = []
    for i in range(2 * B):
        negatives = [j for j in range(len(c)) if j not in (i, partner(i, B))]
        if sampler in supervised_samplers():
            negatives = [j for j in negatives if y[j] != y[i]]
        if sampler == "hscl-threshold":
            negatives = [j for j in negatives if z[i] @ c[j] >= options["threshold"]] or negatives
        similarity = c[negatives] @ z[i] / t
        if sampler in ("hucl", "hscl"):
            weights = torch.exp(beta * similarity * clip_scale)
        elif sampler == "ot":
            weights = coupling[i, negatives]
        elif sampler == "undimix":
            weights = mixed[i]
        else:
            weights = torch.ones_like(similarity)
        rows.append((negatives, weights))
    return rows


def reference_loss(sampler: str, batch: QueuedBatch, label_positives: bool, **changes: object) -> Tensor:
    """The sampler's loss over the candidates, anchor by anchor, with N = M = 2B - 2 + K:
    ``-log(pos / (pos + Ng))``, ``Ng = N E_q[exp(s)]`` (HCL's, H-SCL Eq. 3's ``log(1 + M e^-s_ip E)``,
    UnDiMix's NT-Xent with ``sum_j w_ij exp(s_ij)``), debiased and clamped as HCL Fig. 13 for
    debiased, hucl and ot; or HCL-OT Eq. (9)'s ``E_q[z.c] - z.c_p``."""
    options = OPTIONS | changes
    z, c, y = batch.anchors, batch.candidates, candidate_labels()
    t, tau_plus, n = options["temperature"], options["tau_plus"], len(c) - 2
    debiased = sampler in ("debiased", "hucl", "ot")
    terms = []
    for i, (negatives, weights) in enumerate(reference_weights(sampler, batch, options)):
        q = weights / weights.sum()
        positives = [p for p in range(len(c)) if p != i and y[p] == y[i]] if label_positives else [partner(i, B)]
        for p in positives:
            if options.get("objective") == "bcl":
                terms.append((q * (c[negatives] @ z[i])).sum() - z[i] @ c[p])
                continue
            pos = torch.exp(z[i] @ c[p] / t)
            ng = n * (q * torch.exp(c[negatives] @ z[i] / t)).sum()
            if debiased:
                ng = torch.clamp((ng - tau_plus * n * pos) / (1 - tau_plus), min=n * math.exp(-1 / t))
            terms.append(-torch.log(pos / (pos + ng)))
    return torch.stack(terms).mean()


# --- K = 0: today's values --------------------------------------------------------------------------


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_an_empty_queue_with_the_queries_as_keys_gives_the_in_batch_values_bit_for_bit(sampler: str) -> None:
    """Bit for bit, but for undimix: in-batch, its uncertainty Gram is multiplied out as a symmetric matrix and its
    pseudo-labels read the batch's cosines (``undimix.symmetric_gram_product``), which rounds otherwise than the
    candidates' general products of the queue path: equal to float64 rounding."""
    same: Callable[[torch.Tensor, torch.Tensor], bool] = (
        torch.equal if sampler != "undimix" else functools.partial(torch.allclose, rtol=1e-14, atol=1e-16)
    )
    batch = QueuedBatch(0)
    empty = MomentumKeys(
        batch.z1.detach(),
        batch.z2.detach(),
        torch.empty(0, D, dtype=torch.float64),
        torch.empty(0, dtype=torch.int64),
        head_inputs=(batch.h1, batch.h2),
        queue_features=torch.empty(0, D + HIDDEN, dtype=torch.float64),
    )
    for options in ({}, {"objective": "bcl"}, {"positives": "labels"}, {"clip": True}):
        arguments = {"sampler": sampler, "head_inputs": (batch.h1, batch.h2), **OPTIONS, **options}
        in_batch = contrastive_loss(batch.z1, batch.z2, LABELS, **arguments)
        assert same(contrastive_loss(batch.z1, batch.z2, LABELS, momentum_keys=empty, **arguments), in_batch), options
        weights = negative_weights(batch.z1, batch.z2, LABELS, **arguments)
        assert same(negative_weights(batch.z1, batch.z2, LABELS, momentum_keys=empty, **arguments), weights), options


# --- with a queue: each sampler is its formula over batch plus queue ----------------------------------


@pytest.mark.parametrize(
    ("sampler", "options"),
    [
        ("ucl", {}),
        ("debiased", {}),
        ("hucl", {}),
        ("hucl", {"tau_plus": 0.0, "beta": 0.5, "clip": True}),
        ("hucl", {"positives": "labels"}),
        ("scl", {}),
        ("hscl", {}),
        ("hscl", {"objective": "bcl"}),
        ("hscl-threshold", {"threshold": 0.2}),
        ("hscl-threshold", {"threshold": 0.95}),
        ("ot", {}),
        ("ot", {"ot_cost": "exp", "tau_plus": 0.0}),
        ("ot", {"objective": "bcl"}),
        ("undimix", {}),
        ("undimix", {"undimix_weights": (0.2, 0.5, 0.3)}),
        ("undimix", {"undimix_weights": (0.0, 0.0, 1.0), "positives": "labels"}),
    ],
    ids=lambda value: value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()) or "defaults",
)
def test_each_sampler_over_batch_and_queue_is_its_formula(sampler: str, options: dict[str, object]) -> None:
    batch = QueuedBatch(1)
    label_positives = sampler in supervised_samplers() or options.get("positives") == "labels"
    loss = batch.loss(sampler, **options)
    assert_same_loss(loss, reference_loss(sampler, batch, label_positives, **options), (batch.z1, batch.z2))


def test_the_queue_changes_the_loss_and_takes_no_gradient() -> None:
    batch = QueuedBatch(2)
    k1, k2, queue = (keys.clone().requires_grad_() for keys in (batch.k1, batch.k2, batch.queue))
    keys = MomentumKeys(k1, k2, queue, QUEUE_LABELS)
    loss = contrastive_loss(batch.z1, batch.z2, sampler="hucl", momentum_keys=keys, **OPTIONS)
    assert loss.item() != pytest.approx(contrastive_loss(batch.z1, batch.z2, sampler="hucl", **OPTIONS).item())
    assert loss.requires_grad
    assert torch.autograd.grad(loss, (k1, k2, queue), allow_unused=True) == (None, None, None)


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_negative_weights_over_the_queue_are_distributions_over_negatives(sampler: str) -> None:
    batch = QueuedBatch(3)
    q = negative_weights(
        batch.z1, batch.z2, LABELS, sampler=sampler, momentum_keys=batch.keys(), head_inputs=(batch.h1, batch.h2), **OPTIONS
    )
    assert q.shape == (2 * B, 2 * B + K)
    torch.testing.assert_close(q.sum(1), torch.ones(2 * B, dtype=torch.float64))
    index = torch.arange(2 * B)
    assert q[index, index].max() == 0 and q[index, (index + B) % (2 * B)].max() == 0
    assert q[:, 2 * B :].sum() > 0, "the queue holds negatives"
    if sampler in supervised_samplers():
        y = torch.tensor(candidate_labels())
        assert q[LABELS.repeat(2)[:, None] == y[None, :]].max() == 0


def test_supervised_anchors_whose_candidates_share_one_label_are_left_out() -> None:
    batch = QueuedBatch(4)
    same = torch.zeros(B, dtype=torch.int64)
    keys = batch.keys(queue_labels=torch.zeros(K, dtype=torch.int64))
    loss, stats = contrastive_loss(batch.z1, batch.z2, same, sampler="scl", momentum_keys=keys, return_stats=True)
    assert (stats.anchors_without_negatives.item(), stats.terms.item(), loss.item()) == (2 * B, 0, 0.0)
    _, stats = contrastive_loss(batch.z1, batch.z2, same, sampler="scl", momentum_keys=batch.keys(), return_stats=True)
    assert stats.anchors_without_negatives.item() == 0, "the queue holds other labels"


@pytest.mark.parametrize(
    ("changes", "sampler", "message"),
    [
        ({"queue": torch.zeros(3, D, dtype=torch.float64)}, "ucl", "K even"),
        ({"queue": torch.zeros(4, D + 1, dtype=torch.float64)}, "ucl", r"momentum_keys.queue must be \(K, 6\)"),
        ({"queue_labels": None}, "scl", "queue_labels must have shape"),
        ({"queue_features": None}, "undimix", "queue_features"),
        ({"queue_features": torch.zeros(K, 2, dtype=torch.float64)}, "undimix", "queue_features must be"),
        ({"head_inputs": None}, "undimix", "head_inputs"),
    ],
)
def test_momentum_keys_that_do_not_fit_are_one_line_usage_errors(changes: dict[str, Tensor | None], sampler: str, message: str) -> None:
    batch = QueuedBatch(5)
    with pytest.raises(UsageError, match=message) as error:
        contrastive_loss(batch.z1, batch.z2, LABELS, sampler=sampler, momentum_keys=batch.keys(**changes), head_inputs=(batch.h1, batch.h2))
    assert "\n" not in str(error.value)


def test_undimix_literal_gradients_refuse_a_queue() -> None:
    batch = QueuedBatch(6)
    with pytest.raises(UsageError, match="cannot use a queue"):
        batch.loss("undimix", undimix_uncertainty="literal", head_layer=batch.layer)


# --- the key encoder and the queue --------------------------------------------------------------------


def small_queue(size: int, momentum: float = 0.9, feature_dim: int = 0) -> tuple[nn.Module, MomentumQueue]:
    torch.manual_seed(0)
    model = build_model("small_cnn", 1, 8, 4)
    return model, MomentumQueue(model, size, momentum, torch.float32, feature_dim)


def test_the_key_encoder_is_the_moving_average_of_the_model() -> None:
    model, queue = small_queue(8)
    assert all(torch.equal(k, q) for k, q in zip(queue.key_model.parameters(), model.parameters()))
    assert not any(p.requires_grad for p in queue.key_model.parameters())
    before = [p.clone() for p in queue.key_model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    queue.follow(model)
    for key, old, query in zip(queue.key_model.parameters(), before, model.parameters()):
        torch.testing.assert_close(key, 0.9 * old + 0.1 * query, rtol=0, atol=1e-6)


def test_the_queue_keeps_the_last_k_keys_with_both_views_side_by_side() -> None:
    _, queue = small_queue(8, feature_dim=3)
    assert queue.filled() == 0 and queue.queued()[0].shape == (0, 4)
    batches = [torch.randn(6, 4) for _ in range(3)]  # three batches of 3 images, [k1; k2] each
    for number, keys in enumerate(batches):
        queue.push(keys, labels=torch.arange(3) + 10 * number, features=torch.full((6, 3), float(number)))
    assert queue.filled() == 8 and queue.pushed == 18
    rows = [views_side_by_side(F.normalize(keys, dim=1)) for keys in batches]
    keys, labels, features = queue.queued()  # slots 0 .. 5, then 6, 7, 0 .. 3, then 4 .. 7, 0, 1
    torch.testing.assert_close(keys, torch.cat([rows[2][4:], rows[1][4:], rows[2][:4]]), rtol=0, atol=0)
    assert labels.tolist() == [22, 22, 12, 12, 20, 20, 21, 21]
    assert features[:, 0].tolist() == [2, 2, 1, 1, 2, 2, 2, 2]
    many = torch.randn(20, 4)
    queue.push(many)  # more keys than the queue holds: the last 8 stay
    assert queue.filled() == 8 and queue.pushed == 38
    assert sorted(map(tuple, queue.keys.tolist())) == sorted(map(tuple, views_side_by_side(F.normalize(many, dim=1))[-8:].tolist()))


# --- the trainer ---------------------------------------------------------------------------------------


def test_the_options_queue_size_and_momentum_are_checked_and_an_unread_momentum_is_warned_about() -> None:
    with pytest.raises(UsageError, match="cannot use a queue"):
        PretrainConfig(sampler="undimix", undimix_uncertainty="literal", queue_size=64)
    with pytest.raises(UsageError, match="--queue-size must be even"):
        PretrainConfig(queue_size=63)
    with pytest.raises(UsageError, match="--momentum must be < 1.0"):
        PretrainConfig(queue_size=64, momentum=1.0)
    assert PretrainConfig(momentum=0.9).ignored_changes() == ["momentum = 0.9 is not read without a queue (queue_size 0)"]
    assert PretrainConfig(momentum=0.9, queue_size=64).ignored_changes() == []


def tiny_queue_config(data: Path, run: Path, **changes: object) -> PretrainConfig:
    values = {
        "epochs": 1,
        "batch_size": 16,
        "queue_size": 64,
        "device": "cpu",
        "data": str(data),
        "out": str(run / "models"),
        "live_dir": str(run / "dvclive"),
    }
    return PretrainConfig(**(values | changes))


def test_without_a_queue_the_trainer_has_no_key_encoder_and_checkpoints_the_model(prepared_digits: Callable[[float], Path]) -> None:
    data = prepared_digits(0.9)
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    model, step = build_training(PretrainConfig(queue_size=0, data=str(data)), load_card(data), context)
    assert step.queue is None and step.state is model


def test_the_trainer_feeds_the_loss_the_key_encoder_s_keys_and_the_queue(
    prepared_digits: Callable[[float], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five steps of 16 images with a queue of 64: before each step the key encoder moves half way
    to the model; the loss gets the keys of the batch and the queue of the earlier steps' keys."""
    data = prepared_digits(0.9)
    config = tiny_queue_config(data, tmp_path, sampler="scl", momentum=0.5)
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    context.seed_everything(0)
    model, training_step = build_training(config, load_card(data), context)
    images, labels = load_split(data, "train")
    calls, real_loss = [], step.sampler_loss

    def recording_loss(*args: object, **kwargs: object) -> object:
        keys = kwargs["options"].momentum_keys  # type: ignore[attr-defined]
        calls.append(dataclasses.replace(keys, queue=keys.queue.clone(), queue_labels=keys.queue_labels.clone()))
        return real_loss(*args, **kwargs)

    monkeypatch.setattr(step, "sampler_loss", recording_loss)
    for index in range(5):
        batch = slice(16 * index, 16 * index + 16)
        key_model, query_model = [p.clone() for p in training_step.queue.key_model.parameters()], [p.clone() for p in model.parameters()]
        assert training_step(images[batch], labels[batch], config.loss_options(0)).finite
        for key, old, query in zip(training_step.queue.key_model.parameters(), key_model, query_model):
            torch.testing.assert_close(key, 0.5 * old + 0.5 * query, rtol=0, atol=1e-6)
    assert [len(keys.queue) for keys in calls] == [0, 32, 64, 64, 64]
    assert torch.equal(calls[1].queue_labels, labels[:16].repeat_interleave(2))
    assert torch.equal(calls[2].queue[:32], calls[1].queue) and training_step.queue.pushed == 160
    assert training_step.state["model"] is model and training_step.state["queue"] is training_step.queue


def test_a_run_with_a_queue_checkpoints_the_key_encoder_and_writes_the_query_encoder_alone(
    prepared_digits: Callable[[float], Path], tmp_path: Path
) -> None:
    data = prepared_digits(0.9)
    pretrain.run(tiny_queue_config(data, tmp_path / "queue", sampler="undimix"))
    pretrain.run(tiny_queue_config(data, tmp_path / "plain", sampler="undimix", queue_size=0))
    queued, _ = load_artifact(tmp_path / "queue" / "models" / "encoder.safetensors", "encoder", {})
    plain, _ = load_artifact(tmp_path / "plain" / "models" / "encoder.safetensors", "encoder", {})
    assert queued.keys() == plain.keys()
    model, sidecar = load_encoder(tmp_path / "queue" / "models" / "encoder.safetensors")
    assert sidecar.config["queue_size"] == 64 and sum(p.numel() for p in model.parameters()) > 0
    checkpoint, _ = load_artifact(tmp_path / "queue" / "models" / "checkpoints" / "epoch-0001-step-000000.safetensors", "checkpoint", {})
    assert {f"model.model.{name}" for name in plain} | {
        "model.queue.keys",
        "model.queue.labels",
        "model.queue.features",
        "model.queue.count",
    } <= checkpoint.keys()
    assert {f"model.queue.key_model.{name}" for name in plain} <= checkpoint.keys()
    assert checkpoint["model.queue.keys"].shape == (64, 128) and checkpoint["model.queue.features"].shape == (64, 128 + 512)
    assert checkpoint["model.queue.count"].item() == 11 * 32
