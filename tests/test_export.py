"""``hcl export`` and ``hcl pretrain --init``: the encoder carried out of hcl (a torchvision state dict that a fine-tune
starts from, a torch.export program, TorchScript) with its input normalisation, and weights carried in (torchvision's
ResNet-18 state dict, an hcl encoder); bad inputs are one-line errors that write nothing."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torchvision
from safetensors.torch import load_file, save_file
from test_graph_step import prepared  # noqa: F401 - the toy TU dataset, prepared: a fixture
from torch import nn

from hcl_cli.artifacts import load_artifact
from hcl_cli.cli import main
from hcl_cli.config import PretrainConfig
from hcl_cli.distributed import DistributedContext
from hcl_cli.errors import InputError
from hcl_cli.graph.encoder import GinModel, save_graph_encoder
from hcl_cli.image.card import load_card
from hcl_cli.image.encoder import ENCODER_KIND, load_encoder, save_encoder
from hcl_cli.image.momentum import MomentumQueue
from hcl_cli.image.networks import SmallCNN, build_model, torchvision_resnet
from hcl_cli.image.prepared import load_split
from hcl_cli.modality import modality_of
from hcl_cli.training.builders import build_training
from hcl_cli.training.init import start_from

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def digits(prepared_digits: Callable[[float], Path]) -> Path:
    """Digits with a small train split (89 images): five steps of 16 an epoch."""
    return prepared_digits(0.95)


def saved_encoder(folder: Path, digits: Path, arch: str, seed: int = 0) -> Path:
    """An encoder artifact of ``arch`` as pretrain writes it, with BatchNorm statistics away from their start values."""
    torch.manual_seed(seed)
    model = build_model(arch, 1, 8, 16)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d | nn.BatchNorm1d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    card = load_card(digits)
    path = folder / f"{arch}.safetensors"
    save_encoder(
        path, model, {"config": {"sampler": "hucl"}, "epoch": 1, "seed": seed, "dataset": "digits", "mean": card.mean, "std": card.std}
    )
    return path


@pytest.fixture(scope="module")
def resnet(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved_encoder(tmp_path_factory.mktemp("models"), digits, "resnet18")


def hcl(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``hcl ARGS`` in this process: its exit code and standard error."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return int(exit_info.value.code or 0), capsys.readouterr().err


def normalised(digits: Path, record: dict, split: str = "train") -> tuple[torch.Tensor, torch.Tensor]:
    """The split's images as the export's record says the backbone reads them, and their labels."""
    images, labels = load_split(digits, split)
    mean, std = (torch.tensor(record[key]).view(1, -1, 1, 1) for key in ("mean", "std"))
    return (images.float() / 255 - mean) / std, labels


def test_export_then_fine_tune_the_torchvision_resnet18_it_loads_into(
    digits: Path, resnet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "export" / "resnet18.pt"
    code, _ = hcl(["export", "--model", str(resnet), "--out", str(out)], capsys)
    assert code == 0
    record = json.loads((tmp_path / "export" / "resnet18.pt.json").read_text())
    card = load_card(digits)
    assert (record["arch"], record["in_channels"], record["image_size"], record["feature_dim"]) == ("resnet18", 1, 8, 512)
    assert (record["mean"], record["std"]) == (card.mean, card.std)
    assert record["stem"].startswith("cifar") and record["left_out"] == ["fc.weight", "fc.bias"]
    assert record["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert record["encoder"]["sha256"] == json.loads(resnet.with_suffix(".json").read_text())["sha256"]

    net = torchvision.models.resnet18(num_classes=10)
    net.conv1, net.maxpool = nn.Conv2d(1, 64, 3, 1, 1, bias=False), nn.Identity()
    loaded = net.load_state_dict(torch.load(out, weights_only=True), strict=False)
    assert (loaded.missing_keys, loaded.unexpected_keys) == (["fc.weight", "fc.bias"], [])
    x, labels = normalised(digits, record)
    model, _ = load_encoder(resnet)
    classifier, net.fc = net.fc, nn.Identity()
    with torch.no_grad():
        torch.testing.assert_close(net.eval()(x), model.backbone(x), rtol=1e-5, atol=1e-5)
    net.fc = classifier
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(5):
        loss = nn.functional.cross_entropy(net.train()(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("fmt", ["safetensors", "pt2", "torchscript"])
def test_every_format_gives_the_encoders_features_for_any_batch_size(
    fmt: str, digits: Path, resnet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / f"backbone.{fmt}"
    assert hcl(["export", "--model", str(resnet), "--format", fmt, "--out", str(out)], capsys)[0] == 0
    record = json.loads(Path(f"{out}.json").read_text())
    assert record["format"] == fmt
    if fmt == "safetensors":
        program = torchvision_resnet("resnet18", 1, 8)
        program.load_state_dict(load_file(out), strict=False)
        program.fc = nn.Identity()
        program.eval()
    elif fmt == "pt2":
        program = torch.export.load(out).module()
    else:
        with pytest.warns(FutureWarning):  # torch deprecates TorchScript
            program = torch.jit.load(out)
    x, _ = normalised(digits, record, "test")
    model, _ = load_encoder(resnet)
    with torch.no_grad():
        torch.testing.assert_close(program(x[:5]), model.backbone(x[:5]), rtol=1e-5, atol=1e-5)


def test_a_small_cnn_exports_the_state_dict_of_its_module(digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    encoder = saved_encoder(tmp_path, digits, "small_cnn")
    out = tmp_path / "small.safetensors"
    assert hcl(["export", "--model", str(encoder), "--format", "safetensors", "--out", str(out)], capsys)[0] == 0
    record = json.loads(Path(f"{out}.json").read_text())
    assert (record["stem"], record["left_out"], record["feature_dim"]) == (None, [], 128)
    backbone = SmallCNN(1)
    backbone.load_state_dict(load_file(out))
    x, _ = normalised(digits, record, "test")
    model, _ = load_encoder(encoder)
    with torch.no_grad():
        torch.testing.assert_close(backbone.eval()(x), model.backbone(x))


def test_onnx_is_written_where_its_packages_are_installed_else_one_line(
    resnet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "backbone.onnx"
    code, err = hcl(["export", "--model", str(resnet), "--format", "onnx", "--out", str(out)], capsys)
    if all(importlib.util.find_spec(name) for name in ("onnx", "onnxscript")):
        assert code == 0 and out.stat().st_size > 1_000_000
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert "--format onnx needs the onnx and onnxscript packages" in err and "pip install onnx onnxscript" in err
        assert not tmp_path.joinpath("backbone.onnx").exists() and os.listdir(tmp_path) == []


ONNX_TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
"""How close onnxruntime's features are to PyTorch's: |onnx - torch| <= 1e-4 + 1e-4 |torch| per feature, float32 on a
CPU (features of the digits up to about 5 in size; measured, the largest difference was 4.3e-6)."""


def test_the_onnx_export_gives_the_pytorch_encoders_features_under_onnxruntime(
    digits: Path, resnet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    onnxruntime = pytest.importorskip("onnxruntime", reason="the [onnx] extra: pip install -e '.[onnx]'")
    for package in ("onnx", "onnxscript"):
        pytest.importorskip(package, reason="the [onnx] extra: pip install -e '.[onnx]'")
    out = tmp_path / "backbone.onnx"
    assert hcl(["export", "--model", str(resnet), "--format", "onnx", "--out", str(out)], capsys)[0] == 0
    record = json.loads(Path(f"{out}.json").read_text())
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [node.name for node in session.get_inputs()] == ["images"] and [node.name for node in session.get_outputs()] == ["features"]
    x, _ = normalised(digits, record, "test")
    model, _ = load_encoder(resnet)
    for size in (1, 7, 64):  # any batch size: the program's batch dimension is dynamic
        with torch.no_grad():
            expected = model.backbone(x[:size])
        (features,) = session.run(["features"], {"images": x[:size].numpy()})
        torch.testing.assert_close(torch.from_numpy(features), expected, **ONNX_TOLERANCE)


def test_export_writes_over_its_own_export_only(resnet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "encoder.pt"
    assert hcl(["export", "--model", str(resnet), "--out", str(out)], capsys)[0] == 0
    assert hcl(["export", "--model", str(resnet), "--out", str(out)], capsys)[0] == 0  # its own earlier export
    mine = tmp_path / "mine.pt"
    mine.write_bytes(b"my notes")
    code, err = hcl(["export", "--model", str(resnet), "--out", str(mine)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "hcl writes only over its own encoder export" in err
    assert mine.read_bytes() == b"my notes"
    assert sorted(os.listdir(tmp_path)) == [".hcl-written.json", "encoder.pt", "encoder.pt.json", "mine.pt"]
    (tmp_path / "notes.pt.json").write_text("{}")
    code, err = hcl(["export", "--model", str(resnet), "--out", str(tmp_path / "notes.pt")], capsys)
    assert code == 2 and "notes.pt.json exists" in err and not (tmp_path / "notes.pt").exists()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("missing.safetensors", "encoder not found"),
        ("graph.safetensors", "is an hcl 'graph encoder' artifact; hcl export writes image encoders"),
        ("resnet18.safetensors", "would write over the input --model"),
    ],
)
def test_export_refuses_in_one_line(model: str, message: str, resnet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_graph_encoder(tmp_path / "graph.safetensors", GinModel(7), {"epoch": 1})
    model_path = resnet if model == "resnet18.safetensors" else tmp_path / model
    out = resnet if model == "resnet18.safetensors" else tmp_path / "out" / "encoder.pt"
    before = resnet.read_bytes()
    code, err = hcl(["export", "--model", str(model_path), "--out", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() and resnet.read_bytes() == before


def torchvision_digits_resnet18() -> nn.Module:
    """torchvision's ResNet-18 (no download: weights=None) with the CIFAR stem hcl gives 1x8x8 digits."""
    torch.manual_seed(1)
    net = torchvision.models.resnet18(weights=None)
    net.conv1, net.maxpool = nn.Conv2d(1, 64, 3, 1, 1, bias=False), nn.Identity()
    return net


