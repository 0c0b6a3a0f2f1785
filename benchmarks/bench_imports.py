"""Import time of each pipeline stage's process: this checkout against a baseline tree, interleaved.

Each dvc stage is one ``hcl <stage>`` process that imports the CLI and the stage's module before it
does any work. For every stage this times, in a fresh interpreter, ``import hcl_cli.cli,
hcl_cli.stages.<stage>`` under ``python -X importtime`` (the sum of the top-level cumulative
times it prints), once with this checkout on ``sys.path`` and once with the baseline tree (a
``git worktree`` of an older commit), alternating, and records the median of the repeats, the
third-party packages above 100 ms each and whether torchvision, sklearn, matplotlib and kornia (the
baseline's augmentation) were imported. Imports a stage makes later inside a function (sklearn's
digits in prepare) are not counted on either side.

    git worktree add --detach /tmp/hcl-base 44d23fe
    python -m benchmarks.bench_imports --baseline-tree /tmp/hcl-base
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, load_average, write_result

STAGES = ("prepare", "pretrain", "embed", "knn_eval", "linear_eval", "report")
HEAVY = ("torch", "torchvision", "sklearn", "matplotlib", "kornia", "scipy", "sympy")
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_profile(tree: Path, stage: str) -> tuple[float, dict[str, float]]:
    """Seconds to import the CLI and ``stage`` from ``tree`` in a fresh interpreter, and each third-party package's import.

    A package's time is the cumulative time of the line that imports its top module (``torch``,
    ``sklearn``), wherever in the tree the first import happens."""
    code = f"import hcl_cli.cli, hcl_cli.stages.{stage}"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=True)
    packages: dict[str, float] = {}
    total = 0.0
    for line in done.stderr.splitlines():
        match = LINE.match(line)
        if match is None:
            continue
        seconds, name = int(match.group(2)) / 1e6, match.group(4)
        if len(match.group(3)) == 1:  # one space: imported at top level, its time cumulative
            total += seconds
        if "." not in name and not name.startswith(("_", "hcl_cli")):
            packages[name] = packages.get(name, 0.0) + seconds
    return total, packages


def heavy_imports(tree: Path, stage: str) -> list[str]:
    """Which of :data:`HEAVY` importing the stage from ``tree`` brings in."""
    code = f"import sys, hcl_cli.cli, hcl_cli.stages.{stage}; print(' '.join(n for n in {HEAVY!r} if n in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return done.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-tree", type=Path, required=True, help="a checkout of the baseline commit (git worktree)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    baseline = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=args.baseline_tree, capture_output=True, text=True, check=True
    ).stdout.strip()
    trees = {"this": ROOT, "baseline": args.baseline_tree.resolve()}
    loads = [load_average()]
    stages = {}
    for stage in STAGES:
        seconds: dict[str, list[float]] = {name: [] for name in trees}
        packages: dict[str, dict[str, float]] = {}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                total, packages[name] = import_profile(tree, stage)
                seconds[name].append(total)
        medians = {name: statistics.median(values) for name, values in seconds.items()}
        stages[stage] = {
            name: {
                "median_s": round(medians[name], 3),
                "min_s": round(min(seconds[name]), 3),
                "max_s": round(max(seconds[name]), 3),
                "heavy_imports": heavy_imports(tree, stage),
                "packages_over_100ms_last_run_s": {
                    p: round(s, 3) for p, s in sorted(packages[name].items(), key=lambda i: -i[1]) if s > 0.1
                },
            }
            for name, tree in trees.items()
        }
        stages[stage]["ratio_this_to_baseline"] = round(medians["this"] / medians["baseline"], 3)
        print(stage, stages[stage]["this"]["median_s"], stages[stage]["baseline"]["median_s"], stages[stage]["ratio_this_to_baseline"])
        loads.append(load_average())
    total = {name: round(sum(stages[s][name]["median_s"] for s in STAGES), 3) for name in trees}
    write_result(
        "stage_imports",
        {
            "baseline_commit": baseline,
            "repeats": args.repeats,
            "load_average_1min": loads,
            "note": "medians of interleaved runs on a shared machine; the ratio is the figure to read",
            "stages": stages,
            "all_stages_s": total,
            "ratio_this_to_baseline": round(total["this"] / total["baseline"], 3),
        },
    )


if __name__ == "__main__":
    main()
