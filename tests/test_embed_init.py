"""``hcl embed --init``: hcl's readouts of weights that ``hcl pretrain`` did not make. An exported backbone embeds as its
encoder does, a torchvision ResNet-18 state dict embeds and ``hcl knn-eval`` reads the result, and what does not fit is
a one-line error (exit 2) that writes nothing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from test_export import hcl, saved_encoder
from test_graph_step import prepared  # noqa: F401 - the toy TU dataset, prepared: a fixture

from hcl_cli.config import ExportConfig
from hcl_cli.image.networks import torchvision_resnet
from hcl_cli.stages import export

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def digits(prepared_digits: Callable[[float], Path]) -> Path:
    """Digits with a small train split (89 images of 1x8x8) and 1,708 test images."""
    return prepared_digits(0.95)


@pytest.fixture(scope="module")
def exported(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small CNN encoder artifact and its backbone, exported as safetensors (with its record beside it)."""
    folder = tmp_path_factory.mktemp("exported")
    encoder = saved_encoder(folder, digits, "small_cnn")
    out = folder / "export" / "backbone.safetensors"
    export.run(ExportConfig(model=str(encoder), format="safetensors", out=str(out)))
    return encoder, out


def embed(digits: Path, out: Path, *weights: str) -> list[str]:
    return ["embed", "--data", str(digits), "--out", str(out), "--device", "cpu", "--threads", "1", *weights]


def test_an_exported_backbone_embeds_as_its_encoder_does(
    digits: Path, exported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    encoder, backbone = exported
    assert hcl(embed(digits, tmp_path / "model.safetensors", "--model", str(encoder)), capsys)[0] == 0
    code, err = hcl(embed(digits, tmp_path / "init.safetensors", "--init", str(backbone)), capsys)
    assert code == 0, err
    assert f"from --init {backbone}" in err
    original, initial = load_file(tmp_path / "model.safetensors"), load_file(tmp_path / "init.safetensors")
    for split in ("train", "test"):
        assert torch.equal(initial[f"{split}_backbone"], original[f"{split}_backbone"]), split
        assert torch.equal(initial[f"{split}_labels"], original[f"{split}_labels"])
    sidecar = json.loads((tmp_path / "init.json").read_text())
    assert sidecar["inputs"]["init"] == hashlib.sha256(backbone.read_bytes()).hexdigest()
    assert "encoder" not in sidecar["inputs"] and sidecar["inputs"]["prepared"]
    assert sidecar["encoder"]["arch"] == "small_cnn" and sidecar["encoder"]["init"]["record"] is True


def test_a_torchvision_resnet18_state_dict_embeds_and_knn_eval_reads_it(
    digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    weights = tmp_path / "resnet18.safetensors"
    save_file(torchvision_resnet("resnet18", 1, 8).state_dict(), weights)  # torchvision's resnet18 with the CIFAR stem
    out = tmp_path / "embeddings.safetensors"
    code, err = hcl(embed(digits, out, "--init", str(weights), "--arch", "resnet18"), capsys)
    assert code == 0, err
    tensors = load_file(out)
    assert tensors["train_backbone"].shape == (89, 512) and tensors["test_backbone"].isfinite().all()
    sidecar = json.loads((tmp_path / "embeddings.json").read_text())
    assert sidecar["inputs"]["init"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert "fc.bias and fc.weight left out" in sidecar["encoder"]["init"]["weights"]
    metrics = tmp_path / "knn.json"
    code, err = hcl(["knn-eval", "--embeddings", str(out), "--k", "5", "--out", str(metrics), "--threads", "1"], capsys)
    assert code == 0, err
    assert 0.0 <= json.loads(metrics.read_text())["top1"] <= 1.0


def bad_init(kind: str, folder: Path, exported: tuple[Path, Path]) -> tuple[Path, list[str]]:
    """Weights that ``embed --init`` must refuse, and the options beside them."""
    path = folder / f"{kind}.safetensors"
    if kind == "resnet50-as-resnet18":
        save_file(torchvision_resnet("resnet50", 1, 8).state_dict(), path)
        return path, ["--arch", "resnet18"]
    if kind == "pickle":
        torch.save(torchvision_resnet("resnet18", 1, 8).state_dict(), path)
        return path, ["--arch", "resnet18"]
    if kind == "no-arch":
        save_file(torchvision_resnet("resnet18", 1, 8).state_dict(), path)
        return path, []
    encoder, backbone = exported
    if kind == "record-disagrees":
        return backbone, ["--arch", "resnet18"]
    if kind == "stale-record":
        path.write_bytes(backbone.read_bytes() + b" ")
        (folder / f"{path.name}.json").write_text((backbone.parent / f"{backbone.name}.json").read_text())
        return path, []
    if kind == "encoder":
        return encoder, []
    return path, ["--arch", "resnet18"]  # absent


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("resnet50-as-resnet18", "is not a state dict of resnet18's backbone"),
        ("pickle", "is a torch.save file, and hcl unpickles no file: save it as safetensors"),
        ("no-arch", "has no hcl export record"),
        ("record-disagrees", "holds a small_cnn backbone, as its export record says, not --arch resnet18"),
        ("stale-record", "records another file (its sha256 differs)"),
        ("encoder", "is an hcl 'encoder' artifact: give an encoder as --model"),
        ("absent", "--init"),
    ],
)
def test_init_refuses_what_does_not_fit_in_one_line_and_writes_nothing(
    kind: str, message: str, digits: Path, exported: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights, options = bad_init(kind, tmp_path, exported)
    out = tmp_path / "out" / "embeddings.safetensors"
    code, err = hcl(embed(digits, out, "--init", str(weights), *options), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err, err
    if kind == "absent":
        assert "no such file" in err
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_a_graph_dataset_and_arch_without_init_are_refused(
    prepared: Path,  # noqa: F811 - the fixture imported above
    exported: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "embeddings.safetensors"
    code, err = hcl(embed(prepared, out, "--init", str(exported[1])), capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--init embeds images" in err and "holds graphs" in err, err
    code, err = hcl(embed(prepared, out, "--arch", "resnet18"), capsys)
    assert code == 2 and "--arch names the architecture of --init's weights" in err, err
    code, err = hcl(embed(prepared, out, "--init", str(exported[1]), "--model", str(tmp_path / "encoder.safetensors")), capsys)
    assert code == 2 and "--model and --init name two encoders" in err, err
    assert not out.exists()
