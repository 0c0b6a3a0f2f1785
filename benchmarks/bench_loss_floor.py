"""Each sampler's loss against the floor of a contrastive loss, forward and backward, in one process.

The floor is what no contrastive loss over a batch can skip: the similarity matmul of the 2B
anchors ``[z1; z2]`` (normalised) with themselves and a logsumexp over every column but the
anchor's own, less the positive logit, then the backward of that (:func:`floor_loss`). Each
sampler runs through the product's own entry, the one the training step calls:
:func:`hcl_cli.objectives.loss.sampler_loss` with the sampler's options at their declared
defaults at the first epoch (``SamplerOptions.resolve``), on the same float32 inputs (B x d
projections of two views, labels of 10 classes, and for undimix the (B, 512) inputs of the head's
last layer). Every repetition times the floor and every sampler once, in an order rotated each
repetition, on new random inputs; a sampler's ratio is the median over repetitions of its time
over the floor's time of the same repetition. The process's CPU time (less disturbed by other
processes on a shared machine) is recorded the same way.

Graphs (``--graphs``): InfoGraph's loss (:func:`hcl_cli.objectives.infograph.local_global_loss`)
on a MUTAG-sized synthetic batch (128 graphs of 18 nodes, 96-d unnormalised embeddings scored in
the range a trained encoder gives) for ucl, hucl and ot at each of HCL-OT Table V's epsilons,
forward and backward, with the Sinkhorn iterations each ot step ran.

Goals (issue 22, item 1): every sampler within 1.25x of the floor, ot within 1.8x, undimix within
2.5x. Run from the repository root::

    python -m benchmarks.bench_loss_floor

It writes ``benchmarks/results/loss_floor.json``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, median_ratio, write_result
from hcl_cli.objectives.infograph import local_global_loss
from hcl_cli.objectives.loss import sampler_loss
from hcl_cli.objectives.registry import SAMPLERS, lookup
from hcl_cli.objectives.sampler_options import SamplerOptions

GOALS = {"ot": 1.8, "undimix": 2.5}
"""Each sampler's goal as a multiple of the floor; 1.25 for the others."""
DEFAULT_GOAL = 1.25
DIMENSION = 128
HEAD_HIDDEN = 512
CLASSES = 10
GRAPH_EPSILONS = (0.05, 0.1, 0.5, 1.0)
"""HCL-OT Table V's epsilons."""


def floor_loss(z1: Tensor, z2: Tensor, temperature: float, self_mask: Tensor) -> Tensor:
    """NT-Xent at its leanest: normalise, one (2B, 2B) matmul (the temperature on the (2B, d) side), ``torch.logsumexp``
    over every column but the anchor's own (``self_mask``, built once outside the timing), less the positive logit."""
    size = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = (z / temperature) @ z.T
    positives = torch.cat([logits.diagonal(size), logits.diagonal(-size)])
    return (torch.logsumexp(logits.masked_fill(self_mask, -math.inf), dim=1) - positives).mean()


Inputs = dict[str, Tensor]


def image_inputs(size: int, generator: torch.Generator) -> Inputs:
    """Fresh float32 projections of two views (leaves that want a gradient), labels, and the head's last-layer inputs."""
    z1, z2 = (torch.randn(size, DIMENSION, generator=generator).requires_grad_() for _ in range(2))
    labels = torch.randint(0, CLASSES, (size,), generator=generator)
    hidden = [torch.randn(size, HEAD_HIDDEN, generator=generator).relu() for _ in range(2)]
    return {"z1": z1, "z2": z2, "labels": labels, "h1": hidden[0], "h2": hidden[1]}


def sampler_run(name: str) -> Callable[[Inputs], Tensor]:
    """The loss of ``name`` through the training step's entry, at the declared defaults."""
    spec = lookup(name)
    options = SamplerOptions.resolve(spec, {})

    def run(inputs: Inputs) -> Tensor:
        given = options.with_inputs(head_inputs=(inputs["h1"], inputs["h2"])) if spec.head_inputs else options
        return sampler_loss(inputs["z1"], inputs["z2"], inputs["labels"], spec=spec, options=given)[0]

    return run


def timed(run: Callable[[Any], Tensor], inputs: Any) -> tuple[float, float]:
    """Wall and CPU seconds of ``run(inputs)`` and its backward."""
    start, start_cpu = time.perf_counter(), time.process_time()
    run(inputs).backward()
    return time.perf_counter() - start, time.process_time() - start_cpu


