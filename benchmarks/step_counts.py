"""Host work of one image training step, counted exactly on a CPU: aten ops dispatched and host syncs (issue 28).

The recipe (so that everyone counts alike): a synthetic imagefolder of 256 random 32x32 RGB images
(the SimCLR recipe) written in a temporary folder and prepared by ``hcl prepare``'s own stage code;
the step that ``hcl pretrain`` trains with (:func:`hcl_cli.training.builders.build_training`), fed
as the epoch loop feeds it (the epoch's seeded order, :meth:`~hcl_cli.distributed.DistributedContext.shard_batches`,
index slices of the resident uint8 set); one CPU thread. One untimed step, then
``torch.profiler.profile(activities=[ProfilerActivity.CPU])`` over steps 2-4:

- ``ops``: the number of ``aten::`` events (nested calls included) divided by 3, a multi-tensor op
  (``aten::_foreach_*``, ``aten::_fused_*``: torch's optimizers and the gradients' norm) counting as one with
  what it calls: on CUDA it is one launch per device and dtype, while its CPU fallback loops over the tensors;
- ``syncs``: the counts of ``aten::_local_scalar_dense`` (``.item()``), ``aten::nonzero`` and ``aten::lift_fresh`` (a
  tensor made from host data, ``torch.tensor``/``new_tensor``/an item set from a Python number: on CUDA a blocking copy
  to the device, which CUDA's sync debug mode reports) over the three steps,
  but for those inside torch's fused optimizer kernels (``aten::_fused_adam_``, ``aten::_fused_sgd_``, ...): they read
  their step counts, ``found_inf`` and a tensor learning rate in place where they live, on the host for a CPU, in the
  kernel on CUDA (no host sync there).

Each op is also put in one phase of the step, by the profiled range it runs in: ``augmentation``,
``forward`` (the encoder, and the key encoder with a queue), ``loss``, ``backward`` (the autograd
engine), ``optimiser`` (``Optimizer.step``), ``other`` (what is left: the batch's indexing, the views'
glue, the gradients' norm and the finite check). The step is counted as a GPU runs it: the ot sampler's Sinkhorn runs
its device path (:func:`~hcl_cli.objectives.ot.device_path_on_cpu`), not the CPU's, whose stop is read every round. Goals: ResNet-18 at batch 64, at
most 2,000 ops per step for ucl and hucl, and at most one sync in the three steps for every sampler, with a queue in both modes (``tests/test_step_counts.py``
pins them). A setting is ``SAMPLER`` or ``SAMPLER@queue`` (a 128-key queue, ``queue_mode: batch``) or ``SAMPLER@moco``
(``queue_mode: moco``). Writes ``benchmarks/results/step_counts.json``::

    python -m benchmarks.step_counts                       # resnet18 and small_cnn, every setting of SETTINGS
    python -m benchmarks.step_counts --arch small_cnn --sampler ucl,hucl@queue --no-write
    python -m benchmarks.step_counts --sampler ucl,ot,ot@queue --name step_counts_ot --baseline benchmarks/results/step_counts.json
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.autograd.profiler_util import FunctionEvent
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_pretrain import SYNTHETIC_SIZE, write_synthetic_image_folder
from benchmarks.common import prepared, write_result
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import distributed_context
from hcl_cli.image import step as image_step
from hcl_cli.modality import modality_of
from hcl_cli.objectives import ot
from hcl_cli.optimizer import set_scheduled_rate
from hcl_cli.training.builders import build_training
from hcl_cli.training.loop import epoch_order

IMAGES = 256
BATCH_SIZE = 64
PROFILED_STEPS = 3
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::lift_fresh")
IN_PLACE_READS = "aten::_fused_"
"""The prefix of the ops whose CPU kernels read their scalars on the host (not a device sync: see the module docstring)."""
MULTI_TENSOR = ("aten::_foreach_", "aten::_fused_")
"""The prefixes of the multi-tensor ops, counted as one op each (see the module docstring)."""
QUEUE_SIZE = 128
SETTINGS = (
    "ucl",
    "debiased",
    "hucl",
    "scl",
    "hscl",
    "hscl-threshold",
    "ot",
    "undimix",
    "hucl@queue",
    "hucl@moco",
)
"""Every image sampler, and a queue in both modes."""
PHASES = ("augmentation", "forward", "loss", "backward", "optimiser", "other")
LABELS = {"hcl::augmentation": "augmentation", "hcl::forward": "forward", "hcl::loss": "loss"}


@dataclass(frozen=True)
class StepCounts:
    """One setting's counts: aten ops per step, host syncs in the profiled steps, and the ops of each phase per step."""

    arch: str
    sampler: str
    batch_size: int
    ops: float
    syncs: int
    phases: dict[str, float]


