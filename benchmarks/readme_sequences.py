"""The README's documented sequences, followed in order in a fresh clone, with what each gives.

Clones HEAD into a temporary folder (DVC set up as the repository has it) and runs, in order:
Quick start's `dvc repro`; "Using it": `hcl pretrain --sampler hscl --beta 1` by hand (then
`git status` and `dvc status` must be clean) and `dvc exp run -S pretrain.sampler=ucl`;
"Sweeps": `dvc exp run --queue -S pretrain.sampler=hucl -S pretrain.beta=0.5,1,2`, `dvc queue
start`, `dvc exp show` and `hcl compare`. Records every step's wall time and the sweep's rows as
`dvc exp show --json` and `hcl compare` give them, in results/readme_sequences_digits.json.
Uses the `hcl` installed from this checkout: run it on a clean, committed tree.

    python benchmarks/readme_sequences.py
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["dvc", "exp", "run", "--queue", "-S", "pretrain.sampler=hucl", "-S", "pretrain.beta=0.5,1,2"]


def timed(clone: Path, steps: list[dict[str, Any]], *command: str) -> str:
    """Run ``command`` in the clone, record its wall time, return its output."""
    start = time.perf_counter()
    result = subprocess.run(list(command), cwd=clone, capture_output=True, text=True, check=False)
    steps.append({"command": " ".join(command), "seconds": round(time.perf_counter() - start, 1), "exit_code": result.returncode})
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def experiments_shown(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workspace and each finished experiment as ``dvc exp show --json`` gives them, read here (not by hcl compare's code)."""
    rows = []
    for baseline in entries:
        groups = [{"name": "workspace", "revs": [baseline]}] if baseline["rev"] == "workspace" else baseline.get("experiments") or []
        for group in groups:
            data = group["revs"][0].get("data") or {}
            top1 = {
                name: (data.get("metrics", {}).get(f"metrics/{name}.json", {}).get("data") or {}).get("top1") for name in ("knn", "linear")
            }
            pretrain = data.get("params", {}).get("params.yaml", {}).get("data", {}).get("pretrain", {})
            if None not in top1.values():
                rows.append(
                    {
                        "name": group["name"],
                        "sampler": pretrain.get("sampler"),
                        "beta": pretrain.get("beta"),
                        **{f"{k}_top1": v for k, v in top1.items()},
                    }
                )
    return rows


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    steps: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hcl-readme-") as scratch:
        clone = Path(scratch) / "hcl"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for key, value in (("user.name", "readme"), ("user.email", "readme@example.com")):
            subprocess.run(["git", "config", key, value], cwd=clone, check=True)
        timed(clone, steps, "dvc", "repro")
        quick_start = {name: json.loads((clone / "metrics" / f"{name}.json").read_text())["top1"] for name in ("knn", "linear")}
        timed(clone, steps, "git", "add", "dvc.lock")  # the run's record; a clone commits none (README, Quick start)
        timed(clone, steps, "git", "commit", "-qm", "the pipeline's record")

        timed(clone, steps, "hcl", "pretrain", "--sampler", "hscl", "--beta", "1")
        hand_run_clean = {
            "git_status": timed(clone, steps, "git", "status", "--porcelain").strip() == "",
            "dvc_status": json.loads(timed(clone, steps, "dvc", "status", "--json") or "{}") == {},
            "wrote": sorted(str(p.relative_to(clone)) for p in (clone / "runs").rglob("encoder.safetensors")),
        }
        timed(clone, steps, "dvc", "exp", "run", "-S", "pretrain.sampler=ucl")

        timed(clone, steps, *SWEEP)
        timed(clone, steps, "dvc", "queue", "start")
        while any(
            state in subprocess.run(["dvc", "queue", "status"], cwd=clone, capture_output=True, text=True).stdout
            for state in ("Queued", "Running")
        ):
            time.sleep(10)
        experiments = experiments_shown(json.loads(timed(clone, steps, "dvc", "exp", "show", "--json")))
        timed(clone, steps, "hcl", "compare")
        with open(clone / "reports" / "compare.csv", newline="") as handle:
            table = {row["experiment"]: row for row in csv.DictReader(handle)}
    sweep = [e for e in experiments if e["sampler"] == "hucl" and e["name"] != "workspace"]
    write_result(
        "readme_sequences_digits",
        {
            "steps": steps,
            "quick_start_top1": quick_start,
            "hand_run": hand_run_clean,
            "experiments": experiments,
            "sweep_betas": sorted(e["beta"] for e in sweep),
            "sweep_rows_differ": len({(e["knn_top1"], e["linear_top1"]) for e in sweep}) > 1,
            "compare_equals_exp_show": all(
                float(table[e["name"]]["knn_top1"]) == e["knn_top1"] and float(table[e["name"]]["linear_top1"]) == e["linear_top1"]
                for e in experiments
            )
            and len(table) == len(experiments),
        },
    )


if __name__ == "__main__":
    main()
