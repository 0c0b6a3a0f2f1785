"""``hcl table`` writes over its own results and Markdown and merges the parts it wrote (the hostile cases in
tests/hostile/cases_table.py refuse everything else)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hcl_cli.errors import UsageError
from hcl_cli.stages import table as table_stage
from hcl_cli.stages.table import TableRequest

ROOT = Path(__file__).resolve().parents[1]


def test_a_table_rewrites_its_own_files_and_merges_its_own_part_but_not_an_edited_one(tmp_path: Path) -> None:
    one = {"datasets": ("mutag",), "methods": ("ucl",), "seeds": 1, "epochs": 1, "data": ROOT / "data" / "raw", "out": tmp_path}
    part = table_stage.run(TableRequest(name="part", **one))
    table_stage.run(TableRequest(name="part", **one))  # its own earlier files: rewritten
    joined = table_stage.run(TableRequest(name="t", merge=("part",), work=tmp_path / "joined", **one))
    assert joined["datasets"]["MUTAG"]["methods"]["ucl"]["accuracies"] == part["datasets"]["MUTAG"]["methods"]["ucl"]["accuracies"]
    assert set(json.loads((tmp_path / ".hcl-written.json").read_text())["files"]) == {"part.json", "part.md", "t.json", "t.md"}
    (tmp_path / "part.json").write_text((tmp_path / "part.json").read_text().replace('"MUTAG"', '"MUTAG" '))
    with pytest.raises(UsageError, match="--merge part: .* is not the table results hcl wrote there"):
        table_stage.run(TableRequest(name="u", merge=("part",), **one))
    assert not (tmp_path / "u").exists()
