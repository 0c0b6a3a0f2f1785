"""The parts of the GPU check that benchmarks/device_check.sh runs one by one, each in its own process and time box.

Each part writes ``results/PART_<device>.json`` (the environment of :func:`benchmarks.common.environment` first) as it
goes: after every row, so that a part cut by its time box, or a row that fails, leaves what was measured before it (a
failed row is kept with its error, and the part exits 1 after the rows that follow it). ``--smoke`` runs the same code at
tiny sizes (small CNN, batches of 16) so that a CPU runs every part in seconds (tests/test_benchmarks.py); the
environment variable ``HCL_DEVICE_CHECK_FAIL`` (``PART`` or ``PART:ROW``, comma-separated) makes a part or one of its
rows fail on purpose, which is how that test shows the neighbours' results survive. Parts:

- ``setup``: the CIFAR-10 archive (or, with ``--synthetic N``, one of N random images in its layout) extracted and
  prepared (``hcl prepare --dataset imagefolder``) into ``WORK/prepared``;
- ``compile``: the SimCLR step compiled whole (``--compile``: CUDA graphs on CUDA) for a few steps in a child process
  under ``TORCH_LOGS=recompiles,graph_breaks,cudagraphs``, against the same steps in eager mode from the same seed (with
  inductor's random numbers falling back to eager's, so both see the same views): the losses side by side, the graph
  breaks, recompiles and CUDA-graph messages the logs report;
- ``throughput``: one epoch of the product's loop (:func:`benchmarks.common.timed_epochs`) per setting of
  :data:`THROUGHPUT`: ResNet-18 at B = 512 in bf16 and fp32 for every sampler, ``--compile``, ResNet-50 at B = 256 in
  bf16 and fp32 (the official code's setting), the rows the issue needs first;
- ``profile``: ``torch.profiler`` over a few steps of ucl: the kernels by GPU time, the GPU busy fraction (the union of
  the kernels' times over the wall time of as many steps unprofiled, and over the profiled ones), launches, aten ops and
  every device-to-host read per step (``_local_scalar_dense``, ``nonzero``, copies to the host, synchronising calls),
  with the lines of code that made them as ``torch.cuda.set_sync_debug_mode`` names them;
- ``concurrency``: the per-step time of N processes training at once against one alone, with ``--threads auto`` (the
  cap of :func:`hcl_cli.runtime.set_cpu_threads`) and, on CUDA, with every core (what hcl did before);
- ``accuracy``: ucl, hucl (beta 1, tau+ 0.1), scl and hscl (beta 1) at the same number of epochs, chosen to fit the
  time left, one after another through :mod:`benchmarks.reproduce` (resumable: rerun to continue);
- ``tests-summary``: the test run's JUnit file as counts and failures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch._inductor.config as inductor_config
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import common
from benchmarks.bench_pretrain import write_synthetic_image_folder
from benchmarks.common import cpu_count, load_average, portable, prepared, synchronize, timed_epochs, training_run, write_result
from benchmarks.reproduce import STOPPED_BY_BUDGET
from hcl_cli.config import PretrainConfig
from hcl_cli.config.base import CUDA_THREADS, parse_threads
from hcl_cli.distributed import distributed_context
from hcl_cli.objectives.registry import SAMPLERS
from hcl_cli.runtime import resolve_device, set_cpu_threads

R18 = {"arch": "resnet18", "batch_size": 512}
R50 = {"arch": "resnet50", "batch_size": 256}
FIRST = ("ucl", "hucl")
THROUGHPUT: list[tuple[str, dict[str, Any]]] = [
    *((name, {**R18, "sampler": name, "precision": "bf16"}) for name in FIRST),
    ("r50-hucl-b256-bf16", {**R50, "sampler": "hucl", "precision": "bf16"}),
    *((name, {**R18, "sampler": name, "precision": "bf16"}) for name in SAMPLERS if name not in FIRST),
    ("ucl-fp32", {**R18, "sampler": "ucl", "precision": "fp32"}),
    ("r50-hucl-b256-fp32", {**R50, "sampler": "hucl", "precision": "fp32"}),
    ("ucl-compile", {**R18, "sampler": "ucl", "precision": "bf16", "compile": True}),
    *((f"{name}-fp32", {**R18, "sampler": name, "precision": "fp32"}) for name in SAMPLERS if name != "ucl"),
]
"""(row name, PretrainConfig values): the issue's table in the order that matters if the time box cuts it: the R18 goal,
the official code's setting, every sampler's step (are they all free of host syncs?), then the rest."""
SMOKE = {"arch": "small_cnn", "batch_size": 16}
"""What ``--smoke`` puts in place of every row's architecture and batch."""
SMOKE_ROWS = ("ucl", "hucl", "r50-hucl-b256-bf16", "ucl-fp32", "r50-hucl-b256-fp32")
"""The throughput rows ``--smoke`` times: both precisions, both ResNet-50 rows and a second sampler (the ``--compile`` row
is the compile part's on a CPU: compiling ResNets there is no smoke run)."""
ACCURACY_SETS = {"ucl": "sampler=ucl", "hucl": "sampler=hucl,beta=1,tau_plus=0.1", "scl": "sampler=scl", "hscl": "sampler=hscl,beta=1"}
"""The accuracy part's four runs, as benchmarks/reproduce.py's ``--set NAME:VALUES``."""
EVALUATION_SECONDS = 30.0
"""Set aside per accuracy set for embed, knn-eval and linear-eval of CIFAR-10 (what they took on the H100 of ../shared/gpu/README.md)."""
WARMUP_STEPS = 3
LAUNCHES = ("cudaLaunch", "cuLaunch", "cudaGraphLaunch")
"""The CUDA runtime and driver calls that start work on the GPU, as the profiler names them."""


