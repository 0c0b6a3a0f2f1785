"""Wall time of ``dvc repro --force`` of the default pipeline (target: 90 s or less on 2 CPU cores).

Run from the repository root: ``python -m benchmarks.bench_dvc_repro``. It reruns every stage in
this checkout at the parameters in params.yaml and records the time and the resulting metrics."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 90.0


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    start = time.perf_counter()
    subprocess.run(["dvc", "repro", "--force"], cwd=ROOT, check=True)
    wall = time.perf_counter() - start
    metrics = {name: json.loads((ROOT / "metrics" / f"{name}.json").read_text()) for name in ("knn", "linear")}
    write_result(
        "dvc_repro_digits",
        {
            "wall_seconds": round(wall, 1),
            "target_seconds": TARGET_SECONDS,
            "meets_target": wall <= TARGET_SECONDS,
            "knn_top1": metrics["knn"]["top1"],
            "linear_top1": metrics["linear"]["top1"],
        },
    )


if __name__ == "__main__":
    main()
