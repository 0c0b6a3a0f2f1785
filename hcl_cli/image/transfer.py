"""The image encoder's backbone carried out of hcl and weights carried in.

Out (``hcl export``): the backbone f, the representation the evaluations read (HCL Sec. 5.1), without the
projection head g that only the contrastive loss sees (SimCLR Sec. 4.2), as a plain state dict: a ResNet's
is torchvision's ``resnet18``/``resnet50`` state dict less the classifier ``fc`` (hcl builds its backbone as
torchvision's model with ``fc`` removed, :func:`~hcl_cli.image.networks.build_resnet`), a small CNN's that of
:class:`~hcl_cli.image.networks.SmallCNN`. Its :func:`input_record` says what the backbone reads: the
per-channel normalisation, the image size and channels, and the stem (for images of 64 px or less hcl's
ResNets have the CIFAR stem of HCL's code, a 3x3 stride-1 ``conv1`` and no max-pool, which
:func:`~hcl_cli.image.networks.torchvision_resnet` rebuilds). The other formats are the same backbone as a
self-contained program, taking a batch of any size: torch.export's, TorchScript, or ONNX (which needs the ``onnx``
and ``onnxscript`` packages, which hcl does not depend on).

In (``hcl pretrain --init``, ``hcl embed --init``): :func:`load_backbone` loads such a state dict, torchvision's own
ResNet state dict included (its ``fc`` left out: the backbone has none), into a model's backbone, and
:func:`read_export_record` reads the export's record beside it (architecture and normalisation); a key missing or
unexpected, or a tensor of another shape, is a one-line error. Files are read as safetensors only: hcl
unpickles nothing, so a ``torch.save`` file is refused with the line that converts it.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import Tensor

from hcl_cli.artifacts import sha256_of
from hcl_cli.artifacts.encoders import key_mismatch
from hcl_cli.errors import InputError, UsageError, first_line, shown
from hcl_cli.image.card import wrong_channel_statistics
from hcl_cli.image.encoder import EncoderSidecar
from hcl_cli.image.networks import BUILT_ARCHS, CIFAR_STEM_MAX_SIZE, ContrastiveModel

HEAD_KEYS = ("fc.weight", "fc.bias")
"""torchvision's ResNet classifier: what a ResNet state dict holds beyond hcl's backbone, left out when loaded."""
ONNX_PACKAGES = ("onnx", "onnxscript")
ZIP_MAGIC = b"PK\x03\x04"
"""The start of a file ``torch.save`` writes (a zip archive holding a pickle)."""
CONVERT = "python -c \"import torch, safetensors.torch as s; s.save_file(torch.load('IN', weights_only=True), 'OUT.safetensors')\""
"""The line that turns a ``torch.save`` state dict into a safetensors file hcl reads."""


def backbone_state(model: ContrastiveModel) -> dict[str, Tensor]:
    """The backbone's state dict, on the CPU and contiguous: torchvision's ResNet keys less ``fc``, or :class:`SmallCNN`'s."""
    return {name: tensor.detach().cpu().contiguous() for name, tensor in model.backbone.state_dict().items()}


def input_record(sidecar: EncoderSidecar, fmt: str) -> dict[str, Any]:
    """What an exported backbone of the encoder ``sidecar`` describes reads and returns, for the export's JSON sidecar."""
    resnet = sidecar.arch != "small_cnn"
    cifar = resnet and sidecar.image_size <= CIFAR_STEM_MAX_SIZE
    return {
        "format": fmt,
        "arch": sidecar.arch,
        "in_channels": sidecar.in_channels,
        "image_size": sidecar.image_size,
        "mean": sidecar.mean,
        "std": sidecar.std,
        "input": "float32 (N, in_channels, image_size, image_size): pixels scaled to [0, 1], then (x - mean) / std per channel",
        "output": f"float32 (N, {sidecar.feature_dim}): the backbone features (no projection head)",
        "feature_dim": sidecar.feature_dim,
        "stem": ("cifar: conv1 3x3 stride 1 padding 1, no max-pool" if cifar else "imagenet: conv1 7x7 stride 2") if resnet else None,
        "left_out": list(HEAD_KEYS) if resnet else [],
    }


