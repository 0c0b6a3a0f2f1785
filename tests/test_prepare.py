"""``hcl prepare`` and the prepared-folder readers, on tiny files the tests write in each original format.

CIFAR python batches (pickled dicts, as in the real archive), STL-10 column-major binaries and a
PNG image folder are written here from known pixel arrays; the prepared tensors must equal those
arrays exactly. torchvision checks every CIFAR/STL file against the MD5 of the real archive, so
the tests register their fixtures' own MD5s in the dataset class's file table (``train_list``,
``test_list``, ``meta``): torchvision's integrity check still runs, against the tiny files.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import signal
import subprocess
import sys
import tarfile
import urllib.error
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.datasets
from PIL import Image
from sklearn.datasets import load_digits

from hcl_cli.artifacts import OWNED_FILES, save_artifact, write_json
from hcl_cli.cli import main
from hcl_cli.config import PrepareConfig
from hcl_cli.errors import HclError
from hcl_cli.image.card import load_card
from hcl_cli.image.prepared import load_split
from hcl_cli.stages import prepare

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
STL10_CLASSES = ["airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck"]


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _random_images(rng: np.random.Generator, count: int, size: int) -> np.ndarray:
    return rng.integers(0, 256, size=(count, 3, size, size), dtype=np.uint8)


def _pickle(path: Path, obj: dict[str, object]) -> None:
    path.write_bytes(pickle.dumps(obj, protocol=2))


def _write_cifar10(root: Path, monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``cifar-10-batches-py/``: five train batches, a test batch and ``batches.meta``, as the real archive."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = {f"data_batch_{i}": 3 for i in range(1, 6)} | {"test_batch": 4}
    written = {}
    for name, count in batches.items():
        images, labels = _random_images(rng, count, 32), rng.integers(0, 10, count)
        batch = {
            "batch_label": name,
            "labels": labels.tolist(),
            "data": images.reshape(count, 3072),
            "filenames": [f"{i}.png" for i in range(count)],
        }
        _pickle(folder / name, batch)
        written[name] = (images, labels)
    _pickle(folder / "batches.meta", {"num_cases_per_batch": 3, "label_names": CIFAR10_CLASSES, "num_vis": 3072})
    dataset_class = torchvision.datasets.CIFAR10
    monkeypatch.setattr(dataset_class, "train_list", [[f"data_batch_{i}", _md5(folder / f"data_batch_{i}")] for i in range(1, 6)])
    monkeypatch.setattr(dataset_class, "test_list", [["test_batch", _md5(folder / "test_batch")]])
    monkeypatch.setattr(dataset_class, "meta", {**dataset_class.meta, "md5": _md5(folder / "batches.meta")})
    train = [written[f"data_batch_{i}"] for i in range(1, 6)]
    return {"train": (np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train])), "test": written["test_batch"]}


def _write_stl10(root: Path, monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``stl10_binary/``: uint8 images stored channel by channel in column-major order, labels 1..10."""
    folder = root / "stl10_binary"
    folder.mkdir(parents=True)
    written = {}
    for split, count in (("train", 3), ("test", 2), ("unlabeled", 4)):
        images = _random_images(rng, count, 96)
        (folder / f"{split}_X.bin").write_bytes(images.transpose(0, 1, 3, 2).tobytes())
        labels = rng.integers(0, 10, count) if split != "unlabeled" else np.full(count, -1)
        if split != "unlabeled":
            (folder / f"{split}_y.bin").write_bytes((labels + 1).astype(np.uint8).tobytes())
        written[split] = (images, labels)
    (folder / "class_names.txt").write_text("\n".join(STL10_CLASSES) + "\n")
    table = {name: [name, _md5(folder / name)] for name in ("train_X.bin", "train_y.bin", "unlabeled_X.bin", "test_X.bin", "test_y.bin")}
    monkeypatch.setattr(torchvision.datasets.STL10, "train_list", [table["train_X.bin"], table["train_y.bin"], table["unlabeled_X.bin"]])
    monkeypatch.setattr(torchvision.datasets.STL10, "test_list", [table["test_X.bin"], table["test_y.bin"]])
    return written


