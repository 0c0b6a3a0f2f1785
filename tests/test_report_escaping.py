"""Control and bidirectional characters from outside hcl never reach the report's markdown raw (issue 41, item 8)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from hcl_cli.report.escaping import code, inline
from hcl_cli.report.parameters import parameter_section

HIDDEN = ["\x00", "\x1b", "\x7f", "\u202e", "\u2066", "\u200f", "\u200b", "\ufeff"]


@pytest.mark.parametrize("char", HIDDEN, ids=[f"U+{ord(char):04X}" for char in HIDDEN])
def test_control_and_bidirectional_characters_are_written_as_escapes(char: str) -> None:
    escape = repr(char)[1:-1]
    assert inline(f"a{char}b") == f"a{escape.replace(chr(92), chr(92) * 2)}b"
    assert code(f"a{char}b") == f"`a{escape}b`"


def test_params_values_with_nul_and_a_right_to_left_override_are_escaped(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(json.dumps({"pretrain": {"sampler": "hcl\u202egpj.exe"}, "mine": {"note\x00": "a\x00b"}}), encoding="utf-8")
    section = parameter_section(params, {}, "image")
    assert not [char for char in section if unicodedata.category(char) in ("Cc", "Cf") and char != "\n"], repr(section)
    assert "hcl\\\\u202egpj.exe" in section and "note\\\\x00" in section and "a\\\\x00b" in section
