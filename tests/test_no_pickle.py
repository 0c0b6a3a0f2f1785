"""Nothing in hcl unpickles a file. Models, checkpoints and embeddings are safetensors with
JSON sidecars; CIFAR's python batches are read only through torchvision's dataset class."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for folder in ("hcl_cli", "benchmarks") for p in (ROOT / folder).rglob("*.py"))
UNPICKLING_CALLS = {
    ("torch", "load"),
    ("pickle", "load"),
    ("pickle", "loads"),
    ("np", "load"),
    ("numpy", "load"),
    ("joblib", "load"),
    ("dill", "load"),
    ("cloudpickle", "load"),
}
UNPICKLING_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}


def unpickling_uses(source: Path) -> list[str]:
    """Each import of a pickling module and each call like ``torch.load(...)`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source.read_text(), filename=str(source))):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in UNPICKLING_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in UNPICKLING_MODULES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            if (node.func.value.id, node.func.attr) in UNPICKLING_CALLS:
                found.append(f"{node.func.value.id}.{node.func.attr}() at line {node.lineno}")
    return found


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("import pickle\nimport torch\nstate = torch.load('x.pt')\n")
    assert unpickling_uses(planted) == ["import pickle", "torch.load() at line 3"]


@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_source_file_unpickles(source: Path) -> None:
    assert unpickling_uses(source) == []