def _write_png(path: Path, chw: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(chw.transpose(1, 2, 0)).save(path)


def _write_image_folder(root: Path, rng: np.random.Generator, classes: dict[str, int]) -> dict[str, dict[str, list[np.ndarray]]]:
    """``root/{train,test}/<class>/NN.png`` from random 5x7 RGB arrays; returns the arrays per split and class."""
    written: dict[str, dict[str, list[np.ndarray]]] = {}
    for split in ("train", "test"):
        written[split] = {}
        for name, count in classes.items():
            written[split][name] = [rng.integers(0, 256, size=(3, 5, 7), dtype=np.uint8) for _ in range(count)]
            for index, image in enumerate(written[split][name]):
                _write_png(root / split / name / f"{index:02d}.png", image)
    return written


def _prepare(tmp_path: Path, **options: object) -> Path:
    out = tmp_path / "prepared"
    prepare.run(PrepareConfig(out=str(out), **options))
    return out


def _run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return int(exit_info.value.code)


def _assert_no_output(out: Path) -> None:
    assert not out.exists()
    assert (
        not out.parent.exists()
        or [entry.name for entry in out.parent.iterdir() if entry.name.startswith((f".{out.name}.", f".hcl.{out.name}."))] == []
    )


def errors_of(err: str) -> list[str]:
    """stderr's lines less prepare's status lines (``hcl prepare: reading digits``): its warnings and its error."""
    return [line for line in err.splitlines() if not line.startswith("hcl prepare: ") or ": error: " in line or ": warning: " in line]


def test_digits_counts_split_and_pixel_values(tmp_path: Path) -> None:
    out = _prepare(tmp_path)
    card = load_card(out)
    train_images, train_labels = load_split(out, "train")
    test_images, test_labels = load_split(out, "test")
    assert card.counts == {"train": 1347, "test": 450}
    assert card.classes == [str(d) for d in range(10)] and card.num_classes == 10
    assert card.image_shape == [1, 8, 8] and card.skipped == 0 and card.seed == 0
    for label in range(10):
        in_test, total = int((test_labels == label).sum()), int((train_labels == label).sum() + (test_labels == label).sum())
        assert abs(in_test - 0.25 * total) <= 1, f"class {label} is not stratified"
    digits = load_digits()
    expected = np.floor(digits.images * 255 / 16 + 0.5).astype(np.uint8)
    original = sorted((image.tobytes(), int(label)) for image, label in zip(expected, digits.target))
    all_images, all_labels = torch.cat([train_images, test_images]), torch.cat([train_labels, test_labels])
    prepared = sorted((image.numpy().tobytes(), int(label)) for image, label in zip(all_images, all_labels))
    assert prepared == original
    pixels = train_images.double() / 255
    assert card.mean == pytest.approx([pixels.mean().item()]) and card.std == pytest.approx([pixels.std(unbiased=False).item()])


def test_digits_split_is_deterministic_and_seeded(tmp_path: Path) -> None:
    first = load_split(_prepare(tmp_path / "a"), "test")
    again = load_split(_prepare(tmp_path / "b"), "test")
    other_seed = load_split(_prepare(tmp_path / "c", seed=1), "test")
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other_seed[0])


def test_cifar10_python_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _write_cifar10(tmp_path / "raw", monkeypatch, np.random.default_rng(0))
    out = _prepare(tmp_path, dataset="cifar10", path=str(tmp_path / "raw"))
    card = load_card(out)
    assert card.classes == CIFAR10_CLASSES and card.counts == {"train": 15, "test": 4} and card.image_shape == [3, 32, 32]
    for split, (images, labels) in written.items():
        prepared_images, prepared_labels = load_split(out, split)
        assert np.array_equal(prepared_images.numpy(), images) and np.array_equal(prepared_labels.numpy(), labels)
    train = written["train"][0] / 255.0
    assert card.mean == pytest.approx(train.mean(axis=(0, 2, 3)).tolist())
    assert card.std == pytest.approx(train.std(axis=(0, 2, 3)).tolist())


