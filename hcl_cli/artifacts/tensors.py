"""Tensor artifacts: ``NAME.safetensors`` plus a ``NAME.json`` sidecar, bound by the tensor file's sha256.

The sidecar holds ``schema_version``, ``kind``, the shape and dtype of every tensor, the ``sha256``
of the tensor file, and free metadata (the config, the dataset card, library versions). Writers go
through :func:`save_artifact` (each file atomically); readers go through :func:`load_artifact`,
which turns any truncated, foreign or mismatched file (a tensor file whose hash is not the one its
sidecar records included) into a one-line :class:`~hcl_cli.errors.HclError` naming the file. No
pickle is involved.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from hcl_cli.artifacts.checks import first_line, is_integer
from hcl_cli.artifacts.files import atomic_path, read_json, write_json
from hcl_cli.errors import HclError, InputError
from hcl_cli.interrupts import uninterrupted

SCHEMA_VERSION = 1
KIND_METADATA = "hcl_kind"
"""The safetensors header's metadata key that records the artifact's kind: a tensor file alone says it is hcl's
(:func:`~hcl_cli.artifacts.outputs.tensor_output`), even when a kill left it without its sidecar."""


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

    The sidecar records the sha256 of the tensor file, which binds the pair: a reader that meets
    new tensors with an old sidecar (a process killed between the two renames), or a changed
    byte, refuses the pair rather than reading stale or damaged data as valid. The tensor file's
    header records ``kind`` too (:data:`KIND_METADATA`).
    """
    contiguous = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    with uninterrupted():
        _save_pair(path, contiguous, kind, meta)


def _save_pair(path: str | os.PathLike[str], contiguous: Mapping[str, torch.Tensor], kind: str, meta: Mapping[str, Any] | None) -> None:
    # Serialised here and written through atomic_path: safetensors' own save_file writes a temporary
    # sibling of its own (``.tmpXXXXXX``), which a killed save would leave behind.
    serialised = save(dict(contiguous), metadata={KIND_METADATA: kind})
    digest = hashlib.sha256(serialised).hexdigest()
    with atomic_path(path) as tmp:
        tmp.write_bytes(serialised)
    sidecar = {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "tensors": {name: {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)} for name, t in contiguous.items()},
        **(meta or {}),
        "sha256": digest,
    }
    write_json(sidecar_path(path), sidecar)


def load_artifact(
    path: str | os.PathLike[str],
    kind: str,
    expected: Mapping[str, TensorSpec],
    device: str | torch.device = "cpu",
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Read and validate an artifact written by :func:`save_artifact`.

    Checks the sidecar's schema version and kind, that the tensor file is readable and its sha256
    is the one the sidecar records, that every expected tensor is present with the expected dtype
    and rank, and that every tensor's shape equals the one the sidecar records. Returns the
    tensors (all of them, expected or not) and the sidecar.
    """
    source = Path(path)
    if not source.is_file():
        raise InputError(f"{kind} not found: {source}")
    sidecar = read_json(sidecar_path(source), what=f"{kind} sidecar")
    version = sidecar.get("schema_version")
    if not is_integer(version) or version != SCHEMA_VERSION:
        raise InputError(f"{source}: schema version {version!r} is not supported (this hcl reads {SCHEMA_VERSION})")
    if sidecar.get("kind") != kind:
        article = "an" if kind.startswith(tuple("aeiou")) else "a"
        raise InputError(f"{source}: expected {article} {kind} artifact, found {sidecar.get('kind')!r}")
    try:
        with open(source, "rb") as handle:
            hashed = os.fstat(handle.fileno())
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        tensors = load_file(str(source), device=str(device))
        loaded = os.stat(source)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise InputError(f"{source}: not a readable safetensors file ({first_line(exc)})") from exc
    except OSError as exc:
        raise HclError(f"cannot read {source}: {exc.strerror or exc}") from exc
    if (hashed.st_dev, hashed.st_ino, hashed.st_mtime_ns) != (loaded.st_dev, loaded.st_ino, loaded.st_mtime_ns):
        raise HclError(f"{source} was replaced while hcl read it: run again")
    check_sha256(source, digest, sidecar)
    for name, spec in expected.items():
        if name not in tensors:
            raise InputError(f"{source}: missing tensor {name!r}")
        tensor = tensors[name]
        if tensor.dtype != spec.dtype or tensor.ndim != spec.ndim:
            raise InputError(
                f"{source}: tensor {name!r} is {str(tensor.dtype).removeprefix('torch.')} with {tensor.ndim} dims, "
                f"expected {str(spec.dtype).removeprefix('torch.')} with {spec.ndim}"
            )
    recorded = sidecar.get("tensors", {})
    for name, tensor in tensors.items():
        shape = recorded.get(name, {}).get("shape") if isinstance(recorded, dict) else None
        if not isinstance(shape, list) or not all(map(is_integer, shape)) or shape != list(tensor.shape):
            raise InputError(f"{source}: tensor {name!r} has shape {list(tensor.shape)} but the sidecar records {shape}")
    return tensors, sidecar


def check_sha256(source: Path, digest: str, sidecar: Mapping[str, Any]) -> None:
    """One-line HclError unless ``digest`` (the sha256 of ``source``) is the one its sidecar records."""
    recorded = sidecar.get("sha256")
    if not isinstance(recorded, str):
        raise InputError(
            f"{source}: its sidecar {sidecar_path(source)} records no 'sha256' of the tensor file (an older hcl wrote it): write it again"
        )
    if digest != recorded:
        raise InputError(
            f"{source}: the tensor file does not match the 'sha256' its sidecar {sidecar_path(source)} records "
            "(an interrupted write, or a changed file): write it again"
        )


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape an artifact, recorded in every sidecar."""
    import platform

    import hcl_cli

    versions = {"hcl": hcl_cli.__version__, "python": platform.python_version(), "torch": torch.__version__}
    vision = torchvision_version()
    if vision is not None:
        versions["torchvision"] = vision
    return versions


def torchvision_version() -> str | None:
    """``torchvision.__version__`` (local tag included, e.g. ``0.29.1+cu130``) read from its ``version.py``.

    Importing torchvision to read it would cost a stage that builds no ResNet its import
    (benchmarks/results/stage_imports.json); the package metadata drops the local tag.
    """
    import ast
    import importlib.util

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        with contextlib.suppress(OSError, SyntaxError, UnicodeDecodeError):
            for node in ast.parse(Path(folder, "version.py").read_text(encoding="utf-8")).body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets):
                    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                        return node.value.value
    return None
