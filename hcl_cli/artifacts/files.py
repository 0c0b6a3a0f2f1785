"""Atomic writes: a temporary sibling, fsync, then rename, so no reader ever sees half a file.

Temporary siblings are named ``.hcl.<start of the name>.<hash of the name>.<pid>-<random>.<tag>``:
short whatever the target's name, recognisably hcl's, and tied to their target and their writer,
so the next write of a target removes those a killed process left behind (:func:`stale_siblings`).
JSON is written through :func:`write_json` and read back through :func:`read_json`, which turns a
missing or corrupt file into a one-line :class:`~hcl_cli.errors.HclError`.

A write, and a set of files written together (a tensor file and its sidecar, a checkpoint and its
pointer, a report and its figures), runs :func:`~hcl_cli.interrupts.uninterrupted`: a Ctrl-C or SIGTERM that comes
during it waits for its end, so a signal never leaves half of a set (or a temporary file) behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hcl_cli.errors import HclError, InputError
from hcl_cli.interrupts import uninterrupted

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
    with uninterrupted():
        yield from _atomic_path(target)


def _atomic_path(target: Path) -> Iterator[Path]:
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
        _discard(tmp)
        raise HclError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: Path) -> None:
    """Remove the temporary file of a write that failed; one that cannot be removed (the file system went read-only)
    stays for the next write of its target to remove, and the write's own error is the one reported."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


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
        if source.exists():  # a folder, a FIFO (whose reading would wait forever), a device
            raise InputError(f"{what} {source} is not a regular file")
        raise InputError(f"{what} not found: {source}")
    try:
        obj = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{what} {source} is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise InputError(f"{what} {source} must hold a JSON object")
    return obj
