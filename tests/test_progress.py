"""The long loops outside training show progress: a bar on a terminal, else plain lines (``dvc repro``, a log file).

``linear-eval --protocol svm`` (seconds on MUTAG with 10 repeats) and ``prepare`` were silent until they ended.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import hcl_cli.progress
from hcl_cli.config import PrepareConfig
from hcl_cli.graph.svm import svm_protocol
from hcl_cli.progress import progress
from hcl_cli.stages import prepare


@pytest.fixture
def every_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain line after every item (stderr is captured, so no terminal: the plain lines, not the bar)."""
    monkeypatch.setattr(hcl_cli.progress, "PLAIN_SECONDS", 0.0)


def test_without_a_terminal_a_line_says_how_far_the_loop_is(every_item: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert list(progress(iter("abc"), 3, "letters", "letter", "hcl test")) == ["a", "b", "c"]
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r"about \d+ s", "about N s", line) for line in lines] == [
        "hcl test: letters: 1 of 3 letters (33%), about N s to go",
        "hcl test: letters: 2 of 3 letters (67%), about N s to go",
    ], "no line once the loop is done"


def test_the_svm_protocol_shows_its_folds(every_item: None, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1], 20)
    svm_protocol(rng.normal(size=(40, 4)) + labels[:, None], labels, folds=2, repeats=2, inner_folds=2, c_grid=(1.0,))
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"hcl linear-eval: SVM folds: {done} of 4 folds" for done in (1, 2, 3)]


def test_prepare_says_what_it_reads_and_writes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prepare.run(PrepareConfig(test_fraction=0.5, out=str(tmp_path / "prepared")))
    lines = capsys.readouterr().err.splitlines()
    assert lines[:2] == ["hcl prepare: reading digits", f"hcl prepare: writing {tmp_path / 'prepared'}"]
