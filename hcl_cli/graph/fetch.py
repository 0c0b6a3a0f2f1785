"""Fetch a TU dataset from the collection's site into ``data/raw/tu/NAME.zip``, as torchvision fetches CIFAR.

The TU collection (Morris et al., "TUDataset: A collection of benchmark datasets for learning with
graphs", 2020) serves each dataset as ``https://www.chrsmrrs.com/graphkerneldatasets/NAME.zip``.
MUTAG and PTC_MR ship with the repository (``data/raw/tu/``); ``hcl prepare --dataset tu --name
NAME`` with a folder as ``--path`` (``data/raw`` by default) that holds no ``NAME`` fetches it once
into ``PATH/tu/NAME.zip`` and reads it from there on. The download goes to ``NAME.zip.part`` first
and is resumed from where it stopped (an HTTP ``Range`` request; a server that ignores it sends
the whole file again); it becomes ``NAME.zip`` only once its size is the one the server announced
and every member's CRC checks out. Offline, the one-line error names the address and where to put
the file. ``HCL_TU_MIRROR`` names another ``http(s)://`` base address serving the same ``NAME.zip``
files (a mirror, or a local server in the tests).
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path

from hcl_cli.errors import HclError, UsageError, shown
from hcl_cli.graph.tu import check_name, folder_archive, folder_files
from hcl_cli.logs import LOG
from hcl_cli.progress import progress

TU_SITE = "https://www.chrsmrrs.com/graphkerneldatasets"
MIRROR_VARIABLE = "HCL_TU_MIRROR"
BLOCK = 1 << 16
TIMEOUT_SECONDS = 30.0
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.()-]*")
"""The names of the collection's datasets (``MUTAG``, ``IMDB-BINARY``, ``Fingerprint``, ``COIL-DEL``): nothing a URL or a path would read otherwise."""


def tu_source(path: Path, name: str) -> Path:
    """What to read ``name`` from: ``path`` itself, unless it is a folder that holds no ``name`` (neither its files nor its
    zip), then the zip fetched into ``path/tu/NAME.zip``."""
    check_name(name)
    if not path.is_dir() or folder_files(path, name) is not None or folder_archive(path, name) is not None:
        return path
    return fetch(name, path / "tu" / f"{name}.zip")


def base_address() -> str:
    """The collection's address, or the ``http(s)://`` one ``HCL_TU_MIRROR`` names."""
    base = os.environ.get(MIRROR_VARIABLE) or TU_SITE
    if not base.startswith(("http://", "https://")):
        raise UsageError(f"{MIRROR_VARIABLE}={shown(base)}: expected an http:// or https:// address")
    return base.rstrip("/")


def fetch(name: str, target: Path) -> Path:
    """Download ``NAME.zip`` to ``target`` (resuming ``target.part``), check it, and return ``target``."""
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(f"invalid TU dataset name {name!r}: expected a name of the collection such as ENZYMES")
    url = f"{base_address()}/{name}.zip"
    partial = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HclError(f"cannot write {shown(target.parent)}: {exc.strerror or exc}") from exc
    LOG.info(f"hcl prepare: {name} is not in {shown(target.parent.parent)}: downloading {url} to {shown(target)}")
    total = _download(url, partial, name, target)
    size = partial.stat().st_size
    if total is not None and size != total:
        raise HclError(f"{url}: the download ended at {size} of {total} bytes; rerun to resume it ({shown(partial)} is kept)")
    _check_zip(partial, name, url)
    os.replace(partial, target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    LOG.info(f"hcl prepare: fetched {shown(target)} ({size} bytes, sha256 {digest})")
    return target


def _download(url: str, partial: Path, name: str, target: Path) -> int | None:
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
                LOG.info(f"hcl prepare: resuming {shown(partial)} at {have} bytes")
            blocks = iter(lambda: response.read(BLOCK), b"")
            count = -(-(total - (have if resumed else 0)) // BLOCK) if total is not None else 0
            with open(partial, "ab" if resumed else "wb") as out:
                for block in progress(blocks, max(count, 1), f"downloading {name}.zip", "block of 64 KiB", "hcl prepare"):
                    out.write(block)
            return total
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the partial file is already whole: the checks decide
            return None
        if exc.code == 404:
            raise UsageError(f"{url}: not found (HTTP 404): the TU collection has no dataset {name!r}; see {TU_SITE}") from exc
        raise HclError(f"{url}: HTTP {exc.code} {exc.reason}; {_put_it(name, target)}") from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UsageError(f"cannot download {url} ({reason}): {_put_it(name, target)}") from exc


def _put_it(name: str, target: Path) -> str:
    return (
        f"offline, put {name}.zip (from that address) at {shown(target)}, "
        f"or give --path a folder or archive holding {name}/{name}_A.txt, ..."
    )


def _check_zip(partial: Path, name: str, url: str) -> None:
    """Refuse a download that is no zip, whose members fail their CRC, or that holds no ``NAME/NAME_A.txt``; the partial
    file is removed then, so that the next run downloads afresh."""
    problem = None
    try:
        with zipfile.ZipFile(partial) as archive:
            broken = archive.testzip()
            names = set(archive.namelist())
        if broken is not None:
            problem = f"its member {broken} fails its CRC check"
        elif f"{name}/{name}_A.txt" not in names:
            problem = f"it holds no {name}/{name}_A.txt"
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
        problem = f"not a readable zip archive ({exc})"
    if problem:
        partial.unlink(missing_ok=True)
        raise HclError(f"{url}: the download is unusable: {problem}; removed it, rerun to download it again")
