"""Read a TU graph-classification dataset in its raw text format, checked line by line.

The format (Morris et al. 2020, https://chrsmrrs.github.io/datasets/docs/format/): ``NAME_A.txt``
holds one ``row, col`` line per directed adjacency entry (1-based global node ids),
``NAME_graph_indicator.txt`` the 1-based graph id of each node, ``NAME_graph_labels.txt`` the class
of each graph; ``NAME_node_labels.txt`` (integers per node) and ``NAME_node_attributes.txt``
(numbers per node) are optional. Edge labels and attributes are not read: the papers' GIN ignores
them.

The files come from a folder, from a zip as the collection serves each dataset (``NAME/`` members;
MUTAG and PTC_MR ship in ``data/raw/tu/``, others are fetched there by :mod:`hcl_cli.graph.fetch`)
or from a tar archive (``tu/NAME/`` or ``NAME/`` members, the layout of ``tu.tar.gz``), read member
by member and never extracted to disk; a member that is a link or not a regular file is refused. Every problem is a one-line :class:`~hcl_cli.errors.InputError`
naming the file and, where there is one, the line.

The edges are what torch-geometric's ``read_tu_data`` (torch_geometric/io/tu.py, 2.8.1) makes of
them, the graphs the papers' code trains on: self-loops removed, repeated entries merged (IMDB and
REDDIT list every edge four times), sorted by (row, col). No reverse entry is added: the TU files
list both directions of every undirected edge, :attr:`TuGraphs.undirected` says whether they do, and
where they do not, :attr:`TuGraphs.notes` says so once (``hcl prepare`` prints it as a warning).
"""

from __future__ import annotations

import hashlib
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import torch

from hcl_cli.errors import InputError, UsageError

REQUIRED = ("A", "graph_indicator", "graph_labels")
OPTIONAL = ("node_labels", "node_attributes")
TOKEN_SHOWN = 24
UTF8_BOM = b"\xef\xbb\xbf"
"""The byte-order mark some editors put at the start of a UTF-8 file: read as nothing."""


@dataclass(frozen=True)
class TuGraphs:
    """A TU dataset as its files state it, checked.

    ``edge_index`` is int64 (2, E) of 0-based global node ids, coalesced as torch-geometric does;
    ``node_graph`` the 0-based graph of each node (non-decreasing); ``graph_labels`` the class of
    each graph as written in the file; ``node_labels`` int64 (N, k) and ``node_attributes`` float32
    (N, a) where the files exist. ``files`` maps each file read to its sha256.
    """

    name: str
    source: str
    edge_index: torch.Tensor
    node_graph: torch.Tensor
    graph_labels: torch.Tensor
    node_labels: torch.Tensor | None
    node_attributes: torch.Tensor | None
    files: dict[str, str]
    self_loops_removed: int
    duplicates_removed: int
    undirected: bool
    notes: tuple[str, ...] = ()
    """What the files state that is accepted but worth a warning (edges listed in one direction only)."""

    @property
    def num_nodes(self) -> int:
        return len(self.node_graph)

    @property
    def num_graphs(self) -> int:
        return len(self.graph_labels)


def read_tu_files(source: str | Path, name: str) -> TuGraphs:
    """Read and check the TU dataset ``name`` from ``source``: a zip or tar archive, or a folder.

    A folder may hold the files itself or in ``NAME/``, ``NAME/raw/`` (torch-geometric's layout) or
    ``tu/NAME/``, or else the zip ``tu/NAME.zip`` or ``NAME.zip``. A missing source or an invalid name is a :class:`UsageError`; a missing or
    malformed file an :class:`InputError`.
    """
    check_name(name)
    path = Path(source)
    if path.is_dir() and (archive := folder_archive(path, name)) is not None:
        path = archive
    if path.is_dir():
        raw, labels = _read_folder(path, name)
    elif path.is_file():
        raw, labels = _read_archive(path, name)
    else:
        raise UsageError(f"{path}: no such file or folder (expected a TU archive such as tu.tar.gz, or a folder of TU files)")
    return _check(name, str(path), raw, labels)


