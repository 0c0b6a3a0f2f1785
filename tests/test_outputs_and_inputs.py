"""Every output owned, every artifact bound to its inputs, one check of a metrics file (issue 32, items 1, 2, 7, 15).

One rule for an output that exists (:func:`hcl_cli.artifacts.check_replaceable`): hcl writes over it only when it is
hcl's own earlier result of that output; a user's file, another stage's artifact or a symbolic link is kept and the
run stops in one line (exit 2) before any work. Every artifact records the sha256 of what it was made from, and a
reader refuses inputs of different runs in one line (exit 1).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from hcl_cli.artifacts import check_replaceable, log_sha256, recorded_output, save_artifact, tensor_output, write_output
from hcl_cli.cli import main
from hcl_cli.config import PrepareConfig
from hcl_cli.errors import HclError, UsageError
from hcl_cli.metrics import METRICS_OUTPUTS, check_metrics, load_metrics, save_metrics
from hcl_cli.stages import compare, prepare

TINY = ("--epochs", "1", "--batch-size", "32", "--arch", "small_cnn", "--device", "cpu")


def hcl(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``hcl ARGS`` in this process: its exit code and its standard error."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    code = exit_info.value.code
    return int(code) if isinstance(code, int) else 0, capsys.readouterr().err.strip()


@pytest.fixture(scope="module")
def trained(prepared_digits: Callable[[float], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run of the pipeline: its own copy of prepared digits, encoder, training log, embeddings and metrics."""
    root = tmp_path_factory.mktemp("run")
    shutil.copytree(prepared_digits(0.95), root / "prepared")
    for args in (
        ["pretrain", "--data", "prepared", "--out", "m", "--live-dir", "live", *TINY],
        ["embed", "--data", "prepared", "--model", "m/encoder.safetensors", "--out", "e.safetensors", "--device", "cpu"],
        ["knn-eval", "--embeddings", "e.safetensors", "--out", "metrics/knn.json", "--k", "5", "--device", "cpu"],
        ["linear-eval", "--embeddings", "e.safetensors", "--out", "metrics/linear.json", "--epochs", "2", "--device", "cpu"],
    ):
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(root)
            with pytest.raises(SystemExit) as exit_info:
                main(args)
        assert exit_info.value.code == 0, args
    return root


