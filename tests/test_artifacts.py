"""Artifact I/O: outputs kept apart from inputs, tensor file and sidecar bound by a hash, file modes
that follow the umask, short temporary names, and stale temporary files removed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hcl_cli.artifacts import (
    OWNED_FILES,
    check_outputs_apart,
    load_artifact,
    save_artifact,
    sidecar_path,
    temp_sibling,
    write_json,
    write_owned_folder_manifest,
    write_text,
)
from hcl_cli.checkpoint import CheckpointMismatch, CheckpointStore, TrainingPosition
from hcl_cli.errors import HclError, UsageError

KIND = "toy"
NAME_MAX = 255


def toy_tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {"weights": torch.randn(4, 3, generator=generator), "labels": torch.arange(4)}


@pytest.fixture
def umask() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def dead_pid() -> int:
    """The id of a process that has exited (the kernel reuses ids only after wrapping around)."""
    process = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(process.stdout)


# Outputs apart from inputs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "outputs", "message"),
    [
        (
            {"--model": "m/encoder.safetensors"},
            {"--out": "m/encoder.safetensors"},
            r"^--out m/encoder.safetensors is also the input --model m/encoder.safetensors: choose another --out$",
        ),
        (
            {"--model": "m/encoder.safetensors"},
            {"--out": "m/encoder.json"},
            "is also the input --model m/encoder.safetensors .both use .*m/encoder.json",
        ),
        ({"--embeddings": "e.safetensors"}, {"--out": "e.json"}, "--out e.json is also the input --embeddings e.safetensors"),
        ({"--model": "m/encoder.safetensors"}, {"--out": "m/encoder.bin"}, "both use .*m/encoder.json"),
        (
            {"--path": "raw"},
            {"--out": "raw/prepared"},
            r"--out raw/prepared is also the input --path raw \(.*raw/prepared lies inside the folder .*raw\)",
        ),
        ({"--path": "raw/cifar"}, {"--out": "raw"}, r"--out raw is also the input --path raw/cifar \(.*raw/cifar lies inside .*raw\)"),
        ({"--metrics": "metrics"}, {"--out": "metrics/report.md"}, "--out metrics/report.md is also the input --metrics metrics"),
        ({"--metrics": "metrics"}, {"--out": "./metrics/../metrics"}, "is also the input --metrics metrics"),
    ],
)
def test_an_output_that_is_an_input_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inputs: dict[str, str], outputs: dict[str, str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "raw" / "cifar").mkdir(parents=True)
    with pytest.raises(UsageError, match=message) as caught:
        check_outputs_apart(inputs, outputs)
    assert "\n" not in str(caught.value)


def test_outputs_apart_from_inputs_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "raw").mkdir(parents=True)
    check_outputs_apart({"--data": "data/prepared", "--model": "models/encoder.safetensors"}, {"--out": "data/embeddings.safetensors"})
    check_outputs_apart({"--path": "data/raw"}, {"--out": "data/prepared"})
    check_outputs_apart({"--embeddings": "data/embeddings.safetensors"}, {"--out": "metrics/knn.json"})
    check_outputs_apart({}, {"--out": "anything"})


def test_symbolic_links_are_resolved(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (tmp_path / "link").symlink_to(models, target_is_directory=True)
    (models / "encoder.safetensors").write_bytes(b"weights")
    (tmp_path / "alias.safetensors").symlink_to(models / "encoder.safetensors")
    with pytest.raises(UsageError, match="is also the input --model"):
        check_outputs_apart({"--model": str(models / "encoder.safetensors")}, {"--out": str(tmp_path / "link" / "encoder.safetensors")})
    with pytest.raises(UsageError, match="is also the input --model"):
        check_outputs_apart({"--model": str(tmp_path / "alias.safetensors")}, {"--out": str(models / "encoder.safetensors")})


def test_hard_links_are_one_file(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    os.link(tmp_path / "a.json", tmp_path / "b.json")
    with pytest.raises(UsageError, match="are one file"):
        check_outputs_apart({"--metrics": str(tmp_path / "a.json")}, {"--out": str(tmp_path / "b.json")})


def test_an_output_inside_a_folder_hcl_writes_whole_is_refused(tmp_path: Path) -> None:
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    write_owned_folder_manifest(prepared, ["card.json"])
    with pytest.raises(UsageError, match=f"--out {prepared}/knn.json lies inside {prepared}, a folder hcl writes whole"):
        check_outputs_apart({"--embeddings": str(tmp_path / "e.safetensors")}, {"--out": str(prepared / "knn.json")})
    check_outputs_apart({}, {"--out": str(prepared)})  # the prepared folder itself is prepare's to replace
    assert (prepared / OWNED_FILES).is_file()


# Tensor file and sidecar bound by a hash -----------------------------------------------------------


def test_new_tensors_with_an_old_sidecar_of_the_same_shapes_are_refused(tmp_path: Path) -> None:
    """A kill between the two renames of save_artifact pairs the new tensor file with the old sidecar."""
    path = tmp_path / "a.safetensors"
    save_artifact(path, toy_tensors(0), KIND)
    old_sidecar = sidecar_path(path).read_bytes()
    save_artifact(path, toy_tensors(1), KIND)
    sidecar_path(path).write_bytes(old_sidecar)
    with pytest.raises(HclError, match=f"^{path}: the tensor file does not match the 'sha256' its sidecar .* records") as caught:
        load_artifact(path, KIND, {})
    assert "\n" not in str(caught.value)


def test_a_flipped_bit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    save_artifact(path, toy_tensors(), KIND)
    flip_bit(path, -5)
    with pytest.raises(HclError, match="does not match the 'sha256'"):
        load_artifact(path, KIND, {})


def test_a_sidecar_without_a_hash_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.safetensors"
    save_artifact(path, toy_tensors(), KIND)
    sidecar = json.loads(sidecar_path(path).read_text())
    del sidecar["sha256"]
    sidecar_path(path).write_text(json.dumps(sidecar))
    with pytest.raises(HclError, match=f"{path}: its sidecar .*a.json records no 'sha256'"):
        load_artifact(path, KIND, {})


def test_round_trip_keeps_tensors_and_records_the_hash(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "a.safetensors"
    tensors = toy_tensors()
    save_artifact(path, tensors, KIND, {"note": "kept", "sha256": "not the writer's"})
    loaded, sidecar = load_artifact(path, KIND, {})
    assert all(torch.equal(loaded[name], tensors[name]) for name in tensors)
    assert sidecar["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and sidecar["note"] == "kept"


# File modes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_artifact_and_sidecar_modes_follow_the_umask(tmp_path: Path, umask: None, mask: int) -> None:
    os.umask(mask)
    path = tmp_path / "a.safetensors"
    save_artifact(path, toy_tensors(), KIND)
    write_json(tmp_path / "metrics.json", {"top1": 1.0})
    expected = 0o666 & ~mask
    for written in (path, sidecar_path(path), tmp_path / "metrics.json"):
        assert written.stat().st_mode & 0o777 == expected, f"{written.name}: {oct(written.stat().st_mode & 0o777)}"


# Temporary files --------------------------------------------------------------------------------


def test_names_near_the_length_limit_can_be_written(tmp_path: Path) -> None:
    stem = "e" * (NAME_MAX - len(".safetensors"))
    path = tmp_path / f"{stem}.safetensors"
    save_artifact(path, toy_tensors(), KIND)
    write_text(tmp_path / ("r" * (NAME_MAX - 3) + ".md"), "report\n")
    assert load_artifact(path, KIND, {})[0]["labels"].tolist() == [0, 1, 2, 3]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, f"{stem}.json", "r" * (NAME_MAX - 3) + ".md"])


def test_temporary_names_are_short_and_recognisable(tmp_path: Path) -> None:
    for name in ("a.json", "é" * 127, "x" * NAME_MAX):
        temp = temp_sibling(tmp_path / name)
        assert temp.parent == tmp_path and temp.name.startswith(".hcl.") and temp.name.endswith(".tmp")
        assert len(os.fsencode(temp.name)) <= 64
    assert temp_sibling(tmp_path / "a.json") != temp_sibling(tmp_path / "a.json")


def test_stale_temporary_files_are_removed_on_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    dead, alive = temp_sibling(target, pid=dead_pid()), temp_sibling(target, pid=os.getppid())
    legacy = tmp_path / ".metrics.json.ab12cd_9.tmp"  # as earlier versions named them (mkstemp)
    other_target = temp_sibling(tmp_path / "other.json", pid=dead_pid())
    foreign = [tmp_path / ".metrics.json.tmp", tmp_path / "notes.tmp", other_target]
    for path in [dead, alive, legacy, *foreign]:
        path.write_text("partial")
    write_json(target, {"top1": 1.0})
    left = {p.name for p in tmp_path.iterdir()}
    assert dead.name not in left and legacy.name not in left
    assert {alive.name, "metrics.json", *(p.name for p in foreign)} == left, (
        "a running writer's file, and files of other targets or of others, stay"
    )


# Checkpoints ----------------------------------------------------------------------------------------

TOTALS = {"steps": 3, "loss": 12.5, "same_label_pairs": 0.0, "anchors_left_out": 0.0}
IDENTITY = {"run": "test"}


def saved_checkpoint(
    folder: Path, position: TrainingPosition, loop_state: dict[str, object]
) -> tuple[CheckpointStore, torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    store = CheckpointStore(folder)
    store.save(model, optimizer, position, loop_state, IDENTITY)
    return store, model, optimizer


def edit_checkpoint_sidecar(store: CheckpointStore, drop: tuple[str, ...] = (), **changes: object) -> Path:
    path = store.latest()
    assert path is not None
    sidecar = {key: value for key, value in json.loads(sidecar_path(path).read_text()).items() if key not in drop}
    sidecar_path(path).write_text(json.dumps(sidecar | changes))
    return path


def test_a_checkpoint_step_past_the_end_of_its_epoch_is_refused(tmp_path: Path) -> None:
    store, model, optimizer = saved_checkpoint(tmp_path, TrainingPosition(2, 9), {"epoch_totals": TOTALS})
    with pytest.raises(
        CheckpointMismatch, match=r"epoch-0002-step-000009.safetensors: 'position.step' 9 lies past the end of an epoch of 8 steps"
    ) as caught:
        store.load(model, optimizer, IDENTITY, epochs=5, steps_per_epoch=8)
    assert "\n" not in str(caught.value)
    checkpoint = store.load(model, optimizer, IDENTITY, epochs=5, steps_per_epoch=9)  # the last step of the epoch is done
    assert checkpoint is not None and checkpoint.position == TrainingPosition(2, 9)
    assert store.load(model, optimizer, IDENTITY, 5) is not None, "the parameters that existed before keep working"


@pytest.mark.parametrize(
    ("position", "message"),
    [
        ({"epoch": 1, "step": -2}, r"'position.step' must be a non-negative integer \(got -2\)"),
        ({"epoch": "1", "step": 0}, r"'position.epoch' must be a non-negative integer \(got '1'\)"),
        ({"epoch": 1.5, "step": 0}, r"'position.epoch' must be a non-negative integer"),
        (None, r"records no 'position' object"),
    ],
)
def test_a_corrupt_checkpoint_position_names_the_file_and_the_field(tmp_path: Path, position: object, message: str) -> None:
    store, model, optimizer = saved_checkpoint(tmp_path, TrainingPosition(1, 0), {"epoch_totals": TOTALS})
    path = edit_checkpoint_sidecar(store, position=position)
    with pytest.raises(HclError, match=f"^{path}: .*{message}"):
        store.load(model, optimizer, IDENTITY, epochs=5)


@pytest.mark.parametrize(
    ("totals", "message"),
    [
        ({key: value for key, value in TOTALS.items() if key != "loss"}, "'loop_state.epoch_totals' lacks loss and has unknown nothing"),
        ({**TOTALS, "accuracy": 0.5}, "'loop_state.epoch_totals' lacks nothing and has unknown accuracy"),
        ({**TOTALS, "loss": "12.5"}, r"'loop_state.epoch_totals.loss' must be a finite number \(got '12.5'\)"),
        ([1, 2], r"'loop_state.epoch_totals' must be an object of numbers"),
        (None, r"'loop_state.epoch_totals' must be an object of numbers \(got None\)"),
    ],
)
def test_corrupt_epoch_totals_name_the_file_and_the_field(tmp_path: Path, totals: object, message: str) -> None:
    loop_state = {"epoch_totals": totals} if totals is not None else {}
    store, model, optimizer = saved_checkpoint(tmp_path, TrainingPosition(1, 4), loop_state)
    with pytest.raises(HclError, match=f"epoch-0001-step-000004.safetensors: the sidecar's {message}") as caught:
        store.load(model, optimizer, IDENTITY, epochs=5, epoch_total_fields=tuple(TOTALS))
    assert "\n" not in str(caught.value)


def test_epoch_totals_must_be_numbers_even_without_the_field_names(tmp_path: Path) -> None:
    store, model, optimizer = saved_checkpoint(tmp_path, TrainingPosition(1, 4), {"epoch_totals": {**TOTALS, "loss": None}})
    with pytest.raises(HclError, match="'loop_state.epoch_totals.loss' must be a finite number"):
        store.load(model, optimizer, IDENTITY, epochs=5)


def test_a_checkpoint_of_an_hcl_without_hashes_is_another_run(tmp_path: Path) -> None:
    store, model, optimizer = saved_checkpoint(tmp_path, TrainingPosition(1, 0), {"epoch_totals": TOTALS})
    edit_checkpoint_sidecar(store, drop=("sha256",))
    with pytest.raises(CheckpointMismatch, match="was written by an older hcl .its sidecar records no 'sha256'."):
        store.load(model, optimizer, IDENTITY, epochs=5)


def test_a_checkpoint_with_a_flipped_bit_is_refused(tmp_path: Path) -> None:
    store, model, optimizer = saved_checkpoint(tmp_path, TrainingPosition(1, 0), {"epoch_totals": TOTALS})
    flip_bit(edit_checkpoint_sidecar(store), -3)
    with pytest.raises(HclError, match="does not match the 'sha256'") as caught:
        store.load(model, optimizer, IDENTITY, epochs=5)
    assert not isinstance(caught.value, CheckpointMismatch), "a damaged checkpoint is an error, not a reason to start over"


def test_an_input_that_was_not_given_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_outputs_apart({"--params-file": ""}, {"--out": "reports/report.md"})
    with pytest.raises(UsageError, match="--out reports/report.md is also the input --params-file ."):
        check_outputs_apart({"--params-file": "."}, {"--out": "reports/report.md"})
