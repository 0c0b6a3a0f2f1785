"""The loss as ``torch.nn.Module`` objects, one per sampler family, for a training loop of one's own (docs/api.md).

Each module names one registered sampler (:data:`~hcl_cli.objectives.registry.SAMPLERS`) and its options, checks them
once when it is built (a one-line :class:`~hcl_cli.errors.UsageError`), and its ``forward`` is the loss ``hcl pretrain``
trains with, :func:`~hcl_cli.objectives.loss.sampler_loss` over the one objective of
:mod:`~hcl_cli.objectives.core`: the same tensors give the same loss and gradients, bit for bit. The defaults are the
registry's, those of ``hcl pretrain``. ``forward(z1, z2)`` takes the (B, d) projections of two views of B images
(normalised here) and returns a scalar; ``labels`` (B,) where the loss reads them; ``momentum_keys``
(:class:`~hcl_cli.objectives.candidates.MomentumKeys`) to contrast the anchors with a momentum encoder's keys and queue
instead of with themselves. A scheduled value (HCL's annealed beta, H-SCL(tau)'s threshold) is the loss of the epoch:
build the epoch's module with :func:`~hcl_cli.objectives.schedules.beta_at` or
:func:`~hcl_cli.objectives.schedules.threshold_at`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from torch import Tensor, nn

from hcl_cli.errors import UsageError
from hcl_cli.objectives.candidates import MomentumKeys
from hcl_cli.objectives.core import Objective
from hcl_cli.objectives.loss import check_batch, sampler_loss
from hcl_cli.objectives.registry import (
    BETA,
    CLIP,
    DETACH_WEIGHTS,
    OT_COST,
    OT_EPSILON,
    OT_ITERATIONS,
    OT_KAPPA,
    POSITIVES,
    TAU_PLUS,
    TEMPERATURE,
    UNDIMIX_DIVERSITY,
    UNDIMIX_UNCERTAINTY,
    UNDIMIX_WEIGHTS,
    lookup,
    undimix_weight_values,
)
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.objectives.undimix import initial_attention

Positives = Literal["partner", "labels"]
"""``partner``: each anchor's other view; ``labels``: every same-label sample, partner included (needs labels)."""
UNDIMIX_DEFAULT_WEIGHTS = undimix_weight_values(UNDIMIX_WEIGHTS.default)
"""Similarity, uncertainty and diversity weighted equally, as ``hcl pretrain``'s ``--undimix-weights`` default."""


class SamplerLoss(nn.Module):
    """The loss of one registered sampler under options checked once: the base of the modules below."""

    def __init__(self, sampler: str, **options: Any) -> None:
        super().__init__()
        self.sampler = sampler
        """The ``--sampler`` whose loss this is."""
        self.spec = lookup(sampler)
        self.options = SamplerOptions.resolve(self.spec, options)
        """The resolved options, as ``hcl pretrain --sampler SAMPLER`` with the same values resolves them."""

    def batch_loss(self, z1: Tensor, z2: Tensor, labels: Tensor | None, **inputs: Any) -> Tensor:
        """The loss of the batch, with the step's tensors ``inputs`` (:data:`~hcl_cli.objectives.registry.RUNTIME_INPUTS`)."""
        options = self.options.with_inputs(**inputs)
        check_batch(z1, z2, labels, self.sampler, options)
        return sampler_loss(z1, z2, labels, spec=self.spec, options=options)[0]

    def extra_repr(self) -> str:
        return f"sampler={self.sampler!r}, " + ", ".join(f"{name}={value!r}" for name, value in self.options.items())


