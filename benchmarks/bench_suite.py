"""The test suite's wall time: the README's test command's ``pytest``, from the repository root (issue 54, item 7).

Runs ``pytest`` as the README's Tests section gives it (pyproject's addopts leave the e2e and hostile sets out), with a
JUnit report in a temporary folder to count the tests and time each one, and records the wall time, the counts (passed,
failed, errors, skipped), the 20 slowest tests (setup, call and teardown together) and the 1-minute load average before
and after (a busy machine slows the suite: the figure the README quotes is an idle machine's). ``--select`` runs a subset
instead (its arguments go to pytest; tests/test_benchmarks.py runs one test file). Writes
``benchmarks/results/suite_cpu.json``.

    python -m benchmarks.bench_suite
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, load_average, write_result

SLOWEST = 20


def pytest_command() -> list[str]:
    """``pytest`` as the README runs it: the console script beside this interpreter, else on the PATH, else ``-m pytest``."""
    beside = Path(sys.executable).with_name("pytest")
    script = str(beside) if beside.is_file() else shutil.which("pytest")
    return [script] if script else [sys.executable, "-m", "pytest"]


def suite_counts(report: Path) -> tuple[dict[str, int], list[dict[str, object]]]:
    """The counts of a JUnit report (passed, failed, errors, skipped) and its :data:`SLOWEST` slowest tests, slowest first."""
    cases = list(ElementTree.parse(report).getroot().iter("testcase"))
    outcomes = {"failed": "failure", "errors": "error", "skipped": "skipped"}
    counts = {name: sum(1 for case in cases if case.find(tag) is not None) for name, tag in outcomes.items()}
    counts = {"passed": len(cases) - sum(counts.values()), **counts}
    timed = sorted(((float(case.get("time", 0.0)), f"{case.get('classname')}::{case.get('name')}") for case in cases), reverse=True)
    return counts, [{"test": name, "seconds": round(seconds, 2)} for seconds, name in timed[:SLOWEST]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--select", nargs=argparse.REMAINDER, default=[], help="Run only these (pytest's arguments: files, -k, -m).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        load_before = load_average()
        start = time.perf_counter()
        result = subprocess.run([*pytest_command(), *args.select, f"--junitxml={report}"], cwd=ROOT, check=False)
        seconds = time.perf_counter() - start
        load_after = load_average()
        counts, slowest = suite_counts(report)
    payload = {
        "pytest": shlex.join(["pytest", *args.select]),
        "exit_code": result.returncode,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "wall_seconds": round(seconds, 1),
        "wall_minutes": round(seconds / 60, 1),
        **counts,
        "load_average_1min": {"before": load_before, "after": load_after},
        "slowest": slowest,
    }
    print(f"{payload['pytest']}: {payload['wall_minutes']} min, {counts}, load {load_before} -> {load_after}")
    write_result("suite_cpu", payload)


if __name__ == "__main__":
    main()
