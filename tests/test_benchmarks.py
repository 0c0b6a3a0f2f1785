"""Every benchmark imports, parses its arguments and runs its smallest mode, and the GPU check runs whole on a CPU (issue 28).

The benchmarks run in this process (``main()`` with their argv) on data the tests make, writing into a temporary results
folder, never into benchmarks/results/. ``benchmarks/device_check.sh --smoke`` runs every part of the GPU check on a CPU.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from test_graph_step import write_toy_tu

from benchmarks import common
from benchmarks.bench_pretrain import write_synthetic_image_folder
from benchmarks.check_cifar10_prepare import CIFAR10_CLASSES
from benchmarks.device_check import ACCURACY_SETS, INJECTED, SMOKE_ROWS, THROUGHPUT, fail_if_asked

ROOT = Path(__file__).resolve().parents[1]
CIFAR_TRAIN, CIFAR_TEST = 3, 1
"""Images per class of the small archive in CIFAR-10's JPEG layout."""

SMALLEST: dict[str, list[str] | None] = {
    "bench_cpu_precision": ["--repeats", "1", "--resnet-repeats", "1", "--warmup", "0", "--batch-size", "16", "--resnet-batch-size", "2"]
    + ["--skip-accuracy"],
    "bench_gin": ["--archive", "{tu}", "--datasets", "TOY", "--repeats", "1"],
    "bench_graph_undimix": ["--archive", "{tu}", "--dataset", "TOY", "--epochs", "2", "--repeats", "1", "--batch-size", "16"],
    "bench_help": ["--repeats", "1"],
    "bench_knn_memory": ["--device", "cpu", "--bank", "5000", "--queries", "100"],
    "bench_knn_probe": ["--epochs", "1", "--probes", "1", "--threads", "1"],
    "bench_linear": ["--train", "500", "--test", "100"],
    "bench_loss_floor": ["--batch-sizes", "8", "--repeats", "1", "--warmup", "0", "--graph-repeats", "1", "--threads", "1"],
    "bench_optimizer": ["--repeats", "1", "--warmup", "0"],
    "bench_option_resolution": ["--repeats", "2", "--warmup", "1"],
    "bench_ot_subnormals": ["--size", "8", "--elements", "1024", "--repeats", "1"],
    "bench_preset_estimate": ["--presets", "hcl-mutag-beta1", "--repeats", "1"],
    "bench_peer": ["--device", "cpu", "--batch-size", "8", "--limit", "20", "--steps", "1", "--warmup", "0", "--rounds", "1"]
    + ["--workers", "0", "--archive", "{cifar}", "--work", "{work}"],
    "bench_pretrain": ["--synthetic", "64", "--arch", "small_cnn", "--batch-size", "32", "--epochs", "1"]
    + ["--device", "cpu", "--threads", "1"],
    "bench_queue": ["--queue-sizes", "64", "--batch-size", "16", "--repeats", "1", "--warmup", "0", "--threads", "1"],
    "bench_samplers": ["--batch-size", "16", "--repeats", "1", "--runs", "1", "--warmup", "0", "--threads", "1"],
    "bench_suite": ["--select", "tests/test_readme_figures.py", "-k", "check_finds_a_figure or says_when_where"],
    "bench_text_samplers": ["--corpus", "{corpus}", "--batch-size", "8", "--steps", "1", "--warmup", "0", "--repeats", "1"],
    "bench_sinkhorn_cpu": ["--archive", "{tu}", "--dataset", "TOY", "--batches", "1", "--repeats", "1", "--iterations", "5"],
    "check_cifar10_prepare": ["--archive", "{cifar}", "--sample", "2", "--expected-counts", str(10 * CIFAR_TRAIN), str(10 * CIFAR_TEST)],
    "reproduce": ["--name", "smoke", "--work", "{work}", "--device", "cpu", "--prepare", "dataset=digits,test_fraction=0.5"]
    + ["--set", "ucl:sampler=ucl", "--all", "arch=small_cnn,batch_size=64,max_steps=2,linear.epochs=5"],
    # Import and argument parsing only: minutes of work, or what they need is not here.
    "cuda_syncs": None,  # the device check's syncs part, whose smoke run tries it on a CPU (where nothing reports syncs)
    "adam_rounding": None,  # reruns rows of a table's results file: tests/test_table.py makes one and runs it
    "bench_augment": None,  # engineer A's (issue 28): tests/test_augment.py
    "bench_dvc_cache": None,  # four dvc runs of the default pipeline, minutes even at --epochs 1 (run by hand at 43501f6)
    "bench_dvc_repro": None,  # dvc repro of two commits, minutes
    "bench_graph_peer": None,  # HCL's official graph code, from ../shared/peers
    "bench_imports": None,  # a baseline checkout, and about a hundred interpreters
    "bench_install": None,  # fresh environments from a package index
    "device_table": None,  # the device check's table part, minutes at its recipe: tests/test_device_table.py runs its smoke mode
    "device_check": None,  # the GPU check's parts: test_the_device_check_runs_whole_on_a_cpu_and_keeps_what_a_failure_leaves
    "official_hcl_image": None,  # the official code's harness: the same test, on a stand-in of the code
    "readme_sequences": None,  # a fresh clone through dvc repro and a sweep, minutes
    "migrate_reproduce_sentences": None,  # migrated reproduce_sentences.json once; run again, it refuses the migrated record
    "reproduce_graphs": None,  # the graph engineer's: tests/test_reproduce_graphs.py
    "step_counts": None,  # engineer B's (issue 28): tests/test_step_counts.py
}
"""Each benchmark module's smallest mode (``{cifar}``, ``{tu}``, ``{work}``: data made here; ``{corpus}``: the repository's
data/text), or None where a run is not a test."""
SLOW = {"bench_cpu_precision", "bench_gin", "bench_help", "bench_knn_memory"}
"""Smallest modes of several seconds: interpreters started for their start-up time or memory, a ResNet-18 step."""
NEEDS = {"bench_peer": "lightly"}
"""A benchmark's peer library that only the ``bench`` extra installs (pyproject.toml): without it the benchmark is skipped."""
NEEDS_REASON = "{library} is a peer that only the bench extra installs: pip install -e '.[test,bench]' -c constraints.txt"
"""Why such a benchmark is skipped after the README's test install (lightly is heavy: PyTorch Lightning, Hydra)."""
NOT_BENCHMARKS = {"__init__", "common"}
"""Modules of benchmarks/ that are no script to run: the package and the shared helpers."""