def export_sidecar(out: str | os.PathLike[str]) -> Path:
    """``OUT.json``: the export's record, named after the whole file name (``encoder.pt.json``), so that it never meets
    the ``encoder.json`` sidecar of an encoder artifact in the same folder."""
    path = Path(out)
    return path.with_name(path.name + ".json")


def read_export_record(path: str | os.PathLike[str], digest: str, option: str) -> dict[str, Any] | None:
    """The :func:`input_record` that ``hcl export`` wrote beside ``path`` (given as ``option``, of sha256 ``digest``), its
    fields checked; None when there is none. A record of another file, or one that does not parse, is a one-line
    :class:`~hcl_cli.errors.InputError`."""
    record = export_sidecar(path)
    if not record.exists():
        return None
    source = f"{option} {shown(path)}'s record {shown(record)}"
    try:
        values = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{source} is not a readable JSON record ({exc.__class__.__name__})") from None
    if not isinstance(values, dict) or values.get("sha256") != digest:
        raise InputError(f"{source} records another file (its sha256 differs): move it away, or export the encoder again")
    if values.get("arch") not in BUILT_ARCHS:
        raise InputError(f"{source} names an unknown arch {values.get('arch')!r} (expected one of {', '.join(BUILT_ARCHS)})")
    for name in ("in_channels", "image_size"):
        value = values.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"{source}: field {name!r} must be a positive integer (got {value!r})")
    wrong = wrong_channel_statistics(values, values["in_channels"])
    if wrong is not None:
        raise InputError(f"{source}: field {wrong[0]!r} must be {wrong[1]} (got {values.get(wrong[0])!r})")
    return values


