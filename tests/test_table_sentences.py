"""``hcl table --sentences``: HCL Table 2's and UnDiMix Table 4's rows trained on the repository's small corpus and read out
on its two tiny SentEval tasks, the Markdown, the resume, the parts and the refusals (the hostile cases of
tests/hostile/cases_table.py refuse a user's files through the command line)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hcl_cli.errors import UsageError
from hcl_cli.stages import table_sentences
from hcl_cli.stages.table import TableStopped
from hcl_cli.stages.table_sentences import SentenceTableRequest
from hcl_cli.tables.sentence_rows import Recipe
from hcl_cli.tables.sentences import sentences_markdown
from hcl_cli.text.senteval import TASKS, task_files

ROOT = Path(__file__).resolve().parents[1]
TINY = {"corpus": ROOT / "data" / "text", "senteval": ROOT / "data" / "senteval-tiny", "recipe": Recipe(epochs=1, folds=3)}
"""One pass over the 1,500 sentences (3 steps of 400), SentEval's MR and MRPC stand-ins at 3 folds."""


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The (row/seed) runs :func:`~hcl_cli.stages.table_sentences.run` trains or reads out from here on."""
    ran: list[str] = []
    real: Callable[..., dict[str, Any]] = table_sentences.run_sentences

    def counting(row: str, values: dict[str, Any], seed: int, *args: Any) -> dict[str, Any]:
        ran.append(f"{row}/{seed}")
        return real(row, values, seed, *args)

    monkeypatch.setattr(table_sentences, "run_sentences", counting)
    return ran


def test_two_rows_at_two_seeds_write_the_tables_and_a_rerun_runs_only_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = counted(monkeypatch)
    request = SentenceTableRequest(name="tiny", rows=("qt", "hard-beta1"), seeds=2, out=tmp_path, **TINY)  # type: ignore[arg-type]
    result = table_sentences.run(request)
    assert ran == ["word-embeddings/0", "untrained/0", "qt/0", "hard-beta1/0", "qt/1", "hard-beta1/1"]
    assert result["complete"] and result["tasks"] == ["MR", "MRPC"] and list(result["rows"]) == ["qt", "hard-beta1"]
    assert all(run["scores"].keys() == {"MR", "MRPC"} and "f1" in run["scores"]["MRPC"] and run["commit"] for run in result["runs"])
    markdown = (tmp_path / "tiny.md").read_text()
    assert markdown == sentences_markdown(json.loads((tmp_path / "tiny.json").read_text()))
    for text in ("| QT (ucl: beta 0, tau+ 0) | 2 |", "| Hard (hucl: beta 1, tau+ 0) | 2 |", "| untrained encoder | 1 |"):
        assert text in markdown
    assert "| mean untrained word embeddings | 1 |" in markdown and "<br>vs QT " in markdown and "<br>F1 " in markdown
    assert "paper 76.8" in markdown and "paper 77.1" in markdown and "paper 68.3 (F1 79.8)" in markdown  # HCL's, UnDiMix's
    assert "nor are CR, SUBJ, MPQA, TREC here" in markdown and "1 pass (3 steps)" in markdown

    del ran[:]
    table_sentences.run(request)  # everything done: nothing runs, and the files are rewritten (its own)
    assert ran == []
    more = table_sentences.run(SentenceTableRequest(name="tiny", rows=("qt", "hard-beta1"), seeds=3, out=tmp_path, **TINY))  # type: ignore[arg-type]
    assert ran == ["qt/2", "hard-beta1/2"] and len(more["runs"]) == 8 and len(more["invocations"]) == 3
    joined = table_sentences.run(SentenceTableRequest(name="joined", rows=("qt",), seeds=3, out=tmp_path, merge=("tiny",), **TINY))  # type: ignore[arg-type]
    assert ran == ["qt/2", "hard-beta1/2"] and joined["runs"] == more["runs"] and list(joined["rows"]) == ["qt", "hard-beta1"]

    with pytest.raises(UsageError, match="holds another table"):
        table_sentences.run(SentenceTableRequest(name="tiny", seeds=1, out=tmp_path, **{**TINY, "recipe": Recipe(epochs=2, folds=3)}))  # type: ignore[arg-type]
    (tmp_path / "alice").mkdir()
    shutil.copy(ROOT / "data" / "text" / "carroll-alice.txt", tmp_path / "alice")
    with pytest.raises(UsageError, match="is another corpus"):  # a part of another corpus, merged
        table_sentences.run(
            SentenceTableRequest(name="other", seeds=1, out=tmp_path, merge=("tiny",), **{**TINY, "corpus": tmp_path / "alice"})  # type: ignore[arg-type]
        )


def test_the_committed_record_is_complete_and_its_rerun_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/results/reproduce_sentences.json, hcl's own there (its .hcl-written.json), resumed at its recipe: no run is
    missing, and the tables it writes are the ones docs/sentences.md holds."""
    results = ROOT / "benchmarks" / "results"
    for name in (".hcl-written.json", "reproduce_sentences.json", "reproduce_sentences.md"):
        shutil.copy(results / name, tmp_path / name)
    senteval = tmp_path / "senteval"
    for task in TASKS:  # the tasks' file names: nothing is read when nothing is missing
        (senteval / task).mkdir(parents=True)
        for name in task_files(task):
            (senteval / task / name).write_text("")
    ran = counted(monkeypatch)
    request = SentenceTableRequest(
        "reproduce_sentences", ROOT / "data" / "text", senteval, out=tmp_path, work=tmp_path / "work", recipe=Recipe(folds=5)
    )
    result = table_sentences.run(request)
    assert ran == [] and result["complete"] and len({run["commit"] for run in result["runs"]}) >= 1
    assert (tmp_path / "reproduce_sentences.md").read_text() == (results / "reproduce_sentences.md").read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "a/b"}, "--name 'a/b': expected a plain name"),
        ({"rows": ("scl",)}, "unknown sentence row 'scl'"),
        ({"recipe": Recipe(folds=1)}, "--folds must be in"),
        ({"time_budget": float("nan")}, "--time-budget must be a finite number"),
        ({"senteval": ROOT / "data" / "text"}, "holds the files of none of SentEval's"),
        ({"corpus": Path("no-such-corpus")}, "--sentences no-such-corpus: no such folder"),
        ({"page": ROOT / "README.md"}, "not a page holding the generated markers"),
        ({"merge": ("absent",)}, "--merge absent: no "),
    ],
)
def test_a_bad_request_is_one_line_before_any_work(
    tmp_path: Path, change: dict[str, Any], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    request = SentenceTableRequest(**{"name": "t", "seeds": 1, "out": tmp_path / "out", **TINY, **change})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message):
        table_sentences.run(request)
    assert not (tmp_path / "out" / "t.json").exists()


def test_a_spent_time_budget_stops_between_runs_with_exit_75_and_the_record_written(tmp_path: Path) -> None:
    request = SentenceTableRequest(name="t", rows=("qt",), seeds=1, out=tmp_path, time_budget=1e-9, **TINY)  # type: ignore[arg-type]
    with pytest.raises(TableStopped, match="time budget spent before word-embeddings/0") as stopped:
        table_sentences.run(request)
    assert stopped.value.exit_code == 75
    record = json.loads((tmp_path / "t.json").read_text())
    assert not record["complete"] and record["runs"] == [] and "Cost: no trained row yet." in (tmp_path / "t.md").read_text()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--sentences", "data/text"], "--sentences needs --senteval DIR"),
        (
            ["--sentences", "data/text", "--senteval", "data/senteval-tiny", "--images", "a=b"],
            "--images and --sentences: one table at a time",
        ),
    ],
)
def test_the_command_line_refuses_a_sentence_table_it_cannot_run_in_one_line(arguments: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "hcl_cli", "table", "--name", "t", *arguments], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith(f"hcl table: error: {message}") and done.stderr.count("\n") == 1, done.stderr
