"""Outputs kept apart from inputs: no stage writes over, or inside, a path it reads."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from hcl_cli.artifacts.owned import OWNED_FILES
from hcl_cli.artifacts.tensors import sidecar_path
from hcl_cli.errors import UsageError


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
