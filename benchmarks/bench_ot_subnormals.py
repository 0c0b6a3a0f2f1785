"""What subnormal floats cost the OT sampler's Sinkhorn rounds on a CPU, and what flushing them saves.

At a small ``ot_epsilon`` most entries of the Sinkhorn kernel underflow into the subnormal range
(:mod:`hcl_cli.objectives.ot`). Two measurements, each interleaved (the variants alternate every
repetition, so that drifts in the machine's load hit all alike) and reported as the median time of
each variant and the median of its per-repetition ratios to the first:

- ``matvec``: the matrix-vector product a Sinkhorn round is made of, on an n x n kernel of normal
  floats, and on one of subnormal floats with subnormals kept and flushed
  (:func:`~hcl_cli.objectives.ot.subnormals_flushed`, as :func:`~hcl_cli.objectives.ot.sinkhorn_log_coupling` runs its rounds);
- ``exp``: ``torch.exp`` per element on exponents whose results are normal floats and on exponents
  whose results underflow, and :func:`~hcl_cli.objectives.ot.exp_flushed` on the underflowing ones.

Run from the repository root (it writes ``benchmarks/results/ot_subnormals.json``)::

    python -m benchmarks.bench_ot_subnormals --threads 1
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, median_ratio, write_result
from hcl_cli.objectives.ot import exp_flushed, subnormals_flushed

SEED = 0


def interleaved(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Wall seconds of each variant per repetition, the variants alternating (one untimed warm-up repetition first)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for repetition in range(repeats + 1):
        order = list(variants) if repetition % 2 else list(reversed(variants))
        for name in order:
            start = time.perf_counter()
            variants[name]()
            if repetition:
                times[name].append(time.perf_counter() - start)
    return times


def summary(times: dict[str, list[float]], baseline: str) -> dict[str, object]:
    """Each variant's median seconds, and its median ratio to ``baseline``'s time of the same repetition."""
    return {
        "median_seconds": {name: statistics.median(values) for name, values in times.items()},
        f"median_ratio_to_{baseline}": {name: median_ratio(values, times[baseline]) for name, values in times.items()},
    }


def with_flushing(run: Callable[[], object]) -> Callable[[], object]:
    """``run`` with subnormals flushed to zero."""

    def flushed() -> object:
        with subnormals_flushed():
            return run()

    return flushed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads")
    parser.add_argument("--size", type=int, default=2048, help="n: the kernel is n x n")
    parser.add_argument("--elements", type=int, default=1 << 22, help="exponents per exp call")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(SEED)
    tiny = torch.finfo(torch.float32).tiny

    normal_kernel = torch.rand(args.size, args.size, generator=generator)
    subnormal_kernel = normal_kernel * tiny * 0.5
    scaling = torch.rand(args.size, generator=generator)
    matvec = interleaved(
        {
            "normal_kernel": lambda: normal_kernel @ scaling,
            "subnormal_kernel_kept": lambda: subnormal_kernel @ scaling,
            "subnormal_kernel_flushed": with_flushing(lambda: subnormal_kernel @ scaling),
        },
        args.repeats,
    )

    tiny_exponent = math.log(tiny)
    normal = torch.empty(args.elements).uniform_(-10.0, 0.0, generator=generator)
    underflowing = torch.empty(args.elements).uniform_(tiny_exponent - 15.0, tiny_exponent - 0.5, generator=generator)
    exps = interleaved(
        {
            "exp_normal_results": lambda: torch.exp(normal),
            "exp_underflowing_results": lambda: torch.exp(underflowing),
            "exp_flushed_underflowing": lambda: exp_flushed(underflowing),
        },
        args.repeats,
    )

    write_result(
        "ot_subnormals",
        {
            "threads": args.threads,
            "load_average_1min": load_average(),
            "matvec": {"kernel": f"{args.size} x {args.size} float32", **summary(matvec, "normal_kernel")},
            "exp": {"elements": args.elements, **summary(exps, "exp_normal_results")},
        },
    )


if __name__ == "__main__":
    main()