def settings(values: dict[str, Any], smoke: bool) -> dict[str, Any]:
    """A row's PretrainConfig values, at :data:`SMOKE`'s sizes under ``--smoke``."""
    return {**values, **SMOKE} if smoke else values


def warmup_steps(smoke: bool) -> int:
    """Untimed steps before a timing: one in a smoke run."""
    return 1 if smoke else WARMUP_STEPS


def setup(args: argparse.Namespace) -> None:
    """``WORK/images`` from the archive (extracted once) and ``WORK/prepared`` from them (prepared once)."""
    work: Path = args.work
    archive = args.archive
    if args.synthetic:
        archive = work / "synthetic.tar.gz"
        if not archive.is_file():
            write_synthetic_image_folder(work / "synthetic", args.synthetic)
            with tarfile.open(work / "synthetic.tar.part", "w:gz") as tar:
                for split in ("train", "test"):
                    tar.add(work / "synthetic" / split, arcname=split)
            (work / "synthetic.tar.part").rename(archive)
    images = work / "images"
    if not images.is_dir():
        start = time.perf_counter()
        with tarfile.open(archive) as opened:
            members = [member for member in opened if member.name.split("/")[0] in ("train", "test")]
            opened.extractall(work / "images.part", members=members, filter="data")
        (work / "images.part").rename(images)
        print(f"extracted {archive} in {time.perf_counter() - start:.1f} s")
    card = prepared(work / "prepared", dataset="imagefolder", path=str(images))
    print(f"prepared {work / 'prepared'}: {card.counts}")


INJECTED = "failure injected by HCL_DEVICE_CHECK_FAIL"


def fail_if_asked(part: str, row: str | None = None) -> None:
    """Raise where ``HCL_DEVICE_CHECK_FAIL`` names this part (``PART``) or this row of it (``PART:ROW``)."""
    asked = {entry.strip() for entry in os.environ.get("HCL_DEVICE_CHECK_FAIL", "").split(",")}
    if (part if row is None else f"{part}:{row}") in asked:
        raise RuntimeError(f"{INJECTED} ({part}{'' if row is None else ':' + row})")


