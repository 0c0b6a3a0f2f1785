"""The README's sweep, run for real.

``dvc exp run --queue -S pretrain.beta=0.5,1,2``, ``dvc queue start``, wait, then ``dvc exp show``
and ``hcl compare``. Records each experiment's values as ``dvc exp show --json`` reports them next
to the rows of the comparison table, and whether they agree, in results/sweep_beta_digits.json.
Run from the root of a clean checkout (the experiments are based on HEAD): ``python -m benchmarks.sweep_beta``.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result
from hcl_cli.stages.compare import dvc_exp_show, parse_experiments

ROOT = Path(__file__).resolve().parents[1]
BETAS = "0.5,1,2"


def dvc(*args: str) -> str:
    return subprocess.run(["dvc", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    start = time.perf_counter()
    dvc("exp", "run", "--queue", "-S", f"pretrain.beta={BETAS}")
    dvc("queue", "start")
    while any(state in dvc("queue", "status") for state in ("Queued", "Running")):
        time.sleep(5)
    wall = time.perf_counter() - start
    shown, _ = parse_experiments(dvc_exp_show())
    subprocess.run(["hcl", "compare", "--out", "reports/compare"], cwd=ROOT, check=True)
    with open(ROOT / "reports" / "compare.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    by_name = {row["experiment"]: row for row in table}
    agree = len(table) == len(shown) and all(
        float(by_name[e.name]["knn_top1"]) == e.knn_top1 and float(by_name[e.name]["linear_top1"]) == e.linear_top1 and float(by_name[e.name]["beta"]) == e.beta
        for e in shown
    )
    write_result(
        "sweep_beta_digits",
        {
            "sweep": f"pretrain.beta={BETAS} (other parameters from params.yaml)",
            "wall_seconds": round(wall, 1),
            "dvc_exp_show": [{"name": e.name, "beta": e.beta, "knn_top1": e.knn_top1, "linear_top1": e.linear_top1} for e in shown],
            "compare_rows": len(table),
            "compare_equals_exp_show": agree,
        },
    )


if __name__ == "__main__":
    main()