def benchmark_modules() -> list[str]:
    return sorted(path.stem for path in (ROOT / "benchmarks").glob("*.py") if path.stem not in NOT_BENCHMARKS)


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The results folder of this test's runs (in this process and in the subprocesses they start), which run on one thread
    (tiny runs on a CPU shared with other jobs stall on more); torch's threads restored."""
    folder = tmp_path / "results"
    monkeypatch.setattr(common, "RESULTS", folder)
    monkeypatch.setenv("HCL_BENCHMARK_RESULTS", str(folder))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield folder
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def cifar_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small archive in CIFAR-10's JPEG layout: ``train/`` and ``test/`` folders of its ten classes."""
    root = tmp_path_factory.mktemp("cifar")
    write_synthetic_image_folder(root / "images", 10 * CIFAR_TRAIN)
    archive = root / "cifar10-small.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for split, per_class in (("train", CIFAR_TRAIN), ("test", CIFAR_TEST)):
            for label, name in enumerate(CIFAR10_CLASSES):
                for index, image in enumerate(sorted((root / "images" / split / f"class{label}").iterdir())[:per_class]):
                    tar.add(image, arcname=f"{split}/{name}/{index}.png")
    return archive


def run_main(module_name: str, argv: list[str]) -> None:
    """``python -m benchmarks.MODULE ARGV`` in this process."""
    if module_name in NEEDS:
        pytest.importorskip(NEEDS[module_name], reason=NEEDS_REASON.format(library=NEEDS[module_name]))
    module = importlib.import_module(f"benchmarks.{module_name}")
    saved = sys.argv
    sys.argv = [f"benchmarks/{module_name}.py", *argv]
    try:
        module.main()
    finally:
        sys.argv = saved


def test_every_benchmark_has_a_smallest_mode_or_a_reason() -> None:
    assert benchmark_modules() == sorted(SMALLEST), "a benchmark without a row, or a row without its benchmark"