def error_line(error: BaseException) -> str:
    """An exception as one line: its type and the first line of its message, cut to 300 characters."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0] if message else ''}"[:300]


def throughput(args: argparse.Namespace) -> None:
    """One timed epoch per row of :data:`THROUGHPUT`, the file rewritten after every row; a row that fails is kept with its
    error and the rows after it still run (the part then exits 1)."""
    device = resolve_device(args.device)
    set_cpu_threads(None, device, CUDA_THREADS)
    fail_if_asked("throughput")
    rows: list[dict[str, Any]] = []
    what = f"one epoch of hcl's training loop after {warmup_steps(args.smoke)} untimed steps"
    payload: dict[str, Any] = {"what": what, "complete": False, "rows": rows}
    chosen = [(name, values) for name, values in THROUGHPUT if not args.smoke or name in SMOKE_ROWS]
    for name, values in chosen:
        row: dict[str, Any] = {"name": name, **values, **settings({}, args.smoke)}
        try:
            fail_if_asked("throughput", name)
            config = PretrainConfig(data=str(args.work / "prepared"), device=args.device, epochs=1, seed=0, **settings(values, args.smoke))
            if device.type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats(device)
            with distributed_context(args.device) as context, tempfile.TemporaryDirectory() as scratch:
                training = training_run(config, context, scratch)
                seconds = timed_epochs(training, 1, warmup_steps(args.smoke))[0]
            steps = training.steps_per_epoch
            row |= {"epoch_seconds": round(seconds, 3), "steps": steps, "images_per_second": round(steps * config.batch_size / seconds, 1)}
            if device.type == "cuda":
                row["max_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
            print(f"{name}: {row['epoch_seconds']} s per epoch of {steps} steps ({row['images_per_second']} images/s)", flush=True)
        except Exception as error:  # one row's failure (an OOM, a compile error) must not lose the rows after it
            row["error"] = error_line(error)
            print(f"{name}: failed: {row['error']}", flush=True)
        rows.append(row)
        write_result(f"throughput_{device.type}", {**payload, "threads": torch.get_num_threads()}, device)
    failed = [row["name"] for row in rows if "error" in row]
    payload |= {"complete": True, "failed_rows": failed}
    write_result(f"throughput_{device.type}", {**payload, "threads": torch.get_num_threads()}, device)
    if failed:
        sys.exit(1)


COMPILE_STEPS = 5
"""Steps of the compile part, compiled and eager, on the same batches."""
TORCH_LOG_MARKS = {"recompiles": "[__recompiles] Recompiling function", "graph_breaks": "[__graph_breaks] Graph break"}
"""What a line of ``TORCH_LOGS`` output starts its message with, per event counted."""


def compile_worker(args: argparse.Namespace) -> None:
    """One process of :func:`compile_check`: ``--steps`` steps of ucl compiled or eager from seed 0, on the same batches,
    each step's loss printed as a JSON line as soon as it is read."""
    device = resolve_device(args.device)
    set_cpu_threads(None, device, CUDA_THREADS)
    inductor_config.fallback_random = True  # inductor's random numbers as eager mode's: both runs see the same views
    values = settings({**R18, "sampler": "ucl", "precision": "bf16"}, args.smoke)
    config = PretrainConfig(data=str(args.work / "prepared"), device=args.device, seed=0, compile=args.compiled, **values)
    with distributed_context(args.device) as context, tempfile.TemporaryDirectory() as scratch:
        training = training_run(config, context, scratch)
        batches = torch.Generator().manual_seed(1)
        for step in range(args.steps):
            batch = torch.randperm(len(training.samples), generator=batches)[: config.batch_size].to(training.samples.device)
            synchronize(device)
            start = time.perf_counter()
            result = training.step(training.samples[batch], training.labels[batch], config.loss_options(0)).read()
            seconds = time.perf_counter() - start
            print(json.dumps({"step": step, "loss": result.loss, "finite": bool(result.finite), "seconds": round(seconds, 4)}), flush=True)