def phase_of(event: FunctionEvent) -> str:
    """The phase of the step an aten op runs in, from the nearest labelled range around it."""
    parent: FunctionEvent | None = event
    while parent is not None:
        if parent.name in LABELS:
            return LABELS[parent.name]
        if parent.name.startswith("autograd::engine::evaluate_function"):
            return "backward"
        if parent.name.startswith("Optimizer."):
            return "optimiser"
        parent = parent.cpu_parent
    return "other"


def labelled(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` run inside a profiler range ``name`` (for :func:`phase_of`); what it returns, unchanged."""

    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        with record_function(name):
            return call(*args, **kwargs)

    return run


@contextlib.contextmanager
def phase_labels(step: Any) -> Iterator[None]:
    """Label the augmentation, the encoder(s) and the loss of ``step`` with profiler ranges (no other change)."""
    patched = [(step.augment, "forward", "hcl::augmentation"), (step.network, "forward", "hcl::forward")]
    if step.queue is not None:
        patched.append((step.queue.key_model, "forward", "hcl::forward"))
    losses = [name for name in ("sampler_loss", "moco_sampler_loss") if hasattr(image_step, name)]
    saved = [(owner, attribute, getattr(owner, attribute)) for owner, attribute, _ in patched]
    saved_losses = {name: getattr(image_step, name) for name in losses}
    for owner, attribute, label in patched:
        setattr(owner, attribute, labelled(label, getattr(owner, attribute)))
    for name in losses:
        setattr(image_step, name, labelled("hcl::loss", saved_losses[name]))
    try:
        yield
    finally:
        for owner, attribute, value in saved:
            setattr(owner, attribute, value)
        for name, value in saved_losses.items():
            setattr(image_step, name, value)


def inside_multi_tensor(event: FunctionEvent) -> bool:
    """Whether ``event`` runs inside a multi-tensor op (:data:`MULTI_TENSOR`), which counts as one op with it."""
    parent = event.cpu_parent
    while parent is not None and not parent.name.startswith(MULTI_TENSOR):
        parent = parent.cpu_parent
    return parent is not None


def host_syncs(events: list[FunctionEvent]) -> int:
    """The host syncs among the profiled ``events``: :data:`SYNC_OPS`, less the in-place reads of :data:`IN_PLACE_READS`."""

    def inside_fused(event: FunctionEvent) -> bool:
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith(IN_PLACE_READS):
            parent = parent.cpu_parent
        return parent is not None

    return sum(1 for event in events if event.name in SYNC_OPS and not inside_fused(event))


def setting_config(folder: Path, arch: str, setting: str, batch_size: int, device: str = "cpu", **extra: Any) -> PretrainConfig:
    """``hcl pretrain``'s config of one setting (``SAMPLER``, ``SAMPLER@queue``, ``SAMPLER@moco``) on ``folder``, with
    ``extra`` options."""
    sampler, _, queue = setting.partition("@")
    queue_options = {"queue_size": QUEUE_SIZE, "queue_mode": "moco" if queue == "moco" else "batch"} if queue else {}
    return PretrainConfig(data=str(folder), arch=arch, sampler=sampler, batch_size=batch_size, device=device, **queue_options, **extra)


def count_step(folder: Path, arch: str, sampler: str, batch_size: int = BATCH_SIZE, **extra: Any) -> StepCounts:
    """The recipe of the module docstring for one architecture and setting (``sampler``) on the prepared ``folder``, with
    ``extra`` options (``optimizer="lars", lr_schedule="cosine"``: the loop's write of a scheduled learning rate is
    counted with its step)."""
    config = setting_config(folder, arch, sampler, batch_size, **extra)
    modality = modality_of(folder)
    card = modality.load_card(folder)
    with ot.device_path_on_cpu(), distributed_context("cpu") as context:
        samples, labels = modality.load_samples(folder, modality.training_splits(card, config.needs_labels), context.device)
        context.seed_everything(config.seed)
        _, step = build_training(modality, config, card, context)
        options = config.loss_options(0).replaced({"objective": modality.objectives[0]}, {})
        order = epoch_order(len(samples), config.seed, 0)
        batches = context.shard_batches(order, batch_size, modality.keep_last_batch)
        if len(batches) < 1 + PROFILED_STEPS:
            raise SystemExit(f"{len(samples)} images make {len(batches)} batches of {batch_size}: need {1 + PROFILED_STEPS}")

        def run(index: int) -> None:
            if config.scheduled:
                set_scheduled_rate(step.optimizer, config, index, len(batches))
            step(samples[batches[index]], labels[batches[index]], options)

        run(0)
        with phase_labels(step), profile(activities=[ProfilerActivity.CPU]) as profiler:
            for index in range(1, 1 + PROFILED_STEPS):
                run(index)
    counted = [event for event in profiler.events() if event.name.startswith("aten::") and not inside_multi_tensor(event)]
    phases = collections.Counter(phase_of(event) for event in counted)
    return StepCounts(
        arch=arch,
        sampler=sampler,
        batch_size=batch_size,
        ops=len(counted) / PROFILED_STEPS,
        syncs=host_syncs(profiler.events()),
        phases={phase: phases[phase] / PROFILED_STEPS for phase in PHASES},
    )


@contextlib.contextmanager
def synthetic_folder(images: int = IMAGES, side: int = SYNTHETIC_SIZE) -> Iterator[Path]:
    """A prepared folder of ``images`` random ``side`` x ``side`` RGB training images (``hcl prepare --dataset imagefolder``),
    removed after."""
    with tempfile.TemporaryDirectory() as scratch:
        write_synthetic_image_folder(Path(scratch) / "images", images, side=side)
        folder = Path(scratch) / "prepared"
        prepared(folder, dataset="imagefolder", path=str(Path(scratch) / "images"))
        yield folder


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one CPU thread (the recipe's), restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="resnet18,small_cnn", help="Comma-separated architectures.")
    parser.add_argument("--sampler", default=",".join(SETTINGS), help="Comma-separated settings (SAMPLER[@queue|@moco]).")
    parser.add_argument("--no-write", action="store_true", help="Print only; leave benchmarks/results/step_counts.json alone.")
    parser.add_argument("--name", default="step_counts", help="The results file: benchmarks/results/NAME.json.")
    parser.add_argument(
        "--baseline", type=Path, help="An earlier results file of this benchmark: its counts of the same settings are written beside."
    )
    args = parser.parse_args()
    counts = []
    with one_thread(), synthetic_folder() as folder:
        for arch in args.arch.split(","):
            for sampler in args.sampler.split(","):
                result = count_step(folder, arch, sampler)
                phases = ", ".join(f"{phase} {value:.0f}" for phase, value in result.phases.items())
                print(
                    f"{arch} B={result.batch_size} {sampler}: {result.ops:.0f} aten ops per step ({phases}); {result.syncs} syncs in 3 steps"
                )
                counts.append(asdict(result))
    if not args.no_write:
        recipe = f"synthetic imagefolder of {IMAGES} random 32x32 RGB images, batch {BATCH_SIZE}, one CPU thread, steps 2-4 profiled"
        recipe += f"; @queue: a {QUEUE_SIZE}-key queue, queue_mode batch; @moco: queue_mode moco"
        payload: dict[str, Any] = {"recipe": recipe, "goals": {"ops_per_step": 2000, "syncs_in_3_steps": 1}, "counts": counts}
        if args.baseline:
            earlier = json.loads(args.baseline.read_text())
            settings = {(row["arch"], row["sampler"]) for row in counts}
            payload["baseline"] = {
                "file": args.baseline.name,
                **{key: earlier.get(key) for key in ("date", "commit", "torch")},
                "counts": [row for row in earlier["counts"] if (row["arch"], row["sampler"]) in settings],
            }
        write_result(args.name, payload)


if __name__ == "__main__":
    main()
