"""hcl_cli/objectives/ot.py: the Sinkhorn kernel's exp without the CPU's slow path for underflowing results
is ``torch.exp`` (and ``torch.logsumexp``) bit for bit, as the rounds read it with subnormals flushed."""

from __future__ import annotations

import math

import pytest
import torch

from hcl_cli.objectives.ot import exp_flushed, logsumexp_flushed, subnormals_flushed


def exponents(dtype: torch.dtype) -> torch.Tensor:
    """Exponents from far below underflow to above 1, the values next to the normal/subnormal edge, infinities and NaN."""
    generator = torch.Generator().manual_seed(0)
    spread = -torch.rand(20_000, generator=generator, dtype=torch.float64) * 1e5
    edge = math.log(torch.finfo(dtype).tiny)
    near_edge = edge + torch.linspace(-2.0, 2.0, 4001, dtype=torch.float64)
    special = torch.tensor([-math.inf, math.inf, math.nan, 0.0, 3.0], dtype=torch.float64)
    return torch.cat([spread, near_edge, special]).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_exp_flushed_is_torch_exp_bit_for_bit_with_subnormals_flushed(dtype: torch.dtype) -> None:
    values = exponents(dtype)
    with subnormals_flushed():  # exp may leave subnormal bit patterns, which every later operation reads as zero: * 1 reads them
        expected, ours = torch.exp(values) * 1.0, exp_flushed(values)
    assert bool((expected[values < math.log(torch.finfo(dtype).tiny) - 1] == 0).all()), "the subnormal results read as zero"
    assert torch.equal(ours.isnan(), expected.isnan())
    assert torch.equal(ours[~ours.isnan()], expected[~expected.isnan()])


def test_exp_flushed_without_flushing_drops_only_the_subnormal_results() -> None:
    values = exponents(torch.float32)
    expected, ours = torch.exp(values), exp_flushed(values)
    normal = expected >= torch.finfo(torch.float32).tiny
    assert torch.equal(ours[normal], expected[normal])
    assert bool((ours[~normal & ~expected.isnan()] == 0).all())


@pytest.mark.parametrize("dim", [0, 1])
def test_logsumexp_flushed_is_torch_logsumexp_bit_for_bit(dim: int) -> None:
    generator = torch.Generator().manual_seed(1)
    values = torch.randn(300, 200, generator=generator) * 1e4
    values[3], values[:, 7] = -math.inf, -math.inf  # a row and a column without mass
    with subnormals_flushed():
        assert torch.equal(logsumexp_flushed(values, dim), torch.logsumexp(values, dim))