def compile_check(args: argparse.Namespace) -> None:
    """The SimCLR step compiled (``--compile``) against eager mode: losses, graph breaks, recompiles, CUDA-graph messages.

    Each run is a child process writing its steps and its torch logs to ``WORK/compile_MODE.{out,log}`` (a compile failure
    or a CUDA error cannot take the part's record with it); the record is rewritten after each, and when the time box
    interrupts the part, with what the interrupted run had printed."""
    device = resolve_device(args.device)
    fail_if_asked("compile")
    values = settings({**R18, "sampler": "ucl", "precision": "bf16"}, args.smoke)
    record: dict[str, Any] = {"setting": {**values, "steps": args.steps, "fallback_random": True}, "runs": {}}
    try:
        for mode in ("eager", "compiled"):
            command = [sys.executable, "-m", "benchmarks.device_check", "compile-worker", "--work", str(args.work)]
            command += ["--device", args.device, "--steps", str(args.steps)]
            command += (["--smoke"] if args.smoke else []) + (["--compiled"] if mode == "compiled" else [])
            environment = {**os.environ, "TORCH_LOGS": "recompiles,graph_breaks,cudagraphs", "PYTHONUNBUFFERED": "1"}
            out, log = args.work / f"compile_{mode}.out", args.work / f"compile_{mode}.log"
            with out.open("w") as stdout, log.open("w") as stderr:
                worker = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=environment)
                try:
                    worker.wait()
                finally:
                    if worker.poll() is None:
                        worker.terminate()
                        worker.wait()
                    record["runs"][mode] = compile_run(worker.returncode, out, log)
                    write_result(f"compile_{device.type}", record, device)
            run = record["runs"][mode]
            print(
                f"{mode}: exit {run['exit_code']}, {len(run['steps'])} steps, {run['graph_breaks']} graph breaks, {run['recompiles']} recompiles"
            )
    except KeyboardInterrupt:
        record["interrupted"] = "by the part's time box"
        write_result(f"compile_{device.type}", record, device)
        raise
    eager, compiled = (record["runs"][mode]["steps"] for mode in ("eager", "compiled"))
    pairs = [(a["loss"], b["loss"]) for a, b in zip(eager, compiled)]
    record["losses"] = [{"eager": a, "compiled": b, "relative_difference": abs(b - a) / max(abs(a), 1e-12)} for a, b in pairs]
    record["max_relative_difference"] = max((row["relative_difference"] for row in record["losses"]), default=None)
    record["last_step_seconds"] = {mode: run["steps"][-1]["seconds"] for mode, run in record["runs"].items() if run["steps"]}
    write_result(f"compile_{device.type}", record, device)
    if any(run["exit_code"] != 0 for run in record["runs"].values()) or len(pairs) < args.steps:
        sys.exit(1)


