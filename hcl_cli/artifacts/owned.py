"""Folders hcl writes whole (a prepared dataset): a manifest lists their files; hcl deletes only those.

A folder that hcl writes whole lists its files in :data:`OWNED_FILES`; hcl replaces or removes only
such a folder, and deletes only the files it lists (:func:`remove_owned_folder`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Collection
from pathlib import Path

from hcl_cli.artifacts.files import stale_siblings, write_json

OWNED_FILES = ".hcl-owned.json"
"""The manifest of a folder hcl writes whole: ``{"written_by": "hcl", "files": [...]}``."""


def write_owned_folder_manifest(folder: Path, files: Collection[str]) -> None:
    """Record in ``folder`` that hcl wrote it and owns exactly ``files`` (plain names in it)."""
    write_json(folder / OWNED_FILES, {"written_by": "hcl", "files": sorted(files)})


def owned_files(folder: Path) -> set[str] | None:
    """The files ``folder``'s manifest says hcl wrote; None when it has no valid manifest."""
    if not (folder / OWNED_FILES).is_file():  # missing, or a FIFO that would block the read
        return None
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
