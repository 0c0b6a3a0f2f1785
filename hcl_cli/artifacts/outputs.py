"""The one rule for an output path that already exists: hcl writes over it only when it is hcl's own earlier result.

Every output of every stage (a tensor artifact and its sidecar, a metrics file, a checkpoint and its
pointer, a training log's files, a report and its figures, a comparison table, a prepared dataset
folder) is checked by :func:`check_replaceable` before any work, against the :class:`Output` it is,
which says how hcl recognises a file it wrote as that output, always by a record hcl itself wrote, never
by a file's name or by whether its content parses: a tensor artifact by the kind its safetensors header
and its sidecar record, every other file by its folder's record of the files hcl wrote there, with
their sha256 (:mod:`~hcl_cli.artifacts.record`), a prepared folder by its manifest. Whatever else is there is kept, and the run stops in one
:class:`~hcl_cli.errors.UsageError` naming the path and what it is: a user's file (``echo notes >
e.safetensors``), another stage's artifact, a folder where a file goes (or a file where a folder
goes), a FIFO or device, and a symbolic link, which hcl neither replaces by a file nor writes
through (its target may be anything, the DVC cache included).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hcl_cli.artifacts.record import foreign_to_record, read_record, write_recorded
from hcl_cli.artifacts.tensors import KIND_METADATA, sidecar_path
from hcl_cli.errors import UsageError, shown
from hcl_cli.logs import LOG

HEADER_LIMIT = 100 << 20
"""The largest safetensors header read to find its kind (the format's own limit is 100 MB)."""


@dataclass(frozen=True)
class Output:
    """One kind of output: ``what`` it is (in messages, after "hcl's": ``embeddings artifact``), and ``foreign``, which says of an
    existing path of the right type (a regular file; a folder when ``folder``) what it is when it is not hcl's earlier
    result of this output (``a file hcl did not write``), and None when it is. ``paired``: the path's sidecar
    (``x.safetensors`` -> ``x.json``) belongs to the output too."""

    what: str
    foreign: Callable[[Path], str | None]
    folder: bool = False
    paired: bool = False
    record_in: Callable[[Path], Path] | None = None
    """The folder whose record (:mod:`~hcl_cli.artifacts.record`) says whether a path is hcl's, for an output known by it."""


def check_replaceable(option: str, path: str | os.PathLike[str], output: Output) -> None:
    """Refuse, before any work, to write ``output`` over ``path`` (given as ``option``) unless ``path`` is missing or
    hcl's own earlier result of that output: the one ownership rule of the module docstring, a one-line UsageError."""
    target = Path(path)
    if output.record_in is not None:
        read_record(output.record_in(target), option)  # a record hcl did not write is refused, never replaced
    for file in (target, sidecar_path(target)) if output.paired else (target,):
        try:
            mode = os.lstat(file).st_mode
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            raise UsageError(f"{option} {shown(file)} lies under a file, not a folder: choose another {option}") from None
        except OSError as exc:
            raise UsageError(f"{option} {shown(file)} cannot be read ({exc.strerror or exc}): choose another {option}") from None
        if stat.S_ISLNK(mode):
            raise UsageError(
                f"{option} {shown(file)} is a symbolic link, which hcl neither replaces nor writes through: give its target, or another {option}"
            )
        if (output.folder and not stat.S_ISDIR(mode)) or (not output.folder and not stat.S_ISREG(mode)):
            found = "a folder" if stat.S_ISDIR(mode) else "a file" if stat.S_ISREG(mode) else "a FIFO, socket or device"
            raise UsageError(f"{option} {shown(file)} exists and is {found}, not hcl's {output.what}: choose another {option}")
    if not (os.path.lexists(target) or (output.paired and os.path.lexists(sidecar_path(target)))):
        return
    found = output.foreign(target)
    if found is not None:
        raise UsageError(
            f"{option} {shown(path)} exists and is {found}; hcl writes only over its own {output.what}: move it away, or choose another {option}"
        )


def tensor_output(what: str, kinds: Collection[str]) -> Output:
    """A tensor artifact of one of ``kinds`` with its sidecar (:func:`~hcl_cli.artifacts.save_artifact`).

    The pair is hcl's when its sidecar (if present) records one of ``kinds`` and its tensor file (if present) is a
    safetensors file whose header records one of them, or, written by an hcl that did not record it there, whose
    sha256 is the one the sidecar records. A tensor file without a sidecar (a first write killed between the two
    renames) is hcl's by its header alone.
    """

    def foreign(path: Path) -> str | None:
        sidecar = _json_object(sidecar_path(path)) if os.path.lexists(sidecar_path(path)) else None
        if os.path.lexists(sidecar_path(path)) and (sidecar is None or sidecar.get("kind") not in kinds):
            return f"{_artifact(sidecar)} (its sidecar {shown(sidecar_path(path))})"
        if not os.path.lexists(path):
            return None
        header = header_kind(path)
        if header in kinds:
            return None
        if header:
            return f"an hcl {header!r} artifact"
        if header == "" and sidecar is not None and sidecar.get("sha256") == _sha256(path):
            return None
        if sidecar is not None and isinstance(sidecar.get("sha256"), str):  # hcl's record of it, which the file no longer matches
            return f"not the {what} hcl wrote there (damaged, or changed since: its sha256 is not the one its sidecar records)"
        return "a file hcl did not write" if header is None else "a safetensors file hcl did not write"

    return Output(what, foreign, paired=True)


def recorded_output(what: str, record_in: Callable[[Path], Path] = lambda path: path.parent) -> Output:
    """A file hcl knows as its own ``what`` only by the record of the folder ``record_in(path)`` (the file's own by default):
    listed there as ``what`` with its present sha256 (:func:`~hcl_cli.artifacts.record.foreign_to_record`). Write it with
    :func:`~hcl_cli.artifacts.record.write_recorded`."""

    def foreign(path: Path) -> str | None:
        found = foreign_to_record(path, what, record_in(path), "--out")
        tensors = path.with_suffix(".safetensors")
        return f"the sidecar of {shown(tensors)}" if found and path.suffix == ".json" and os.path.lexists(tensors) else found

    return Output(what, foreign, record_in=record_in)


def write_output(path: str | os.PathLike[str], content: str | bytes, output: Output, option: str = "--out") -> None:
    """Write ``content`` as ``path``, the recorded ``output`` (:func:`recorded_output`), and list it in its record."""
    if output.record_in is None:
        raise TypeError(f"{output.what} is not known by a record")
    write_recorded(path, content, output.what, output.record_in(Path(path)), option, output.foreign)
    LOG.debug(f"hcl: debug: wrote {shown(path)} ({output.what}, {len(content)} {'characters' if isinstance(content, str) else 'bytes'})")


def folder_output(what: str, foreign_entries: Callable[[Path], list[str]]) -> Output:
    """A folder hcl replaces or fills whole: hcl's own when ``foreign_entries`` (the entries it holds that hcl did not
    write as this output) is empty."""

    def foreign(path: Path) -> str | None:
        entries = foreign_entries(path)
        if not entries:
            return None
        listed = ", ".join(shown(name) for name in entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        return f"a folder holding files hcl did not write ({listed})"

    return Output(what, foreign, folder=True)


def _artifact(values: dict[str, Any] | None) -> str:
    """What a sidecar says it is: ``an hcl 'encoder' artifact``, or ``a file hcl did not write``."""
    return (
        f"an hcl {values['kind']!r} artifact" if values is not None and isinstance(values.get("kind"), str) else "a file hcl did not write"
    )


def header_kind(path: Path) -> str | None:
    """The kind :func:`~hcl_cli.artifacts.save_artifact` recorded in a safetensors file's header: "" when its header records
    none, None when the file is not safetensors at all (a user's notes) or cannot be read."""
    try:
        with open(path, "rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            if not 2 <= size <= HEADER_LIMIT:
                return None
            header = json.loads(handle.read(size))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    metadata = header.get("__metadata__")
    kind = metadata.get(KIND_METADATA) if isinstance(metadata, dict) else None
    return kind if isinstance(kind, str) else ""


def _sha256(path: Path) -> str | None:
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
    return None


def _json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in the regular file ``path``; None for anything else (a folder, a FIFO, another format)."""
    try:
        if not path.is_file() or path.is_symlink():
            return None
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
