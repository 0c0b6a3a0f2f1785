"""Contrastive objectives with the negative samplers of HCL, H-SCL, HCL-OT and UnDiMix.

The samplers differ only in the negative distribution q(x-|x) (issue 3):

========================  ===========================================================  ==============
``ucl``                   SimCLR NT-Xent, uniform negatives                            ``simclr.py``
``debiased``, ``hucl``    Chuang et al.; HCL ``exp(beta s)`` tilt, tau+ debiasing      ``hcl.py``
``scl``, ``hscl``,        H-SCL: different-label negatives, uniform / ``exp(beta s)``  ``hscl.py``
``hscl-threshold``        / cosine above a scheduled threshold
``ot``                    HCL-OT: entropic OT coupling of the batch with itself        ``ot.py``
``undimix``               UnDiMix: similarity + uncertainty + diversity scores         ``undimix.py``
========================  ===========================================================  ==============

Each sampler is one function ``(PairBatch, SamplerOptions) -> NegativeWeights`` registered in
:data:`SAMPLERS`; :func:`~hcl_cli.objectives.core.contrastive_objective` is the one loss they all
share. Schedules over training: :func:`beta_at` (HCL annealing) and :func:`threshold_at` (H-SCL(tau)).
"""

from hcl_cli.objectives.core import LossStats
from hcl_cli.objectives.loss import check_sampler_inputs, contrastive_loss, negative_weights
from hcl_cli.objectives.options import SamplerOptions
from hcl_cli.objectives.registry import SAMPLERS, SUPERVISED, Sampler
from hcl_cli.objectives.schedules import beta_at, threshold_at

__all__ = [
    "SAMPLERS",
    "SUPERVISED",
    "LossStats",
    "Sampler",
    "SamplerOptions",
    "beta_at",
    "check_sampler_inputs",
    "contrastive_loss",
    "negative_weights",
    "threshold_at",
]