class HardNegativeLoss(SamplerLoss):
    """HCL's hard negatives (Robinson et al., "Contrastive learning with hard negative samples", ICLR 2021).

    Eq. (4), estimated by importance sampling over the batch (Sec. 3.1, Fig. 13): negatives tilted by
    ``q(j|i) ~ exp(beta s_ij)`` and debiased with the class prior ``tau_plus`` (Eq. 2),

        Ng_i = max((N E_q[exp(s_ij)] - tau+ N exp(s_ip)) / (1 - tau+), N exp(-1/t)),   loss = mean_i -log(exp(s_ip) / (exp(s_ip) + Ng_i))

    over the N = 2B - 2 other samples, ``s_ij = z_i.z_j / t`` (:mod:`~hcl_cli.objectives.hcl`). Its special cases are
    the samplers they are in ``hcl pretrain``: ``beta=0`` is Chuang et al.'s debiased loss (``--sampler debiased``),
    ``beta=0, tau_plus=0`` SimCLR's NT-Xent (``--sampler ucl``); otherwise ``--sampler hucl``. ``objective="bcl"``:
    HCL-OT's Eq. (9), ``E_q[z_i.z_j] - z_i.z_p``, where tau+ does not enter. ``detach_weights``: no gradient through q
    (H-SCL's code); ``clip``: the weights' inner products scaled into [-2, 2] (HCL App. D.2, Fig. 14); at ``beta=0``,
    where the weights are uniform, neither changes anything.
    """

    def __init__(
        self,
        beta: float = BETA.default,
        tau_plus: float = TAU_PLUS.default,
        *,
        temperature: float = TEMPERATURE.default,
        objective: Objective = "nce",
        positives: Positives = POSITIVES.default,
        detach_weights: bool = DETACH_WEIGHTS.default,
        clip: bool = CLIP.default,
    ) -> None:
        options: dict[str, Any] = {"temperature": temperature, "objective": objective, "positives": positives}
        if beta != 0:
            super().__init__("hucl", beta=beta, tau_plus=tau_plus, detach_weights=detach_weights, clip=clip, **options)
        else:
            super().__init__("debiased" if tau_plus else "ucl", **({"tau_plus": tau_plus} if tau_plus else {}), **options)

    def forward(self, z1: Tensor, z2: Tensor, labels: Tensor | None = None, *, momentum_keys: MomentumKeys | None = None) -> Tensor:
        """The loss of the (B, d) views ``z1``, ``z2`` (``labels`` (B,) read with ``positives="labels"``)."""
        return self.batch_loss(z1, z2, labels, momentum_keys=momentum_keys)


class SupervisedHardNegativeLoss(SamplerLoss):
    """H-SCL (Jiang et al., "Supervised contrastive learning with hard negative samples"): labels decide the negatives.

    Eq. (3), ``mean over positive pairs (i, p) of log(1 + M exp(-s_ip) E_q[exp(s_ij)])``, M = 2B - 2, the positives
    every other sample of the anchor's label and q over the samples of other labels (Sec. III-B), tilted by a
    hardening function (Definition 1): ``exp(beta s_ij)``, H-SCL(beta) (``--sampler hscl``; ``beta=0`` is SCL,
    ``--sampler scl``), or with ``threshold`` l the indicator ``cos_ij >= l``, H-SCL(tau) (``--sampler hscl-threshold``,
    whose l follows Eq. (4) over training; an anchor no negative of which reaches l keeps them all). No tau+: the labels
    remove the false negatives. An anchor all of whose candidates share its label is left out of the mean
    (:mod:`~hcl_cli.objectives.hscl`).
    """

    def __init__(
        self,
        beta: float = BETA.default,
        *,
        threshold: float | None = None,
        temperature: float = TEMPERATURE.default,
        objective: Objective = "nce",
        detach_weights: bool = DETACH_WEIGHTS.default,
        clip: bool = CLIP.default,
    ) -> None:
        options: dict[str, Any] = {"temperature": temperature, "objective": objective}
        if threshold is not None:
            if beta != BETA.default or detach_weights or clip:
                raise UsageError("threshold (H-SCL(tau)) weights its negatives uniformly: beta, detach_weights and clip are H-SCL(beta)'s")
            super().__init__("hscl-threshold", threshold=threshold, **options)
        elif beta != 0:
            super().__init__("hscl", beta=beta, detach_weights=detach_weights, clip=clip, **options)
        else:
            super().__init__("scl", **options)

    def forward(self, z1: Tensor, z2: Tensor, labels: Tensor, *, momentum_keys: MomentumKeys | None = None) -> Tensor:
        """The loss of the (B, d) views ``z1``, ``z2`` of B images labelled ``labels`` (B,)."""
        return self.batch_loss(z1, z2, labels, momentum_keys=momentum_keys)