def exported_bytes(model: ContrastiveModel, fmt: str) -> bytes:
    """The backbone of ``model`` (in eval mode, on the CPU) written in ``fmt``, one of :data:`~hcl_cli.config.export.EXPORT_FORMATS`, in memory."""
    state = backbone_state(model)
    buffer = io.BytesIO()
    if fmt == "safetensors":
        from safetensors.torch import save

        return save(state)
    if fmt == "pytorch":
        torch.save(state, buffer)
        return buffer.getvalue()
    backbone = model.backbone.cpu().eval()
    example = torch.zeros(2, model.in_channels, model.image_size, model.image_size)
    batch = ({0: torch.export.Dim("batch")},)
    if fmt == "pt2":
        torch.export.save(torch.export.export(backbone, (example,), dynamic_shapes=batch), buffer)
    elif fmt == "torchscript":
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*torch\.jit\.\w+` is deprecated", category=FutureWarning)
            torch.jit.save(torch.jit.trace(backbone, example), buffer)
    else:
        check_onnx_packages()
        program = torch.onnx.export(
            backbone, (example,), dynamo=True, dynamic_shapes=batch, input_names=["images"], output_names=["features"]
        )
        with tempfile.TemporaryDirectory() as folder:  # ONNXProgram.save writes to a path
            program.save(os.path.join(folder, "backbone.onnx"))  # type: ignore[union-attr]
            return Path(folder, "backbone.onnx").read_bytes()
    return buffer.getvalue()


def check_onnx_packages() -> None:
    """A one-line usage error when the packages ``torch.onnx.export`` needs are not installed."""
    missing = [name for name in ONNX_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(
            f"--format onnx needs the {' and '.join(ONNX_PACKAGES)} packages, which hcl does not depend on, and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed here: pip install {' '.join(ONNX_PACKAGES)}, or export --format pt2"
        )


def read_state_file(path: str | os.PathLike[str], option: str) -> dict[str, Tensor]:
    """The plain state dict in the safetensors file ``path`` (given as ``option``); a ``torch.save`` pickle, another
    format or an unreadable file is a one-line :class:`~hcl_cli.errors.InputError`."""
    try:
        with open(path, "rb") as handle:
            start = handle.read(4)
    except OSError as exc:
        raise InputError(f"{option} {shown(path)} cannot be read: {exc.strerror or exc}") from None
    if start == ZIP_MAGIC:
        raise InputError(
            f"{option} {shown(path)} is a torch.save file, and hcl unpickles no file: save it as safetensors ({CONVERT.replace('IN', shown(path))})"
        )
    try:
        return load_file(os.fspath(path))
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise InputError(f"{option} {shown(path)} is not a safetensors state dict ({first_line(exc)})") from None


def existing_file(path: str, option: str) -> Path:
    """``path`` (given as ``option``) as a Path; a one-line :class:`~hcl_cli.errors.InputError` when it is missing or not a
    regular file."""
    source = Path(path)
    if not source.is_file():
        raise InputError(f"{option} {shown(path)}: {'not a regular file' if source.exists() else 'no such file'}")
    return source


def file_digest(source: Path, option: str) -> str:
    """The sha256 of the weights file ``source`` (given as ``option``), as the artifacts made from it record it."""
    digest = sha256_of(source)
    if digest is None:
        raise InputError(f"{option} {shown(source)} cannot be read")
    return digest


def load_backbone_file(model: ContrastiveModel, path: str, option: str) -> str:
    """Load the safetensors state dict ``path`` (given as ``option``) into ``model``'s backbone (:func:`load_backbone`);
    what was taken from it, in words."""
    left_out = load_backbone(model, read_state_file(path, option), f"{option} {shown(path)}")
    dropped = f", its {' and '.join(left_out)} left out" if left_out else ""
    return f"the backbone of a state dict{dropped}; the projection head initialised afresh"


def load_backbone(model: ContrastiveModel, state: Mapping[str, Tensor], source: str) -> list[str]:
    """Copy the plain state dict ``state`` (read from ``source``, as messages name it) into ``model``'s backbone.

    Its keys must be the backbone's (a torchvision ResNet's, or :class:`SmallCNN`'s), each tensor of the backbone's
    shape; torchvision's classifier ``fc`` (:data:`HEAD_KEYS`) is left out and returned, anything else missing or
    unexpected is a one-line :class:`~hcl_cli.errors.InputError`, as is a NaN or infinite weight.
    """
    expected = model.backbone.state_dict()
    left_out = sorted(key for key in HEAD_KEYS if key in state and key not in expected)
    given = {key: value for key, value in state.items() if key not in left_out}
    if mismatch := key_mismatch(expected, given):
        raise InputError(f"{source} is not a state dict of {model.arch}'s backbone: {mismatch}")
    for key, reference in expected.items():
        tensor = given[key]
        if tensor.shape != reference.shape:
            stem = stem_hint(model) if key == "conv1.weight" else ""
            raise InputError(
                f"{source}: {key} is {list(tensor.shape)}, {model.arch}'s backbone for {model.in_channels}x{model.image_size}x"
                f"{model.image_size} images needs {list(reference.shape)}{stem}"
            )
        if tensor.is_floating_point() and not tensor.isfinite().all():
            raise InputError(f"{source}: {key} holds NaN or infinite weights")
    with torch.no_grad():
        model.backbone.load_state_dict({key: tensor.to(expected[key].dtype) for key, tensor in given.items()})
    return left_out


def stem_hint(model: ContrastiveModel) -> str:
    """Why a ResNet's ``conv1`` may not fit: the stem hcl gives images of this size and channels."""
    if model.image_size <= CIFAR_STEM_MAX_SIZE:
        return f" (hcl's ResNets have the CIFAR stem, a 3x3 conv1, for images of {CIFAR_STEM_MAX_SIZE} px or less)"
    return f" (hcl's conv1 reads {model.in_channels} channels)"