@pytest.mark.parametrize("module_name", benchmark_modules())
def test_every_benchmark_imports_and_parses_its_arguments(module_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        run_main(module_name, ["--help"])
    assert exited.value.code == 0 and "usage:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "module_name",
    [pytest.param(name, marks=[pytest.mark.slow] if name in SLOW else []) for name, argv in SMALLEST.items() if argv is not None],
)
def test_every_benchmark_runs_its_smallest_mode(module_name: str, results: Path, cifar_archive: Path, tmp_path: Path) -> None:
    places = {"cifar": str(cifar_archive), "tu": str(write_toy_tu(tmp_path / "tu")), "work": str(tmp_path / "work")}
    places["corpus"] = str(ROOT / "data" / "text")
    argv = [argument.format(**places) for argument in SMALLEST[module_name] or []]
    try:
        run_main(module_name, argv)
    except SystemExit as exited:
        assert exited.code in (0, None), f"{module_name} exited with {exited.code}"
    written = list(results.glob("*.json"))
    assert written, f"{module_name} wrote no results file"
    for path in written:
        record = json.loads(path.read_text())
        assert {"date", "machine", "command", "torch", "device", "device_name"} <= record.keys()


def machine_paths(value: object) -> list[str]:
    """The absolute paths (``/dir/...``) in the strings of a JSON value: a results file names what it ran portably."""
    if isinstance(value, dict):
        return [path for key, item in value.items() for path in machine_paths(key) + machine_paths(item)]
    if isinstance(value, list):
        return [path for item in value for path in machine_paths(item)]
    return [token for token in re.split(r"[\s=,;'\"()\[\]]+", value) if re.match(r"/[^/\s]+/", token)] if isinstance(value, str) else []


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks" / "results").glob("*.json")), ids=lambda path: path.name)
def test_a_results_file_names_no_path_of_the_machine_that_made_it(path: Path) -> None:
    """Commands, work folders and data carry paths relative to the repository or as ``<name>`` (benchmarks.common.portable)."""
    assert machine_paths(json.loads(path.read_text())) == []


def test_machine_paths_finds_an_absolute_path_in_a_command() -> None:
    assert machine_paths({"command": "pytest --junitxml=/tmp/x/junit.xml", "rows": [{"images/s": 1}]}) == ["/tmp/x/junit.xml"]


STANDIN = ROOT / "tests" / "official_image_standin"
"""The interface of HCL's official image code (main.py, model.py, utils.py), ours, for the official part's harness."""
SMOKE_FILES = ("tests", "compile", "syncs", "throughput", "official_hcl_image", "concurrency", "reproduce_four_samplers")
"""The results files of the smoke run whose parts are not made to fail (the profile part is)."""


@pytest.mark.slow
@pytest.mark.e2e
def test_the_device_check_runs_whole_on_a_cpu_and_keeps_what_a_failure_leaves(tmp_path: Path) -> None:
    """``device_check.sh --smoke``, with one throughput row and the profile part made to fail on purpose: every other part
    ends well and writes its results file as on the GPU (the table part its record), the failed row is kept with its error
    and the rows after it still ran, and the run exits 1 naming both failures. Its budget is widened 3x (the default holds
    it on a CPU that other jobs leave free), so that a machine they load cuts no part."""
    results = tmp_path / "results"
    environment = {**os.environ, "OFFICIAL_HCL_IMAGE": str(STANDIN), "CUDA_VISIBLE_DEVICES": ""}
    environment["HCL_DEVICE_CHECK_FAIL"] = "throughput:ucl-fp32,profile"
    command = ["bash", "benchmarks/device_check.sh", "--smoke", "--budget", "1080", "--work", str(tmp_path / "work")]
    command += ["--results", str(results)]
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=1000)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
    assert "== failed: throughput (exit 1) profile (exit 1)" in done.stdout
    assert not (results / "profile_cpu.json").exists()
    records = {name: json.loads((results / f"{name}_cpu.json").read_text()) for name in SMOKE_FILES}
    for record in records.values():
        assert record["device"] == "cpu" and {"device_name", "torch", "date", "command"} <= record.keys()
    assert records["tests"]["failed"] == 0 and records["tests"]["passed"] > 0
    throughput = records["throughput"]
    rows = {row["name"]: row for row in throughput["rows"]}
    assert throughput["complete"] and list(rows) == [name for name, _ in THROUGHPUT if name in SMOKE_ROWS]
    assert throughput["failed_rows"] == ["ucl-fp32"] and INJECTED in rows["ucl-fp32"]["error"]
    assert all(row["epoch_seconds"] > 0 for name, row in rows.items() if name != "ucl-fp32")
    assert list(rows).index("r50-hucl-b256-fp32") > list(rows).index("ucl-fp32"), "a row after the failed one ran"
    compiled = records["compile"]
    assert {mode: run["exit_code"] for mode, run in compiled["runs"].items()} == {"eager": 0, "compiled": 0}
    assert len(compiled["losses"]) == compiled["setting"]["steps"] and compiled["losses"][0]["relative_difference"] < 1e-3
    assert compiled["runs"]["eager"]["graph_breaks"] == 0 and compiled["runs"]["eager"]["recompiles"] == 0
    assert set(records["syncs"]["syncs"]) == {"ucl fp32", "hucl@queue fp32", "ucl bf16", "hucl@queue bf16"}
    assert all(len(row["losses"]) == 3 for row in records["syncs"]["syncs"].values())
    assert set(records["official_hcl_image"]["hcl_over_official"]) == {"r50-hucl-b256-bf16", "r50-hucl-b256-fp32"}
    assert [row["processes"] for row in records["concurrency"]["rows"]] == [1, 2]
    table = json.loads((results / "table_images_smoke.json").read_text())  # the table part: every run of its 2 seeds
    assert table["complete"] and set(table["runs"]) == {f"{row}/{seed}" for row in ("untrained", "ucl", "hucl") for seed in (0, 1)}
    accuracy = records["reproduce_four_samplers"]
    assert accuracy["complete"] and all(row["knn_top1"] is not None for row in accuracy["sets"].values())
    assert set(accuracy["sets"]) == set(ACCURACY_SETS)


