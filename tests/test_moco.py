"""``queue_mode: moco``, MoCo-v2 as facebookresearch/moco's ``moco/builder.py`` runs it, against a transcription
of that file: the logits and labels of ``forward`` (to float64 rounding), the momentum update, the shuffled
key batch, ``_dequeue_and_enqueue``, the random initial queue; HCL App. C.1's hard negatives over the queue;
a run killed mid-epoch and resumed, bitwise; and the MoCo-v2 presets' optimizer, schedule and head."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import hcl_cli.stages.pretrain as pretrain
from hcl_cli.artifacts import load_artifact
from hcl_cli.checkpoint import CheckpointStore
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.errors import UsageError
from hcl_cli.image.augment import build_eval_transform
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import load_encoder
from hcl_cli.image.prepared import load_split
from hcl_cli.image.step import build_training
from hcl_cli.objectives import negative_weights
from hcl_cli.objectives.moco import MocoBatch, moco_loss
from hcl_cli.objectives.schedules import learning_rate_at
from hcl_cli.presets import PRESETS

pytestmark = pytest.mark.usefixtures("one_thread")


def builder_logits(q: Tensor, k: Tensor, queue: Tensor, t: float) -> tuple[Tensor, Tensor]:
    """moco/builder.py ``forward`` after the encoders: ``l_pos = einsum('nc,nc->n', q, k)``, ``l_neg =
    einsum('nc,ck->nk', q, queue)`` with the queue stored (C, K), ``logits = cat([l_pos, l_neg]) / T``, labels 0."""
    q, k = F.normalize(q, dim=1), F.normalize(k, dim=1)
    l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
    l_neg = torch.einsum("nc,ck->nk", q, queue)
    return torch.cat([l_pos, l_neg], dim=1) / t, torch.zeros(len(q), dtype=torch.long)


def hcl_moco_hard(logits: Tensor, t: float, beta: float, tau_plus: float) -> Tensor:
    """HCL's image/main.py ``criterion(estimator='hard')`` on MoCo's logits (App. C.1): pos = exp(l_pos / T),
    neg = exp(l_neg / T), N = K, imp = exp(beta log neg), Ng = (-tau+ N pos + sum(imp neg) / mean(imp)) / (1 - tau+),
    clamped at N e^{-1/T}; loss = mean -log(pos / (pos + Ng))."""
    pos, neg = logits[:, 0].exp(), logits[:, 1:].exp()
    n = neg.shape[1]
    imp = (beta * neg.log()).exp()
    reweight_neg = (imp * neg).sum(dim=-1) / imp.mean(dim=-1)
    ng = torch.clamp((-tau_plus * n * pos + reweight_neg) / (1 - tau_plus), min=n * math.e ** (-1 / t))
    return (-torch.log(pos / (pos + ng))).mean()


def float64_batch(seed: int, batch: int = 6, dim: int = 5, size: int = 24) -> tuple[Tensor, Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(batch, dim, generator=generator, dtype=torch.float64) for _ in range(2))
    queue = F.normalize(torch.randn(dim, size, generator=generator, dtype=torch.float64), dim=0)
    return q.requires_grad_(), k, queue


@pytest.mark.parametrize("t", [0.2, 0.07])
def test_the_loss_is_builder_forward_s_cross_entropy_to_float64_rounding(t: float) -> None:
    q, k, queue = float64_batch(0)
    logits, labels = builder_logits(q, k, queue, t)
    batch = MocoBatch(q, k, queue.T, t)
    torch.testing.assert_close(batch.logits, logits, rtol=0, atol=1e-12)
    assert torch.equal(batch.masks.partner, labels), "column 0 is each query's positive"
    loss = moco_loss(q, k, queue.T, temperature=t)
    expected = F.cross_entropy(logits, labels)
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.autograd.grad(loss, q)[0], torch.autograd.grad(expected, q)[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("beta", "tau_plus"), [(0.2, 0.0), (1.0, 0.1)])
def test_hard_negatives_reweight_exactly_the_queued_keys_as_hcl_c1(beta: float, tau_plus: float) -> None:
    q, k, queue = float64_batch(1)
    loss = moco_loss(q, k, queue.T, sampler="hucl", temperature=0.2, beta=beta, tau_plus=tau_plus)
    expected = hcl_moco_hard(builder_logits(q, k, queue, 0.2)[0], 0.2, beta, tau_plus)
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-12)
    debiased = moco_loss(q, k, queue.T, sampler="debiased", temperature=0.2, tau_plus=tau_plus)
    torch.testing.assert_close(debiased, hcl_moco_hard(builder_logits(q, k, queue, 0.2)[0], 0.2, 0.0, tau_plus), rtol=0, atol=1e-12)
    batch = MocoBatch(q, k, queue.T, 0.2)
    assert batch.num_negatives == queue.shape[1] and not batch.masks.negatives[:, 0].any() and batch.masks.negatives[:, 1:].all()
    assert negative_weights(q, k, sampler="ucl").shape == (12, 12), "in-batch weights are unchanged"


def test_samplers_moco_v2_does_not_define_are_usage_errors() -> None:
    for sampler in ("scl", "hscl", "hscl-threshold", "ot", "undimix"):
        with pytest.raises(UsageError, match=f"{sampler} needs --queue-mode batch"):
            PretrainConfig(sampler=sampler, queue_size=64, queue_mode="moco")
    with pytest.raises(UsageError, match="--positives labels needs --queue-mode batch"):
        PretrainConfig(sampler="hucl", positives="labels", queue_size=64, queue_mode="moco")
    q, k, queue = float64_batch(2)
    with pytest.raises(UsageError, match="ot needs --queue-mode batch"):
        moco_loss(q, k, queue.T, sampler="ot")


def test_one_training_step_is_builder_forward_then_dequeue_and_enqueue(prepared_digits: Callable[[float], Path], tmp_path: Path) -> None:
    data = prepared_digits(0.9)
    values = {"queue_size": 64, "queue_mode": "moco", "momentum": 0.9, "temperature": 0.2, "sampler": "ucl", "batch_size": 16}
    config = PretrainConfig(**values, epochs=1, device="cpu", data=str(data), out=str(tmp_path / "m"), live_dir=str(tmp_path / "l"))
    context = DistributedContext(0, 1, 0, torch.device("cpu"))
    context.seed_everything(0)
    card = load_card(data)
    model, training_step = build_training(config, card, context)
    training_step.augment = build_eval_transform(card.mean, card.std)  # no random draws: the views are the images
    queue = training_step.queue
    assert queue is not None and queue.filled() == 64 and queue.pushed == 0
    torch.testing.assert_close(queue.keys.norm(dim=1), torch.ones(64), rtol=0, atol=1e-6)
    assert queue.keys.std(dim=0).min() > 0.01, "the initial queue is random unit vectors, not one repeated vector"

    images = load_split(data, "train")[0][:16]
    encoder_q, encoder_k = copy.deepcopy(model), copy.deepcopy(queue.key_model)
    queue_before = queue.keys.T.clone()  # builder.py stores the queue as (C, K)
    torch.manual_seed(7)
    result = training_step(images, torch.zeros(16, dtype=torch.long), config.loss_options(0)).read()

    # The transcription: q from encoder_q, the momentum update, then k from the shuffled batch.
    im_q = im_k = training_step.augment(images)
    q = encoder_q(im_q)[2]
    with torch.no_grad():
        for param_q, param_k in zip(encoder_q.parameters(), encoder_k.parameters()):
            param_k.mul_(0.9).add_(param_q.mul(1.0 - 0.9))
        torch.manual_seed(7)
        idx_shuffle = torch.randperm(16)
        shuffled = im_k[idx_shuffle]
        k = torch.cat([encoder_k(chunk)[2] for chunk in shuffled.tensor_split(8)])  # SplitBatchNorm, --bn-splits 8
        k = F.normalize(k, dim=1)[torch.argsort(idx_shuffle)]
    logits, labels = builder_logits(q, k, queue_before, 0.2)
    assert result.loss == pytest.approx(F.cross_entropy(logits, labels).item(), abs=1e-5)
    for key, expected in zip(queue.key_model.parameters(), encoder_k.parameters()):
        torch.testing.assert_close(key, expected, rtol=0, atol=1e-7)
    expected_queue = queue_before.clone()
    expected_queue[:, 0:16] = k.T  # ptr 0: the 16 keys of the batch, and only they
    torch.testing.assert_close(queue.keys.T, expected_queue, rtol=0, atol=1e-4)  # float32 through BatchNorm of two images
    assert queue.pushed == 16 and result.same_label_pairs == 16
    training_step(images, torch.zeros(16, dtype=torch.long), config.loss_options(0))
    assert torch.equal(queue.keys[32:], queue_before.T[32:]) and queue.pushed == 32, "the pointer moves by B"


def test_the_moco_v2_presets_train_with_sgd_a_cosine_schedule_and_the_mlp_head(
    prepared_digits: Callable[[float], Path], tmp_path: Path
) -> None:
    """main_moco.py's SGD (lr 0.03, momentum 0.9, weight decay 1e-4) with ``--cos``, and builder.py's ``--mlp`` head
    (Linear with bias as wide as the features, ReLU, the 128-d fc), as HCL's MoCo-v2 presets set them; tiny on digits.
    UnDiMix's MoCo-v2 baseline keeps MoCo-v2's method but trains as its App. A says every model does (Adam)."""
    data = prepared_digits(0.9)
    tiny = {"arch": "small_cnn", "epochs": 2, "batch_size": 16, "queue_size": 64, "blur": False, "device": "cpu"}
    for name in ("hcl-cifar10-mocov2", "hcl-cifar10-mocov2-hard"):
        assert {"optimizer": "sgd", "lr": 0.03, "sgd_momentum": 0.9, "weight_decay": 1e-4, "lr_schedule": "cosine"}.items() <= (
            PRESETS[name].groups()["pretrain"].items()
        ), name
    for dataset in ("cifar10", "cifar100", "tinyimagenet"):  # UnDiMix App. A: "For all models ... Adam, 1e-3 ... 1e-6"
        moco = PRESETS[f"undimix-{dataset}-moco"].groups()["pretrain"]
        assert {"optimizer": "adam", "lr": 1e-3, "weight_decay": 1e-6, "lr_schedule": "constant", "queue_mode": "moco"}.items() <= (
            moco.items()
        ), dataset
        assert (moco["momentum"], moco["temperature"], moco["epochs"], moco["batch_size"]) == (0.999, 0.2, 400, 256)
    values = {**PRESETS["hcl-cifar10-mocov2"].groups()["pretrain"], **tiny}
    pretrain.run(PretrainConfig(**values, data=str(data), out=str(tmp_path / "models"), live_dir=str(tmp_path / "live")))

    model, sidecar = load_encoder(tmp_path / "models" / "encoder.safetensors")
    assert (sidecar.projection_hidden, sidecar.projection_batchnorm, sidecar.projection_dim) == (model.feature_dim, False, 128)
    hidden, relu = model.head.hidden_layers
    assert isinstance(hidden, nn.Linear) and hidden.bias is not None and isinstance(relu, nn.ReLU)
    assert (hidden.in_features, hidden.out_features) == (model.feature_dim, model.feature_dim)
    checkpoint = CheckpointStore(tmp_path / "models" / "checkpoints").latest()
    assert checkpoint is not None
    tensors, sidecar_json = load_artifact(checkpoint, "checkpoint", {})
    (group,) = sidecar_json["optimizer"]["param_groups"]
    assert (group["momentum"], group["weight_decay"], group["nesterov"], group["fused"]) == (0.9, 1e-4, False, True)
    steps = 2 * (179 // 16)
    assert group["lr"] == pytest.approx(learning_rate_at(0.03, steps - 1, steps, 0, "cosine"), rel=1e-6), "the cosine's last step"
    slots = {name.rsplit(".", 1)[1] for name in tensors if name.startswith("optimizer.")}
    assert slots == {"momentum_buffer"}, "SGD's momenta, no Adam moments"