def interleaved(
    runs: dict[str, Callable[[Any], Tensor]], make_inputs: Callable[[], Any], warmup: int, repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of every run per repetition, the order rotated each repetition, on the same fresh inputs."""
    names = list(runs)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(-warmup, repeats):
        inputs = make_inputs()
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            for leaf in (value for value in (inputs.values() if isinstance(inputs, dict) else ()) if value.requires_grad):
                leaf.grad = None
            wall_seconds, cpu_seconds = timed(runs[name], inputs)
            if repeat >= 0:
                wall[name].append(wall_seconds)
                cpu[name].append(cpu_seconds)
    return wall, cpu


def image_results(size: int, warmup: int, repeats: int, seed: int) -> dict[str, Any]:
    """Every sampler's fwd+bwd time and its ratio to the floor at batch size ``size``."""
    temperature = SamplerOptions.resolve(lookup("ucl"), {}).temperature
    self_mask = torch.eye(2 * size, dtype=torch.bool)
    runs: dict[str, Callable[[Inputs], Tensor]] = {"floor": lambda inputs: floor_loss(inputs["z1"], inputs["z2"], temperature, self_mask)}
    runs |= {name: sampler_run(name) for name in SAMPLERS}
    generator = torch.Generator().manual_seed(seed)
    wall, cpu = interleaved(runs, lambda: image_inputs(size, generator), warmup, repeats)
    results: dict[str, Any] = {"floor_ms": round(1e3 * statistics.median(wall["floor"]), 3)}
    for name in SAMPLERS:
        ratio, goal = median_ratio(wall[name], wall["floor"]), GOALS.get(name, DEFAULT_GOAL)
        results[name] = {
            "median_ms": round(1e3 * statistics.median(wall[name]), 3),
            "ratio_to_floor": round(ratio, 3),
            "ratio_spread": [
                round(min(t / f for t, f in zip(wall[name], wall["floor"])), 3),
                round(max(t / f for t, f in zip(wall[name], wall["floor"])), 3),
            ],
            "cpu_ratio_to_floor": round(median_ratio(cpu[name], cpu["floor"]), 3),
            "goal": goal,
            "meets_goal": ratio <= goal,
        }
        print(
            f"B={size:5d} {name:15s} {results[name]['median_ms']:9.2f} ms  {ratio:6.3f}x  cpu {results[name]['cpu_ratio_to_floor']:6.3f}x  goal {goal}"
        )
    return results


def graph_inputs(generator: torch.Generator, graphs: int, nodes_per_graph: int, dimension: int, scale: float) -> dict[str, Tensor]:
    """A MUTAG-sized batch: ``graphs`` graphs of ``nodes_per_graph`` nodes; local and global embeddings of norm about ``scale``."""
    local = (scale * torch.randn(graphs * nodes_per_graph, dimension, generator=generator) / math.sqrt(dimension)).requires_grad_()
    global_ = (scale * torch.randn(graphs, dimension, generator=generator) / math.sqrt(dimension)).requires_grad_()
    node_graph = torch.arange(graphs).repeat_interleave(nodes_per_graph)
    return {
        "local": local,
        "global_": global_,
        "node_graph": node_graph,
        "graph_labels": torch.randint(0, 2, (graphs,), generator=generator),
    }


def graph_results(warmup: int, repeats: int, seed: int, scale: float) -> dict[str, Any]:
    """ucl, hucl and ot (each Table V epsilon) on node-graph batches: fwd+bwd time and ratio to ucl."""

    def loss(sampler: str, **options: Any) -> Callable[[dict[str, Tensor]], Tensor]:
        return lambda inputs: local_global_loss(**inputs, sampler=sampler, **options)

    runs = {"ucl": loss("ucl"), "hucl": loss("hucl")}
    runs |= {f"ot eps={epsilon}": loss("ot", ot_epsilon=epsilon, ot_iterations=1000) for epsilon in GRAPH_EPSILONS}
    generator = torch.Generator().manual_seed(seed)
    wall, cpu = interleaved(runs, lambda: graph_inputs(generator, 128, 18, 96, scale), warmup, repeats)
    results: dict[str, Any] = {}
    for name in runs:
        results[name] = {
            "median_ms": round(1e3 * statistics.median(wall[name]), 3),
            "ratio_to_ucl": round(median_ratio(wall[name], wall["ucl"]), 3),
        }
        print(f"graphs {name:12s} {results[name]['median_ms']:9.2f} ms  {results[name]['ratio_to_ucl']:6.3f}x ucl")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024, 4096], help="images per batch (two views each)")
    parser.add_argument("--repeats", type=int, nargs="+", default=[40, 15, 7], help="timed repetitions per batch size")
    parser.add_argument("--warmup", type=int, default=2, help="untimed repetitions first")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--graph-repeats", type=int, default=10, help="timed repetitions of the graph batch (0: skip it)")
    parser.add_argument("--graph-scale", type=float, default=6.0, help="norm of the synthetic node and graph embeddings")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if len(args.repeats) != len(args.batch_sizes):
        parser.error("give one --repeats per --batch-sizes")
    load_before = load_average()
    images = {str(size): image_results(size, args.warmup, repeats, args.seed) for size, repeats in zip(args.batch_sizes, args.repeats)}
    graphs = graph_results(args.warmup, args.graph_repeats, args.seed, args.graph_scale) if args.graph_repeats else None
    payload = {
        "floor": "normalise [z1; z2], (2B, 2B) similarity matmul of z / t with z, torch.logsumexp over every column but the anchor's own (a cached mask), less the positive logit; mean; backward",
        "entry": "hcl_cli.objectives.loss.sampler_loss (the training step's), each sampler's declared defaults at the first epoch",
        "dtype": "float32",
        "dimension": DIMENSION,
        "threads": torch.get_num_threads(),
        "repeats": dict(zip(map(str, args.batch_sizes), args.repeats)),
        "warmup": args.warmup,
        "load_average_1min": {"before": load_before, "after": load_average()},
        "images": images,
        "graphs": graphs,
    }
    write_result("loss_floor", payload)


if __name__ == "__main__":
    main()
