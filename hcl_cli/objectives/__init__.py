"""Contrastive objectives with the negative samplers of HCL, H-SCL, HCL-OT and UnDiMix.

The samplers differ only in the negative distribution q(x-|x):

========================  ===========================================================  ==============
``ucl``                   SimCLR NT-Xent, uniform negatives                            ``simclr.py``
``debiased``, ``hucl``    Chuang et al.; HCL ``exp(beta s)`` tilt, tau+ debiasing      ``hcl.py``
``scl``, ``hscl``,        H-SCL: different-label negatives, uniform / ``exp(beta s)``  ``hscl.py``
``hscl-threshold``        / cosine above a scheduled threshold
``ot``                    HCL-OT: entropic OT coupling of the batch with itself        ``ot.py``
``undimix``               UnDiMix: similarity + uncertainty + diversity scores         ``undimix.py``
========================  ===========================================================  ==============

Each sampler is one function ``(PairBatch, SamplerOptions) -> NegativeWeights`` and one entry of
:data:`~hcl_cli.objectives.registry.SAMPLERS`; :func:`~hcl_cli.objectives.core.contrastive_objective`
is the one loss they all share. The public functions below are imported on first use, so that
importing the registry (as ``hcl --help`` does) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "contrastive_loss": "hcl_cli.objectives.loss",
    "negative_weights": "hcl_cli.objectives.loss",
    "check_sampler_inputs": "hcl_cli.objectives.loss",
    "LossStats": "hcl_cli.objectives.core",
    "SamplerOptions": "hcl_cli.objectives.sampler_options",
    "SAMPLERS": "hcl_cli.objectives.registry",
    "Sampler": "hcl_cli.objectives.registry",
    "beta_at": "hcl_cli.objectives.schedules",
    "initial_attention": "hcl_cli.objectives.undimix",
    "threshold_at": "hcl_cli.objectives.schedules",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'hcl_cli.objectives' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