class OTNegativeLoss(SamplerLoss):
    """HCL-OT (Jiang et al., "Hard negative sampling via regularized optimal transport for contrastive representation
    learning", IJCNN 2023): q is the entropic optimal transport coupling of the batch with itself.

    Eq. (5) with phi = KL: the coupling P of the 2B anchors with uniform marginals under the ground cost
    ``||z_i - z_j||^2`` (``cost="exp"``: Sec. VII-C's ``exp(||z_i - z_j||^2 - kappa)``), +inf on self and partner, by at
    most ``iterations`` Sinkhorn rounds on detached embeddings; ``q(j|i) = 2B P_ij``. The loss is Eq. (8), with HCL's
    tau+ debiasing, or with ``objective="bcl"`` Eq. (9). ``epsilon`` is the official code's ``reg``, twice the paper's
    epsilon for the ``sq`` cost (:mod:`~hcl_cli.objectives.ot`). ``--sampler ot``.
    """

    def __init__(
        self,
        epsilon: float = OT_EPSILON.default,
        tau_plus: float = TAU_PLUS.default,
        *,
        cost: Literal["sq", "exp"] = OT_COST.default,
        kappa: float = OT_KAPPA.default,
        iterations: int = OT_ITERATIONS.default,
        temperature: float = TEMPERATURE.default,
        objective: Objective = "nce",
        positives: Positives = POSITIVES.default,
    ) -> None:
        super().__init__(
            "ot",
            ot_epsilon=epsilon,
            tau_plus=tau_plus,
            ot_cost=cost,
            ot_kappa=kappa,
            ot_iterations=iterations,
            temperature=temperature,
            objective=objective,
            positives=positives,
        )

    def forward(self, z1: Tensor, z2: Tensor, labels: Tensor | None = None, *, momentum_keys: MomentumKeys | None = None) -> Tensor:
        """The loss of the (B, d) views ``z1``, ``z2`` (``labels`` (B,) read with ``positives="labels"``)."""
        return self.batch_loss(z1, z2, labels, momentum_keys=momentum_keys)


class UnDiMixLoss(SamplerLoss):
    """UnDiMix (Tabassum et al., "UnDiMix: hard negative sampling strategies for contrastive representation learning").

    Algorithm 1 and Eq. (5): each negative's importance is a convex mix of its similarity ``s_ij`` (P1), uncertainty
    ``u_ij = g_i.g_j`` (P2, Eq. 3: gradients of the pseudo-labelling task of Eq. 2 at the projection head's last layer)
    and diversity ``r_ij`` (P3, Eq. 4), each min-max normalised over the anchor's negatives, mixed by ``weights``
    (similarity, uncertainty, diversity) divided by their sum; the importances weight the NT-Xent denominator as q
    (:mod:`~hcl_cli.objectives.undimix`). ``learned``: the mix is ``softmax(attention)`` over the parts of positive
    weight, ``attention`` a parameter of this module starting at ``weights`` (Table 3): give the optimizer
    ``loss.parameters()`` too. ``uncertainty``: ``badge`` (BADGE's closed form) or ``literal`` (Eq. 3 by autograd, which
    needs ``head_layer``); ``diversity``: the reading of Eq. (4). ``--sampler undimix``.
    """

    def __init__(
        self,
        weights: Sequence[float] = UNDIMIX_DEFAULT_WEIGHTS,
        *,
        learned: bool = False,
        uncertainty: Literal["badge", "literal"] = UNDIMIX_UNCERTAINTY.default,
        diversity: Literal["negative-view", "anchor-view", "both-views"] = UNDIMIX_DIVERSITY.default,
        temperature: float = TEMPERATURE.default,
        objective: Objective = "nce",
        positives: Positives = POSITIVES.default,
    ) -> None:
        super().__init__(
            "undimix",
            undimix_weights=",".join(str(float(weight)) for weight in weights),
            undimix_learned=learned,
            undimix_uncertainty=uncertainty,
            undimix_diversity=diversity,
            temperature=temperature,
            objective=objective,
            positives=positives,
        )
        self.attention = nn.Parameter(initial_attention(self.options.undimix_weights)) if learned else None
        """(3,) the learned logits of the mix (``undimix_attention``), or None for fixed weights."""

    def forward(
        self,
        z1: Tensor,
        z2: Tensor,
        labels: Tensor | None = None,
        *,
        head_inputs: tuple[Tensor, Tensor],
        head_layer: nn.Module | None = None,
        momentum_keys: MomentumKeys | None = None,
    ) -> Tensor:
        """The loss of the (B, d) views ``z1``, ``z2``; ``head_inputs`` the (B, H) inputs ``(h1, h2)`` of the projection
        head's last linear layer ``head_layer`` (``z = head_layer(h)``), which ``uncertainty="literal"`` differentiates."""
        learned = {} if self.attention is None else {"undimix_attention": self.attention}
        return self.batch_loss(z1, z2, labels, head_inputs=head_inputs, head_layer=head_layer, momentum_keys=momentum_keys, **learned)


__all__ = ["HardNegativeLoss", "OTNegativeLoss", "SamplerLoss", "SupervisedHardNegativeLoss", "UnDiMixLoss"]
