"""SimCLR's uniform negatives (Chen et al., ICML 2020), the ``ucl`` baseline.

NT-Xent over the 2B anchors: ``-log(exp(s_ip) / (exp(s_ip) + sum_{j != i, p} exp(s_ij)))``, i.e.
q(j|i) uniform over the N = 2B - 2 other samples, no debiasing. With a momentum encoder's queue
of K keys (MoCo-v2's loss) it is uniform over the N = 2B - 2 + K other keys. On nodes against
graphs it is uniform over the other graphs of the batch: with ``objective="jsd"``, InfoGraph itself.
"""

from __future__ import annotations

from hcl_cli.objectives.core import NegativeWeights, ScoreBatch
from hcl_cli.objectives.sampler_options import SamplerOptions


def ucl(batch: ScoreBatch, options: SamplerOptions) -> NegativeWeights:
    """Uniform q(j|i) over every sample but the anchor and its partner."""
    return NegativeWeights(batch.uniform, log_normaliser=batch.uniform_log_normaliser)