def compile_run(exit_code: int, out: Path, log: Path) -> dict[str, Any]:
    """One run of :func:`compile_worker`, from what it printed: its steps, and its torch logs counted."""
    steps = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    lines = log.read_text(errors="replace").splitlines()
    run: dict[str, Any] = {"exit_code": exit_code, "steps": steps}
    run |= {name: sum(mark in line for line in lines) for name, mark in TORCH_LOG_MARKS.items()}
    run["cudagraphs_messages"] = sorted({line.split("[__cudagraphs]", 1)[1].strip()[:200] for line in lines if "[__cudagraphs]" in line})[
        :20
    ]
    if exit_code != 0:
        run["stderr_tail"] = [line[:300] for line in lines[-15:]]
    return run


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def step_profile(args: argparse.Namespace) -> None:
    """``torch.profiler`` over ``--steps`` steps of ucl (ResNet-18, B = 512, bf16) after untimed ones."""
    device = resolve_device(args.device)
    set_cpu_threads(None, device, CUDA_THREADS)
    fail_if_asked("profile")
    values = settings({**R18, "sampler": "ucl", "precision": "bf16"}, args.smoke)
    config = PretrainConfig(data=str(args.work / "prepared"), device=args.device, seed=0, **values)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with distributed_context(args.device) as context, tempfile.TemporaryDirectory() as scratch:
        training = training_run(config, context, scratch)
        batch = torch.arange(config.batch_size, device=device)
        options = config.loss_options(0)
        for _ in range(warmup_steps(args.smoke)):
            training.step(training.samples[batch], training.labels[batch], options)
        synchronize(device)
        start = time.perf_counter()
        for _ in range(args.steps):
            training.step(training.samples[batch], training.labels[batch], options)
        synchronize(device)
        unprofiled = time.perf_counter() - start
        sync_sites = synchronizing_lines(
            device, lambda: training.step(training.samples[batch], training.labels[batch], options), args.steps
        )
        with profile(activities=activities) as profiled:
            start = time.perf_counter()
            for _ in range(args.steps):
                training.step(training.samples[batch], training.labels[batch], options)
            synchronize(device)
            wall = time.perf_counter() - start
    events = profiled.events()
    kernels = [(event.time_range.start, event.time_range.end) for event in events if event.device_type == DeviceType.CUDA]
    averages = profiled.key_averages()
    counts = {entry.key: entry.count for entry in averages}
    by_gpu = sorted((entry for entry in averages if entry.self_device_time_total > 0), key=lambda entry: -entry.self_device_time_total)
    by_cpu = sorted(averages, key=lambda entry: -entry.self_cpu_time_total)
    gpu_seconds = busy_seconds(kernels) / 1e6
    reads = {
        "local_scalar_dense": counts.get("aten::_local_scalar_dense", 0),
        "nonzero": counts.get("aten::nonzero", 0),
        "copies_to_host": sum(1 for event in events if event.device_type == DeviceType.CUDA and "DtoH" in event.name),
        "synchronize_calls": max(0, sum(count for key, count in counts.items() if key.endswith(SYNCHRONIZING)) - 1),
    }
    write_result(
        f"profile_{device.type}",
        {
            "setting": {**values, "steps": args.steps},
            "wall_seconds_per_step": round(unprofiled / args.steps, 5),
            "profiled_wall_seconds_per_step": round(wall / args.steps, 5),
            "gpu_busy_seconds_per_step": round(gpu_seconds / args.steps, 5) if kernels else None,
            "gpu_busy_fraction": round(gpu_seconds / unprofiled, 3) if kernels else None,
            "gpu_busy_fraction_profiled": round(gpu_seconds / wall, 3) if kernels else None,
            "kernel_launches_per_step": sum(count for key, count in counts.items() if key.startswith(LAUNCHES)) / args.steps,
            "aten_ops_per_step": sum(entry.count for entry in averages if entry.key.startswith("aten::")) / args.steps,
            "host_syncs": sum(reads.values()),
            "host_reads": reads,
            "host_reads_note": "in the profiled steps, none of which reads its result; the closing synchronize is left out",
            "synchronizing_lines": sync_sites,
            "top_gpu": [
                {"name": entry.key[:120], "calls": entry.count, "ms": round(entry.self_device_time_total / 1e3, 3)} for entry in by_gpu[:15]
            ],
            "top_cpu": [
                {"name": entry.key[:120], "calls": entry.count, "ms": round(entry.self_cpu_time_total / 1e3, 3)} for entry in by_cpu[:15]
            ],
        },
        device,
    )


SYNCHRONIZING = ("StreamSynchronize", "DeviceSynchronize", "EventSynchronize")
"""The CUDA runtime and driver calls that wait for the device, as the profiler names them."""


def synchronizing_lines(device: torch.device, step: Callable[[], object], steps: int) -> list[str]:
    """Where ``steps`` calls of ``step`` wait for the device: ``torch.cuda.set_sync_debug_mode``'s warnings, by the line of
    code that raised each (``path:line``, relative to the repository where under it; on a CPU there is nothing to wait for)."""
    if device.type != "cuda":
        return []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                step()
            synchronize(device)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    sites = {f"{relative_to_root(warning.filename)}:{warning.lineno}" for warning in caught if "synchroniz" in str(warning.message)}
    return sorted(sites)


def relative_to_root(path: str) -> str:
    """``path`` relative to the repository root where it lies under it; else from its ``site-packages`` on, or its name."""
    resolved = Path(path).resolve()
    if resolved.is_relative_to(common.ROOT):
        return str(resolved.relative_to(common.ROOT))
    parts = resolved.parts
    return "/".join(parts[parts.index("site-packages") + 1 :]) if "site-packages" in parts else resolved.name


