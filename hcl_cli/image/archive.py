"""An image folder read from a tar archive (``cifar10-jpeg.tar.gz``), safely and without extracting it.

The archive holds ``train/`` and ``test/``, each with one folder per class, at its top or inside one
top folder (a tar of the folder itself). As ``--dataset tu`` reads its archive
(:func:`hcl_cli.graph.tu.read_tu_files`), the members are streamed one by one and never written to
disk, and a member under ``train/`` or ``test/`` that is a link or a special file is refused; so is
a member named with an absolute path or a ``..`` part anywhere in the archive, an image file over
:data:`MAX_IMAGE_BYTES`, and images that together exceed the memory free now (``HCL_SKIP_MEMORY_CHECK=1``
skips that check). Dot-files and dot-folders are skipped, as in a folder.
"""

from __future__ import annotations

import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import torch

from hcl_cli.errors import InputError
from hcl_cli.runtime import GIB, SKIP_VARIABLE, available_bytes, memory_check_skipped

IMAGE_SPLITS = ("train", "test")
MAX_IMAGE_BYTES = 2**26
"""The largest image file read from an archive (64 MiB); a larger member is refused before it is read."""


@dataclass
class ArchiveTree:
    """The image files of an archive: ``files[split][class]`` lists (path within the class folder, bytes) in archive order;
    a class folder without files is there with an empty list. ``root`` is where train/ and test/ are (``archive:`` or
    ``archive:TOP/``)."""

    root: str
    files: dict[str, dict[str, list[tuple[PurePosixPath, bytes]]]] = field(default_factory=lambda: {split: {} for split in IMAGE_SPLITS})

    def where(self, split: str) -> str:
        """How messages name a split folder: ``cifar10-jpeg.tar.gz:train/``."""
        return f"{self.root}{split}/"

    def class_names(self, split: str) -> list[str]:
        """The sorted class folders of ``split``; a one-line :class:`HclError` when it has none."""
        if not self.files[split]:
            raise InputError(
                f"{self.where(split)} not found or without class folders: imagefolder needs train/ and test/, each holding one folder per class"
            )
        return sorted(self.files[split])


def read_image_archive(archive: Path) -> ArchiveTree:
    """The image files of ``archive`` (module docstring); a one-line :class:`HclError` for an unsafe or unreadable one."""
    available = None if memory_check_skipped() else available_bytes(torch.device("cpu"))
    files: dict[str, dict[str, list[tuple[PurePosixPath, bytes]]]] = {split: {} for split in IMAGE_SPLITS}
    tops: set[tuple[str, ...]] = set()
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    total = 0
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            for member in tar:
                label = f"{archive}:{member.name}"
                name = PurePosixPath(member.name)
                if name.is_absolute() or ".." in name.parts:
                    raise InputError(f"{label}: a member named outside the archive's folder (absolute, or with ..): refused")
                parts = tuple(part for part in name.parts if part != ".")
                at = next((index for index, part in enumerate(parts[:2]) if part in IMAGE_SPLITS), None)
                if at is None or any(part.startswith(".") for part in parts) or len(parts) < at + 2:
                    continue
                if not (member.isfile() or member.isdir()):
                    raise InputError(f"{label}: a link or special member, not a regular file (hcl reads only regular image files)")
                tops.add(parts[:at])
                split, class_name, inside = parts[at], parts[at + 1], parts[at + 2 :]
                if member.isdir() or inside:
                    files[split].setdefault(class_name, [])
                if not member.isfile() or not inside:  # a folder, or a file beside the class folders (ignored, as in a folder)
                    continue
                if member.size > MAX_IMAGE_BYTES:
                    raise InputError(
                        f"{label}: {member.size} bytes, more than the {MAX_IMAGE_BYTES // 2**20} MiB an image file may have: refused"
                    )
                total += member.size
                if available is not None and total > available:
                    raise InputError(
                        f"{archive}: its images need more than the {available / GIB:.1f} GiB of memory free: extract it and give the "
                        f"folder, or free memory; {SKIP_VARIABLE}=1 skips this check"
                    )
                handle = tar.extractfile(member)
                if handle is None:
                    raise InputError(f"{label}: not a readable member")
                if (split, class_name, inside) in seen:
                    raise InputError(f"{label}: the archive holds this file twice")
                seen.add((split, class_name, inside))
                files[split][class_name].append((PurePosixPath(*inside), handle.read()))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise InputError(f"{archive}: not a readable tar archive ({exc})") from exc
    if len(tops) > 1:
        raise InputError(
            f"{archive}: holds train/ or test/ in more than one place ({', '.join(sorted('/'.join(top) or '.' for top in tops))})"
        )
    if not tops:
        raise InputError(
            f"{archive}: no train/ or test/ folder at its top or in a top folder: imagefolder needs both, each holding one folder per class"
        )
    (top,) = tops
    return ArchiveTree(f"{archive}:{''.join(part + '/' for part in top)}", files)
