"""Values refused where they enter (issue 32): each used to pass and fail later with a traceback, wrong advice or a
silent wrong result, or to be ignored without a word."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from hcl_cli import presets
from hcl_cli.artifacts import load_artifact, save_artifact
from hcl_cli.cli import main
from hcl_cli.config import KnnConfig, LinearConfig, PrepareConfig, PretrainConfig
from hcl_cli.errors import HclError, UsageError
from hcl_cli.graph.svm import svm_protocol
from hcl_cli.image import data as image_data
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import load_encoder, save_encoder
from hcl_cli.image.networks import build_model
from hcl_cli.image.prepared import SPLIT_KIND, load_split
from hcl_cli.params import default_params_yaml
from hcl_cli.presets import writer
from hcl_cli.splits import check_split_sizes


@pytest.fixture
def prepared(prepared_digits: Callable[[float], Path], tmp_path: Path) -> Path:
    """A copy of a prepared digits folder, to damage."""
    folder = tmp_path / "prepared"
    shutil.copytree(prepared_digits(0.25), folder)
    return folder


def edit_card(folder: Path, **values: object) -> None:
    card = json.loads((folder / "card.json").read_text())
    (folder / "card.json").write_text(json.dumps({**card, **values}))


def relabel(folder: Path, split: str, change: Callable[[torch.Tensor], None]) -> None:
    """Rewrite ``split``'s labels with ``change``, as a whole artifact (its sidecar's sha256 matching)."""
    tensors, sidecar = load_artifact(folder / f"{split}.safetensors", SPLIT_KIND, {})
    change(tensors["labels"])
    save_artifact(folder / f"{split}.safetensors", tensors, SPLIT_KIND, {key: sidecar[key] for key in ("dataset", "split", "versions")})


@pytest.mark.parametrize("label", [10, -1, -5])
def test_a_label_outside_the_cards_classes_is_refused_when_read(prepared: Path, label: int) -> None:
    relabel(prepared, "train", lambda labels: labels.__setitem__(0, label))
    with pytest.raises(HclError, match=rf"train.safetensors: labels run from {min(label, 0)} to {max(label, 9)}, but they must be 0 to 9"):
        load_split(prepared, "train")


def test_labels_beyond_a_two_class_card_are_refused(prepared: Path) -> None:
    edit_card(prepared, classes=["0", "1"], num_classes=2)
    with pytest.raises(HclError, match="labels run from 0 to 9, but they must be 0 to 1, the card's 2 classes"):
        load_split(prepared, "test")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mean", [1e308], r"'mean' must be a list of 1 numbers in \[0, 1\]"),
        ("std", [1e-320], r"'std' must be a list of 1 numbers in \[1e-08, 1\]"),
        ("std", [0.0], r"'std' must be a list of 1 numbers in \[1e-08, 1\]"),
        ("classes", ["0", "1", "2", "3", "4", "5", "6", "7", "8", "0"], "'classes' must be a list of at least 2 distinct class names"),
    ],
)
def test_card_values_that_would_fail_training_are_refused_when_read(prepared: Path, field: str, value: object, message: str) -> None:
    edit_card(prepared, **{field: value})
    with pytest.raises(HclError, match=message):
        load_card(prepared)


def test_an_encoder_sidecar_with_a_mean_out_of_range_is_refused(prepared: Path, tmp_path: Path) -> None:
    """It made embed write all-NaN embeddings with exit 0."""
    card = load_card(prepared)
    save_encoder(tmp_path / "e.safetensors", build_model("small_cnn", 1, 8, 16), {"mean": card.mean, "std": card.std})
    load_encoder(tmp_path / "e.safetensors")
    sidecar = json.loads((tmp_path / "e.json").read_text())
    (tmp_path / "e.json").write_text(json.dumps({**sidecar, "mean": [1e308]}))
    with pytest.raises(HclError, match=r"e.safetensors: sidecar field 'mean' must be a list of 1 numbers in \[0, 1\]"):
        load_encoder(tmp_path / "e.safetensors")


def test_undimix_weights_that_underflow_are_refused() -> None:
    """0,0,1e-300 is 0,0,0 in float32: the weights divided by their sum were 0/0, "non-finite loss: try a lower --lr"."""
    with pytest.raises(UsageError, match=r"--undimix-weights must be three numbers, each 0 or in \[1e-06, 1000\]"):
        PretrainConfig(sampler="undimix", undimix_weights="0,0,1e-300")
    PretrainConfig(sampler="undimix", undimix_weights="0,0,1e-6")


def test_a_subnormal_svm_c_is_refused() -> None:
    with pytest.raises(UsageError, match=r"--svm-c-grid must be numbers in \[1e-06, 1e\+06\]"):
        LinearConfig(protocol="svm", svm_c_grid="1e-320")


def test_more_inner_folds_than_a_training_fold_holds_is_a_usage_error() -> None:
    """20 graphs a class, 10 outer folds: 18 of each class in a training fold; 19 inner folds was sklearn's ValueError."""
    x = np.random.default_rng(0).normal(size=(40, 4))
    y = np.repeat([0, 1], 20)
    with pytest.raises(UsageError, match="18 in an outer training fold: fewer than the 19 inner folds"):
        svm_protocol(x, y, folds=10, inner_folds=19)
    assert svm_protocol(x, y, folds=10, inner_folds=18, c_grid=[1.0]).folds == 10