def pretrain_args(digits: Path, run: Path) -> list[str]:
    return ["pretrain", "--data", str(digits), "--out", str(run / "models"), "--live-dir", str(run / "log"), "--arch", "resnet18"]


def test_pretrain_starts_from_a_torchvision_resnet18_state_dict(digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net = torchvision_digits_resnet18()
    weights = tmp_path / "resnet18.safetensors"
    save_file(net.state_dict(), weights)
    run = tmp_path / "run"
    args = pretrain_args(digits, run)
    args += ["--init", str(weights), "--epochs", "1", "--batch-size", "16", "--max-steps", "1", "--lr", "1e-8", "--device", "cpu"]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 0
    out = capsys.readouterr().err  # a status line (hcl_cli.logs)
    assert f"starting from {weights}: the backbone of a state dict, its fc.bias and fc.weight left out" in out
    tensors, sidecar = load_artifact(run / "models" / "encoder.safetensors", ENCODER_KIND, {})
    assert sidecar["inputs"]["init"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    given = net.state_dict()
    for name in ("conv1.weight", "layer1.0.conv1.weight", "layer4.1.bn2.weight"):  # one step of lr 1e-8 moves no weight by more
        torch.testing.assert_close(tensors[f"backbone.{name}"], given[name], rtol=0, atol=1e-6)
    assert not any(name.startswith("backbone.fc") for name in tensors)


def test_an_hcl_encoder_starts_the_whole_model_and_the_key_encoder(digits: Path, resnet: Path) -> None:
    config = PretrainConfig(data=str(digits), arch="resnet18", projection_dim=16, queue_size=32, device="cpu", init=str(resnet))
    modality = modality_of(digits)
    model, step = build_training(modality, config, modality.load_card(digits), DistributedContext(0, 1, 0, torch.device("cpu")))
    initial = start_from(config.init, modality, model, step.state)
    assert initial.described == "the whole encoder (backbone and head)"
    saved, _ = load_encoder(resnet)
    (queue,) = [module for module in step.state.modules() if isinstance(module, MomentumQueue)]
    for copy in (model, queue.key_model):
        for name, tensor in saved.state_dict().items():
            torch.testing.assert_close(copy.state_dict()[name], tensor, rtol=0, atol=0)


def bad_init(kind: str, folder: Path, digits: Path) -> Path:
    """A file ``--init`` must refuse, of ``kind``."""
    path = folder / f"{kind}.safetensors"
    net = torchvision_digits_resnet18()
    if kind == "imagenet-stem":
        save_file(torchvision.models.resnet18(weights=None).state_dict(), path)
    elif kind == "pickle":
        path = folder / "resnet18.pt"
        torch.save(net.state_dict(), path)
    elif kind == "missing-key":
        save_file({name: value for name, value in net.state_dict().items() if name != "layer2.0.bn1.weight"}, path)
    elif kind == "extra-key":
        save_file({**net.state_dict(), "projector.weight": torch.zeros(2)}, path)
    elif kind == "other-arch":
        path = saved_encoder(folder, digits, "small_cnn")
    elif kind == "graph":
        save_graph_encoder(path, GinModel(7), {"epoch": 1})
    elif kind == "text":
        path.write_text("not weights")
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        (
            "imagenet-stem",
            "conv1.weight is [64, 3, 7, 7], resnet18's backbone for 1x8x8 images needs [64, 1, 3, 3] (hcl's ResNets have the CIFAR stem",
        ),
        ("pickle", "is a torch.save file, and hcl unpickles no file: save it as safetensors"),
        ("missing-key", "is not a state dict of resnet18's backbone: 1 key missing (e.g. layer2.0.bn1.weight)\n"),
        ("extra-key", "is not a state dict of resnet18's backbone: 1 key unexpected (e.g. projector.weight)\n"),
        ("other-arch", "is an encoder of another architecture: arch small_cnn (the run's: resnet18)"),
        ("graph", "is an hcl 'graph encoder' artifact, but the run trains on images"),
        ("text", "is not a safetensors state dict"),
        ("absent", "no such file"),
    ],
)
def test_init_refuses_what_does_not_fit_in_one_line(
    kind: str, message: str, digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = bad_init(kind, tmp_path, digits) if kind != "absent" else tmp_path / "absent.safetensors"
    run = tmp_path / "run"
    args = [*pretrain_args(digits, run), "--init", str(weights), "--epochs", "1", "--batch-size", "16", "--device", "cpu"]
    code, err = hcl(args, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    assert not (run / "models" / "encoder.safetensors").exists()


def test_a_resume_from_other_initial_weights_is_refused(digits: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = (saved_encoder(tmp_path / name, digits, "small_cnn", seed) for name, seed in (("a", 0), ("b", 1)))
    run = tmp_path / "run"
    args = ["pretrain", "--data", str(digits), "--out", str(run / "models"), "--live-dir", str(run / "log"), "--arch", "small_cnn"]
    args += ["--projection-dim", "16", "--batch-size", "16", "--device", "cpu"]
    assert hcl([*args, "--epochs", "1", "--init", str(first)], capsys)[0] == 0
    code, err = hcl([*args, "--epochs", "2", "--resume", "--init", str(second)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "was made with other settings (init '" in err
    code, err = hcl([*args, "--epochs", "2", "--resume"], capsys)
    assert code == 2 and "-> None" in err, "a resume without --init of a run that had one is another run"
    code, err = hcl([*args, "--epochs", "2", "--resume", "--init", str(first)], capsys)
    assert code == 0 and "starting from" not in err, "the weights are the checkpoint's: one line says so (issue 54)"
    assert f"; resuming from {run / 'models' / 'checkpoints'}" in err and f", a run started from --init {first})" in err


def test_a_graph_run_starts_from_a_graph_encoder_only(prepared: Path, tmp_path: Path) -> None:  # noqa: F811 - the fixture
    modality = modality_of(prepared)
    card = modality.load_card(prepared)
    torch.manual_seed(3)
    saved = GinModel(card.feature_dim, hidden=8, layers=2)
    save_graph_encoder(tmp_path / "gin.safetensors", saved, {"epoch": 1})
    save_graph_encoder(tmp_path / "wide.safetensors", GinModel(card.feature_dim, hidden=16, layers=2), {"epoch": 1})
    save_file(saved.state_dict(), tmp_path / "plain.safetensors")
    config = PretrainConfig(data=str(prepared), gin_hidden=8, gin_layers=2, device="cpu")
    model, step = build_training(modality, config, card, DistributedContext(0, 1, 0, torch.device("cpu")))
    assert start_from(str(tmp_path / "gin.safetensors"), modality, model, step.state).described.startswith("the whole encoder")
    for name, tensor in saved.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor, rtol=0, atol=0)
    with pytest.raises(InputError, match=r"is an encoder of another architecture: hidden 16 \(the run's: 8\)"):
        start_from(str(tmp_path / "wide.safetensors"), modality, model, step.state)
    with pytest.raises(InputError, match="is no hcl graph encoder artifact: a graph run starts only from one"):
        start_from(str(tmp_path / "plain.safetensors"), modality, model, step.state)
