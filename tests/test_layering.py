"""The package's import graph has no cycles, and the command line's modules import no torch."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hcl_cli"
LIGHT = (
    "hcl_cli.cli",
    "hcl_cli.config",
    "hcl_cli.config.base",
    "hcl_cli.config.pipeline",
    "hcl_cli.config.prepare",
    "hcl_cli.config.pretrain",
    "hcl_cli.config.embed",
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


ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"
NAMED = re.compile(r"(?<![\w./<-])(\w+(?:/\w+)*(?:\.py|/))(?![\w/])")
"""A file or folder as ARCHITECTURE.md names one: ``cli.py``, ``report/``, ``training/step.py``."""


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
