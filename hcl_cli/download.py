"""A file fetched once from its published address into the raw data folder, as torchvision fetches CIFAR: resumable,
checked, and one line offline (``graph/fetch.py``'s TU datasets, ``text/senteval_fetch.py``'s SentEval tasks).

The download goes to ``TARGET.part`` first and is resumed from where it stopped (an HTTP ``Range`` request; a server
that ignores it sends the whole file again); it becomes ``TARGET`` only once its size is the one the server announced
and the caller's check passes (a zip's CRCs, a pinned sha256). A download that fails its check is removed, so that the
next run downloads afresh. An environment variable may name another ``http(s)://`` base address serving the same
files (a mirror, or a server on 127.0.0.1 in the tests).
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.logs import LOG
from hcl_cli.progress import progress

BLOCK = 1 << 16
TIMEOUT_SECONDS = 30.0


def mirror_address(variable: str) -> str | None:
    """The ``http(s)://`` base address the environment variable ``variable`` names, without a final ``/``; None when unset."""
    base = os.environ.get(variable)
    if not base:
        return None
    if not base.startswith(("http://", "https://")):
        raise UsageError(f"{variable}={shown(base)}: expected an http:// or https:// address")
    return base.rstrip("/")


def sha256_of(file: Path) -> str:
    """The hex sha256 of ``file``'s bytes, read a block at a time."""
    digest = hashlib.sha256()
    with open(file, "rb") as data:
        for block in iter(lambda: data.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, target: Path, *, check: Callable[[Path], str | None], put_it: str, not_found: str, prog: str) -> Path:
    """Download ``url`` to ``target`` (resuming ``target.part``), check it and return ``target``.

    ``check`` reads the whole partial file and returns what is wrong with it (None: nothing); ``put_it`` tells the user
    offline what to put where; ``not_found`` follows a 404's ``not found (HTTP 404):``; ``prog`` begins the log lines.
    Offline or refused: a :class:`UsageError`; cut short, an HTTP error or a failed check: an :class:`HclError`.
    """
    partial = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HclError(f"cannot write {shown(target.parent)}: {exc.strerror or exc}") from exc
    total = _fetch(url, partial, target.name, put_it, not_found, prog)
    size = partial.stat().st_size
    if total is not None and size != total:
        raise HclError(f"{url}: the download ended at {size} of {total} bytes; rerun to resume it ({shown(partial)} is kept)")
    if (problem := check(partial)) is not None:
        partial.unlink(missing_ok=True)
        raise HclError(f"{url}: the download is unusable: {problem}; removed it, rerun to download it again")
    os.replace(partial, target)
    LOG.info(f"{prog}: fetched {shown(target)} ({size} bytes, sha256 {sha256_of(target)})")
    return target


def _fetch(url: str, partial: Path, name: str, put_it: str, not_found: str, prog: str) -> int | None:
    """Write ``url`` to ``partial``, appending after the bytes already there where the server honours ``Range``; the
    file's whole size as the server states it (None where it does not)."""
    have = partial.stat().st_size if partial.is_file() else 0
    headers = {"User-Agent": "hcl", **({"Range": f"bytes={have}-"} if have else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_SECONDS) as response:
            resumed = response.status == 206 and response.headers.get("Content-Range", "").startswith(f"bytes {have}-")
            length = response.headers.get("Content-Length")
            total = (have if resumed else 0) + int(length) if length and length.isdigit() else None
            if have and resumed:
                LOG.info(f"{prog}: resuming {shown(partial)} at {have} bytes")
            blocks = iter(lambda: response.read(BLOCK), b"")
            count = -(-(total - (have if resumed else 0)) // BLOCK) if total is not None else 0
            with open(partial, "ab" if resumed else "wb") as out:
                for block in progress(blocks, max(count, 1), f"downloading {name}", "block of 64 KiB", prog):
                    out.write(block)
            return total
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the partial file is already whole: the checks decide
            return None
        if exc.code == 404:
            raise UsageError(f"{url}: not found (HTTP 404): {not_found}") from exc
        raise HclError(f"{url}: HTTP {exc.code} {exc.reason}; {put_it}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UsageError(f"cannot download {url} ({reason}): {put_it}") from exc
