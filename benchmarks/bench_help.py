"""Start-up time of ``hcl --help`` and ``hcl pretrain --help`` against ``python -c "import torch"``.

Each command runs as a fresh subprocess (output discarded), ``--repeats`` times, interleaved so a
change in the machine's load hits all alike; the median wall time is reported. ``hcl`` is the
console script installed beside this interpreter, so both sides start the same Python. ``python
-c pass`` is the interpreter's own start-up, the floor under every figure. Goal: ``hcl --help``
under a quarter of the torch import. ``-X importtime`` of ``hcl --help`` also says whether torch
was imported at all, and the slowest top-level imports. Run from the repository root::

    python -m benchmarks.bench_help

It writes ``benchmarks/results/help_startup.json``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import load_average, write_result

GOAL = 0.25
HCL = str(Path(sys.executable).with_name("hcl"))
COMMANDS = {
    "hcl --help": [HCL, "--help"],
    "hcl pretrain --help": [HCL, "pretrain", "--help"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
    "python -c pass": [sys.executable, "-c", "pass"],
}


def wall_seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def slowest_imports(command: list[str], count: int = 5) -> tuple[bool, list[tuple[str, float]]]:
    """Whether ``command`` imports torch, and its ``count`` slowest top-level imports (cumulative ms), from ``-X importtime``."""
    lines = subprocess.run([sys.executable, "-X", "importtime", *command], check=True, capture_output=True, text=True).stderr.splitlines()
    rows = [line.split("|") for line in lines[1:] if line.startswith("import time:") and line.count("|") == 2]
    modules = [(name[1:], int(cumulative) / 1e3) for _, cumulative, name in rows]  # nested imports are indented further
    top_level = sorted(((name, ms) for name, ms in modules if not name.startswith(" ")), key=lambda row: -row[1])
    return any(name.strip() == "torch" for name, _ in modules), top_level[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="runs of each command (the median is reported)")
    args = parser.parse_args()
    load_before = load_average()
    for command in COMMANDS.values():
        wall_seconds(command)  # warm the page cache
    seconds: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, command in COMMANDS.items():
            seconds[name].append(wall_seconds(command))
    medians = {name: statistics.median(times) for name, times in seconds.items()}
    torch_import = medians["python -c 'import torch'"]
    imports_torch, slowest = slowest_imports([HCL, "--help"])
    results = {
        name: {
            "median_ms": round(1e3 * median, 1),
            "ratio_to_torch_import": round(median / torch_import, 3),
            "runs_ms": [round(1e3 * s, 1) for s in seconds[name]],
        }
        for name, median in medians.items()
    }
    for name, row in results.items():
        print(f"{name:>26}: {row['median_ms']:7.1f} ms  ({row['ratio_to_torch_import']:.3f} of the torch import)")
    ratio = medians["hcl --help"] / torch_import
    write_result(
        "help_startup",
        {
            "repeats": args.repeats,
            "load_average_1min": {"before": load_before, "after": load_average()},
            "hcl": HCL,
            "results": results,
            "goal_ratio": GOAL,
            "hcl_help_ratio_to_torch_import": round(ratio, 3),
            "meets_goal": ratio < GOAL,
            "hcl_help_imports_torch": imports_torch,
            "hcl_help_slowest_top_level_imports_ms": dict(slowest),
        },
    )


if __name__ == "__main__":
    main()