@pytest.mark.parametrize("out", ["newdir/", "newdir/.", ".", ".."])
def test_an_output_file_that_names_a_folder_is_refused(out: str) -> None:
    """``knn-eval --out newdir/`` wrote a file named ``newdir``."""
    with pytest.raises(UsageError, match="--out must name a file, not a folder"):
        KnnConfig(out=out)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--k", "1_0", "--k must be a whole number"),
        ("--k", "١٠", "--k must be a whole number"),
        ("--temperature", "1_0.5", "--temperature must be a number"),
        ("--k", "9" * 5000, "--k is a whole number of 5000 characters"),
    ],
)
def test_numbers_on_the_command_line_are_spelt_as_params_yaml_spells_them(
    option: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's int() reads ``1_0`` as 10: ``--epochs 1_0`` meant 10 epochs."""
    with pytest.raises(SystemExit) as stop:
        main(["knn-eval", "--embeddings", "nowhere.safetensors", option, value])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_an_empty_preset_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["preset", ""])
    assert stop.value.code == 2 and "unknown preset ''" in capsys.readouterr().err


def test_preset_keeps_a_hard_linked_params_file_whole(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(default_params_yaml())
    os.link(tmp_path / "a.yaml", tmp_path / "b.yaml")
    with pytest.raises(HclError, match="b.yaml has 2 hard links, which replacing it would break; nothing written"):
        presets.apply("hcl-stl10-simclr", tmp_path / "b.yaml")
    assert os.stat(tmp_path / "a.yaml").st_nlink == 2 and (tmp_path / "a.yaml").read_text() == default_params_yaml()


def test_preset_on_a_read_only_file_system_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """There, creating the temporary file fails and so does removing it: the unlink's OSError was an internal error."""

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(writer, "open", read_only, raising=False)
    monkeypatch.setattr(Path, "unlink", read_only)
    with pytest.raises(HclError, match="cannot write .*new.yaml: Read-only file system; nothing written"):
        presets.apply("hcl-stl10-simclr", tmp_path / "new.yaml")


def test_prepare_refuses_images_that_will_not_fit_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prepare --image-size 4096`` on digits was killed by the kernel at about 20 GB."""
    monkeypatch.setattr(image_data, "available_bytes", lambda device: image_data.PREPARE_HEADROOM + 2**20)
    with pytest.raises(HclError, match=r"decoding the 1347 train images at 64 px would need about .* GiB free: try --image-size 16"):
        image_data.load_digits(0.25, 0, 64)


def test_options_one_modality_does_not_read_are_refused_or_warned() -> None:
    for option in ({"precision": "bf16"}, {"sync_batchnorm": True}, {"compile": True}):
        with pytest.raises(UsageError, match="is for images and does nothing on g's graphs"):
            PretrainConfig(**option).check_modality("graph", "g's graphs")
    assert PretrainConfig(sync_batchnorm=True).ignored_changes(1) == [
        "sync_batchnorm = true is not read in a single process (it spans the GPUs of a torchrun run)"
    ]
    assert PretrainConfig(sync_batchnorm=True).ignored_changes(2) == []
    assert PrepareConfig(dataset="tu", image_size=32).unread_changes() == [
        "image_size = 32 is not read with dataset tu (only with dataset digits, cifar10, cifar100, stl10, imagefolder)"
    ]
    assert PrepareConfig(dataset="cifar10", test_fraction=0.5).unread_changes() == [
        "test_fraction = 0.5 is not read with dataset cifar10 (only with dataset digits, tu)"
    ]


def test_messages_name_what_they_are_about(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="leaves 0 train and 5 test graphs of 5, but each split needs at least one graph per class"):
        check_split_sizes(5, 2, 0.9, "graph")
    save_artifact(tmp_path / "e.safetensors", {"x": torch.zeros(1)}, "embeddings")
    with pytest.raises(HclError, match="expected an encoder artifact"):
        load_artifact(tmp_path / "e.safetensors", "encoder", {})