def test_cifar10_archive_is_extracted_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = tmp_path / "staging"
    written = _write_cifar10(staging, monkeypatch, np.random.default_rng(1))
    raw = tmp_path / "raw"
    raw.mkdir()
    with tarfile.open(raw / "cifar-10-python.tar.gz", "w:gz") as archive:
        archive.add(staging / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "tgz_md5", _md5(raw / "cifar-10-python.tar.gz"))
    out = _prepare(tmp_path, dataset="cifar10", path=str(raw), image_size=16)
    images, labels = load_split(out, "test")
    resized = [Image.fromarray(image.transpose(1, 2, 0)).resize((16, 16), Image.Resampling.BILINEAR) for image in written["test"][0]]
    expected = np.stack([np.asarray(image).transpose(2, 0, 1) for image in resized])
    assert np.array_equal(images.numpy(), expected) and np.array_equal(labels.numpy(), written["test"][1])


def test_cifar100_python_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "raw" / "cifar-100-python"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(2)
    fine_names, coarse_names = [f"fine_{i:03d}" for i in range(100)], [f"coarse_{i:02d}" for i in range(20)]
    written = {}
    for split, count in (("train", 6), ("test", 3)):
        images, labels = _random_images(rng, count, 32), rng.integers(0, 100, count)
        batch = {
            "batch_label": split,
            "fine_labels": labels.tolist(),
            "coarse_labels": (labels // 5).tolist(),
            "data": images.reshape(count, 3072),
        }
        _pickle(folder / split, {**batch, "filenames": [f"{i}.png" for i in range(count)]})
        written[split] = (images, labels)
    _pickle(folder / "meta", {"fine_label_names": fine_names, "coarse_label_names": coarse_names})
    dataset_class = torchvision.datasets.CIFAR100
    monkeypatch.setattr(dataset_class, "train_list", [["train", _md5(folder / "train")]])
    monkeypatch.setattr(dataset_class, "test_list", [["test", _md5(folder / "test")]])
    monkeypatch.setattr(dataset_class, "meta", {**dataset_class.meta, "md5": _md5(folder / "meta")})
    out = _prepare(tmp_path, dataset="cifar100", path=str(tmp_path / "raw"))
    card = load_card(out)
    assert card.classes == fine_names and card.num_classes == 100 and card.counts == {"train": 6, "test": 3}
    for split, (images, labels) in written.items():
        prepared_images, prepared_labels = load_split(out, split)
        assert np.array_equal(prepared_images.numpy(), images) and np.array_equal(prepared_labels.numpy(), labels)


def test_stl10_binaries_with_unlabeled_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _write_stl10(tmp_path / "raw", monkeypatch, np.random.default_rng(3))
    out = _prepare(tmp_path, dataset="stl10", path=str(tmp_path / "raw"))
    card = load_card(out)
    assert card.classes == STL10_CLASSES and card.counts == {"train": 3, "test": 2, "unlabeled": 4} and card.image_shape == [3, 96, 96]
    for split, (images, labels) in written.items():
        prepared_images, prepared_labels = load_split(out, split)
        assert np.array_equal(prepared_images.numpy(), images) and np.array_equal(prepared_labels.numpy(), labels)
    assert load_split(out, "unlabeled")[1].tolist() == [-1] * 4


def test_image_folder_classes_pixels_and_skipped_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "images"
    written = _write_image_folder(root, np.random.default_rng(4), {"zebra": 2, "ant": 3, "moth": 1})
    gray = np.random.default_rng(5).integers(0, 256, size=(5, 7), dtype=np.uint8)
    Image.fromarray(gray).save(root / "test" / "moth" / "gray.png")
    written["test"]["moth"].append(np.stack([gray] * 3))
    (root / "train" / "ant" / "notes.txt").write_text("not an image")
    (root / "train" / "zebra" / "broken.png").write_bytes((root / "train" / "zebra" / "00.png").read_bytes()[:40])
    (root / "train" / "zebra" / ".DS_Store").write_bytes(b"\0\1")
    out = _prepare(tmp_path, dataset="imagefolder", path=str(root))
    card = load_card(out)
    assert card.classes == ["ant", "moth", "zebra"] and card.counts == {"train": 6, "test": 7}
    assert card.image_shape == [3, 5, 7] and card.skipped == 2
    warnings = capsys.readouterr().err.splitlines()
    assert any("notes.txt" in line for line in warnings) and any("broken.png" in line for line in warnings)
    assert any("skipped 2 unreadable" in line for line in warnings)
    for split in ("train", "test"):
        images, labels = load_split(out, split)
        expected = [(image, label) for label, name in enumerate(card.classes) for image in written[split][name]]
        assert labels.tolist() == [label for _, label in expected]
        assert np.array_equal(images.numpy(), np.stack([image for image, _ in expected]))


def test_image_folder_resizes_mixed_sizes(tmp_path: Path) -> None:
    root = tmp_path / "images"
    rng = np.random.default_rng(6)
    sizes = {"train/a/0.png": (3, 9, 12), "train/b/0.png": (3, 6, 6), "test/a/0.png": (3, 4, 4), "test/b/0.png": (3, 20, 10)}
    for name, shape in sizes.items():
        _write_png(root / name, rng.integers(0, 256, size=shape, dtype=np.uint8))
    out = _prepare(tmp_path, dataset="imagefolder", path=str(root), image_size=6)
    images, _ = load_split(out, "test")
    for image, name in zip(images, ("test/a/0.png", "test/b/0.png")):
        with Image.open(root / name) as source:
            expected = np.asarray(source.convert("RGB").resize((6, 6), Image.Resampling.BILINEAR)).transpose(2, 0, 1)
        assert np.array_equal(image.numpy(), expected)


def test_rerun_replaces_an_earlier_output(tmp_path: Path) -> None:
    out = _prepare(tmp_path)
    _prepare(tmp_path, seed=3)
    assert load_card(out).seed == 3
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["prepared"]
    listed = json.loads((out / OWNED_FILES).read_text())["files"]
    assert sorted(listed) == ["card.json", "test.json", "test.safetensors", "train.json", "train.safetensors"]
    assert sorted(entry.name for entry in out.iterdir()) == sorted([*listed, OWNED_FILES])


def test_failed_write_keeps_the_earlier_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _prepare(tmp_path)
    before = {path.name: path.read_bytes() for path in out.iterdir()}

    def disk_full(folder: object, card: object) -> None:
        raise HclError(f"cannot write {folder}/card.json: No space left on device")

    monkeypatch.setattr(prepare, "save_card", disk_full)
    with pytest.raises(HclError, match="No space left"):
        prepare.run(PrepareConfig(out=str(out), seed=5))
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["prepared"]


def _one_class(root: Path) -> list[str]:
    _write_image_folder(root, np.random.default_rng(7), {"only": 2})
    return ["--dataset", "imagefolder", "--path", str(root)]


def _missing_test_split(root: Path) -> list[str]:
    _write_image_folder(root, np.random.default_rng(8), {"a": 1, "b": 1})
    for path in (root / "test").rglob("*.png"):
        path.unlink()
    for folder in sorted((root / "test").rglob("*"), reverse=True) + [root / "test"]:
        folder.rmdir()
    return ["--dataset", "imagefolder", "--path", str(root)]


def _mixed_sizes(root: Path) -> list[str]:
    _write_image_folder(root, np.random.default_rng(9), {"a": 1, "b": 1})
    _write_png(root / "train" / "a" / "big.png", np.zeros((3, 8, 8), dtype=np.uint8))
    return ["--dataset", "imagefolder", "--path", str(root)]


def _empty_folder(root: Path) -> list[str]:
    root.mkdir()
    return ["--dataset", "imagefolder", "--path", str(root)]


def _no_class_folders(root: Path) -> list[str]:
    (root / "train").mkdir(parents=True)
    (root / "test").mkdir()
    return ["--dataset", "imagefolder", "--path", str(root)]


def _only_corrupt_files(root: Path) -> list[str]:
    _write_image_folder(root, np.random.default_rng(10), {"a": 1, "b": 1})
    (root / "test" / "b" / "00.png").write_bytes(b"garbage")
    return ["--dataset", "imagefolder", "--path", str(root)]


def _foreign_test_classes(root: Path) -> list[str]:
    _write_image_folder(root, np.random.default_rng(11), {"a": 1, "b": 1})
    (root / "test" / "b").rename(root / "test" / "c")
    return ["--dataset", "imagefolder", "--path", str(root)]


def _missing_path(root: Path) -> list[str]:
    return ["--dataset", "imagefolder", "--path", str(root)]


def _unknown_dataset(root: Path) -> list[str]:
    return ["--dataset", "imagenet"]


def _bad_test_fraction(root: Path) -> list[str]:
    return ["--test-fraction", "1.5"]


def _test_fraction_below_one_image_per_class(root: Path) -> list[str]:
    return ["--test-fraction", "0.001"]


def _test_fraction_above_one_image_per_class(root: Path) -> list[str]:
    return ["--test-fraction", "0.999"]


def _out_is_the_path(root: Path) -> list[str]:
    return ["--dataset", "imagefolder", "--path", "data/prepared"]


def _out_contains_the_path(root: Path) -> list[str]:
    return ["--dataset", "imagefolder", "--path", "data/prepared/raw"]


@pytest.mark.parametrize(
    ("make_case", "exit_code", "message"),
    [
        (_unknown_dataset, 2, "--dataset must be one of"),
        (_bad_test_fraction, 2, "--test-fraction must be <"),
        (_missing_path, 2, "not found"),
        (_empty_folder, 2, "train not found"),
        (_no_class_folders, 2, "holds no class folders"),
        (_one_class, 2, "at least 2 classes"),
        (_missing_test_split, 2, "test not found"),
        (_foreign_test_classes, 2, "missing: b; extra: c"),
        (_only_corrupt_files, 2, "no readable image in class folder(s): b"),
        (_mixed_sizes, 2, "pass --image-size"),
        (
            _test_fraction_below_one_image_per_class,
            2,
            "--test-fraction 0.001 leaves 1795 train and 2 test images of 1797, but each split needs at least one image per class (10 classes)",
        ),
        (_test_fraction_above_one_image_per_class, 2, "--test-fraction 0.999 leaves 1 train and 1796 test images of 1797"),
        (_out_is_the_path, 2, "--out data/prepared is also the input --path data/prepared: choose another --out"),
        (_out_contains_the_path, 2, "--out data/prepared is also the input --path data/prepared/raw ("),
    ],
)
def test_bad_input_gives_one_line_and_no_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    make_case: Callable[[Path], list[str]],
    exit_code: int,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    args = make_case(tmp_path / "source")
    code = _run_cli(["prepare", *args, "--out", "data/prepared"])
    errors = [line for line in errors_of(capsys.readouterr().err) if "warning" not in line]
    assert code == exit_code
    assert len(errors) == 1 and errors[0].startswith("hcl prepare: error:") and message in errors[0]
    _assert_no_output(tmp_path / "data" / "prepared")


def test_offline_without_files_names_what_to_put_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(torchvision.datasets.cifar, "download_and_extract_archive", offline)
    monkeypatch.chdir(tmp_path)
    code = _run_cli(["prepare", "--dataset", "cifar10", "--path", "raw", "--out", "prepared"])
    errors = errors_of(capsys.readouterr().err)
    assert code == 2 and len(errors) == 1
    assert "cifar10 not found in raw: put cifar-10-python.tar.gz (or its extracted cifar-10-batches-py/) there" in errors[0]
    _assert_no_output(tmp_path / "prepared")


def test_corrupt_cifar_files_fail_the_checksum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _write_cifar10(tmp_path / "raw", monkeypatch, np.random.default_rng(12))
    (tmp_path / "raw" / "cifar-10-batches-py" / "test_batch").write_bytes(b"truncated")
    monkeypatch.chdir(tmp_path)
    code = _run_cli(["prepare", "--dataset", "cifar10", "--path", "raw", "--out", "prepared"])
    errors = errors_of(capsys.readouterr().err)
    assert code == 2 and len(errors) == 1 and "failed torchvision's checks" in errors[0]
    _assert_no_output(tmp_path / "prepared")


def test_refuses_to_replace_a_folder_it_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "prepared"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    with pytest.raises(HclError, match="did not write"):
        prepare.run(PrepareConfig(out=str(out)))
    assert (out / "thesis.tex").read_text() == "precious"


def test_a_card_json_does_not_make_a_users_folder_replaceable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "card.json").write_text('{"mine": true}')
    (out / "thesis.tex").write_text("precious")
    code = _run_cli(["prepare", "--out", str(out)])
    errors = errors_of(capsys.readouterr().err)
    assert code == 2 and len(errors) == 1
    assert errors[0] == (
        f"hcl prepare: error: --out {out} exists and is a folder holding files hcl did not write (card.json, thesis.tex); "
        "hcl writes only over its own prepared dataset: move it away, or choose another --out"
    )
    assert sorted(p.name for p in out.iterdir()) == ["card.json", "thesis.tex"] and (out / "thesis.tex").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_a_file_added_to_a_prepared_folder_is_never_deleted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _prepare(tmp_path)
    (out / "notes.txt").write_text("mine")
    code = _run_cli(["prepare", "--seed", "2", "--out", str(out)])
    error = "\n".join(errors_of(capsys.readouterr().err))
    assert code == 2 and error == (
        f"hcl prepare: error: --out {out} exists and is a folder holding files hcl did not write (notes.txt); "
        "hcl writes only over its own prepared dataset: move it away, or choose another --out"
    )
    assert (out / "notes.txt").read_text() == "mine" and load_card(out).seed == 0


