"""Artifact I/O: atomic writes, safetensors with a JSON sidecar, validation on every read.

Every artifact is a ``NAME.safetensors`` file of tensors plus a ``NAME.json`` sidecar holding
``schema_version``, ``kind``, the shape and dtype of every tensor, the ``sha256`` of the tensor
file, and free metadata (the config, the dataset card, library versions). Writers go through
:func:`atomic_path`: a temporary file in the same folder, fsync, then rename, so no reader ever
sees half a file. Readers go through :func:`load_artifact`, which turns any truncated, foreign or
mismatched file (a tensor file whose hash is not the one its sidecar records included) into a
one-line :class:`~hcl_cli.errors.HclError` naming the file. No pickle is involved.

Temporary siblings are named ``.hcl.<start of the name>.<hash of the name>.<pid>-<random>.<tag>``:
short whatever the target's name, recognisably hcl's, and tied to their target and their writer,
so the next write of a target removes those a killed process left behind (:func:`stale_siblings`).
A folder that hcl writes whole lists its files in :data:`OWNED_FILES`; hcl replaces or removes only
such a folder, and deletes only the files it lists (:func:`remove_owned_folder`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import secrets
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from hcl_cli.errors import HclError, UsageError

SCHEMA_VERSION = 1
OWNED_FILES = ".hcl-owned.json"
"""The manifest of a folder hcl writes whole: ``{"written_by": "hcl", "files": [...]}``."""
NAME_HINT_BYTES = 24
NAME_DIGEST_CHARS = 8
TEMP_TAG = "tmp"


def _name_stem(name: str) -> str:
    """``.hcl.<first bytes of name>.<hash of name>.``: the bounded prefix of every temporary sibling of ``name``."""
    encoded = os.fsencode(name)
    hint = os.fsdecode(encoded[:NAME_HINT_BYTES])
    return f".hcl.{hint}.{hashlib.sha256(encoded).hexdigest()[:NAME_DIGEST_CHARS]}."


def temp_sibling(target: str | os.PathLike[str], tag: str = TEMP_TAG, pid: int | None = None) -> Path:
    """A fresh temporary name beside ``target`` (at most about 60 bytes), owned by process ``pid`` (this one by default)."""
    path = Path(target)
    owner = os.getpid() if pid is None else pid
    return path.with_name(f"{_name_stem(path.name)}{owner}-{secrets.token_hex(4)}.{tag}")


_LEGACY_PATTERNS = {TEMP_TAG: r"\.[a-z0-9_]{8}\.tmp", "staging": r"\.tmp-[0-9a-f]{12}", "old": r"\.old-[0-9a-f]{12}"}
"""Temporary siblings as earlier versions of hcl named them: ``.NAME.<random>.tmp``, ``.NAME.tmp-<hex>``, ``.NAME.old-<hex>``."""


def stale_siblings(target: str | os.PathLike[str], tag: str = TEMP_TAG, *, include_live: bool = False) -> list[Path]:
    """hcl's temporary siblings of ``target`` with ``tag`` whose writer is no longer running.

    A sibling of a running process (this one included) is left alone unless ``include_live``.
    """
    path = Path(target)
    ours = re.compile(re.escape(_name_stem(path.name)) + r"(\d+)-[0-9a-f]{8}\." + re.escape(tag))
    legacy = re.compile(re.escape(f".{path.name}") + _LEGACY_PATTERNS.get(tag, r"(?!)"))
    try:
        names = os.listdir(path.parent)
    except OSError:
        return []
    stale = []
    for name in names:
        match = ours.fullmatch(name)
        if (match and (include_live or not _is_running(int(match.group(1))))) or legacy.fullmatch(name):
            stale.append(path.parent / name)
    return sorted(stale)


def _is_running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # another user's process, or no such id at all
        return True
    return True


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success fsync it and rename it over ``path``.

    The temporary file is created with the mode a new file gets (0666 less the umask), and keeps
    it even when the writer replaced the file. Stale temporary files of ``path`` that a killed
    process left are removed first. On any exception the temporary file is removed and ``path``
    is left as it was.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for stale in stale_siblings(target):
            with contextlib.suppress(IsADirectoryError, PermissionError):
                stale.unlink(missing_ok=True)
        tmp = temp_sibling(target)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        mode = tmp.stat().st_mode & 0o777
    except OSError as exc:
        raise HclError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        yield tmp
        if tmp.stat().st_mode & 0o777 != mode:
            os.chmod(tmp, mode)
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


def is_finite_number(value: Any) -> bool:
    """Whether a JSON value is a finite number (an int or a float, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
    byte, refuses the pair rather than reading stale or damaged data as valid.
    """
    contiguous = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    with atomic_path(path) as tmp:
        save_file(contiguous, str(tmp))
        with open(tmp, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
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
        raise HclError(f"{kind} not found: {source}")
    sidecar = read_json(sidecar_path(source), what=f"{kind} sidecar")
    version = sidecar.get("schema_version")
    if version != SCHEMA_VERSION:
        raise HclError(f"{source}: schema version {version!r} is not supported (this hcl reads {SCHEMA_VERSION})")
    if sidecar.get("kind") != kind:
        raise HclError(f"{source}: expected a {kind} artifact, found {sidecar.get('kind')!r}")
    try:
        with open(source, "rb") as handle:
            hashed = os.fstat(handle.fileno())
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        tensors = load_file(str(source), device=str(device))
        loaded = os.stat(source)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise HclError(f"{source}: not a readable safetensors file ({first_line(exc)})") from exc
    except OSError as exc:
        raise HclError(f"cannot read {source}: {exc.strerror or exc}") from exc
    if (hashed.st_dev, hashed.st_ino, hashed.st_mtime_ns) != (loaded.st_dev, loaded.st_ino, loaded.st_mtime_ns):
        raise HclError(f"{source} was replaced while hcl read it: run again")
    check_sha256(source, digest, sidecar)
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


def check_sha256(source: Path, digest: str, sidecar: Mapping[str, Any]) -> None:
    """One-line HclError unless ``digest`` (the sha256 of ``source``) is the one its sidecar records."""
    recorded = sidecar.get("sha256")
    if not isinstance(recorded, str):
        raise HclError(
            f"{source}: its sidecar {sidecar_path(source)} records no 'sha256' of the tensor file (an older hcl wrote it): write it again"
        )
    if digest != recorded:
        raise HclError(
            f"{source}: the tensor file does not match the 'sha256' its sidecar {sidecar_path(source)} records "
            "(an interrupted write, or a changed file): write it again"
        )


def write_owned_folder_manifest(folder: Path, files: Collection[str]) -> None:
    """Record in ``folder`` that hcl wrote it and owns exactly ``files`` (plain names in it)."""
    write_json(folder / OWNED_FILES, {"written_by": "hcl", "files": sorted(files)})


def owned_files(folder: Path) -> set[str] | None:
    """The files ``folder``'s manifest says hcl wrote; None when it has no valid manifest."""
    try:
        manifest = json.loads((folder / OWNED_FILES).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    files = manifest.get("files") if isinstance(manifest, dict) and manifest.get("written_by") == "hcl" else None
    if not isinstance(files, list) or not all(
        isinstance(name, str) and name and Path(name).name == name and name not in (".", "..") for name in files
    ):
        return None
    return set(files)


def foreign_entries(folder: Path) -> list[str] | None:
    """Entries of ``folder`` that its manifest does not list; None when it has no valid manifest."""
    owned = owned_files(folder)
    if owned is None:
        return None
    return sorted(set(os.listdir(folder)) - owned - {OWNED_FILES})


def remove_owned_folder(folder: Path, fallback: Collection[str] = ()) -> bool:
    """Delete the files ``folder``'s manifest lists (else the ``fallback`` names), their and the manifest's
    temporary files, the manifest, then the folder if that left it empty. Nothing else is deleted.

    Returns whether the folder is gone.
    """
    names = owned_files(folder)
    names = set(fallback) if names is None else names
    for name in [*sorted(names), OWNED_FILES]:
        for path in [folder / name, *stale_siblings(folder / name, include_live=True)]:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                path.unlink()
    try:
        folder.rmdir()
    except OSError:
        return False
    return True


def check_outputs_apart(inputs: Mapping[str, str | Path], outputs: Mapping[str, str | Path]) -> None:
    """Refuse, before anything is read, an output that would overwrite or land inside an input.

    ``inputs`` and ``outputs`` map option names (``--model``) to paths; an input given as ``""``
    (not given) is left out. Paths are compared after resolving symbolic links; each stands also
    for its ``.json`` sidecar (unless it is a ``.json`` file or an existing folder), and a folder
    contains everything under it. An output inside a folder that hcl writes whole (one holding
    :data:`OWNED_FILES`, such as a prepared dataset) is refused too, since the next write of that
    folder would not keep it. Raises a one-line :class:`UsageError`: ``--out X is also the input
    --model Y (...)``.
    """
    groups = {option: (path, _artifact_files(path)) for option, path in inputs.items() if path != ""}
    for out_option, out_path in outputs.items():
        out_files = _artifact_files(out_path)
        for in_option, (in_path, in_files) in groups.items():
            for written in out_files:
                for read in in_files:
                    overlap = _overlap(written, read)
                    if overlap is not None:
                        detail = (
                            ""
                            if overlap == "" and (written, read) == (out_files[0], in_files[0])
                            else f" ({overlap or f'both use {written}'})"
                        )
                        raise UsageError(
                            f"{out_option} {out_path} is also the input {in_option} {in_path}{detail}: choose another {out_option}"
                        )
        for folder in out_files[0].parents:
            if (folder / OWNED_FILES).is_file():
                raise UsageError(
                    f"{out_option} {out_path} lies inside {folder}, a folder hcl writes whole (a prepared dataset): choose another {out_option}"
                )


def _artifact_files(path: str | os.PathLike[str]) -> list[Path]:
    """The resolved path and, unless it is JSON or an existing folder, its resolved sidecar."""
    given = Path(path)
    files = [Path(os.path.realpath(given))]
    if given.suffix != ".json" and given.name not in ("", "..") and not files[0].is_dir():
        files.append(Path(os.path.realpath(sidecar_path(given))))
    return files


def _overlap(written: Path, read: Path) -> str | None:
    """How an output path meets an input path: None when apart, "" when equal, else in words."""
    if written == read:
        return ""
    if written in read.parents:
        return f"{read} lies inside {written}"
    if read in written.parents:
        return f"{written} lies inside the folder {read}"
    with contextlib.suppress(OSError):
        if written.exists() and read.exists() and os.path.samefile(written, read):
            return f"{written} and {read} are one file"
    return None


def library_versions() -> dict[str, str]:
    """Versions of the libraries that shape an artifact, recorded in every sidecar."""
    import platform

    import hcl_cli

    versions = {"hcl": hcl_cli.__version__, "python": platform.python_version(), "torch": torch.__version__}
    with contextlib.suppress(ImportError):
        import torchvision

        versions["torchvision"] = torchvision.__version__
    return versions
