"""The package's import graph has no cycles, and the command line's modules import no torch."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hcl_cli"
LIGHT = (
    "hcl_cli.cli",
    "hcl_cli.config",
    "hcl_cli.options",
    "hcl_cli.params",
    "hcl_cli.errors",
    "hcl_cli.objectives.registry",
    "hcl_cli.objectives.schedules",
)
"""What `hcl --help` imports: none of it may import torch at module level."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it is imported (imports inside functions do not count)."""
    imported = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    return imported


GRAPH = {module_name(path): top_level_imports(path) for path in PACKAGE.rglob("*.py")}


def test_no_import_cycles() -> None:
    edges = {module: {target for target in targets if target in GRAPH and target != module} for module, targets in GRAPH.items()}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> None:
        assert module not in visiting, "import cycle: " + " -> ".join([*visiting[visiting.index(module) :], module])
        if module in done:
            return
        visiting.append(module)
        for target in sorted(edges[module]):
            visit(target)
        visiting.pop()
        done.add(module)

    for module in sorted(edges):
        visit(module)


def test_the_command_line_modules_import_no_torch() -> None:
    for module in LIGHT:
        heavy = {
            name for name in GRAPH[module] if name.split(".")[0] in ("torch", "torchvision", "kornia", "numpy", "sklearn", "matplotlib")
        }
        assert not heavy, f"{module} imports {sorted(heavy)}"
        inner = {name for name in GRAPH[module] if name in GRAPH and name not in LIGHT and not name.startswith("hcl_cli.stages")}
        assert not inner, f"{module} imports {sorted(inner)}, which `hcl --help` would then load"
