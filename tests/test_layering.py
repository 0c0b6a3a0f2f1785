"""The package's imports point down the layers ARCHITECTURE.md draws, with no cycle; its modules stay small;
the command line's modules import no torch.

An import counts wherever it is written: at module level, inside a function (a lazy import only
defers loading: the importer still depends on what it imports) and under ``if TYPE_CHECKING:`` (a
type in a signature is part of the interface). What a module names by string and imports with
``importlib`` (``modality.py``'s ``MODALITIES``, the sampler registry's ``"module:function"``) is
not an import: that is how a lower layer names a higher one without depending on it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hcl_cli"
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"
LIGHT = (
    "hcl_cli.cli",
    "hcl_cli.cli_help",
    "hcl_cli.console",
    "hcl_cli.logs",
    "hcl_cli.config",
    "hcl_cli.config.base",
    "hcl_cli.config.pipeline",
    "hcl_cli.config.prepare",
    "hcl_cli.config.pretrain",
    "hcl_cli.config.embed",
    "hcl_cli.config.export",
    "hcl_cli.config.linear",
    "hcl_cli.config.knn",
    "hcl_cli.config.report",
    "hcl_cli.option",
    "hcl_cli.params",
    "hcl_cli.errors",
    "hcl_cli.interrupts",
    "hcl_cli.objectives.registry",
    "hcl_cli.objectives.schedules",
    "hcl_cli.objectives.sampler_options",
    "hcl_cli.training",
    "hcl_cli.training.signals",
    "hcl_cli.versions",
)
"""What `hcl --help` imports: none of it may import torch at module level."""
ROOM_LINES = 350
"""The most lines a module holds without a reason, given in its docstring on a line starting "One room:"."""
MODULE_CELL = re.compile(r"\w+(?:/\w+)*(?:\.py|/)")
"""A cell of the layer table that names a module or package: ``cli.py``, ``report/``, ``objectives/registry.py``."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, *, module_level_only: bool = False) -> set[str]:
    """The modules ``path`` imports: every import statement, or only those run when it is imported (module level)."""
    tree = ast.parse(path.read_text())
    imported = set()
    for node in tree.body if module_level_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, f"{path}: a relative import; hcl_cli imports by absolute name"
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    return imported


PATHS = {module_name(path): path for path in PACKAGE.rglob("*.py")}
GRAPH = {module: {name for name in imports(path) if name in PATHS and name != module} for module, path in PATHS.items()}
"""Every hcl_cli module and the hcl_cli modules it imports."""


def layer_table() -> dict[str, int]:
    """ARCHITECTURE.md's layer table: each module or package it names, and its layer.

    A row starts with its layer number; a row without one continues the row above. Cells are
    separated by two or more spaces; the last, the description, names no module.
    """
    block = re.search(r"```\nlayer +modules[^\n]*\n(.*?)```", ARCHITECTURE.read_text(), re.DOTALL)
    assert block, "ARCHITECTURE.md has no fenced layer table (a block whose header is 'layer  modules ...')"
    table: dict[str, int] = {}
    layer = None
    for line in block.group(1).splitlines():
        cells = re.split(r" {2,}", line.strip())
        if cells[0].isdigit():
            layer = int(cells.pop(0))
        assert layer is not None, f"the layer table's first row has no layer number: {line!r}"
        table |= {cell: layer for cell in cells if MODULE_CELL.fullmatch(cell)}
    return table


LAYERS = layer_table()


def layer_of(module: str) -> int:
    """The layer of the most specific entry naming ``module``: its file, else the nearest package holding it."""
    relative = PATHS[module].relative_to(PACKAGE)
    for name in [relative.as_posix(), *(folder.as_posix() + "/" for folder in relative.parents if folder != Path("."))]:
        if name in LAYERS:
            return LAYERS[name]
    raise AssertionError(f"ARCHITECTURE.md's layer table places no entry over {module} ({relative})")


def test_every_module_has_a_layer_and_every_entry_exists() -> None:
    for module in PATHS:
        layer_of(module)
    missing = sorted(name for name in LAYERS if not (PACKAGE / name).exists())
    assert not missing, f"the layer table names {missing}, which hcl_cli/ does not hold"


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})"
        for module, targets in sorted(GRAPH.items())
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "imports that point up ARCHITECTURE.md's layers:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> None:
        assert module not in visiting, "import cycle: " + " -> ".join([*visiting[visiting.index(module) :], module])
        if module in done:
            return
        visiting.append(module)
        for target in sorted(GRAPH[module]):
            visit(target)
        visiting.pop()
        done.add(module)

    for module in sorted(GRAPH):
        visit(module)


def test_no_module_is_over_the_room_size_without_a_reason() -> None:
    oversized = [
        f"{path.relative_to(PACKAGE.parent)} ({lines} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > ROOM_LINES
        and not any(line.strip().startswith("One room:") for line in (ast.get_docstring(ast.parse(path.read_text())) or "").splitlines())
    ]
    assert not oversized, f"over {ROOM_LINES} lines with no 'One room:' line in the docstring (split by job, or say why not): {oversized}"


def test_the_command_line_modules_import_no_torch() -> None:
    for module in LIGHT:
        top_level = imports(PATHS[module], module_level_only=True)
        heavy = {name for name in top_level if name.split(".")[0] in ("torch", "torchvision", "kornia", "numpy", "sklearn", "matplotlib")}
        assert not heavy, f"{module} imports {sorted(heavy)}"
        inner = {name for name in top_level if name in PATHS and name not in LIGHT and not name.startswith("hcl_cli.stages")}
        assert not inner, f"{module} imports {sorted(inner)}, which `hcl --help` would then load"


NAMED = re.compile(r"(?<![\w./<-])(\w+(?:/\w+)*(?:\.py|/))(?![\w/])")
"""A file or folder as ARCHITECTURE.md names one: ``cli.py``, ``report/``, ``image/step.py``."""


def test_architecture_md_names_only_what_exists_and_every_top_level_part() -> None:
    named = {name for name in NAMED.findall(ARCHITECTURE.read_text()) if not name.startswith(("tests/", "hcl_cli/"))}
    parts = {
        path.relative_to(PACKAGE).as_posix() + ("/" if path.is_dir() else "")
        for path in PACKAGE.rglob("*")
        if path.suffix == ".py" or (path / "__init__.py").is_file()
    }
    missing = sorted(name for name in named if not any(part == name or part.endswith("/" + name) for part in parts))
    assert not missing, f"ARCHITECTURE.md names {missing}, which hcl_cli/ does not hold"
    top_level = {part for part in parts if part.count("/") == (1 if part.endswith("/") else 0)} - {"__init__.py"}
    unnamed = sorted(top_level - named)
    assert not unnamed, f"ARCHITECTURE.md does not name {unnamed}"
