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
PICKLE_WRITES = {"dump", "dumps", "HIGHEST_PROTOCOL"}
UNPICKLING_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "joblib", "shelve", "marshal"}


def unpickling_uses(source: Path) -> list[str]:
    """Each import of a pickling module and each call like ``torch.load(...)`` in ``source``. An ``import pickle`` whose every
    use writes (``pickle.dump``, as for the official code's CIFAR layout in ``benchmarks/official_hcl_image.py``) is no finding."""
    tree = ast.parse(source.read_text(), filename=str(source))
    pickle_uses = {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "pickle"
    }
    writes_only = bool(pickle_uses) and pickle_uses <= PICKLE_WRITES
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"import {a.name}"
                for a in node.names
                if a.name.split(".")[0] in UNPICKLING_MODULES and not (a.name == "pickle" and a.asname is None and writes_only)
            ]
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
    planted.write_text("import pickle\npickle.dump(1, open('x', 'wb'))\nvalue = pickle.load(open('x', 'rb'))\n")
    assert unpickling_uses(planted) == ["import pickle", "pickle.load() at line 3"]
    planted.write_text("import pickle\npickle.dump(1, open('x', 'wb'), protocol=pickle.HIGHEST_PROTOCOL)\n")
    assert unpickling_uses(planted) == []


@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_source_file_unpickles(source: Path) -> None:
    assert unpickling_uses(source) == []
