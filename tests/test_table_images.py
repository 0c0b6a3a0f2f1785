"""``hcl table --images``: every sampler on one image dataset at one recipe, on a CPU at a tiny budget: two samplers, two
seeds, the Markdown with kNN and linear, paired differences and the epochs to reach ucl's final kNN; each run written as
it ends, and a record joined across invocations (the runs of a GPU loan a time)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from sklearn.datasets import load_digits

from hcl_cli.cli import main
from hcl_cli.errors import UsageError
from hcl_cli.stages import table_images
from hcl_cli.stages.table import TableStopped
from hcl_cli.tables.image_methods import Recipe, image_rows, paper_numbers
from hcl_cli.tables.image_summary import epochs_to_reach

TINY = ["--arch", "small_cnn", "--batch-size", "32", "--epochs", "2", "--eval-every", "1", "--device", "cpu", "--seeds", "2"]


def digits_folder(root: Path, per_class: int = 12) -> Path:
    """sklearn's digits as an image folder: ``per_class`` train and half as many test PNGs of each class (8x8, grey as RGB)."""
    digits = load_digits()
    counts: dict[tuple[str, int], int] = {}
    for image, label in zip(digits.images, digits.target, strict=True):
        split = "train" if counts.get(("train", label), 0) < per_class else "test"
        if counts.get((split, label), 0) >= (per_class if split == "train" else per_class // 2):
            continue
        counts[split, label] = counts.get((split, label), 0) + 1
        folder = root / split / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        pixels = np.rint(image * 255 / 16).astype(np.uint8)
        Image.fromarray(np.stack([pixels] * 3, axis=-1)).save(folder / f"{counts[split, label]}.png")
    return root


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return digits_folder(tmp_path_factory.mktemp("digits"))


def test_the_image_table_runs_two_samplers_on_two_seeds_and_resumes(
    images: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tables"
    command = ["table", "--name", "tiny", "--images", f"digits={images}", "--methods", "ucl,hucl", "--out", str(out), *TINY]
    with pytest.raises(SystemExit) as exited:
        main(command)
    assert exited.value.code == 0
    printed = capsys.readouterr().out
    result = json.loads((out / "tiny.json").read_text())
    assert set(result["runs"]) == {f"{name}/{seed}" for name in ("untrained", "ucl", "hucl") for seed in (0, 1)}
    hucl = result["table"]["rows"]["hucl"]
    assert hucl["seeds"] == [0, 1] and hucl["minus_ucl"]["knn"]["seeds"] == [0, 1] and hucl["minus_ucl"]["linear"]["ci95"]
    assert all(len(result["runs"][f"{name}/{seed}"]["curve"]) == 2 for name in ("ucl", "hucl") for seed in (0, 1))
    assert result["runs"]["untrained/0"]["curve"] == [] and result["complete"]
    assert "small CNN, B 32, fp32, 2 epochs" in result["heading"] and not result["papers_apply"]
    table = (out / "tiny.md").read_text()
    assert "| kNN top-1 | linear top-1 | minus ucl, kNN / linear (95% CI) |" in table and "epochs to reach ucl's final kNN" in table
    assert "| hucl | 2 |" in table and "| untrained encoder | 2 |" in table and "CIFAR-100, STL-10 and tinyImageNet" in table
    assert "hcl table: hucl/1: kNN" in printed
    assert "- HCL Sec. 5.1: on CIFAR-10 'a slight improvement" in table and "Epochs each row takes to reach ucl's: hucl " in table

    with pytest.raises(SystemExit) as again:
        main(command)
    assert again.value.code == 0 and "hcl table: " not in capsys.readouterr().out.split("**digits**")[0]  # nothing rerun


def test_a_record_joins_the_runs_of_each_invocation_and_a_budget_stops_before_a_run_that_does_not_fit(images: Path, tmp_path: Path) -> None:
    """A fresh work folder (another machine) resumes from the results file, runs what is missing and joins it there; a
    budget shorter than a row took before stops before that row, with every run done written."""
    out = tmp_path / "tables"
    recipe = Recipe("small_cnn", 32, 1, "auto", 1)
    first = table_images.ImageTableRequest("joined", "digits", images, ("ucl",), 1, recipe, "cpu", out, tmp_path / "loan1")
    table_images.run(first)
    made = json.loads((out / "joined.json").read_text())["runs"]
    second = table_images.ImageTableRequest("joined", "digits", images, ("ucl", "scl"), 2, recipe, "cpu", out, tmp_path / "loan2")
    with pytest.raises(TableStopped):
        table_images.run(second.__class__(**{**second.__dict__, "time_budget": 1e-3}))
    joined = json.loads((out / "joined.json").read_text())
    assert joined["runs"] == made and len(joined["invocations"]) == 2 and not joined["complete"]
    took = made["ucl/0"]["train_seconds"] + made["ucl/0"]["eval_seconds"]
    assert table_images.estimated_seconds(made, "ucl", "cpu") == took and table_images.estimated_seconds(made, "scl", "cpu") == 0
    table_images.run(second)
    joined = json.loads((out / "joined.json").read_text())
    assert {key: joined["runs"][key] for key in made} == made
    assert set(joined["runs"]) == {f"{name}/{seed}" for name in ("untrained", "ucl", "scl") for seed in (0, 1)}
    assert joined["table"]["rows"]["scl"]["seeds"] == [0, 1] and joined["complete"]
    table_images.run(first)  # a loan that asks for fewer rows keeps the record's other rows in its table
    assert list(json.loads((out / "joined.json").read_text())["table"]["rows"]) == ["ucl", "scl"]
    other = table_images.ImageTableRequest("joined", "digits", images, ("ucl",), 1, Recipe("small_cnn", 16, 1, "auto", 1), "cpu", out)
    with pytest.raises(UsageError, match="another table"):
        table_images.run(other)


def test_epochs_to_reach_ucl_s_final_knn_is_the_first_probe_at_or_above_it_per_seed() -> None:
    ucl = {0: {"curve": [[5, 40.0], [10, 50.0]]}, 1: {"curve": [[5, 45.0], [10, 60.0]]}}
    hard = {0: {"curve": [[5, 50.0], [10, 55.0]]}, 1: {"curve": [[5, 50.0], [10, 59.0]]}}
    reach = epochs_to_reach(hard, ucl)
    assert reach["epochs"] == [5, None] and reach["reached"] == 1 and reach["mean"] == 5.0
    assert epochs_to_reach(ucl, ucl)["epochs"] == [10, 10]


def test_every_row_runs_its_paper_s_sampler_values_and_names_the_paper_s_budget() -> None:
    rows = image_rows(["images"])
    assert list(rows) == ["ucl", "debiased", "hucl", "scl", "hscl", "ot", "undimix"]
    assert rows["hucl"] == {"sampler": "hucl", "beta": 1.0, "tau_plus": 0.1} and rows["debiased"]["tau_plus"] == 0.1
    assert rows["ot"]["ot_epsilon"] == 0.5 and "arch" not in rows["scl"]
    assert paper_numbers("hscl") == ["93.98 (H-SCL Table I: ResNet-50, 200 epochs, B 512)"]
    assert any("tau_plus 0.0" in number for number in paper_numbers("hucl"))  # H-SCL's H-UCL ran without debiasing
    with pytest.raises(UsageError, match="unknown image row"):
        image_rows(["moco"])


@pytest.mark.parametrize("given", ["nothing-here", "digits"])
def test_a_path_that_is_no_image_dataset_is_a_one_line_error(given: str, tmp_path: Path) -> None:
    request = table_images.ImageTableRequest(
        "bad", given, tmp_path / given, ("ucl",), 1, Recipe("small_cnn", 32, 1, "auto", 1), "cpu", tmp_path
    )
    (tmp_path / "digits").mkdir()
    with pytest.raises(UsageError, match="not an image dataset"):
        table_images.run(request)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--images", "cifar10"], "expected NAME=PATH"),
        (["--images", "x=nowhere", "--epochs", "3", "--eval-every", "2"], "must divide --epochs 3"),
        (["--images", "x=nowhere", "--methods", "ucl,moco"], "unknown image row 'moco'"),
        (["--images", "x=nowhere", "--precision", "fp8"], "fp8"),
    ],
)
def test_bad_image_table_options_are_one_line_usage_errors(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["table", "--name", "bad", "--out", str(tmp_path), *options])
    error = capsys.readouterr().err
    assert exited.value.code == 2 and message in error and "Traceback" not in error and not list(tmp_path.iterdir())


def test_the_dataset_s_kind_is_read_from_its_path(tmp_path: Path) -> None:
    """A prepared folder, torchvision's layouts, an image folder or a tar archive of one; anything else is no dataset."""
    (tmp_path / "prepared").mkdir()
    (tmp_path / "prepared" / "card.json").write_text("{}")
    (tmp_path / "cifar" / "cifar-10-batches-py").mkdir(parents=True)
    (tmp_path / "stl" / "stl10_binary").mkdir(parents=True)
    for split in ("train", "test"):
        (tmp_path / "folder" / split).mkdir(parents=True)
    (tmp_path / "images.tar.gz").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    kinds = {
        name: table_images.source_kind(tmp_path / name) for name in ("prepared", "cifar", "stl", "folder", "images.tar.gz", "notes.txt")
    }
    assert kinds == {
        "prepared": "prepared",
        "cifar": "cifar10",
        "stl": "stl10",
        "folder": "imagefolder",
        "images.tar.gz": "imagefolder",
        "notes.txt": None,
    }
