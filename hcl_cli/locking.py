"""An exclusive lock on an output folder, so that two runs never write into the same one."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from hcl_cli.errors import HclError, shown

LOCK_FILE = ".hcl.lock"

_held: dict[str, int] = {}
"""The folders this process holds (by real path), with how many nested blocks hold each."""


@contextlib.contextmanager
def locked_folder(folder: str | Path, command: str) -> Iterator[Path]:
    """Hold ``folder`` (created if missing) for the block; another process gets a one-line error.

    The lock is ``flock`` on ``FOLDER/.hcl.lock``, which records the holder's process id and is
    removed when the block ends. The kernel releases the lock when the process ends, however it
    ends (``kill -9`` included), so a crashed run never leaves a folder locked; its stale file is
    simply locked again by the next run. A lock taken on a file that its holder removed in the
    meantime is retried on the new file, so two runs never both hold the folder. A process that
    already holds ``folder`` (``pretrain --out X --live-dir X`` holds X for both) holds it again
    without a second lock: one run writing two kinds of output into one folder is not a conflict.
    """
    path = Path(folder) / LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HclError(f"cannot write {folder}: {exc.strerror or exc}") from exc
    key = os.path.realpath(path.parent)
    if key in _held:
        _held[key] += 1
        try:
            yield Path(folder)
        finally:
            _held[key] -= 1
        return
    while True:
        try:
            handle = open(path, "a+b", buffering=0)  # noqa: SIM115 - held open for the whole block; unbuffered: closing it writes nothing
        except OSError as exc:
            raise HclError(f"cannot write {folder}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().decode(errors="replace").strip() or "unknown"
            handle.close()
            raise HclError(
                f"{folder} is in use by another run ({shown(holder)}); wait for it to end or choose another output folder"
            ) from None
        if _same_file(path, handle.fileno()):
            break
        handle.close()  # the previous holder removed the file between our open and our lock
    with handle:
        try:
            handle.truncate(0)
            record = f"hcl {command}, pid {os.getpid()}".encode()
            while record:  # a write cut short by a full disk or a file-size limit is retried, and then fails with the reason
                record = record[handle.write(record) :]
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.unlink()
            raise HclError(f"cannot write {path}: {exc.strerror or exc}") from exc
        _held[key] = 1
        try:
            yield Path(folder)
        finally:
            del _held[key]
            path.unlink(missing_ok=True)


def _same_file(path: Path, descriptor: int) -> bool:
    """Whether ``path`` still names the open file ``descriptor``."""
    try:
        return os.stat(path).st_ino == os.fstat(descriptor).st_ino
    except FileNotFoundError:
        return False