def test_out_inside_a_prepared_folder_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _prepare(tmp_path)
    code = _run_cli(["prepare", "--out", str(out / "nested")])
    error = "\n".join(errors_of(capsys.readouterr().err))
    assert code == 2 and error.startswith(f"hcl prepare: error: --out {out / 'nested'} lies inside {out}, a folder hcl writes whole")
    assert not (out / "nested").exists()


def test_an_empty_folder_is_filled(tmp_path: Path) -> None:
    (tmp_path / "prepared").mkdir()
    assert load_card(_prepare(tmp_path)).name == "digits"


def _symlink_to_a_prepared_folder(tmp_path: Path) -> Path:
    real = _prepare(tmp_path / "real")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    return tmp_path / "link"


def _regular_file(tmp_path: Path) -> Path:
    (tmp_path / "prepared").write_text("a file")
    return tmp_path / "prepared"


@pytest.mark.parametrize(
    ("make_out", "message"),
    [
        (lambda tmp_path: Path("/dev/null"), "--out /dev/null exists and is a FIFO, socket or device, not hcl's prepared dataset"),
        (_regular_file, "exists and is a file, not hcl's prepared dataset: choose another --out"),
        (_symlink_to_a_prepared_folder, "is a symbolic link, which hcl neither replaces nor writes through"),
    ],
)
def test_out_must_be_a_real_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_out: Callable[[Path], Path], message: str
) -> None:
    out = make_out(tmp_path)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code = _run_cli(["prepare", "--out", str(out)])
    errors = errors_of(capsys.readouterr().err)
    assert code == 2 and len(errors) == 1 and message in errors[0] and str(out) in errors[0]
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert Path("/dev/null").is_char_device()


