"""The bad-input table: every case across the subcommands and params.yaml gets exit code 2
(usage) or 1 (runtime), exactly one error line on stderr (its last, after the stage's status lines), no traceback, and no partial artifact."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from hcl_cli.artifacts import RECORD_FILE
from hcl_cli.cli import main
from hcl_cli.config import EmbedConfig
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import save_encoder
from hcl_cli.image.networks import build_model
from hcl_cli.stages import embed

USAGE, RUNTIME = 2, 1


@dataclass(frozen=True)
class Case:
    """One bad input: the argv (``{run}`` is the fixture folder), the exit code, a message fragment."""

    name: str
    argv: list[str]
    code: int
    message: str
    setup: Callable[[Path], None] | None = None


def write_bytes(relative: str, data: bytes) -> Callable[[Path], None]:
    return lambda run: (run / relative).write_bytes(data)


def truncate_model(run: Path) -> None:
    data = (run / "encoder.safetensors").read_bytes()
    (run / "truncated.safetensors").write_bytes(data[: len(data) // 2])
    (run / "truncated.json").write_bytes((run / "encoder.json").read_bytes())


def empty_embeddings(run: Path) -> None:
    (run / "empty.safetensors").write_bytes(b"")
    (run / "empty.json").write_bytes((run / "embeddings.json").read_bytes())


def nan_encoder(run: Path) -> None:
    model = build_model("small_cnn", 1, 8, 16)
    with torch.no_grad():
        next(model.parameters())[0].fill_(float("nan"))
    save_encoder(run / "nan.safetensors", model, json.loads((run / "encoder.json").read_text()))


def encoder_without_mean(run: Path) -> None:
    meta = {key: value for key, value in json.loads((run / "encoder.json").read_text()).items() if key != "mean"}
    save_encoder(run / "nomean.safetensors", build_model("small_cnn", 1, 8, 16), meta)


def encoder_with_an_old_sidecar(run: Path) -> None:
    """What a kill between the two renames of a save leaves: new weights, the previous sidecar (same shapes)."""
    shutil.copy(run / "encoder.json", run / "stale.json")
    torch.manual_seed(1)
    save_encoder(run / "stale.safetensors", build_model("small_cnn", 1, 8, 16), json.loads((run / "encoder.json").read_text()))
    shutil.copy(run / "encoder.json", run / "stale.json")


CASES = [
    # Usage errors (exit 2): wrong types, out-of-range values, unknown names.
    Case("unknown sampler", ["pretrain", "--sampler", "hard"], USAGE, "--sampler must be one of"),
    Case("negative beta", ["pretrain", "--beta", "-1"], USAGE, "--beta must be >= 0"),
    Case("tau_plus at 1", ["pretrain", "--tau-plus", "1"], USAGE, "--tau-plus must be < 1"),
    Case(
        "zero temperature",
        ["pretrain", "--temperature", "0"],
        USAGE,
        "--temperature must be >= 0.001 (got 0.0); its range is [0.001, 1000.0]",
    ),
    Case("zero epochs", ["pretrain", "--epochs", "0"], USAGE, "--epochs must be >= 1"),
    Case("non-numeric batch size", ["pretrain", "--batch-size", "many"], USAGE, "--batch-size"),
    Case("two undimix weights", ["pretrain", "--undimix-weights", "1,2"], USAGE, "--undimix-weights"),
    Case(
        "zero OT epsilon",
        ["pretrain", "--ot-epsilon", "0"],
        USAGE,
        "--ot-epsilon must be >= 0.001 (got 0.0); its range is [0.001, 1000000000.0]",
    ),
    Case("boolean not true/false", ["pretrain", "--clip", "maybe"], USAGE, "--clip must be true or false"),
    Case("unknown option", ["pretrain", "--betta", "1"], USAGE, "--betta"),
    Case("NaN beta", ["pretrain", "--beta", "nan"], USAGE, "--beta must be a finite number"),
    Case("unknown dataset", ["prepare", "--dataset", "mnist"], USAGE, "--dataset must be one of"),
    Case("test fraction above 1", ["prepare", "--test-fraction", "1.5"], USAGE, "--test-fraction must be < 1"),
    Case(
        "zero k",
        ["knn-eval", "--k", "0", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/out/knn.json"],
        USAGE,
        "--k must be >= 1",
    ),
    Case(
        "k larger than the bank",
        ["knn-eval", "--k", "100000", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/out/knn.json"],
        USAGE,
        "--k",
    ),
    Case(
        "unknown feature",
        ["knn-eval", "--feature", "pixels", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/out/knn.json"],
        USAGE,
        "--feature must be one of",
    ),
    Case(
        "unknown optimizer",
        ["linear-eval", "--optimizer", "sgd", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/out/linear.json"],
        USAGE,
        "--optimizer must be one of",
    ),
    Case("zero embed batch", ["embed", "--batch-size", "0", "--out", "{run}/out/emb.safetensors"], USAGE, "--batch-size must be >= 1"),
    Case("negative report anchors", ["report", "--anchors", "-1", "--out", "{run}/out/report.md"], USAGE, "--anchors must be >= 0"),
    Case(
        "batch larger than the dataset",
        ["pretrain", "--data", "{run}/prepared", "--batch-size", "5000", "--out", "{run}/out/models", "--live-dir", "{run}/out/live"],
        USAGE,
        "--batch-size",
    ),
    # An option of the other modality, set away from its default, would be silently ignored: refused, from either source.
    Case(
        "graph option on images",
        ["pretrain", "--data", "{run}/prepared", "--gin-layers", "5", "--out", "{run}/out/models", "--live-dir", "{run}/out/live"],
        USAGE,
        "--gin-layers (pretrain.gin_layers) 5 is for graphs and does nothing on {run}/prepared's images",
    ),
    Case(
        "graph reading on images from params.yaml",
        [
            "pretrain",
            "--params",
            "{run}/graph-params.yaml",
            "--data",
            "{run}/prepared",
            "--out",
            "{run}/out/models",
            "--live-dir",
            "{run}/out/live",
        ],
        USAGE,
        "--graph-weights (pretrain.graph_weights) official is for graphs",
        write_bytes("graph-params.yaml", b"pretrain:\n  graph_weights: official\n"),
    ),
    Case(
        "malformed params.yaml",
        ["knn-eval", "--params", "params.yaml", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/out/knn.json"],
        USAGE,
        "params.yaml",
        write_bytes("params.yaml", b"knn: [unclosed\n"),
    ),
    # Runtime errors (exit 1): missing, empty, corrupt, foreign or unwritable files.
    Case(  # a temperature that overflows the similarities to NaN is refused before training
        "settings that would give NaN",
        [
            "pretrain",
            "--data",
            "{run}/prepared",
            "--temperature",
            "1e-30",
            "--epochs",
            "1",
            "--batch-size",
            "64",
            "--out",
            "{run}/out/models",
            "--live-dir",
            "{run}/live",
            "--device",
            "cpu",
        ],
        USAGE,
        "--temperature must be >= 0.001 (got 1e-30); its range is [0.001, 1000.0]",
    ),
    Case(
        "missing data for a supervised sampler",
        ["pretrain", "--data", "{run}/missing", "--sampler", "scl", "--out", "{run}/out/models"],
        USAGE,
        "{run}/missing",
    ),
    Case("missing prepared data", ["pretrain", "--data", "{run}/nowhere", "--out", "{run}/out/models"], USAGE, "{run}/nowhere"),
    Case(
        "missing image folder",
        ["prepare", "--dataset", "imagefolder", "--path", "{run}/no-images", "--out", "{run}/out/prepared"],
        USAGE,
        "{run}/no-images",
    ),
    Case(
        "missing encoder",
        ["embed", "--data", "{run}/prepared", "--model", "{run}/none.safetensors", "--out", "{run}/out/emb.safetensors"],
        USAGE,
        "none.safetensors",
    ),
    Case(
        "truncated encoder",
        ["embed", "--data", "{run}/prepared", "--model", "{run}/truncated.safetensors", "--out", "{run}/out/emb.safetensors"],
        USAGE,
        "truncated.safetensors",
        truncate_model,
    ),
    Case(
        "foreign file as encoder",
        ["embed", "--data", "{run}/prepared", "--model", "{run}/embeddings.safetensors", "--out", "{run}/out/emb.safetensors"],
        USAGE,
        "expected an encoder artifact",
    ),
    Case(
        "missing embeddings",
        ["knn-eval", "--embeddings", "{run}/none.safetensors", "--out", "{run}/out/knn.json"],
        USAGE,
        "none.safetensors",
    ),
    Case(
        "empty embeddings file",
        ["linear-eval", "--embeddings", "{run}/empty.safetensors", "--out", "{run}/out/linear.json"],
        USAGE,
        "empty.safetensors: not a readable safetensors file",
        empty_embeddings,
    ),
    Case("missing metrics folder", ["report", "--metrics", "{run}/no-metrics", "--out", "{run}/out/report.md"], USAGE, "no-metrics"),
    Case(
        "encoder with NaN weights",
        ["embed", "--data", "{run}/prepared", "--model", "{run}/nan.safetensors", "--out", "{run}/out/emb.safetensors"],
        USAGE,
        "nan.safetensors: tensor 'backbone.features.0.0.weight' holds NaN or infinite weights",
        nan_encoder,
    ),
    Case(
        "encoder sidecar without mean",
        ["embed", "--data", "{run}/prepared", "--model", "{run}/nomean.safetensors", "--out", "{run}/out/emb.safetensors"],
        USAGE,
        "nomean.safetensors: sidecar field 'mean' must be a list of 1 numbers",
        encoder_without_mean,
    ),
    Case(
        "encoder with another save's sidecar",
        ["embed", "--data", "{run}/prepared", "--model", "{run}/stale.safetensors", "--out", "{run}/out/emb.safetensors"],
        USAGE,
        "stale.safetensors: the tensor file does not match the 'sha256' its sidecar",
        encoder_with_an_old_sidecar,
    ),
    Case(
        "output under a regular file",
        ["knn-eval", "--k", "5", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/a-file/knn.json"],
        USAGE,
        "a-file/knn.json lies under a file, not a folder",
        write_bytes("a-file", b"not a folder"),
    ),
]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory, prepared_digits: Callable[[float], Path]) -> Path:
    """Prepared digits, an (untrained) encoder and its embeddings: valid inputs to break one at a time."""
    run = tmp_path_factory.mktemp("bad-input")
    shutil.copytree(prepared_digits(0.25), run / "prepared")
    card = load_card(run / "prepared")
    torch.manual_seed(0)
    meta = {"config": {}, "epoch": 0, "seed": 0, "dataset": "digits", "mean": card.mean, "std": card.std}
    save_encoder(run / "encoder.safetensors", build_model("small_cnn", 1, 8, 16), meta)
    embed.run(
        EmbedConfig(
            data=str(run / "prepared"), model=str(run / "encoder.safetensors"), out=str(run / "embeddings.safetensors"), device="cpu"
        )
    )
    return run


def fill(text: str, run: Path) -> str:
    return text.replace("{run}", str(run))


def invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return int(exit_info.value.code or 0), capsys.readouterr().err


def assert_one_line_error(err: str, command: str, message: str) -> None:
    """The error is stderr's last line, and its only one but the stage's status lines before it (``hcl prepare: reading``)."""
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    assert all(line.startswith(f"hcl {command}: ") and ": error: " not in line for line in lines[:-1]), err
    assert lines[-1].startswith(f"hcl {command}: error: ") and message in lines[-1], lines[-1]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(
    case: Case, run_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    run = run_folder
    if case.setup is not None:
        target = work if case.name == "malformed params.yaml" else run
        case.setup(target)
    try:
        code, err = invoke([fill(a, run) for a in case.argv], capsys)
        assert code == case.code, err
        assert_one_line_error(err, case.argv[0], fill(case.message, run))
        assert not (run / "out").exists() or not any((run / "out").rglob("*.*")), "no partial artifact is left"
    finally:
        shutil.rmtree(run / "out", ignore_errors=True)  # a failing case leaves nothing for the next one


def test_debug_flag_shows_the_traceback(run_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = invoke(
        ["--debug", "knn-eval", "--embeddings", str(run_folder / "none.safetensors"), "--out", str(run_folder / "out" / "knn.json")], capsys
    )
    assert code == USAGE and "Traceback" in err and err.strip().splitlines()[-1].startswith("hcl knn-eval: error:")


def test_disk_full_leaves_the_previous_metrics_intact(
    run_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "knn.json"
    args = ["knn-eval", "--k", "5", "--embeddings", str(run_folder / "embeddings.safetensors"), "--out", str(out)]
    assert invoke(args, capsys)[0] == 0  # its own earlier result, which it may replace
    before = out.read_text()

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("hcl_cli.artifacts.files.os.fsync", disk_full)
    code, err = invoke(args, capsys)
    assert code == RUNTIME
    assert_one_line_error(err, "knn-eval", "No space left on device")
    assert out.read_text() == before, "the previous file is untouched"
    assert sorted(p.name for p in tmp_path.iterdir()) == [RECORD_FILE, "knn.inputs.json", "knn.json"], "no temporary file is left"


OVERLAPS = [
    (
        ["embed", "--data", "{run}/prepared", "--model", "{run}/encoder.safetensors", "--out", "{run}/encoder.safetensors"],
        "--out {run}/encoder.safetensors is also the input --model {run}/encoder.safetensors: choose another --out",
    ),
    (
        ["embed", "--data", "{run}/prepared", "--model", "{run}/encoder.safetensors", "--out", "{run}/encoder.json"],
        "--out {run}/encoder.json is also the input --model {run}/encoder.safetensors (both use {run}/encoder.json)",
    ),
    (
        ["embed", "--data", "{run}/prepared", "--model", "{run}/encoder.safetensors", "--out", "{run}/prepared/e.safetensors"],
        "--out {run}/prepared/e.safetensors is also the input --data {run}/prepared",
    ),
    (
        ["knn-eval", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/embeddings.safetensors"],
        "--out {run}/embeddings.safetensors is also the input --embeddings",
    ),
    (
        ["knn-eval", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/embeddings.json"],
        "--out {run}/embeddings.json is also the input --embeddings",
    ),
    (
        ["linear-eval", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/embeddings.json"],
        "--out {run}/embeddings.json is also the input --embeddings",
    ),
    (
        ["knn-eval", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/prepared/knn.json"],
        "--out {run}/prepared/knn.json lies inside {run}/prepared, a folder hcl writes whole",
    ),
    (
        ["report", "--embeddings", "{run}/embeddings.safetensors", "--out", "{run}/embeddings.json"],
        "--out {run}/embeddings.json is also the input --embeddings",
    ),
    (
        ["report", "--data", "{run}/prepared", "--out", "{run}/prepared/report.md"],
        "--out {run}/prepared/report.md is also the input --data {run}/prepared",
    ),
    (["report", "--metrics", "{run}", "--out", "{run}/report.md"], "--out {run}/report.md is also the input --metrics {run}"),
    (
        ["report", "--plots", "{run}/figures", "--out", "{run}/report.md"],
        "--out (its figures) {run}/figures is also the input --plots {run}/figures",
    ),
    (
        ["prepare", "--dataset", "imagefolder", "--path", "{run}/prepared", "--out", "{run}/prepared"],
        "--out {run}/prepared is also the input --path {run}/prepared",
    ),
]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize(("argv", "message"), OVERLAPS, ids=[f"{argv[0]} {argv[-1].removeprefix('{run}/')}" for argv, _ in OVERLAPS])
def test_an_output_that_is_an_input_is_refused_before_anything_is_read(
    argv: list[str], message: str, run_folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(run_folder)

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("an input was read before the outputs were checked")

    for reader in ("load_card", "load_split", "load_encoder", "load_embeddings", "read_metrics", "load_source"):
        for module in ("embed", "knn_eval", "linear_eval", "report", "prepare"):
            monkeypatch.setattr(f"hcl_cli.stages.{module}.{reader}", no_read, raising=False)
    code, err = invoke([fill(a, run_folder) for a in argv], capsys)
    assert code == USAGE, err
    assert_one_line_error(err, argv[0], fill(message, run_folder))
    assert snapshot(run_folder) == before, "no input was touched"
