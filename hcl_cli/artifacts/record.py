"""hcl's record of the files it wrote: the only thing that makes an existing file hcl's to replace.

A file that no header or sidecar of its own can describe (a metrics file, a checkpoint pointer, a training log's
``metrics.json`` and curves, a report and its figures, a comparison table) is hcl's only while the record of its
folder says so: ``RECORD_FOLDER/.hcl-written.json`` lists, by path relative to that folder, each file hcl wrote, which
output it wrote it as (``kNN metrics``, ``linear metrics``) and its sha256. A file the record does not list, lists as
another output (``linear-eval --out metrics/knn.json``), or lists with another sha256 (edited since, or restored
from elsewhere) is the user's, and :func:`recorded_output` refuses it, whatever its name or content. A record that
is not hcl's (a user's file of that name, a symbolic link) is refused as well, never replaced.

:func:`write_recorded` writes such a file and its record together, under an exclusive lock on the record's folder,
checking ownership again under the lock (two stages writing one path at once: the second is refused, not the last
writer winning). The record lists the new sha256 beside the old one before the file is renamed in, and the new one
alone after, so a process killed between the two leaves a record that still knows the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hcl_cli.artifacts.files import atomic_path, stale_siblings, write_json
from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.interrupts import uninterrupted

RECORD_FILE = ".hcl-written.json"
WRITTEN_BY = "hcl"


def sha256_of(path: Path) -> str | None:
    """The sha256 of the regular file ``path``; None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


def read_record(folder: Path, option: str) -> dict[str, dict[str, Any]]:
    """The entries of ``folder``'s record (``{}`` when it has none); a record hcl did not write is a one-line UsageError."""
    path = folder / RECORD_FILE
    if not os.path.lexists(path):
        return {}
    refusal = UsageError(
        f"{option}: {shown(path)} is not hcl's record of the files it wrote there (hcl keeps it): move it away, or choose another {option}"
    )
    if path.is_symlink() or not path.is_file():
        raise refusal
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        raise refusal from None
    files = record.get("files") if isinstance(record, dict) and record.get("written_by") == WRITTEN_BY else None
    if not isinstance(files, dict) or not all(
        isinstance(entry, dict)
        and isinstance(entry.get("output"), str)
        and isinstance(entry.get("sha256"), list)
        and all(isinstance(digest, str) for digest in entry["sha256"])
        for entry in files.values()
    ):
        raise refusal
    return files


def record_key(path: Path, folder: Path) -> str:
    """``path`` as its record in ``folder`` names it: relative to ``folder``, ``/``-separated."""
    return Path(os.path.relpath(path, folder)).as_posix()


def recorded_as(path: Path, folder: Path, option: str) -> tuple[str | None, bool]:
    """Which output ``folder``'s record lists ``path`` as (None: not listed), and whether ``path`` is the file it lists."""
    entry = read_record(folder, option).get(record_key(path, folder))
    if entry is None:
        return None, False
    return entry["output"], sha256_of(path) in entry["sha256"]


def foreign_to_record(path: Path, what: str, folder: Path, option: str) -> str | None:
    """What ``path`` is when ``folder``'s record does not list it as hcl's ``what`` with its present content; None when it does."""
    output, same = recorded_as(path, folder, option)
    if output is None:
        return "a file hcl has no record of writing"
    if not same:
        return f"not the {output} hcl wrote there (changed since, or put there by another program)"
    return None if output == what else f"hcl's {output}, not its {what}"


@contextlib.contextmanager
def locked_record(folder: Path) -> Iterator[None]:
    """Hold ``folder`` (created if missing) exclusively for a read and rewrite of its record: a blocking ``flock``, held
    microseconds, that two writers of one folder take in turn."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise HclError(f"cannot write {folder}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def update_record(folder: Path, option: str, entries: dict[str, dict[str, Any]]) -> None:
    """Set ``entries`` (by key) in ``folder``'s record; call it under :func:`locked_record`."""
    write_json(folder / RECORD_FILE, record_document(read_record(folder, option) | entries))


def record_document(files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A record listing ``files`` (by key: ``{"output": WHAT, "sha256": [...]}``), as :data:`RECORD_FILE` holds it."""
    return {"written_by": WRITTEN_BY, "files": dict(sorted(files.items()))}


def write_recorded(
    path: str | os.PathLike[str], content: str | bytes, what: str, folder: Path, option: str, foreign: Callable[[Path], str | None]
) -> None:
    """Write ``content`` as ``path``, hcl's ``what``, and list it so in ``folder``'s record; a ``path`` that is there and is
    ``foreign`` (not hcl's own ``what``: :func:`foreign_to_record`, checked again under the record's lock) is a one-line
    UsageError and stays as it was."""
    target = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    key = record_key(target, folder)
    with uninterrupted(), locked_record(folder):
        old: list[str] = []
        if os.path.lexists(target):
            found = "a symbolic link" if target.is_symlink() else None if target.is_file() else "not a regular file"
            found = found or foreign(target)
            if found is not None:
                raise UsageError(
                    f"{option} {shown(target)} exists and is {found}; hcl writes only over its own {what}: move it away, or choose another {option}"
                )
            old = [digest for digest in [sha256_of(target)] if digest]
        new = hashlib.sha256(data).hexdigest()
        update_record(folder, option, {key: {"output": what, "sha256": [new, *old]}})
        with atomic_path(target) as tmp:
            tmp.write_bytes(data)
        update_record(folder, option, {key: {"output": what, "sha256": [new]}})


def unrecorded_entries(folder: Path, option: str) -> list[str]:
    """The entries of ``folder`` that its own record does not list with their present content, besides the record and
    hcl's temporary files of the entries it lists: what a folder hcl replaces whole must not hold."""
    files = read_record(folder, option)
    listed = {
        key for key in files if "/" not in key and sha256_of(folder / key) in files[key]["sha256"] and not (folder / key).is_symlink()
    }
    ours = {RECORD_FILE, *listed, *(sibling.name for name in files for sibling in stale_siblings(folder / name, include_live=True))}
    return sorted(set(os.listdir(folder)) - ours)
