"""An exclusive lock on an output folder, so that two runs never write into the same one."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from hcl_cli.errors import HclError

LOCK_FILE = ".hcl.lock"


@contextlib.contextmanager
def locked_folder(folder: str | Path, command: str) -> Iterator[Path]:
    """Hold ``folder`` (created if missing) for the block; a second holder gets a one-line error.

    The lock is ``flock`` on ``FOLDER/.hcl.lock``, which records the holder's process id. The
    kernel releases it when the process ends, however it ends (``kill -9`` included), so a
    crashed run never leaves a folder locked.
    """
    path = Path(folder) / LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the whole block
    except OSError as exc:
        raise HclError(f"cannot write {folder}: {exc.strerror or exc}") from exc
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise HclError(f"{folder} is in use by another run ({holder}); wait for it to end or choose another output folder") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"hcl {command}, pid {os.getpid()}")
        handle.flush()
        yield Path(folder)