def check_name(name: str) -> None:
    """A :class:`UsageError` unless ``name`` is a plain file-name prefix (no path)."""
    if not name or name in (".", "..") or any(ch in name for ch in "/\\\0"):
        raise UsageError(f"invalid TU dataset name {name!r}: expected a plain name such as MUTAG")


def folder_archive(root: Path, name: str) -> Path | None:
    """The zip of ``name`` in the folder ``root`` (``tu/NAME.zip`` or ``NAME.zip``, as the TU collection serves it) where
    ``root`` holds no folder of its files; None otherwise."""
    if folder_files(root, name) is not None:
        return None
    return next((zip_ for zip_ in (root / "tu" / f"{name}.zip", root / f"{name}.zip") if zip_.is_file()), None)


def folder_files(root: Path, name: str) -> Path | None:
    """The folder under ``root`` that holds the TU files of ``name`` (``root``, ``NAME/``, ``NAME/raw/`` or ``tu/NAME/``); None where none does."""
    candidates = [root, root / name, root / name / "raw", root / "tu" / name]
    return next((c for c in candidates if (c / f"{name}_A.txt").is_file() or (c / f"{name}_graph_indicator.txt").is_file()), None)


def _read_folder(root: Path, name: str) -> tuple[dict[str, bytes], dict[str, str]]:
    """The TU files of ``name`` under ``root`` (bytes and display label per file kind)."""
    folder = folder_files(root, name)
    if folder is None:
        found = sorted({p.name[: -len("_A.txt")] for c in (root, root / "tu") if c.is_dir() for p in c.rglob("*_A.txt")})
        holds = f"; it holds {', '.join(found)}" if found else ""
        raise InputError(
            f"{root}: no TU dataset {name} (no {name}_A.txt in it, {name}/, {name}/raw/ or tu/{name}/, no tu/{name}.zip){holds}"
        )
    raw: dict[str, bytes] = {}
    labels: dict[str, str] = {}
    for kind in REQUIRED + OPTIONAL:
        file = folder / f"{name}_{kind}.txt"
        labels[kind] = str(file)
        if file.is_symlink() or (file.exists() and not file.is_file()):
            raise InputError(f"{file}: not a regular file (hcl reads only regular TU files)")
        if file.is_file():
            try:
                raw[kind] = file.read_bytes()
            except OSError as exc:
                raise InputError(f"cannot read {file}: {exc.strerror or exc}") from exc
    return raw, labels


def _read_archive(archive: Path, name: str) -> tuple[dict[str, bytes], dict[str, str]]:
    """The TU files of ``name`` in the archive ``archive`` (a zip, as the TU collection serves each dataset, or a tar), read
    member by member (nothing extracted)."""
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as handle:
                members = ((info.filename, _zip_regular(info), lambda info=info: handle.read(info)) for info in handle.infolist())
                return _read_members(archive, name, members)
        with tarfile.open(archive, mode="r|*") as tar:
            return _read_members(archive, name, ((m.name, m.isfile(), lambda m=m: _tar_member(tar, m)) for m in tar))
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error, OSError) as exc:
        raise InputError(f"{archive}: not a readable zip or tar archive ({exc})") from exc


def _zip_regular(info: zipfile.ZipInfo) -> bool:
    """Whether a zip member is a regular file (not a folder, and not a link or special file by its Unix mode, where it has one)."""
    mode = info.external_attr >> 16
    return not info.is_dir() and stat.S_IFMT(mode) in (0, stat.S_IFREG)


def _tar_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    if handle is None:
        raise InputError(f"{member.name}: not a readable member")
    return handle.read()


