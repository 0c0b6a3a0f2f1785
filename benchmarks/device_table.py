"""The device check's ``table`` part (benchmarks/device_check.sh, issue 53): the next missing (row, seed) runs of the
committed image-table record, in one time box, each written as it ends, joined into the record.

A GPU comes a loan at a time (one call of at most 10 minutes on a fresh machine), so the CIFAR-10 table of every sampler
at one recipe (:data:`RECIPE`: ResNet-18, B 512, bf16 on CUDA, 200 epochs, a kNN probe every 5 epochs) is made a few runs
a loan. ``run`` copies the committed record ``benchmarks/results/NAME.json`` into the results folder (where it is not
there already) and runs ``hcl table --images`` on it with ``--time-budget`` the box less :data:`MARGIN_SECONDS`:
``hcl table`` skips the runs the record holds, starts no run the time left cannot hold (by what the row took before on
the same device; a row whose run :func:`estimate` puts over the box is left out), and rewrites the record after every run, so that what the loan sends back holds every run it ended,
beside the earlier loans'. Copy it over the committed one and commit it. ``plan`` prints the runs the box would hold,
from what each row took in the record on a GPU or, before its first run there, from the step times of
``throughput_cuda.json``, and the rows no box can hold at this recipe. ``--smoke`` runs the same path on a CPU: a small
CNN, batches of 16, 2 epochs, ucl and hucl on 2 seeds, into ``table_images_smoke.json``::

    python -m benchmarks.device_table plan --seconds 390
    python -m benchmarks.device_table run --work WORK --seconds 390          # the images: WORK/prepared (the setup part's)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hcl_cli.tables.owned import write_owned

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "benchmarks" / "results"
RECORD, SMOKE_RECORD = "table_images_cifar10", "table_images_smoke"
SEEDS = 10
RECIPE = ["--arch", "resnet18", "--batch-size", "512", "--epochs", "200", "--eval-every", "5", "--precision", "auto"]
"""The table's recipe (HCL App. D.1's but ResNet-18 and 200 epochs: one run fits a loan); every loan runs it unchanged."""
SMOKE = ["--arch", "small_cnn", "--batch-size", "16", "--epochs", "2", "--eval-every", "1", "--device", "cpu", "--methods", "ucl,hucl"]
ROWS = ("ucl", "debiased", "hucl", "scl", "hscl", "ot", "undimix")
MARGIN_SECONDS = 20
"""What the box keeps back for ``hcl table``'s start-up (torch's import, the prepared images loaded) and its last write."""
READOUT_SECONDS = 20.0
"""A plan's guess, before a row has run on a GPU, of its readouts (every image embedded, kNN, L-BFGS) and probes' share."""
PROBE_SHARE = 0.05
"""A plan's guess of the kNN probes' time (every 5 epochs, 12,000 images embedded) as a share of the training's."""


def results_folder() -> Path:
    return Path(os.environ.get("HCL_BENCHMARK_RESULTS") or COMMITTED)


def record(name: str) -> dict[str, Any]:
    """The record as the results folder holds it, else as committed, else empty."""
    for folder in (results_folder(), COMMITTED):
        if (folder / f"{name}.json").is_file():
            return json.loads((folder / f"{name}.json").read_text())
    return {}


def estimate(row: str, runs: dict[str, Any], epochs: int, smoke: bool = False) -> tuple[float, str]:
    """The seconds a run of ``row`` takes on a GPU (with ``smoke``, on a CPU): its last run's there, else (on a GPU) the
    throughput part's epoch times, else 0 (unknown: ``hcl table`` tries it)."""
    there = [run for key, run in runs.items() if key.split("/")[0] == row and (run.get("device", "cpu") == "cpu") == smoke]
    if there:
        return there[-1]["train_seconds"] + there[-1]["eval_seconds"], f"its last run on {there[-1]['device']}"
    measured = COMMITTED / "throughput_cuda.json"
    rows = {entry["name"]: entry for entry in json.loads(measured.read_text())["rows"]} if measured.is_file() and not smoke else {}
    if row == "untrained" and not smoke:
        return READOUT_SECONDS, "a guess: the readouts only"
    if row not in rows or "epoch_seconds" not in rows[row]:
        return 0.0, "unknown: not run here yet"
    seconds = rows[row]["epoch_seconds"] * epochs * (1 + PROBE_SHARE) + READOUT_SECONDS
    return seconds, f"{rows[row]['epoch_seconds']} s an epoch on {json.loads(measured.read_text())['device_name']}, {epochs} epochs"


def recipe_epochs(smoke: bool) -> int:
    recipe = SMOKE if smoke else RECIPE
    return int(recipe[recipe.index("--epochs") + 1])


