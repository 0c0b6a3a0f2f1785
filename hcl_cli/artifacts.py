"""Artifact I/O: atomic writes, safetensors with a JSON sidecar, validation on every read.

Every artifact is a ``NAME.safetensors`` file of tensors plus a ``NAME.json`` sidecar holding
``schema_version``, ``kind``, the shape and dtype of every tensor, and free metadata (the
config, the dataset card, library versions). Writers go through :func:`atomic_path`: a
temporary file in the same folder, fsync, then rename, so no reader ever sees half a file.
Readers go through :func:`load_artifact`, which turns any truncated, foreign or mismatched
file into a one-line :class:`~hcl_cli.errors.HclError` naming the file. No pickle is involved.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from hcl_cli.errors import HclError

SCHEMA_VERSION = 1


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it over ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise HclError(f"cannot write {target}: {exc.strerror or exc}") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give artifacts the usual permissions
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise HclError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write JSON atomically, indented and with a trailing newline."""
    write_text(path, json.dumps(obj, indent=2) + "\n")


def read_json(path: str | os.PathLike[str], what: str = "file") -> dict[str, Any]:
    """Read a JSON object, turning a missing or corrupt file into a one-line error."""
    source = Path(path)
    if not source.is_file():
        raise HclError(f"{what} not found: {source}")
    try:
        obj = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HclError(f"{what} {source} is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise HclError(f"{what} {source} must hold a JSON object")
    return obj


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """The JSON sidecar that describes ``path`` (``x.safetensors`` -> ``x.json``)."""
    return Path(path).with_suffix(".json")


@dataclass(frozen=True)
class TensorSpec:
    """What a reader expects of one tensor: its dtype and number of dimensions."""

    dtype: torch.dtype
    ndim: int


def save_artifact(
    path: str | os.PathLike[str],
    tensors: Mapping[str, torch.Tensor],
    kind: str,
    meta: Mapping[str, Any] | None = None,
) -> None:
    """Write ``tensors`` to ``path`` (safetensors) and its sidecar, each atomically.

    The tensor file is replaced first; a reader that meets the new tensors with the old sidecar
    sees a shape mismatch and refuses, rather than reading stale data as new.
    """
    contiguous = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    sidecar = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "tensors": {name: {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for name, t in contiguous.items()},
        **(meta or {}),
    }
    with atomic_path(path) as tmp:
        save_file(contiguous, str(tmp))
    write_json(sidecar_path(path), sidecar)


def load_artifact(
    path: str | os.PathLike[str],
    kind: str,
    expected: Mapping[str, TensorSpec],
    device: str | torch.device = "cpu",
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read and validate an artifact written by :func:`save_artifact`.

    Checks the sidecar's schema version and kind, that every expected tensor is present with the
    expected dtype and rank, and that every tensor's shape equals the one the sidecar records.
    Returns the tensors (all of them, expected or not) and the sidecar.
    """
    source = Path(path)
    if not source.is_file():
        raise HclError(f"{kind} not found: {source}")
    sidecar = read_json(sidecar_path(source), what=f"{kind} sidecar")
    version = sidecar.get("schema_version")
    if version != SCHEMA_VERSION:
        raise HclError(f"{source}: schema version {version!r} is not supported (this hcl reads {SCHEMA_VERSION})")
    if sidecar.get("kind") != kind:
        raise HclError(f"{source}: expected a {kind} artifact, found {sidecar.get('kind')!r}")
    try:
        tensors = load_file(str(source), device=str(device))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise HclError(f"{source}: not a readable safetensors file ({first_line(exc)})") from exc
    for name, spec in expected.items():
        if name not in tensors:
            raise HclError(f"{source}: missing tensor {name!r}")
        tensor = tensors[name]
        if tensor.dtype != spec.dtype or tensor.ndim != spec.ndim:
            raise HclError(
                f"{source}: tensor {name!r} is {str(tensor.dtype).removeprefix('torch.')} with {tensor.ndim} dims, "
                f"expected {str(spec.dtype).removeprefix('torch.')} with {spec.ndim}"
            )
    recorded = sidecar.get("tensors", {})
    for name, tensor in tensors.items():
        shape = recorded.get(name, {}).get("shape") if isinstance(recorded, dict) else None
        if shape != list(tensor.shape):
            raise HclError(f"{source}: tensor {name!r} has shape {list(tensor.shape)} but the sidecar records {shape}")
    return tensors, sidecar


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape an artifact, recorded in every sidecar."""
    import platform

    import hcl_cli

    versions = {"hcl": hcl_cli.__version__, "python": platform.python_version(), "torch": torch.__version__}
    with contextlib.suppress(ImportError):
        import torchvision

        versions["torchvision"] = torchvision.__version__
    return versions
