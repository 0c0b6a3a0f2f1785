"""The registry of negative samplers: a new sampler is one function and one entry here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hcl_cli.objectives.core import NegativeWeights, PairBatch
from hcl_cli.objectives.hcl import debiased, hucl
from hcl_cli.objectives.hscl import hscl, hscl_threshold, scl
from hcl_cli.objectives.options import SamplerOptions
from hcl_cli.objectives.ot import ot
from hcl_cli.objectives.simclr import ucl
from hcl_cli.objectives.undimix import undimix

NegativeSampler = Callable[[PairBatch, SamplerOptions], NegativeWeights]


@dataclass(frozen=True)
class Sampler:
    """A negative distribution q(x-|x) and whether it needs labels (then positives share the label too)."""

    negatives: NegativeSampler
    supervised: bool = False


SAMPLERS: dict[str, Sampler] = {
    "ucl": Sampler(ucl),
    "debiased": Sampler(debiased),
    "hucl": Sampler(hucl),
    "scl": Sampler(scl, supervised=True),
    "hscl": Sampler(hscl, supervised=True),
    "hscl-threshold": Sampler(hscl_threshold, supervised=True),
    "ot": Sampler(ot),
    "undimix": Sampler(undimix),
}
"""Every sampler by its ``--sampler`` name, in the order of ``hcl_cli.config.SAMPLERS``."""

SUPERVISED: frozenset[str] = frozenset(name for name, sampler in SAMPLERS.items() if sampler.supervised)
"""The samplers that need labels."""
