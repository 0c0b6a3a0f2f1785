"""The report and its figures written as one set: staged beside the report, then swapped in by renames.

``hcl report --out DIR/NAME.md`` writes ``DIR/NAME.md`` and ``DIR/figures/``. The whole run holds
DIR's lock (:func:`~hcl_cli.locking.locked_folder`, the lock pretrain takes on its output folder),
so a second report into DIR fails in one line naming DIR and the holder's pid. Every file is first
written and fsynced into a hidden staging folder in DIR (a temporary sibling of ``NAME.md``, see
:func:`~hcl_cli.artifacts.temp_sibling`); only when all are written does the set change, by three
renames that need no space: the old figures folder aside, the new one in, the new markdown over the
old. A failure before them (a full disk, a figure that cannot be drawn) leaves the old set as it
was, names the file that could not be written, and removes the staging folder; a failed rename puts
the old figures back. A reader thus finds the old set or the new one, never the markdown of one run
beside the figures of another (only a kill between two renames, microseconds apart, could leave
that, and the next report replaces it).

The report and the figures folder are outputs under hcl's one ownership rule
(:func:`~hcl_cli.artifacts.check_replaceable`), judged by hcl's record of what it wrote
(:mod:`~hcl_cli.artifacts.record`), kept in the figures folder so that DVC caches it with them: the
markdown is replaced only when the record lists it, with its present sha256, as the report; the
figures folder is replaced whole, so it may hold only the files the record lists with their
present sha256, never a user's file of a figure's name (``loss.png``) nor a symbolic link.
Anything else is refused before any work, and nothing of the user's is lost.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from hcl_cli.artifacts import (
    RECORD_FILE,
    check_replaceable,
    folder_output,
    read_record,
    record_document,
    record_key,
    recorded_output,
    sha256_of,
    stale_siblings,
    temp_sibling,
    unrecorded_entries,
    write_json,
)
from hcl_cli.errors import HclError
from hcl_cli.interrupts import uninterrupted
from hcl_cli.locking import locked_folder

FIGURES_FOLDER = "figures"
"""The figures' folder beside the report; the markdown links its files as ``figures/NAME.png``."""
STAGING_TAG = "staging"
RETIRED = "retired-figures"
WRITTEN_BY = "*Written by `hcl report`, which replaces this file when it runs again: keep notes elsewhere.*"
"""The report's last line, which tells a reader that it will be replaced."""
REPORT_OUTPUT = recorded_output("report", lambda path: path.parent / FIGURES_FOLDER)
"""The markdown, listed in the figures folder's record as ``../NAME.md``."""
FIGURE = "report figure"
FIGURES_OUTPUT = folder_output("report figures", lambda path: unrecorded_entries(path, "--out (its figures)"))


@contextlib.contextmanager
def report_folder(out: Path) -> Iterator[None]:
    """Hold the folder of ``out`` for the block (its lock, the folder created if missing), once the set is replaceable.

    The set is replaceable when ``out`` is absent or the report hcl's record lists, and the figures folder
    beside it is absent or a folder holding only files its record lists (and hcl's temporary files of them);
    else a one-line :class:`~hcl_cli.errors.UsageError`. Folders the block created are removed again if it leaves them empty.
    """
    folder = out.parent
    made = [path for path in (folder, *folder.parents) if not path.exists()]  # deepest first
    try:
        with locked_folder(folder, "report"):
            check_replaceable("--out", out, REPORT_OUTPUT)
            check_replaceable("--out (its figures)", out.parent / FIGURES_FOLDER, FIGURES_OUTPUT)
            yield
    finally:
        for path in made:
            try:
                path.rmdir()
            except OSError:
                break


def publish(out: Path, markdown: str, drawings: Mapping[str, Callable[[Path], None]]) -> None:
    """Write ``markdown`` as ``out`` and each drawing (by file name) into the figures folder beside it, as one set.

    Call it inside :func:`report_folder`. A file that cannot be written is a one-line
    :class:`HclError` naming where it was going; the old set is then untouched.
    """
    for stale in stale_siblings(out, STAGING_TAG):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
    staging = temp_sibling(out, STAGING_TAG)
    try:
        try:
            staging.mkdir()
        except OSError as exc:
            raise HclError(f"cannot write {out}: {exc.strerror or exc}") from exc
        figures = out.parent / FIGURES_FOLDER
        for name, draw in drawings.items():
            _stage(figures / name, staging / FIGURES_FOLDER / name, draw)
        _stage(out, staging / out.name, lambda path: path.write_text(f"{markdown.rstrip()}\n\n{WRITTEN_BY}\n", encoding="utf-8"))
        _stage(figures / RECORD_FILE, staging / FIGURES_FOLDER / RECORD_FILE, lambda path: write_json(path, _record(staging, out)))
        with uninterrupted():  # a Ctrl-C waits for the swap: never new figures beside the old markdown
            _swap(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _record(staging: Path, out: Path) -> dict[str, object]:
    """The record of the staged set: each staged figure and the staged markdown (with the markdown's present sha256 too,
    so that a kill between the renames of :func:`_swap` leaves either one known), and the other reports the old
    record lists in this folder."""
    figures, staged = out.parent / FIGURES_FOLDER, staging / FIGURES_FOLDER
    old = read_record(figures, "--out") if figures.is_dir() and not figures.is_symlink() else {}
    key = record_key(out, figures)
    files: dict[str, dict[str, object]] = {name: entry for name, entry in old.items() if name.startswith("../") and name != key}
    files |= {path.name: {"output": FIGURE, "sha256": [sha256_of(path)]} for path in sorted(staged.iterdir())}
    present = [sha256_of(out)] if out.is_file() and key in old else []
    files[key] = {"output": REPORT_OUTPUT.what, "sha256": [sha256_of(staging / out.name), *present]}
    return record_document(files)


def _stage(destination: Path, staged: Path, write: Callable[[Path], None]) -> None:
    """``write(staged)`` and fsync it; an OSError (a full disk) names ``destination``, the file the user asked for."""
    try:
        staged.parent.mkdir(exist_ok=True)
        write(staged)
        with open(staged, "rb") as handle:
            os.fsync(handle.fileno())
    except OSError as exc:
        raise HclError(f"cannot write {destination}: {exc.strerror or exc}") from exc


def _swap(staging: Path, out: Path) -> None:
    """Replace the figures folder and ``out`` by the staged ones; on a failed rename, put the old figures back."""
    current, staged, retired = out.parent / FIGURES_FOLDER, staging / FIGURES_FOLDER, staging / RETIRED
    moved_aside = moved_in = False
    try:
        if current.exists():
            os.rename(current, retired)
            moved_aside = True
        if staged.exists():
            os.rename(staged, current)
            moved_in = True
        os.replace(staging / out.name, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            if moved_in:
                os.rename(current, staged)
            if moved_aside:
                os.rename(retired, current)
        raise HclError(f"cannot replace {out} and {current}: {exc.strerror or exc}") from exc
    with contextlib.suppress(OSError):
        descriptor = os.open(out.parent, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
