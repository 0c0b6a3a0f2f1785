"""Every figure the README or a docs page quotes beside a results file appears in that file (benchmarks/results/*.json).

A line of the README or of a page of docs/ that cites a results file (``benchmarks/results/NAME.json`` or, in the Measured
table, ``NAME.json``) may quote only numbers that the file holds: each number of the line, outside
code spans, must equal some number of the file (a value, a numeric key, or a number inside a
string such as a command) rounded to the digits the README gives, in the file's unit or one of
the usual conversions (bytes to MiB/GiB/GB, seconds to ms, a fraction to per cent). A figure
edited by hand, or left behind when a benchmark was rerun, fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docs_pages import pages

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
CITATION = re.compile(r"`benchmarks/results/([\w*]+\.json)`")
BARE = re.compile(r"`([\w*]+\.json)`")
"""In the Measured table a file is named without its folder; such a name cites a file only when results/ has it."""
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)x?(?!\w|\.\d)")
"""A number (``4,702``, ``0.27``, ``2.4x``), not part of a word (``x86_64``, ``1x8x8``)."""
SCALES = (1.0, 100.0, 1000.0, 1e-3, 2.0**-20, 2.0**-30, 1e-9, 1e-6)
"""The file's unit, per cent, milliseconds, thousands, MiB, GiB, GB, MB."""


def file_numbers(value: Any) -> Iterator[float]:
    """Every number a results file holds: its values, its numeric keys, and the numbers inside its strings."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, str):
        yield from (float(number) for number in re.findall(r"\d+(?:\.\d+)?", value))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from file_numbers(key)
            yield from file_numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from file_numbers(item)


def quoted_numbers(line: str) -> list[str]:
    """The numbers a README line quotes, outside its code spans (file names, options, commands)."""
    return [match.group(1) for match in NUMBER.finditer(re.sub(r"`[^`]*`", " ", line))]


def appears(quoted: str, numbers: list[float]) -> bool:
    """Whether ``quoted`` (``4,702``, ``0.27``, ``97.9``) is some file number rounded to its digits, in some unit."""
    text = quoted.replace(",", "")
    digits = len(text.split(".")[1]) if "." in text else 0
    value = float(text)
    return any(round(number * scale, digits) == value for number in numbers for scale in SCALES)


def unsupported_figures(readme: str, results: Path) -> list[str]:
    """``README line: number (files)`` for every quoted number that none of the line's cited files holds."""
    problems = []
    for line in readme.splitlines():
        cited = CITATION.findall(line) + [name for name in BARE.findall(line) if any(results.glob(name))]
        if not cited:
            continue
        paths = sorted({path for name in cited for path in results.glob(name)})
        numbers = [number for path in paths for number in file_numbers(json.loads(path.read_text(encoding="utf-8")))]
        if not paths:
            problems.append(f"{line.strip()[:60]}...: cites {', '.join(cited)}, which is not in {results}")
            continue
        problems += [
            f"{line.strip()[:60]}...: {quoted} ({', '.join(cited)})" for quoted in quoted_numbers(line) if not appears(quoted, numbers)
        ]
    return problems


@pytest.mark.parametrize("path", pages(), ids=lambda path: path.name)
def test_every_figure_the_documentation_quotes_is_in_the_results_file_it_cites(path: Path) -> None:
    assert unsupported_figures(path.read_text(encoding="utf-8"), RESULTS) == []


def test_the_check_finds_a_figure_that_is_not_in_its_file(tmp_path: Path) -> None:
    (tmp_path / "speed.json").write_text(json.dumps({"images_per_second": 4702.4, "seconds": 0.0979, "bytes": 34078720, "batch": 256}))
    good = "| pretrain, B = 256 | 4,702 images/s, 97.9 ms per step, 32.5 MiB | `speed.json` |"
    assert unsupported_figures(good, tmp_path) == []
    stale = "| pretrain, B = 256 | 4,900 images/s, 1.5x faster | `speed.json` |"
    assert [problem.split(": ")[-1] for problem in unsupported_figures(stale, tmp_path)] == ["4,900 (speed.json)", "1.5 (speed.json)"]
    assert "not in" in unsupported_figures("see `benchmarks/results/missing.json`", tmp_path)[0]


def test_every_results_file_the_documentation_cites_says_when_where_and_how_it_was_measured() -> None:
    readme = "\n".join(path.read_text(encoding="utf-8") for path in pages())
    cited = {path for line in readme.splitlines() for name in CITATION.findall(line) + BARE.findall(line) for path in RESULTS.glob(name)}
    assert cited, "the documentation cites results files"
    for path in sorted(cited):
        record = json.loads(path.read_text(encoding="utf-8"))
        assert {"date", "machine", "command", "torch"} <= record.keys(), f"{path.name} lacks the environment of benchmarks/common.py"
