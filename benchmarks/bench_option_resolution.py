"""What checking the sampler options on every training step cost, and what is left of it.

Before, the training step called the public ``contrastive_loss(..., **options)``, which resolves
and checks every sampler option (``SamplerOptions.resolve``: ``Option.check`` of each, the
schedule, the runtime inputs) and the inputs' shapes on every call. Now ``hcl pretrain`` checks
its configuration once at its entry, resolves the options once per epoch
(``PretrainConfig.loss_options``), and the step adds its tensors (``SamplerOptions.with_inputs``)
and calls ``loss.sampler_loss``, which checks nothing.

Two measures, in one process, on the product's ``TrainingStep`` from ``build_training`` (small
CNN on prepared digits, batch ``--batch-size``, hucl, one thread):

* the step both ways, interleaved: the old path is the same step with its loss call routed
  through the public ``contrastive_loss`` (as the step called it before), the new path the step
  as it is; the order alternates every repetition; medians and their difference in microseconds;
* the per-step option handling alone: ``SamplerOptions.resolve`` of the epoch's options (the
  old path's work) against ``with_inputs`` (the new path's), each timed over many calls.

Run from the repository root::

    python -m benchmarks.bench_option_resolution

It writes ``benchmarks/results/option_resolution.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import torch

from benchmarks.common import load_average, prepared, write_result
from hcl_cli.config.pretrain import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.image import step as step_module
from hcl_cli.image.prepared import load_split
from hcl_cli.image.step import build_training
from hcl_cli.objectives import contrastive_loss
from hcl_cli.objectives.loss import sampler_loss
from hcl_cli.objectives.registry import RUNTIME_INPUTS, Sampler
from hcl_cli.objectives.sampler_options import SamplerOptions
from hcl_cli.option import Option


def checking_loss(sampler: str) -> Any:
    """The step's loss call as it was: the public loss, which resolves and checks the options every call."""

    def loss(
        z1: torch.Tensor, z2: torch.Tensor, labels: torch.Tensor | None, *, spec: Sampler, options: SamplerOptions, anchor_mask: Any = None
    ) -> Any:
        inputs = {name: getattr(options, name) for name in RUNTIME_INPUTS if getattr(options, name) is not None}
        return contrastive_loss(z1, z2, labels, sampler=sampler, anchor_mask=anchor_mask, return_stats=True, **dict(options), **inputs)

    return loss


def checks_per_step(step: Any, images: torch.Tensor, labels: torch.Tensor, options: SamplerOptions, loss: Any) -> int:
    """How many times ``Option.check`` runs in one step whose loss call is ``loss``."""
    calls, check = [], Option.check

    def counting(self: Option, value: Any, *, where: str | None = None) -> Any:
        calls.append(self.name)
        return check(self, value, where=where)

    Option.check, step_module.sampler_loss = counting, loss  # type: ignore[method-assign]
    try:
        step(images, labels, options)
    finally:
        Option.check, step_module.sampler_loss = check, sampler_loss  # type: ignore[method-assign]
    return len(calls)


def per_call_us(function: Any, calls: int) -> float:
    """Median over 5 rounds of the microseconds one call of ``function`` takes."""
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--sampler", default="hucl")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = load_average()

    with tempfile.TemporaryDirectory() as folder:
        card = prepared(f"{folder}/prepared", test_fraction=0.5)
        config = PretrainConfig(sampler=args.sampler, batch_size=args.batch_size, data=f"{folder}/prepared", device="cpu")
        context = DistributedContext(0, 1, 0, torch.device("cpu"))
        context.seed_everything(0)
        _, step = build_training(config, card, context)
        images, labels = load_split(f"{folder}/prepared", "train")
    options = config.loss_options(0)
    paths = {"checked every step (before)": checking_loss(args.sampler), "checked once (now)": sampler_loss}

    times: dict[str, list[float]] = {name: [] for name in paths}
    generator = torch.Generator().manual_seed(0)
    for repeat in range(args.warmup + args.repeats):
        batch = torch.randint(len(labels), (args.batch_size,), generator=generator)
        order = list(paths) if repeat % 2 == 0 else list(reversed(paths))
        for name in order:
            step_module.sampler_loss = paths[name]
            start = time.perf_counter()
            step(images[batch], labels[batch], options)
            if repeat >= args.warmup:
                times[name].append(time.perf_counter() - start)
    step_module.sampler_loss = sampler_loss

    spec = config.spec
    head = {"head_inputs": None, "momentum_keys": None}
    before_us = per_call_us(lambda: SamplerOptions.resolve(spec, dict(options)), 2000)
    now_us = per_call_us(lambda: options.with_inputs(**head), 2000)
    medians = {name: 1e6 * statistics.median(values) for name, values in times.items()}
    (old, new) = medians.values()
    results = {
        "step_median_us": {name: round(value, 1) for name, value in medians.items()},
        "step_saved_us": round(old - new, 1),
        "step_ratio_now_to_before": round(new / old, 4),
        "option_handling_per_step_us": {"SamplerOptions.resolve (before)": round(before_us, 2), "with_inputs (now)": round(now_us, 2)},
        "option_checks_per_step": {
            name: checks_per_step(step, images[: args.batch_size], labels[: args.batch_size], options, path) for name, path in paths.items()
        },
    }
    print(
        f"step: before {old:.1f} us, now {new:.1f} us (saved {old - new:.1f} us); "
        f"option handling per step: resolve {before_us:.2f} us -> with_inputs {now_us:.2f} us"
    )
    payload = {
        "what": "hcl pretrain's TrainingStep (small CNN on prepared digits), the loss called through the public contrastive_loss "
        "(options resolved and checked every step, as before) against loss.sampler_loss with the epoch's options resolved once (now)",
        "sampler": args.sampler,
        "batch_size": args.batch_size,
        "threads": torch.get_num_threads(),
        "repeats": args.repeats,
        "warmup": args.warmup,
        "load_average_1min": {"before": load_before, "after": load_average()},
        "results": results,
    }
    write_result("option_resolution", payload)


if __name__ == "__main__":
    main()
