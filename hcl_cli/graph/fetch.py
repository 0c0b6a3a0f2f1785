"""Fetch a TU dataset from the collection's site into ``data/raw/tu/NAME.zip``, as torchvision fetches CIFAR.

The TU collection (Morris et al., "TUDataset: A collection of benchmark datasets for learning with
graphs", 2020) serves each dataset as ``https://www.chrsmrrs.com/graphkerneldatasets/NAME.zip``.
MUTAG and PTC_MR ship with the repository (``data/raw/tu/``); ``hcl prepare --dataset tu --name
NAME`` with a folder as ``--path`` (``data/raw`` by default) that holds no ``NAME`` fetches it once
into ``PATH/tu/NAME.zip`` and reads it from there on. The download (``hcl_cli/download.py``) goes to ``NAME.zip.part``
first and is resumed from where it stopped; it becomes ``NAME.zip`` only once its size is the one
the server announced and every member's CRC checks out. Offline, the one-line error names the address and where to put
the file. ``HCL_TU_MIRROR`` names another ``http(s)://`` base address serving the same ``NAME.zip``
files (a mirror, or a local server in the tests).
"""

from __future__ import annotations

import re
import zipfile
import zlib
from pathlib import Path

from hcl_cli.download import download, mirror_address
from hcl_cli.errors import UsageError, shown
from hcl_cli.graph.tu import check_name, folder_archive, folder_files
from hcl_cli.logs import LOG

TU_SITE = "https://www.chrsmrrs.com/graphkerneldatasets"
MIRROR_VARIABLE = "HCL_TU_MIRROR"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.()-]*")
"""The names of the collection's datasets (``MUTAG``, ``IMDB-BINARY``, ``Fingerprint``, ``COIL-DEL``): nothing a URL or a path would read otherwise."""


def tu_source(path: Path, name: str) -> Path:
    """What to read ``name`` from: ``path`` itself, unless it is a folder that holds no ``name`` (neither its files nor its
    zip), then the zip fetched into ``path/tu/NAME.zip``."""
    check_name(name)
    if not path.is_dir() or folder_files(path, name) is not None or folder_archive(path, name) is not None:
        return path
    return fetch(name, path / "tu" / f"{name}.zip")


def fetch(name: str, target: Path) -> Path:
    """Download ``NAME.zip`` to ``target`` (resuming ``target.part``), check it, and return ``target``."""
    if not NAME_PATTERN.fullmatch(name):
        raise UsageError(f"invalid TU dataset name {name!r}: expected a name of the collection such as ENZYMES")
    url = f"{mirror_address(MIRROR_VARIABLE) or TU_SITE}/{name}.zip"
    LOG.info(f"hcl prepare: {name} is not in {shown(target.parent.parent)}: downloading {url} to {shown(target)}")
    put_it = (
        f"offline, put {name}.zip (from that address) at {shown(target)}, "
        f"or give --path a folder or archive holding {name}/{name}_A.txt, ..."
    )
    return download(
        url,
        target,
        check=lambda partial: _zip_problem(partial, name),
        put_it=put_it,
        not_found=f"the TU collection has no dataset {name!r}; see {TU_SITE}",
        prog="hcl prepare",
    )


def _zip_problem(partial: Path, name: str) -> str | None:
    """What makes a download unusable: no zip, a member failing its CRC, or no ``NAME/NAME_A.txt`` (None: nothing)."""
    try:
        with zipfile.ZipFile(partial) as archive:
            broken = archive.testzip()
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
        return f"not a readable zip archive ({exc})"
    if broken is not None:
        return f"its member {broken} fails its CRC check"
    if f"{name}/{name}_A.txt" not in names:
        return f"it holds no {name}/{name}_A.txt"
    return None