@pytest.fixture
def run(trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of :func:`trained` as the working folder."""
    shutil.copytree(trained, tmp_path / "run")
    monkeypatch.chdir(tmp_path / "run")
    return tmp_path / "run"


def contents(folder: Path) -> dict[str, bytes | str]:
    """Every path under ``folder``: a file's bytes, a link's target."""
    return {
        path.relative_to(folder).as_posix(): str(path.readlink()) if path.is_symlink() else path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() or path.is_symlink()
    }


# Item 1: every output owned.


def test_a_tensor_output_replaces_only_hcl_tensors_of_its_kind(tmp_path: Path) -> None:
    embeddings = tensor_output("embeddings artifact", ("embeddings",))
    (tmp_path / "notes.safetensors").write_text("notes\n")  # no sidecar: before, a file without one was fair game
    save_file({"w": torch.zeros(2)}, str(tmp_path / "theirs.safetensors"))  # safetensors, not hcl's
    save_artifact(tmp_path / "ours.safetensors", {"w": torch.zeros(2)}, "embeddings")
    save_artifact(tmp_path / "killed.safetensors", {"w": torch.zeros(2)}, "embeddings")
    (tmp_path / "killed.json").unlink()  # a first write killed between its two renames
    save_artifact(tmp_path / "encoder.safetensors", {"w": torch.zeros(2)}, "encoder")
    save_file({"w": torch.zeros(2)}, str(tmp_path / "older.safetensors"))  # as an hcl that recorded no kind in the header
    save_artifact(tmp_path / "reference.safetensors", {"w": torch.zeros(2)}, "embeddings")
    sidecar = json.loads((tmp_path / "reference.json").read_text())
    (tmp_path / "older.json").write_text(json.dumps(sidecar | {"sha256": _sha256(tmp_path / "older.safetensors")}))
    (tmp_path / "changed.safetensors").write_text("changed by hand\n")
    (tmp_path / "changed.json").write_text(json.dumps(sidecar))
    (tmp_path / "link.safetensors").symlink_to(tmp_path / "ours.safetensors")
    for name in ("ours", "killed", "older", "new"):
        check_replaceable("--out", tmp_path / f"{name}.safetensors", embeddings)
    for name, found in [
        ("notes", "a file hcl did not write"),
        ("theirs", "a safetensors file hcl did not write"),
        ("encoder", "an hcl 'encoder' artifact"),
        ("changed", r"not the embeddings artifact hcl wrote there \(damaged, or changed since"),
    ]:
        with pytest.raises(UsageError, match=rf"--out .*{name}\.safetensors exists and is {found}(\W|$)"):
            check_replaceable("--out", tmp_path / f"{name}.safetensors", embeddings)
    with pytest.raises(UsageError, match="link.safetensors is a symbolic link, which hcl neither replaces nor writes through"):
        check_replaceable("--out", tmp_path / "link.safetensors", embeddings)


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_recorded_output_replaces_only_a_file_its_record_lists(tmp_path: Path) -> None:
    """Ownership by hcl's record of what it wrote, never by a file's content (issue 41, item 1)."""
    table = recorded_output("comparison table")
    write_output(tmp_path / "ours.md", "# Sweep comparison\n", table)
    (tmp_path / "notes.md").write_text("# Sweep comparison\n\n| a |\n")  # a user's file that looks like hcl's
    (tmp_path / "folder.md").mkdir()
    check_replaceable("--out", tmp_path / "ours.md", table)
    write_output(tmp_path / "ours.md", "# Sweep comparison\n\n| b |\n", table)
    with pytest.raises(
        UsageError, match="notes.md exists and is a file hcl has no record of writing; hcl writes only over its own comparison table"
    ):
        check_replaceable("--out", tmp_path / "notes.md", table)
    with pytest.raises(UsageError, match="notes.md exists and is a file hcl has no record of writing"):
        write_output(tmp_path / "notes.md", "# Sweep comparison\n", table)
    assert (tmp_path / "notes.md").read_text() == "# Sweep comparison\n\n| a |\n"
    with pytest.raises(UsageError, match="ours.md exists and is hcl's comparison table, not its report"):
        check_replaceable("--out", tmp_path / "ours.md", recorded_output("report"))
    (tmp_path / "ours.md").write_text("# edited by hand\n")
    with pytest.raises(UsageError, match="ours.md exists and is not the comparison table hcl wrote there"):
        check_replaceable("--out", tmp_path / "ours.md", table)
    with pytest.raises(UsageError, match="folder.md exists and is a folder, not hcl's comparison table"):
        check_replaceable("--out", tmp_path / "folder.md", table)


def test_embed_keeps_a_users_file_and_a_symbolic_link(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "notes.safetensors").write_text("notes\n")
    (run / "link.safetensors").symlink_to(run / "e.safetensors")
    before = contents(run)
    args = ["embed", "--data", "prepared", "--model", "m/encoder.safetensors", "--device", "cpu", "--out"]
    code, error = hcl([*args, "notes.safetensors"], capsys)
    assert code == 2 and error.startswith("hcl embed: error: --out notes.safetensors exists and is a file hcl did not write")
    code, error = hcl([*args, "link.safetensors"], capsys)
    assert code == 2 and "--out link.safetensors is a symbolic link" in error
    assert contents(run) == before
    assert hcl([*args, "e.safetensors"], capsys)[0] == 0, "its own earlier result is replaced"


def test_report_keeps_a_users_report_and_a_symbolic_link(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["report", "--metrics", "metrics", "--plots", "live", "--embeddings", "e.safetensors", "--data", "prepared"]
    args += ["--model", "m/encoder.safetensors", "--anchors", "0"]
    assert hcl([*args, "--out", "r/report.md"], capsys)[0] == 0
    assert hcl([*args, "--out", "r/report.md"], capsys)[0] == 0, "its own earlier report is replaced"
    (run / "mine").mkdir()
    (run / "mine" / "report.md").write_text("# My report\n")
    (run / "linked").mkdir()
    (run / "linked" / "report.md").symlink_to(run / "r" / "report.md")
    before = contents(run)
    code, error = hcl([*args, "--out", "mine/report.md"], capsys)
    assert (
        code == 2 and "--out mine/report.md exists and is a file hcl has no record of writing; hcl writes only over its own report" in error
    )
    code, error = hcl([*args, "--out", "linked/report.md"], capsys)
    assert code == 2 and "--out linked/report.md is a symbolic link" in error
    assert contents(run) == before


def test_pretrain_keeps_a_users_curve_and_checkpoint_pointer(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "live" / "plots" / "metrics" / "loss.tsv").write_text("my own loss\n")
    before = contents(run)
    code, error = hcl(["pretrain", "--data", "prepared", "--out", "m", "--live-dir", "live", *TINY], capsys)
    assert code == 2 and "--live-dir live/plots/metrics/loss.tsv exists and is not the training curve hcl wrote there" in error
    assert contents(run) == before
    shutil.rmtree(run / "live")
    (run / "m" / "checkpoints" / "latest.json").write_text('{"mine": 1}')
    (run / "m" / "checkpoints" / "epoch-notes.txt").write_text("kept")
    code, error = hcl(["pretrain", "--data", "prepared", "--out", "m", "--live-dir", "live", *TINY], capsys)
    assert code == 2 and "--out m/checkpoints/latest.json exists and is not the checkpoint pointer hcl wrote there" in error
    (run / "m" / "checkpoints" / "latest.json").unlink()
    assert hcl(["pretrain", "--data", "prepared", "--out", "m", "--live-dir", "live", *TINY], capsys)[0] == 0
    assert (run / "m" / "checkpoints" / "epoch-notes.txt").read_text() == "kept", "a fresh start deletes only checkpoints"


def test_compare_keeps_a_users_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # refused before dvc runs: dvc is not even needed
    (tmp_path / "table.csv").write_text("name,score\n")
    with pytest.raises(UsageError, match="--out table.csv exists and is a file hcl has no record of writing"):
        compare.run("table", compare.Selection())
    assert (tmp_path / "table.csv").read_text() == "name,score\n"


# Items 2 and 15: every artifact bound to its inputs.


def test_the_encoder_embeddings_and_metrics_record_what_they_were_made_from(run: Path) -> None:
    prepared = {
        name: json.loads((run / "prepared" / name).with_suffix(".json").read_text())["sha256"]
        for name in ("train.safetensors", "test.safetensors")
    }
    encoder = json.loads((run / "m" / "encoder.json").read_text())
    embeddings = json.loads((run / "e.json").read_text())
    assert encoder["inputs"] == {"prepared": prepared, "training_log": log_sha256(run / "live")}
    assert embeddings["inputs"] == {"encoder": encoder["sha256"], "prepared": prepared}
    for name in ("knn", "linear"):
        scored = json.loads((run / "metrics" / f"{name}.inputs.json").read_text())["inputs"]
        assert scored == {"embeddings": embeddings["sha256"], "encoder": encoder["sha256"]}


def test_a_prepared_folder_replaced_since_pretraining_is_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 15: ``prepare`` replaced the folder after the encoder trained on it, with another seed: another split of the
    same sizes, which no count can tell apart."""
    shutil.rmtree(run / "prepared")
    prepare.run(PrepareConfig(test_fraction=0.95, seed=1, out=str(run / "prepared")))
    expected = "--data prepared is not the prepared dataset that --model m/encoder.safetensors was made from (test.safetensors, train.safetensors differ)"
    code, error = hcl(
        ["embed", "--data", "prepared", "--model", "m/encoder.safetensors", "--out", "e2.safetensors", "--device", "cpu"], capsys
    )
    assert code == 2 and error.startswith(f"hcl embed: error: {expected}") and len(error.splitlines()) == 1
    paper = ["linear-eval", "--protocol", "paper", "--optimizer", "adam", "--epochs", "1", "--device", "cpu"]
    code, error = hcl([*paper, "--data", "prepared", "--model", "m/encoder.safetensors", "--out", "l.json"], capsys)
    assert code == 2 and error.startswith(f"hcl linear-eval: error: {expected}")
    report = ["report", "--metrics", "metrics", "--plots", "live", "--data", "prepared", "--model", "m/encoder.safetensors"]
    code, error = hcl([*report, "--out", "r/report.md"], capsys)
    assert code == 2 and error.startswith(f"hcl report: error: {expected}")
    code, error = hcl(
        ["pretrain", "--data", "prepared", "--out", "m", "--live-dir", "live", "--resume", "--epochs", "2", *TINY[2:]], capsys
    )
    assert code == 2 and "--resume: " in error and "prepared {" in error, "a resume does not go on over other data"
    assert not (run / "e2.safetensors").exists() and not (run / "l.json").exists() and not (run / "r").exists()


def test_embeddings_whose_encoder_trained_on_other_data_are_refused_by_the_evaluations(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sidecar = json.loads((run / "e.json").read_text())
    sidecar["encoder"]["inputs"]["prepared"]["train.safetensors"] = "0" * 64
    (run / "e.json").write_text(json.dumps(sidecar))
    for stage in ("knn-eval", "linear-eval"):
        code, error = hcl([stage, "--embeddings", "e.safetensors", "--out", "other.json", "--device", "cpu"], capsys)
        assert (
            code == 2
            and "e.safetensors (the prepared dataset it embeds) is not the prepared dataset that its encoder was made from" in error
        )


def test_the_report_refuses_inputs_of_different_runs(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 2: another run's embeddings (graphs beside a digits run) or another encoder's metrics."""
    args = ["report", "--metrics", "metrics", "--plots", "live", "--embeddings", "g.safetensors", "--data", "prepared"]
    args += ["--model", "m/encoder.safetensors", "--out", "r/report.md", "--anchors", "0"]
    shutil.copy(run / "e.safetensors", run / "g.safetensors")
    other_run = json.loads((run / "e.json").read_text())
    other_run["inputs"]["prepared"] = {"graphs.safetensors": "1" * 64, "split.safetensors": "2" * 64}
    (run / "g.json").write_text(json.dumps(other_run | {"dataset": "MUTAG"}))
    code, error = hcl(args, capsys)
    assert code == 2 and error.startswith(
        "hcl report: error: --data prepared is not the prepared dataset that --embeddings g.safetensors was made from"
    )
    knn = json.loads((run / "metrics" / "knn.inputs.json").read_text())
    (run / "metrics" / "knn.inputs.json").write_text(json.dumps(knn | {"inputs": {"embeddings": "3" * 64}}))
    args[args.index("g.safetensors")] = "e.safetensors"
    code, error = hcl(args, capsys)
    assert code == 2 and error.startswith(
        "hcl report: error: --embeddings e.safetensors is not the embeddings that metrics/knn.inputs.json was made from"
    )
    (run / "metrics" / "knn.inputs.json").write_text(json.dumps(knn | {"inputs": {"embeddings": "3" * 64, "encoder": "4" * 64}}))
    args[args.index("e.safetensors")] = "absent.safetensors"  # without the embeddings, the encoder they record still binds
    code, error = hcl(args, capsys)
    assert code == 2 and error.startswith(
        "hcl report: error: --model m/encoder.safetensors is not the encoder that metrics/knn.inputs.json was made from"
    )
    assert not (run / "r").exists()


# Item 7: one check of a metrics file, for the report and hcl compare.

BAD_METRICS: list[tuple[dict[str, Any], str]] = [
    ({"top1": math.nan}, "'top1' must be a number in [0, 1] (got nan)"),
    ({"top1": True}, "'top1' must be a number in [0, 1] (got True)"),
    ({"top1": 1.5, "top5": 1.5}, "'top1' must be a number in [0, 1] (got 1.5)"),
    ({"test_size": 0}, "'test_size' must be a positive integer (got 0)"),
    ({"test_size": 2.5}, "'test_size' must be a positive integer (got 2.5)"),
    ({"test_size": 10**400}, "'test_size' must be a positive integer (got 1000000000000000000000000000... (401 characters))"),
]


@pytest.mark.parametrize(
    ("change", "message"), BAD_METRICS, ids=[message.split(" must")[0] + str(i) for i, (_, message) in enumerate(BAD_METRICS)]
)
def test_compare_leaves_out_what_the_report_refuses(change: dict[str, Any], message: str) -> None:
    values = {"top1": 0.9, "top5": 1.0, "test_size": 100, "k": 20} | change
    with pytest.raises(HclError) as refused:
        check_metrics(values, "metrics/knn.json", "knn-eval")
    assert str(refused.value).startswith(f"metrics/knn.json: {message}")
    experiment = {"name": "exp", "executor": {"state": "success"}, "revs": [{"rev": "a" * 40, "name": "exp", "error": None}]}
    experiment["revs"][0]["data"] = {
        "params": {"params.yaml": {"data": {"pretrain": {"sampler": "hucl"}}}},
        "metrics": {"metrics/knn.json": {"data": values}, "metrics/linear.json": {"data": {"top1": 0.5, "top5": 1.0, "test_size": 100}}},
    }
    rows, skipped = compare.parse_experiments([{"rev": "b" * 40, "name": "main", "data": {}, "error": None, "experiments": [experiment]}])
    assert rows == [] and skipped == [f"exp: {refused.value}"]


# Issue 41, item 1: a file is hcl's only when hcl's own record says so (a sidecar, a folder's record or manifest).

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
USERS_FILES = {
    ".tsv": "step\tloss\n0\t9.99\n",
    ".json": '{"loss": 1.0, "step": 0, "top1": 0.5, "top5": 0.9, "test_size": 10, "checkpoint": "epoch-0001-step-000000.safetensors"}\n',
    ".md": "# Sweep comparison\n\n*Written by `hcl report`, which replaces this file when it runs again: keep notes elsewhere.*\n",
    ".csv": "experiment,rev,baseline,top1\n",
    ".png": PNG,
    ".safetensors": "my notes\n",
}
"""A user's file for each kind of name hcl writes, made to look like hcl's own (well-formed, hcl's first or last line)."""
ENCODER_ARGS = ("--data", "prepared", "--model", "m/encoder.safetensors")
STAGE_WRITES = {
    "prepare": (
        ["prepare", "--out", "P", "--test-fraction", "0.95"],
        ["P/card.json", "P/train.safetensors", "P/train.json", "P/test.safetensors", "P/.hcl-owned.json"],
    ),
    "pretrain": (
        ["pretrain", "--data", "prepared", "--out", "M", "--live-dir", "L", *TINY],
        [
            "M/encoder.safetensors",
            "M/encoder.json",
            "M/checkpoints/latest.json",
            "M/checkpoints/.hcl-written.json",
            "M/checkpoints/epoch-0001-step-000000.safetensors",
            "M/checkpoints/epoch-0001-step-000000.json",
            "L/metrics.json",
            "L/plots/metrics/loss.tsv",
            "L/plots/metrics/knn_top1.tsv",
            "L/plots/.hcl-written.json",
        ],
    ),
    "embed": (["embed", *ENCODER_ARGS, "--out", "E/e.safetensors", "--device", "cpu"], ["E/e.safetensors", "E/e.json"]),
    "knn-eval": (
        ["knn-eval", "--embeddings", "e.safetensors", "--out", "O/k.json", "--device", "cpu"],
        ["O/k.json", "O/.hcl-written.json"],
    ),
    "linear-eval": (
        ["linear-eval", "--embeddings", "e.safetensors", "--out", "O/l.json", "--epochs", "1", "--device", "cpu"],
        ["O/l.json", "O/.hcl-written.json"],
    ),
    "report": (
        ["report", "--metrics", "metrics", "--plots", "live", "--embeddings", "e.safetensors", *ENCODER_ARGS, "--out", "R/report.md"],
        [
            "R/report.md",
            *(f"R/figures/{name}.png" for name in ("loss", "knn_top1", "hscl_diagnostics", "similarity", "hard_negatives")),
            "R/figures/.hcl-written.json",
        ],
    ),
    "compare": (["compare", "--out", "O/t"], ["O/t.md", "O/t.csv", "O/.hcl-written.json"]),
}


@pytest.mark.parametrize(
    ("stage", "name"), [(stage, name) for stage, (_, names) in STAGE_WRITES.items() for name in names], ids=lambda value: str(value)
)
def test_a_users_file_of_each_name_hcl_writes_is_refused_and_unchanged(
    run: Path, stage: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every name every stage writes, in every place it writes: a user's file there (looking like hcl's) is refused, exit 2."""
    path = run / name
    path.parent.mkdir(parents=True, exist_ok=True)
    content = USERS_FILES[path.suffix]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = contents(run)
    code, error = hcl(STAGE_WRITES[stage][0], capsys)
    assert code == 2, error
    assert error.startswith(f"hcl {stage}: error: ") and "\n" not in error, error
    assert contents(run) == before


def test_a_users_symlink_at_a_figures_name_is_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "elsewhere.png").write_bytes(PNG)
    (run / "R" / "figures").mkdir(parents=True)
    (run / "R" / "figures" / "loss.png").symlink_to(run / "elsewhere.png")
    before = contents(run)
    code, error = hcl(STAGE_WRITES["report"][0], capsys)
    assert code == 2 and "R/figures exists and is a folder holding files hcl did not write (loss.png)" in error, error
    assert contents(run) == before and (run / "R" / "figures" / "loss.png").is_symlink()


def test_a_log_hcl_wrote_is_replaced_and_one_edited_since_is_not(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["pretrain", "--data", "prepared", "--out", "M", "--live-dir", "live", *TINY]
    assert hcl(args, capsys)[0] == 0, "the fixture's own log is replaced"
    (run / "live" / "plots" / "metrics" / "loss.tsv").write_text("step\tloss\n0\t9.99\n")
    code, error = hcl([*args[:4], "M2", *args[5:]], capsys)
    assert code == 2 and "loss.tsv exists and is not the training curve hcl wrote there" in error, error


def test_knn_and_linear_eval_never_write_over_each_others_metrics(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 3: an evaluation's output is its own only when the same stage wrote it, also when both run at once."""
    before = contents(run)
    code, error = hcl(["linear-eval", "--embeddings", "e.safetensors", "--out", "metrics/knn.json", "--device", "cpu"], capsys)
    assert code == 2 and "metrics/knn.json exists and is hcl's kNN metrics, not its linear metrics" in error, error
    code, error = hcl(["knn-eval", "--embeddings", "e.safetensors", "--out", "metrics/linear.json", "--device", "cpu"], capsys)
    assert code == 2 and "metrics/linear.json exists and is hcl's linear metrics, not its kNN metrics" in error, error
    assert contents(run) == before
    assert hcl(["knn-eval", "--embeddings", "e.safetensors", "--out", "metrics/knn.json", "--k", "5", "--device", "cpu"], capsys)[0] == 0
    # Both at once on one new --out: each checks before its work; the second to write finds the first's and is refused.
    knn = load_metrics(run / "metrics" / "knn.json", "knn-eval")
    check_replaceable("--out", run / "both.json", METRICS_OUTPUTS["linear-eval"])
    save_metrics(run / "both.json", knn, "knn-eval")
    with pytest.raises(UsageError, match="both.json exists and is hcl's kNN metrics, not its linear metrics"):
        save_metrics(run / "both.json", knn, "linear-eval")
    assert load_metrics(run / "both.json", "knn-eval") == knn


def test_the_reports_training_log_is_the_one_that_trained_its_encoder(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Item 4: the encoder records its training log's files; a report drawing another run's log is refused in one line."""
    recorded = json.loads((run / "m" / "encoder.json").read_text())["inputs"]["training_log"]
    assert {"metrics.json", "plots/metrics/loss.tsv"} <= recorded.keys()
    shutil.copytree(run / "live", run / "other")
    (run / "other" / "plots" / "metrics" / "loss.tsv").write_text("step\tloss\n0\t1.5\n")  # another run's curve
    args = ["report", "--metrics", "metrics", "--embeddings", "e.safetensors", *ENCODER_ARGS, "--anchors", "0", "--out", "R/report.md"]
    code, error = hcl([*args, "--plots", "other"], capsys)
    assert code in (1, 2) and "--plots other is not the training log that --model m/encoder.safetensors was made from" in error, error
    assert "plots/metrics/loss.tsv differs" in error and "\n" not in error
    assert not (run / "R").exists()
    assert hcl([*args, "--plots", "live"], capsys)[0] == 0