KILL_AT_RENAME = """
import os, signal, sys
from hcl_cli.config import PrepareConfig
from hcl_cli.stages import prepare

real_rename = os.rename
def rename(source, target):
    if ".staging" in os.fspath(source):
        os.kill(os.getpid(), signal.SIGKILL)  # killed after the old dataset was moved aside
    real_rename(source, target)
os.rename = rename
prepare.run(PrepareConfig(out=sys.argv[1], seed=4))
"""


def test_a_killed_run_leaves_siblings_that_the_next_run_removes(tmp_path: Path) -> None:
    out = _prepare(tmp_path)
    process = subprocess.run([sys.executable, "-c", KILL_AT_RENAME, str(out)], capture_output=True, text=True)
    assert process.returncode == -signal.SIGKILL, process.stderr
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "prepared")
    assert sorted(name.rsplit(".", 1)[1] for name in leftovers) == ["old", "staging"], leftovers
    assert not out.exists(), "killed after the previous dataset was moved aside"
    assert all(name.startswith(".hcl.prepared.") and len(name) < 64 for name in leftovers)
    _prepare(tmp_path, seed=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepared"] and load_card(out).seed == 5


def test_leftovers_of_earlier_versions_lose_only_the_files_hcl_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    earlier = _prepare(tmp_path / "earlier")
    (earlier / OWNED_FILES).unlink()  # earlier versions wrote no manifest
    retired, staging = tmp_path / ".prepared.old-0123456789ab", tmp_path / ".prepared.tmp-0123456789ab"
    shutil.copytree(earlier, retired)
    shutil.copytree(earlier, staging)
    (staging / ".train.safetensors.abcd_123.tmp").write_bytes(b"half")
    (retired / "thesis.tex").write_text("precious")
    _prepare(tmp_path)
    assert sorted(p.name for p in retired.iterdir()) == ["thesis.tex"], "only hcl's files are deleted"
    assert not staging.exists()
    assert f"kept {retired}" in capsys.readouterr().err


def test_readers_reject_missing_and_foreign_folders(tmp_path: Path) -> None:
    with pytest.raises(HclError, match="run hcl prepare first"):
        load_card(tmp_path / "nowhere")
    with pytest.raises(HclError, match="run hcl prepare first"):
        load_split(tmp_path / "nowhere", "train")
    out = _prepare(tmp_path)
    with pytest.raises(HclError, match="has no unlabeled split"):
        load_split(out, "unlabeled")
    save_artifact(out / "test.safetensors", {"images": torch.zeros(450, 1, 8, 8)}, kind="dataset-split")
    with pytest.raises(HclError, match="tensor 'images' is float32"):
        load_split(out, "test")
    three_images = {"images": torch.zeros(3, 1, 8, 8, dtype=torch.uint8), "labels": torch.zeros(3, dtype=torch.int64)}
    save_artifact(out / "test.safetensors", three_images, kind="dataset-split")
    with pytest.raises(HclError, match="card counts 450"):
        load_split(out, "test")
    write_json(out / "card.json", {"schema_version": 1, "name": "digits"})
    with pytest.raises(HclError, match="not a valid dataset card"):
        load_card(out)


def test_a_file_added_while_prepare_runs_stays_in_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The folder swap moves only the files the manifest lists: a user's file that appeared after the check stays in --out."""
    out = _prepare(tmp_path)
    real_check = prepare._check_replaceable
    checks: list[Path] = []

    def check_then_add(folder: Path) -> None:
        real_check(folder)
        checks.append(folder)
        if len(checks) == 2:  # the last check before the swap
            (folder / "notes.txt").write_text("mine")

    monkeypatch.setattr(prepare, "_check_replaceable", check_then_add)
    prepare.run(PrepareConfig(seed=2, out=str(out)))
    assert (out / "notes.txt").read_text() == "mine" and load_card(out).seed == 2
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name], "no hidden .old folder is left"
    assert "kept notes.txt in" in capsys.readouterr().err
