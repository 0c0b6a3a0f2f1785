"""The README's sentences quick start runs as written in a fresh clone without ../shared (prepare -> pretrain -> embed ->
linear-eval -> report, offline, on the repository's public-domain text); and SentEval's tasks enter the pipeline:
``hcl prepare --dataset senteval`` under the corpus's vocabulary (its input errors one line, exit 2, nothing written),
``hcl embed`` of an encoder trained on the corpus, ``hcl linear-eval --protocol senteval`` and its baselines."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from test_readme_blocks import fresh_clone, offline_blocks, run_block
from test_text_prepare import invoke

from hcl_cli.text.prepared import load_split, load_text_card

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_the_sentences_quick_start_runs_in_a_fresh_clone(tmp_path: Path) -> None:
    (block,) = [code for language, code in offline_blocks() if "--dataset senteval" in code]
    clone = fresh_clone(tmp_path / "hcl")
    assert not (clone.parent / "shared").exists()
    env = {**os.environ, "PYTHONPATH": str(clone), "OMP_NUM_THREADS": "1", "HCL_SENTEVAL_MIRROR": "http://127.0.0.1:9/"}
    run_block(clone, "bash", block, env)
    report = (clone / "runs" / "sentence-report" / "report.md").read_text()
    assert "| MR |" in report and "| MRPC |" in report and "(F1 " in report
    assert "untrained encoder | mean word embeddings" in report
    metrics = json.loads((clone / "runs" / "sentence-metrics" / "senteval-MRPC.json").read_text())
    assert metrics["details"]["senteval"]["f1"] is not None and set(metrics["details"]["senteval"]["baselines"]) == {
        "untrained encoder",
        "mean word embeddings",
    }


@pytest.fixture
def corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "books"
    assert invoke(["prepare", "--dataset", "text", "--path", str(ROOT / "data" / "text"), "--out", str(out)], capsys)[0] == 0
    return out


def test_a_task_is_read_with_the_corpus_vocabulary_in_file_order(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "MR"
    argv = ["prepare", "--dataset", "senteval", "--task", "MR", "--path", str(ROOT / "data" / "senteval-tiny"), "--corpus", str(corpus)]
    code, err = invoke([*argv, "--out", str(out)], capsys)
    assert code == 0, err
    card = load_text_card(out)
    assert card.task == "MR" and card.vocabulary == load_text_card(corpus).vocabulary and card.counts == {"train": 180, "test": 60}
    items = sorted([*load_split(out, "train")["documents"].tolist(), *load_split(out, "test")["documents"].tolist()])
    assert items == list(range(240))
    assert load_split(out, "test")["documents"].tolist()[:2] == [3, 7]  # every fourth item


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("no corpus", "is not a prepared dataset folder"),
        ("half a task", "but not"),
        ("offline", "127.0.0.1"),
    ],
)
def test_every_task_input_error_is_one_line_exit_2_and_writes_nothing(
    case: str, message: str, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "tasks"
    (source / "MR").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "senteval-tiny" / "MR" / "rt-polarity.pos", source / "MR")
    monkeypatch.setenv("HCL_SENTEVAL_MIRROR", "http://127.0.0.1:9/")
    task, corpus_path = ("CR", corpus) if case == "offline" else ("MR", corpus if case == "half a task" else tmp_path / "nowhere")
    out = tmp_path / "out"
    code, err = invoke(
        ["prepare", "--dataset", "senteval", "--task", task, "--path", str(source), "--corpus", str(corpus_path), "--out", str(out)], capsys
    )
    assert code == 2, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("hcl prepare: error: ") and message in lines[-1], err
    assert not out.exists()


def test_a_task_folder_is_not_trained_on(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "MR"
    tiny = str(ROOT / "data" / "senteval-tiny")
    assert (
        invoke(["prepare", "--dataset", "senteval", "--task", "MR", "--path", tiny, "--corpus", str(corpus), "--out", str(out)], capsys)[0]
        == 0
    )
    code, err = invoke(["pretrain", "--data", str(out), "--out", str(tmp_path / "qt"), "--live-dir", str(tmp_path / "live")], capsys)
    assert code == 2 and "a task to read out" in err.strip().splitlines()[-1]


def test_the_senteval_readout_refuses_a_corpus_and_another_tasks_embeddings(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = str(ROOT / "data" / "senteval-tiny")
    for task in ("MR", "MRPC"):
        argv = ["prepare", "--dataset", "senteval", "--task", task, "--path", tiny, "--corpus", str(corpus), "--out", str(tmp_path / task)]
        assert invoke(argv, capsys)[0] == 0
    common = ["--batch-size", "16", "--qt-hidden", "4", "--word-dim", "4", "--max-steps", "1"]
    assert (
        invoke(["pretrain", "--data", str(corpus), "--out", str(tmp_path / "qt"), "--live-dir", str(tmp_path / "live"), *common], capsys)[0]
        == 0
    )
    embeddings = str(tmp_path / "MR.safetensors")
    assert (
        invoke(
            ["embed", "--model", str(tmp_path / "qt" / "encoder.safetensors"), "--data", str(tmp_path / "MR"), "--out", embeddings], capsys
        )[0]
        == 0
    )
    for data, message in ((corpus, "is a text corpus: give the task's folder"), (tmp_path / "MRPC", "is not the prepared dataset")):
        argv = ["linear-eval", "--protocol", "senteval", "--embeddings", embeddings, "--data", str(data), "--out", str(tmp_path / "m.json")]
        code, err = invoke(argv, capsys)
        assert code == 2 and message in err.strip().splitlines()[-1] and not (tmp_path / "m.json").exists()