@pytest.mark.parametrize("mode", [[], ["--smoke"]])
def test_the_device_check_s_time_boxes_fit_its_budget_with_the_install(mode: list[str]) -> None:
    """``--plan``: the parts' boxes and the install fit the default budget, and a budget they overflow is refused."""
    plan = subprocess.run(["bash", "benchmarks/device_check.sh", *mode, "--plan"], cwd=ROOT, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    boxes, install, budget = (
        int(number) for number in re.findall(r"\(sum (\d+) s\) \+ install (\d+) s against a budget of (\d+)", plan.stdout)[0]
    )
    assert boxes + install <= budget
    tight = subprocess.run(
        ["bash", "benchmarks/device_check.sh", *mode, "--plan", "--budget", str(boxes)], cwd=ROOT, capture_output=True, text=True
    )
    assert tight.returncode == 2 and "do not fit" in tight.stderr


def test_the_suite_benchmark_counts_and_times_a_junit_report(tmp_path: Path) -> None:
    """bench_suite's counts and slowest tests from pytest's JUnit report: each outcome counted once, slowest first."""
    report = tmp_path / "junit.xml"
    cases = [("a", "0.5", ""), ("b", "2.25", "<failure/>"), ("c", "0.01", "<skipped/>"), ("d", "1.0", "<error/>"), ("e", "3.0", "")]
    rows = "".join(f'<testcase classname="tests.t" name="{name}" time="{time}">{inner}</testcase>' for name, time, inner in cases)
    report.write_text(f"<testsuites><testsuite>{rows}</testsuite></testsuites>")
    counts, slowest = importlib.import_module("benchmarks.bench_suite").suite_counts(report)
    assert counts == {"passed": 2, "failed": 1, "errors": 1, "skipped": 1}
    assert [row["test"] for row in slowest] == ["tests.t::e", "tests.t::b", "tests.t::d", "tests.t::a", "tests.t::c"]
    assert slowest[0]["seconds"] == 3.0


def test_a_failure_injected_names_its_part_or_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HCL_DEVICE_CHECK_FAIL`` fails exactly the parts and rows it names."""
    monkeypatch.setenv("HCL_DEVICE_CHECK_FAIL", "profile, throughput:ucl")
    with pytest.raises(RuntimeError, match=INJECTED):
        fail_if_asked("profile")
    with pytest.raises(RuntimeError, match="throughput:ucl"):
        fail_if_asked("throughput", "ucl")
    fail_if_asked("throughput")
    fail_if_asked("throughput", "hucl")
    fail_if_asked("concurrency")
