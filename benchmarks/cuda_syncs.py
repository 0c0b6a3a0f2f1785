"""Host syncs of the image training step on CUDA, as CUDA itself reports them: every sampler and both queue modes.

``torch.cuda.set_sync_debug_mode("warn")`` makes torch warn at every operation that waits for the
device (``.item()``, ``nonzero``, a blocking copy, ``cudaStreamSynchronize``); the warnings are
counted, with the line of Python that made each, over three steps after one warm-up step, for every setting of
:data:`benchmarks.step_counts.SETTINGS` on the step-count recipe's synthetic 32x32 images (small
CNN, batch 64, fp32 and bf16). Then the compiled step (``--compile``, CUDA graphs under
``reduce-overhead``) runs five steps of ucl and hucl beside eager ones from the same seed and
weights, and their losses are compared. Writes ``benchmarks/results/syncs_DEVICE.json`` after every row, so a time
limit keeps what was counted (``device_check.sh``'s ``syncs`` part; its smoke run tries it on a CPU, where nothing
reports syncs)::

    python -m benchmarks.cuda_syncs
    HCL_SYNC_DEVICE=cpu python -m benchmarks.cuda_syncs --settings ucl,hucl@queue --compiled ""
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result
from benchmarks.step_counts import BATCH_SIZE, SETTINGS, setting_config, synthetic_folder
from hcl_cli.distributed import distributed_context
from hcl_cli.modality import modality_of
from hcl_cli.training.builders import build_training
from hcl_cli.training.loop import epoch_order

STEPS = 3
ROOT = Path(__file__).resolve().parents[1]
DEVICE = os.environ.get("HCL_SYNC_DEVICE", "cuda")
"""The device (``cpu`` only to try the script out: then nothing reports syncs)."""


def sync_debug_mode(mode: str) -> None:
    if DEVICE == "cuda":
        torch.cuda.set_sync_debug_mode(mode)
        torch.cuda.synchronize()


@contextlib.contextmanager
def training(folder: Path, setting: str, **extra: Any) -> Iterator[tuple[Any, Any, torch.Tensor, Any, Any]]:
    """The step ``hcl pretrain`` trains a setting with on ``folder`` (small CNN, on :data:`DEVICE`), seeded: the step, the
    resident samples and labels, the first epoch's options and the process's context."""
    config = setting_config(folder, "small_cnn", setting, BATCH_SIZE, device=DEVICE, **extra)
    modality = modality_of(folder)
    card = modality.load_card(folder)
    with distributed_context(DEVICE) as context:
        samples, labels = modality.load_samples(folder, modality.training_splits(card, config.needs_labels), context.device)
        context.seed_everything(config.seed)
        _, step = build_training(modality, config, card, context)
        yield step, samples, labels, config.loss_options(0).replaced({"objective": modality.objectives[0]}, {}), context


def syncs(folder: Path, setting: str, precision: str) -> dict[str, Any]:
    """The sync warnings of three steps after a warm-up one (and the first message), or the error that stopped the setting."""
    with training(folder, setting, precision=precision) as (step, samples, labels, options, context):
        batches = context.shard_batches(epoch_order(len(samples), 0, 0).to(context.device), BATCH_SIZE)
        step(samples[batches[0]], labels[batches[0]], options).read()
        sync_debug_mode("default")
        results = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sync_debug_mode("warn")
            try:
                for batch in batches[1 : 1 + STEPS]:
                    results.append(step(samples[batch], labels[batch], options))
            finally:
                sync_debug_mode("default")
        values = [result.read() for result in results]
    found = [warning for warning in caught if "synchroniz" in str(warning.message).lower()]
    where = collections.Counter(
        f"{Path(w.filename).relative_to(ROOT) if Path(w.filename).is_relative_to(ROOT) else Path(w.filename).name}:{w.lineno}"
        for w in found
    )
    return {
        "syncs": len(found),
        "first": str(found[0].message) if found else None,
        "where": dict(where.most_common()),
        "losses": [v.loss for v in values],
    }


def compiled_losses(folder: Path, sampler: str) -> dict[str, Any]:
    """Five steps' losses eager and compiled, from the same seed and batches (inductor drawing eager mode's random numbers,
    so that both see the same views)."""
    torch._inductor.config.fallback_random = True
    losses = {}
    for compiled in (False, True):
        with training(folder, sampler, compile=compiled) as (step, samples, labels, options, context):
            batch = torch.arange(BATCH_SIZE, device=context.device)
            losses["compiled" if compiled else "eager"] = [step(samples[batch], labels[batch], options).read().loss for _ in range(5)]
    return losses


def guarded(call: Any, *args: Any) -> dict[str, Any]:
    try:
        return call(*args)
    except Exception as error:  # one failing setting must not lose the others
        return {"error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()[-2000:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default=",".join(SETTINGS), help="the step-count settings whose syncs are counted")
    parser.add_argument("--compiled", default="ucl,hucl", help='the samplers whose compiled losses are compared (none: "")')
    args = parser.parse_args()
    rows: dict[str, Any] = {}
    compiled: dict[str, Any] = {}
    record = {"recipe": f"small_cnn, batch {BATCH_SIZE}, {STEPS} steps after one", "syncs": rows, "compiled": compiled}
    with synthetic_folder() as folder:
        for precision in ("fp32", "bf16"):
            for setting in args.settings.split(","):
                rows[f"{setting} {precision}"] = row = guarded(syncs, folder, setting, precision)
                print(setting, precision, {k: v for k, v in row.items() if k != "trace"}, flush=True)
                write_result(f"syncs_{DEVICE}", record, DEVICE)  # after every row: a time limit keeps what was counted
        for sampler in filter(None, args.compiled.split(",")):
            compiled[sampler] = guarded(compiled_losses, folder, sampler)
            print(sampler, compiled[sampler], flush=True)
            write_result(f"syncs_{DEVICE}", record, DEVICE)
    failed = [name for name, row in {**rows, **compiled}.items() if "error" in row]
    if failed:
        sys.exit(f"cuda_syncs: failed: {', '.join(failed)} (their errors are in the results file)")


if __name__ == "__main__":
    main()