def concurrency_worker(args: argparse.Namespace) -> None:
    """One process of :func:`concurrency`: warm up, wait until every process has, time ``--steps`` steps, print JSON."""
    device = resolve_device(args.device)
    threads = set_cpu_threads(parse_threads(args.threads), device, CUDA_THREADS)
    values = settings({**R18, "sampler": "ucl", "precision": "bf16"}, args.smoke)
    config = PretrainConfig(data=str(args.work / "prepared"), device=args.device, seed=0, max_steps=args.steps, **values)
    with distributed_context(args.device) as context, tempfile.TemporaryDirectory() as scratch:
        training = training_run(config, context, scratch)
        batch = torch.arange(config.batch_size, device=device)
        for _ in range(warmup_steps(args.smoke)):
            training.step(training.samples[batch], training.labels[batch], config.loss_options(0))
        synchronize(device)
        (args.barrier / str(os.getpid())).touch()
        deadline = time.monotonic() + 300
        while len(list(args.barrier.iterdir())) < args.processes and time.monotonic() < deadline:
            time.sleep(0.05)
        seconds = sum(timed_epochs(training, 1, 0))
    steps = min(args.steps, training.steps_per_epoch)
    print(json.dumps({"threads": threads, "steps": steps, "seconds_per_step": seconds / steps}))


def concurrency(args: argparse.Namespace) -> None:
    """Per-step time of ``--processes`` trainings at once against one alone, at ``--threads auto`` and (CUDA) every core."""
    device = resolve_device(args.device)
    fail_if_asked("concurrency")
    choices = ["auto"] + ([str(cpu_count())] if device.type == "cuda" else [])
    rows: list[dict[str, Any]] = []
    for threads in choices:
        for processes in (1, args.processes):
            with tempfile.TemporaryDirectory() as barrier:
                command = [sys.executable, "-m", "benchmarks.device_check", "concurrency-worker", "--work", str(args.work)]
                command += ["--device", args.device, "--threads", threads, "--barrier", barrier, "--processes", str(processes)]
                command += ["--steps", str(args.steps)] + (["--smoke"] if args.smoke else [])
                workers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(processes)]
                printed = [worker.communicate()[0].splitlines() for worker in workers]
            row: dict[str, Any] = {"threads_option": threads, "processes": processes}
            if any(worker.returncode != 0 or not lines for worker, lines in zip(workers, printed)):
                row["error"] = f"exit codes {[worker.returncode for worker in workers]}"
                print(f"--threads {threads}, {processes} at once: failed ({row['error']})", flush=True)
            else:
                outputs = [json.loads(lines[-1]) for lines in printed]
                per_step = [output["seconds_per_step"] for output in outputs]
                row |= {"threads": outputs[0]["threads"], "seconds_per_step": [round(seconds, 5) for seconds in per_step]}
                row["median_seconds_per_step"] = round(statistics.median(per_step), 5)
                alone = next((other for other in rows if other["threads_option"] == threads and "median_seconds_per_step" in other), row)
                row["over_one_alone"] = round(row["median_seconds_per_step"] / alone["median_seconds_per_step"], 3)
                print(f"--threads {threads}, {processes} at once: {row['median_seconds_per_step']} s per step", flush=True)
            rows.append(row)
            setting = settings({**R18, "sampler": "ucl", "precision": "bf16"}, args.smoke)
            write_result(
                f"concurrency_{device.type}", {"setting": {**setting, "steps": args.steps}, "cpus": cpu_count(), "rows": rows}, device
            )
    if any("error" in row for row in rows):
        sys.exit(1)


def accuracy(args: argparse.Namespace) -> None:
    """The four samplers at one number of epochs through benchmarks.reproduce, stopping at ``--seconds``; rerun to continue."""
    device = resolve_device(args.device)
    fail_if_asked("accuracy")
    chosen = args.work / "accuracy_epochs.json"
    if chosen.is_file():
        epochs = json.loads(chosen.read_text())["epochs"]
    else:
        measured = common.RESULTS / f"throughput_{device.type}.json"
        rows = json.loads(measured.read_text())["rows"] if measured.is_file() else []
        epoch_seconds = next((row["epoch_seconds"] for row in rows if row["name"] == "ucl"), None)
        per_set = args.seconds / len(ACCURACY_SETS) - (0 if args.smoke else EVALUATION_SECONDS)
        epochs = 1 if args.smoke or epoch_seconds is None else max(1, int(per_set / epoch_seconds))
        chosen.write_text(json.dumps({"epochs": epochs, "ucl_epoch_seconds": epoch_seconds, "seconds": args.seconds}) + "\n")
    shared = settings({**R18}, args.smoke) | {"epochs": epochs} | ({"knn.k": 10} if args.smoke else {})
    command = [sys.executable, "-m", "benchmarks.reproduce", "--name", f"four_samplers_{device.type}", "--work", str(args.work)]
    command += [
        "--device",
        args.device,
        "--time-budget",
        str(args.seconds),
        "--prepare",
        f"dataset=imagefolder,path={args.work / 'images'}",
    ]
    command += ["--all", ",".join(f"{key}={value}" for key, value in shared.items())]
    for name, values in ACCURACY_SETS.items():
        command += ["--set", f"{name}:{values}"]
    print(f"{len(ACCURACY_SETS)} samplers, {epochs} epochs each", flush=True)
    returncode = subprocess.run(command).returncode
    if returncode == STOPPED_BY_BUDGET:
        print("the time left ran out: rerun with --parts setup,accuracy and the same --work to continue")
    sys.exit(0 if returncode == STOPPED_BY_BUDGET else returncode)