def fitting(runs: dict[str, Any], box: float, smoke: bool = False) -> list[str]:
    """The rows a run of which fits ``box`` by :func:`estimate` (ucl always: every row is compared with it)."""
    return [row for row in ROWS if row == "ucl" or estimate(row, runs, recipe_epochs(smoke), smoke)[0] <= box]


def plan(args: argparse.Namespace) -> None:
    """Print the runs one box of ``--seconds`` would hold, in ``hcl table``'s order, and the rows no box holds."""
    runs = record(SMOKE_RECORD if args.smoke else RECORD).get("runs", {})
    box, seeds = args.seconds - MARGIN_SECONDS, 2 if args.smoke else SEEDS
    rows = SMOKE[SMOKE.index("--methods") + 1].split(",") if args.smoke else ROWS
    missing = [f"{row}/{seed}" for seed in range(seeds) for row in ("untrained", *rows) if f"{row}/{seed}" not in runs]
    print(f"table: {len(runs)} runs recorded, {len(missing)} missing of {seeds} seeds; a box of {args.seconds} s ({box} s for runs)")
    left, never = float(box), set()
    for key in missing:
        row = key.split("/")[0]
        seconds, basis = estimate(row, runs, recipe_epochs(args.smoke), args.smoke)
        if seconds > box:
            never.add(row)
        elif seconds <= left:
            left -= seconds
            print(f"  planned {key}: {seconds:.0f} s ({basis}); {left:.0f} s left")
    for row in sorted(never):
        print(f"  {row} does not fit one box at this recipe ({estimate(row, runs, recipe_epochs(args.smoke))[0]:.0f} s > {box} s)")


def run(args: argparse.Namespace) -> None:
    """``hcl table --images`` on the record, from the committed one, in ``--seconds``; exit 0 when the box stopped it."""
    name = SMOKE_RECORD if args.smoke else RECORD
    results = results_folder()
    results.mkdir(parents=True, exist_ok=True)
    committed = COMMITTED / f"{name}.json"
    if committed.is_file() and not (results / f"{name}.json").is_file():  # hcl's own there, so that hcl table adds to it
        write_owned(results / f"{name}.json", committed.read_text())
    images = args.images or args.work / "prepared"
    command = [sys.executable, "-m", "hcl_cli", "table", "--name", name, "--images", f"{'smoke' if args.smoke else 'cifar10'}={images}"]
    command += ["--out", str(results), "--work", str(args.work / "table"), "--seeds", str(args.seeds or (2 if args.smoke else SEEDS))]
    box = max(args.seconds - MARGIN_SECONDS, 1)
    command += [
        "--time-budget",
        str(box),
        *(SMOKE if args.smoke else [*RECIPE, "--methods", ",".join(fitting(record(name).get("runs", {}), box))]),
    ]
    print(" ".join(command), flush=True)
    before = set(record(name).get("runs", {}))
    returncode = subprocess.run(command, cwd=ROOT).returncode
    mark_sent_commit(results / f"{name}.json", before)
    sys.exit(0 if returncode == 75 else returncode)


def mark_sent_commit(path: Path, before: set[str]) -> None:
    """Where ``HCL_COMMIT`` names the commit sent to the GPU machine, record it in the provenance of each run this loan added
    (``sent_commit``): the copy's own ``.git``, which the runs' ``commit`` reads, need not be the sender's."""
    sent = os.environ.get("HCL_COMMIT")
    if not sent or not path.is_file():
        return
    stored = json.loads(path.read_text())
    for key, run in stored["runs"].items():
        if key not in before:
            run["provenance"] = {**(run.get("provenance") or {}), "sent_commit": sent}
    write_owned(path, json.dumps(stored, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    planned = parts.add_parser("plan", help="print the runs one box holds")
    planned.add_argument("--seconds", type=int, required=True, help="the table part's box")
    planned.add_argument("--smoke", action="store_true", help="the smoke run's record and recipe")
    running = parts.add_parser("run", help="run the next missing runs of the record")
    running.add_argument("--work", type=Path, required=True, help="the check's work folder (its prepared images: WORK/prepared)")
    running.add_argument("--seconds", type=int, required=True, help="the table part's box")
    running.add_argument("--images", type=Path, help="a prepared image folder or image dataset instead of WORK/prepared")
    running.add_argument("--seeds", type=int, help="seeds 0..N-1 (default 10; 2 with --smoke)")
    running.add_argument("--smoke", action="store_true", help="the same path on a CPU at a tiny recipe")
    args = parser.parse_args()
    {"plan": plan, "run": run}[args.part](args)


if __name__ == "__main__":
    main()
