"""How long ``hcl preset NAME --dry-run`` takes: the plan of the params.yaml edit and the cost estimate (issue 39).

Each preset runs as a fresh ``hcl`` subprocess against a copy of the default params.yaml, ``--repeats``
times; the median wall time is reported with the estimate's own lines (time and memory), and the file
is checked unchanged. The time includes starting Python and importing torch, as a user waits for it.
Run from the repository root::

    python -m benchmarks.bench_preset_estimate

It writes ``benchmarks/results/preset_estimate.json``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, write_result
from hcl_cli.params import default_params_yaml

HCL = str(Path(sys.executable).with_name("hcl"))
PRESETS = ["hscl-cifar10-hscl-beta", "hcl-stl10-hard-beta1", "undimix-cifar10-undimix", "hcl-cifar10-mocov2-hard"]
"""A ResNet-50 preset of each image paper (the MoCo one with its queue)."""


def dry_run(name: str, params: Path) -> tuple[float, list[str]]:
    """The wall seconds of ``hcl preset NAME --dry-run`` and its cost lines; the params file must stay as it was."""
    before = params.read_bytes()
    start = time.perf_counter()
    result = subprocess.run([HCL, "preset", name, "--dry-run", "--params", str(params)], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    if params.read_bytes() != before:
        raise SystemExit(f"hcl preset {name} --dry-run changed {params}")
    return seconds, [line for line in result.stdout.splitlines() if line.startswith(("cost", "memory", "  over", "  more"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="+", default=PRESETS)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = {}
    loads = [load_average()]
    with tempfile.TemporaryDirectory() as folder:
        params = Path(folder) / "params.yaml"
        params.write_text(default_params_yaml())
        for name in args.presets:
            runs = [dry_run(name, params) for _ in range(args.repeats)]
            rows[name] = {
                "seconds": [round(seconds, 2) for seconds, _ in runs],
                "median_seconds": round(statistics.median(s for s, _ in runs), 2),
            }
            rows[name]["estimate"] = runs[-1][1]
            loads.append(load_average())
            print(f"{name}: median {rows[name]['median_seconds']} s", flush=True)
    write_result("preset_estimate", {"presets": rows, "repeats": args.repeats, "load_average": [min(loads), max(loads)]})


if __name__ == "__main__":
    main()