def _read_members(
    archive: Path, name: str, members: Iterable[tuple[str, bool, Callable[[], bytes]]]
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The TU files of ``name`` among an archive's ``members`` (name, is a regular file, its bytes): ``NAME/`` or ``tu/NAME/``
    members only, each once, links and special members refused."""
    wanted = {f"{name}_{kind}.txt": kind for kind in REQUIRED + OPTIONAL}
    raw: dict[str, bytes] = {}
    labels: dict[str, str] = {}
    prefixes: set[str] = set()
    datasets: set[str] = set()
    for member, regular, read in members:
        parts = PurePosixPath(member.removeprefix("./")).parts
        if parts and parts[-1].endswith("_A.txt"):
            datasets.add(parts[-1][: -len("_A.txt")])
        if not (parts and parts[-1] in wanted and parts[:-1] in ((name,), ("tu", name))):
            continue
        label = f"{archive}:{member}"
        kind = wanted[parts[-1]]
        if not regular:
            raise InputError(f"{label}: a link or special member, not a regular file (hcl reads only regular TU files)")
        if kind in raw:
            raise InputError(f"{label}: the archive holds {parts[-1]} twice")
        prefixes.add("/".join(parts[:-1]))
        raw[kind], labels[kind] = read(), label
    if not raw:
        holds = f"; it holds {', '.join(sorted(datasets))}" if datasets else ""
        raise InputError(f"{archive}: no TU dataset {name} (no {name}/ or tu/{name}/ member){holds}")
    if len(prefixes) > 1:
        raise InputError(f"{archive}: holds {name} twice ({' and '.join(sorted(prefixes))}/)")
    (prefix,) = prefixes
    for kind in REQUIRED + OPTIONAL:
        labels.setdefault(kind, f"{archive}:{prefix}/{name}_{kind}.txt")
    return raw, labels


def _check(name: str, source: str, raw: dict[str, bytes], labels: dict[str, str]) -> TuGraphs:
    """Parse the files and check them against each other; the checks of the module docstring."""
    for kind in REQUIRED:
        if kind not in raw:
            raise InputError(f"{labels[kind]} not found (a TU dataset needs {', '.join(f'{name}_{k}.txt' for k in REQUIRED)})")
    files = {Path(labels[kind].rsplit(":", 1)[-1]).name: hashlib.sha256(data).hexdigest() for kind, data in sorted(raw.items())}

    indicator = _parse(raw["graph_indicator"], labels["graph_indicator"], columns=1, integers=True)[:, 0]
    where = labels["graph_indicator"]
    if len(indicator) == 0:
        raise InputError(f"{where} is empty: a TU dataset needs at least one node")
    if indicator[0] != 1:
        raise InputError(f"{where} line 1: graph ids must start at 1, found {indicator[0]}")
    steps = np.diff(indicator)
    if (bad := np.flatnonzero((steps < 0) | (steps > 1))).size:
        line = int(bad[0]) + 2
        before, after = indicator[line - 2], indicator[line - 1]
        later = np.flatnonzero(indicator[line:] == before + 1)
        if after < before:
            why = "graph ids must not decrease"
        elif later.size:
            why = f"graph {before + 1} comes later (line {line + int(later[0]) + 1}): the nodes must be listed graph by graph, in increasing order"
        else:
            why = f"graphs {before + 1}..{after - 1} would have no nodes"
        raise InputError(f"{where} line {line}: graph id {after} after {before}: {why}")
    nodes, graphs = len(indicator), int(indicator[-1])

    graph_labels = _parse(raw["graph_labels"], labels["graph_labels"], columns=1, integers=True)[:, 0]
    if len(graph_labels) != graphs:
        raise InputError(f"{labels['graph_labels']} has {len(graph_labels)} lines, but {where} numbers {graphs} graphs")

    node_graph = indicator - 1
    edges = _parse(raw["A"], labels["A"], columns=2, integers=True)
    if len(edges) == 0:
        raise InputError(
            f"{labels['A']} is empty: it lists no edge, so every graph would be its nodes alone (a truncated download or copy?)"
        )
    if (bad := np.flatnonzero(((edges < 1) | (edges > nodes)).any(axis=1))).size:
        line = int(bad[0])
        value = next(v for v in edges[line] if not 1 <= v <= nodes)
        raise InputError(f"{labels['A']} line {line + 1}: node id {value} is out of range 1..{nodes} ({where} has {nodes} nodes)")
    edges = edges - 1
    if (bad := np.flatnonzero(node_graph[edges[:, 0]] != node_graph[edges[:, 1]])).size:
        line = int(bad[0])
        row, col = edges[line]
        raise InputError(
            f"{labels['A']} line {line + 1}: edge {row + 1}, {col + 1} joins graph {node_graph[row] + 1} to graph {node_graph[col] + 1}"
        )

    node_labels = node_attributes = None
    if "node_labels" in raw:
        node_labels = _parse(raw["node_labels"], labels["node_labels"], columns=None, integers=True)
        _check_count(node_labels, labels["node_labels"], nodes, where)
    if "node_attributes" in raw:
        node_attributes = _parse(raw["node_attributes"], labels["node_attributes"], columns=None, integers=False)
        _check_count(node_attributes, labels["node_attributes"], nodes, where)

    loops = edges[:, 0] == edges[:, 1]
    keys = np.unique(edges[~loops, 0] * nodes + edges[~loops, 1])
    edge_index = np.stack([keys // nodes, keys % nodes])
    one_way = ~np.isin(edge_index[1] * nodes + edge_index[0], keys)
    notes = ()
    if one_way.any():
        row, col = edge_index[:, np.flatnonzero(one_way)[0]]
        line = int(np.flatnonzero((edges[:, 0] == row) & (edges[:, 1] == col))[0]) + 1
        notes = (
            f"{labels['A']} lists {int(one_way.sum())} of its {len(keys)} edges in one direction only (the first on line "
            f"{line}: {row + 1}, {col + 1}); kept as listed, as torch-geometric's read_tu_data keeps them: the GIN passes "
            "their messages one way",
        )
    return TuGraphs(
        name=name,
        source=source,
        edge_index=torch.from_numpy(edge_index),
        node_graph=torch.from_numpy(node_graph),
        graph_labels=torch.from_numpy(graph_labels),
        node_labels=None if node_labels is None else torch.from_numpy(node_labels),
        node_attributes=None if node_attributes is None else torch.from_numpy(node_attributes.astype(np.float32)),
        files=files,
        self_loops_removed=int(loops.sum()),
        duplicates_removed=int((~loops).sum()) - len(keys),
        undirected=not one_way.any(),
        notes=notes,
    )


def _check_count(values: np.ndarray, label: str, nodes: int, indicator: str) -> None:
    if len(values) != nodes:
        raise InputError(f"{label} has {len(values)} lines, but {indicator} has {nodes} nodes")


def _parse(data: bytes, label: str, *, columns: int | None, integers: bool) -> np.ndarray:
    """The comma-separated numbers of a TU file as an (lines, columns) int64 or float64 array.

    ``columns=None`` takes the number of values on the first line and requires it on every line.
    A UTF-8 byte-order mark at the start and trailing blank lines are ignored; any other line that is not ``columns`` numbers is an error
    naming its line. Vectorised: the line structure is checked from the positions of the commas
    and newlines, the values are converted in one call, and only a failed conversion is searched
    token by token for its line.
    """
    data = data.removeprefix(UTF8_BOM).replace(b"\r\n", b"\n").rstrip() + b"\n"
    if data == b"\n":
        return np.zeros((0, columns or 1), dtype=np.int64 if integers else np.float64)
    raw = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(raw == ord("\n"))
    commas = np.bincount(np.searchsorted(newlines, np.flatnonzero(raw == ord(","))), minlength=len(newlines))
    width = columns if columns is not None else int(commas[0]) + 1
    if (bad := np.flatnonzero(commas != width - 1)).size:
        line = int(bad[0])
        as_first = "" if columns is not None else " (as on line 1)"
        raise InputError(f"{label} line {line + 1}: expected {width} comma-separated values{as_first}, found {commas[line] + 1}")
    tokens = data.replace(b"\n", b",").split(b",")[:-1]
    dtype = np.int64 if integers else np.float64
    try:
        values = np.array(tokens).astype(dtype)
    except (ValueError, OverflowError):
        convert = int if integers else float
        for index, token in enumerate(tokens):
            try:
                convert(token)
            except (ValueError, OverflowError):
                shown = token.strip().decode("utf-8", errors="replace")[:TOKEN_SHOWN]
                what = "an integer" if integers else "a number"
                raise InputError(f"{label} line {index // width + 1}: {shown!r} is not {what}") from None
        raise InputError(f"{label}: its values do not convert to {dtype.__name__}") from None
    values = values.reshape(-1, width)
    if not integers and (bad := np.flatnonzero(~np.isfinite(values).all(axis=1))).size:
        raise InputError(f"{label} line {int(bad[0]) + 1}: not a finite number")
    return values
