"""The device check's ``table`` part (benchmarks/device_table.py): ``plan`` lists the runs one box holds and the rows no box
holds, and a smoke run on a CPU writes each run as it ends and joins the runs of each loan into the record it starts from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import device_table
from tests.test_table_images import digits_folder

ROOT = Path(__file__).resolve().parents[1]


def part(results: Path, *args: str, commit: str = "") -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "HCL_BENCHMARK_RESULTS": str(results), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    environment.pop("HCL_COMMIT", None)
    environment |= {"HCL_COMMIT": commit} if commit else {}  # what device_check.sh's caller exports: the commit sent
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.device_table", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600
    )


def test_the_plan_holds_the_runs_that_fit_the_box_by_what_each_row_took_and_names_the_rows_no_box_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {
        "untrained/0": {"train_seconds": 1.0, "eval_seconds": 9.0, "device": "NVIDIA H100"},
        "ucl/0": {"train_seconds": 280.0, "eval_seconds": 20.0, "device": "NVIDIA H100"},
        "ot/0": {"train_seconds": 900.0, "eval_seconds": 20.0, "device": "NVIDIA H100"},
    }
    (tmp_path / f"{device_table.RECORD}.json").write_text(json.dumps({"runs": runs}))
    monkeypatch.setenv("HCL_BENCHMARK_RESULTS", str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["device_table.py", "plan", "--seconds", "340"])
    device_table.main()
    printed = capsys.readouterr().out
    assert "3 runs recorded, 77 missing" in printed and "planned untrained/1: 10 s (its last run on NVIDIA H100); 310 s left" in printed
    assert "planned ucl/1: 300 s (its last run on NVIDIA H100); 10 s left" in printed and "planned ucl/2" not in printed
    assert "planned debiased/0" not in printed  # a guess from throughput_cuda.json's epoch, over the box
    assert "ot does not fit one box at this recipe (920 s > 320 s)" in printed
    assert "ot" not in device_table.fitting(runs, 320) and "ucl" in device_table.fitting({}, 1)


def test_a_smoke_run_on_a_cpu_writes_each_run_and_joins_into_the_record_it_starts_from(tmp_path: Path) -> None:
    images, results = digits_folder(tmp_path / "digits"), tmp_path / "results"
    first = part(results, "run", "--smoke", "--work", str(tmp_path / "loan1"), "--seconds", "300", "--images", str(images), "--seeds", "1")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    record = results / f"{device_table.SMOKE_RECORD}.json"
    made = json.loads(record.read_text())["runs"]
    assert set(made) == {"untrained/0", "ucl/0", "hucl/0"}
    second = part(
        results, "run", "--smoke", "--work", str(tmp_path / "loan2"), "--seconds", "300", "--images", str(images), commit="0123abc"
    )
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    joined = json.loads(record.read_text())
    assert {key: joined["runs"][key] for key in made} == made and len(joined["invocations"]) == 2
    assert set(joined["runs"]) == {f"{row}/{seed}" for row in ("untrained", "ucl", "hucl") for seed in (0, 1)}
    assert second.stdout.count("hcl table: ") == 3 and "hcl table: ucl/0" not in second.stdout  # only the missing runs ran
    assert {key for key, run in joined["runs"].items() if run["provenance"].get("sent_commit") == "0123abc"} == set(joined["runs"]) - set(
        made
    )
    plan = part(results, "plan", "--smoke", "--seconds", "60")
    assert "6 runs recorded, 0 missing of 2 seeds" in plan.stdout
