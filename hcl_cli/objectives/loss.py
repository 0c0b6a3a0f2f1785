"""The public entry points: the contrastive loss of any registered sampler, its negative
distribution, and the up-front check of a sampler's inputs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal, overload

import torch
from torch import Tensor

from hcl_cli.errors import UsageError
from hcl_cli.objectives.candidates import MomentumKeys
from hcl_cli.objectives.core import LossStats, PairBatch, contrastive_objective, negative_distribution
from hcl_cli.objectives.registry import SAMPLERS, Sampler, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions


def check_sampler_inputs(sampler: str, *, labelled: bool, **options: Any) -> None:
    """Raise a one-line :class:`~hcl_cli.errors.UsageError` before training if ``sampler`` cannot run.

    ``labelled`` says whether every training image has a label; the keywords are those of
    :func:`contrastive_loss` (tau+ in [0, 1), ``ot_epsilon > 0``, three ``undimix_weights``, ...).
    """
    check_labels(sampler, SamplerOptions.resolve(lookup(sampler), options), labelled=labelled)


def check_labels(sampler: str, options: SamplerOptions, *, labelled: bool) -> None:
    """:func:`check_sampler_inputs` for options resolved beforehand (a stage's configuration): checks them no further."""
    spec = SAMPLERS[sampler]
    if spec.supervised and not labelled:
        unsupervised = ", ".join(name for name, other in SAMPLERS.items() if not other.supervised)
        raise UsageError(f"--sampler {sampler} needs labels, but the training images are unlabelled (use one of {unsupervised})")
    if spec.label_positives(options) and not labelled:
        raise UsageError("--positives labels needs labels, but the training images are unlabelled (use --positives partner)")


@overload
def contrastive_loss(
    z1: Tensor,
    z2: Tensor,
    labels: Tensor | None = ...,
    *,
    sampler: str,
    anchor_mask: Tensor | None = ...,
    return_stats: Literal[False] = ...,
    **options: Any,
) -> Tensor: ...
@overload
def contrastive_loss(
    z1: Tensor,
    z2: Tensor,
    labels: Tensor | None = ...,
    *,
    sampler: str,
    anchor_mask: Tensor | None = ...,
    return_stats: Literal[True],
    **options: Any,
) -> tuple[Tensor, LossStats]: ...
def contrastive_loss(
    z1: Tensor,
    z2: Tensor,
    labels: Tensor | None = None,
    *,
    sampler: str,
    anchor_mask: Tensor | None = None,
    return_stats: bool = False,
    **options: Any,
) -> Tensor | tuple[Tensor, LossStats]:
    """The contrastive loss of two views under ``sampler``'s negative distribution (a scalar).

    ``z1``, ``z2``: (B, d) projections of the two views (normalised here). ``labels``: (B,), needed
    by the supervised samplers (scl, hscl, hscl-threshold) and with ``positives="labels"``, and
    ignored otherwise. ``options`` are the options declared in
    :mod:`~hcl_cli.objectives.registry` (``temperature``, ``objective``, ``beta``, ``tau_plus``,
    ...; each sampler reads its own, the others are checked and ignored), with the declared
    defaults, plus the trainer's tensors of :data:`~hcl_cli.objectives.registry.RUNTIME_INPUTS`
    (``head_inputs`` for undimix, ...). The arithmetic runs in float32 (float64 for float64
    inputs) with autocast disabled, in the log domain.

    ``momentum_keys`` (:class:`~hcl_cli.objectives.candidates.MomentumKeys`): a momentum encoder's keys of the
    batch and its queue of K earlier keys (MoCo). The anchors ``[z1; z2]`` are then contrasted
    with the 2B + K candidates ``[k1; k2; queue]`` (each anchor's positive is its partner's key)
    under the same sampler, and no gradient reaches the keys. Without them, the candidates are
    the anchors themselves (in-batch), as before.

    ``anchor_mask`` (2B,) bool, for data-parallel training: the sum of the selected anchors'
    terms divided by the number of terms over *all* anchors, so the values over disjoint masks
    that cover the 2B rows add up to the full loss. ``return_stats=True`` also returns
    :class:`~hcl_cli.objectives.core.LossStats` (e.g. how many anchors had no different-label
    negative and were left out, for the supervised samplers).
    """
    spec, sampler_config = prepare(z1, z2, labels, sampler, options)
    if anchor_mask is not None and (anchor_mask.shape != (2 * z1.shape[0],) or anchor_mask.dtype != torch.bool):
        raise UsageError(
            f"anchor_mask must be a bool tensor of shape ({2 * z1.shape[0]},), one entry per row of [z1; z2] (got {anchor_mask.dtype} {tuple(anchor_mask.shape)})"
        )
    loss, stats = sampler_loss(z1, z2, labels, spec=spec, options=sampler_config, anchor_mask=anchor_mask)
    return (loss, stats) if return_stats else loss


def sampler_loss(
    z1: Tensor, z2: Tensor, labels: Tensor | None, *, spec: Sampler, options: SamplerOptions, anchor_mask: Tensor | None = None
) -> tuple[Tensor, LossStats]:
    """:func:`contrastive_loss` with its statistics, for inputs and options checked beforehand: it checks nothing.

    The training step's entry (:class:`~hcl_cli.image.step.TrainingStep`): its options are the
    stage's configuration, checked once at the stage's entry and resolved once per epoch
    (:meth:`~hcl_cli.config.pretrain.PretrainConfig.loss_options`), with the step's tensors
    (:meth:`~hcl_cli.objectives.sampler_options.SamplerOptions.with_inputs`)."""
    label_positives = spec.label_positives(options)
    with full_precision(z1.device):
        batch = PairBatch(z1, z2, labels if label_positives else None, options.temperature, options.momentum_keys)
        negatives = spec.load()(batch, options)
        return contrastive_objective(
            batch,
            negatives,
            label_positives=label_positives,
            tau_plus=options.tau_plus,
            objective=options.objective,
            anchor_mask=anchor_mask,
        )


@torch.no_grad()
def negative_weights(z1: Tensor, z2: Tensor, labels: Tensor | None = None, *, sampler: str, **options: Any) -> Tensor:
    """q(j|i), (2B, 2B + K): the negative distribution each anchor of ``[z1; z2]`` uses under ``sampler``
    over its candidates (the rows of ``[z1; z2]``, or with ``momentum_keys`` the batch's keys and the queue).

    Rows sum to 1 (0 for an anchor without negatives); zero on self, partner and, for the
    supervised samplers, same-label samples. For debiased/hucl/ot this is the (tilted) sampling
    distribution before the tau+ correction. Same arguments and sampler code as :func:`contrastive_loss`.
    """
    spec, sampler_config = prepare(z1, z2, labels, sampler, options)
    labelled = spec.label_positives(sampler_config)
    with full_precision(z1.device):
        batch = PairBatch(z1, z2, labels if labelled else None, sampler_config.temperature, sampler_config.momentum_keys)
        return negative_distribution(spec.load()(batch, sampler_config))


def prepare(z1: Tensor, z2: Tensor, labels: Tensor | None, sampler: str, options: dict[str, Any]) -> tuple[Sampler, SamplerOptions]:
    """Validate the inputs; the sampler and its resolved options."""
    spec = lookup(sampler)
    sampler_config = SamplerOptions.resolve(spec, options)
    check_batch(z1, z2, labels, sampler, sampler_config)
    return spec, sampler_config


def check_batch(z1: Tensor, z2: Tensor, labels: Tensor | None, sampler: str, options: SamplerOptions) -> None:
    """One-line usage errors for a batch that ``sampler`` cannot take under its resolved ``options``: the views' shapes,
    the labels it reads, the momentum keys."""
    spec = SAMPLERS[sampler]
    if z1.ndim != 2 or z1.shape != z2.shape or z1.shape[0] < 2:
        raise UsageError(f"z1 and z2 must both be (B, d) with B >= 2 (got {tuple(z1.shape)} and {tuple(z2.shape)})")
    labelled = spec.label_positives(options)
    if labelled and labels is None:
        raise UsageError(f"--sampler {sampler} needs labels" if spec.supervised else "--positives labels needs labels")
    if labelled and labels is not None and labels.shape != (z1.shape[0],):
        raise UsageError(f"labels must have shape ({z1.shape[0]},) (got {tuple(labels.shape)})")
    keys = options.momentum_keys
    if keys is not None:
        check_keys(keys, tuple(z1.shape), labelled)


def check_keys(keys: MomentumKeys, shape: tuple[int, int], labelled: bool) -> None:
    """One-line usage errors for momentum keys that do not fit a batch of ``shape`` (B, d)."""
    if tuple(keys.k1.shape) != shape or tuple(keys.k2.shape) != shape:
        raise UsageError(f"momentum_keys.k1 and .k2 must be {shape} like z1 and z2 (got {tuple(keys.k1.shape)} and {tuple(keys.k2.shape)})")
    if keys.queue.ndim != 2 or keys.queue.shape[1] != shape[1] or keys.queue_size % 2:
        raise UsageError(
            f"momentum_keys.queue must be (K, {shape[1]}) with K even, both views of each image (got {tuple(keys.queue.shape)})"
        )
    if labelled and keys.queue_size and (keys.queue_labels is None or keys.queue_labels.shape != (keys.queue_size,)):
        got = None if keys.queue_labels is None else tuple(keys.queue_labels.shape)
        raise UsageError(f"this loss reads labels: momentum_keys.queue_labels must have shape ({keys.queue_size},) (got {got})")


@contextlib.contextmanager
def full_precision(device: torch.device) -> Iterator[None]:
    """Disable autocast on ``device`` so the loss arithmetic stays in float32/float64."""
    with torch.autocast(device_type=device.type, enabled=False):
        yield