def tests_summary(args: argparse.Namespace) -> None:
    """The JUnit file of the test run as counts, failures and errors; the log's tail when there is no JUnit file."""
    device = resolve_device(args.device)
    command = " ".join(portable(argument) for argument in args.command.split(" "))  # the JUnit file's path is the machine's
    payload: dict[str, Any] = {"command": command, "exit_code": args.exit_code, "timed_out": args.exit_code == 124}
    payload["seconds"], payload["load_average_1min"] = args.seconds, load_average()
    if args.junit.is_file():
        suites = ElementTree.parse(args.junit).getroot()
        cases = list(suites.iter("testcase"))
        problems = {
            f"{case.get('classname')}::{case.get('name')}": (problem.get("message") or "")[:300]
            for case in cases
            for problem in case
            if problem.tag in ("failure", "error")
        }
        skipped = sum(1 for case in cases for child in case if child.tag == "skipped")
        payload |= {"tests": len(cases), "failed": len(problems), "skipped": skipped, "passed": len(cases) - len(problems) - skipped}
        payload["problems"] = problems
    else:
        payload["log_tail"] = args.log.read_text(errors="replace").splitlines()[-60:] if args.log.is_file() else []
    write_result(f"tests_{device.type}", payload, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    runs = {
        "setup": setup,
        "compile": compile_check,
        "compile-worker": compile_worker,
        "throughput": throughput,
        "profile": step_profile,
        "concurrency": concurrency,
        "concurrency-worker": concurrency_worker,
        "accuracy": accuracy,
        "tests-summary": tests_summary,
    }
    for name in runs:
        part = parts.add_parser(name)
        part.add_argument("--work", type=Path, required=name != "tests-summary", help="the check's work folder")
        part.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
        part.add_argument("--smoke", action="store_true", help="tiny settings (small CNN, batches of 32)")
        if name == "setup":
            part.add_argument("--archive", type=Path, help="CIFAR-10's JPEG archive (train/ and test/ class folders)")
            part.add_argument("--synthetic", type=int, default=0, help="instead, an archive of N random images in its layout")
        if name == "profile":
            part.add_argument("--steps", type=int, default=5, help="profiled steps")
        if name.startswith("compile"):
            part.add_argument("--steps", type=int, default=COMPILE_STEPS, help="steps of each run, compiled and eager")
        if name == "compile-worker":
            part.add_argument("--compiled", action="store_true", help="compile the step (--compile); else eager mode")
        if name.startswith("concurrency"):
            part.add_argument("--processes", type=int, default=4, help="trainings at once")
            part.add_argument("--steps", type=int, default=20, help="timed steps of each")
        if name == "concurrency-worker":
            part.add_argument("--threads", default="auto", help="hcl's --threads")
            part.add_argument("--barrier", type=Path, required=True, help="folder where each process says it is ready")
        if name == "accuracy":
            part.add_argument("--seconds", type=float, required=True, help="the time left for the four runs")
        if name == "tests-summary":
            part.add_argument("--junit", type=Path, required=True)
            part.add_argument("--log", type=Path, required=True)
            part.add_argument("--exit-code", type=int, required=True)
            part.add_argument("--seconds", type=float, required=True)
            part.add_argument("--command", required=True)
    args = parser.parse_args()
    runs[args.part](args)


if __name__ == "__main__":
    main()
