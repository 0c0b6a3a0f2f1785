"""One logging setup for every stage (issue 40, item 5): ``-q``/``--quiet`` prints errors only, ``-v``/``--verbose`` adds
debug lines, anywhere on the command line; the one-line error and its exit code stay as they are at every level."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_embeddings import META, toy_embeddings

from hcl_cli.cli import main
from hcl_cli.embeddings import save_embeddings

KNN = ["knn-eval", "--embeddings", "e.safetensors", "--out", "m.json", "--k", "10", "--device", "cpu"]


def hcl(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``hcl ARGS`` in-process: its exit code, stdout and stderr."""
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


@pytest.fixture
def embeddings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    save_embeddings("e.safetensors", toy_embeddings(), META)
    return tmp_path


@pytest.mark.usefixtures("embeddings")
def test_a_stage_prints_its_status_line_and_quiet_silences_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = hcl(KNN, capsys)
    assert code == 0 and out == "" and err.startswith("hcl knn-eval: wrote m.json: top-1 "), (out, err)
    for quiet in ("-q", "--quiet"):
        for args in ([quiet, *KNN], [*KNN, quiet]):  # anywhere on the command line
            code, out, err = hcl(args, capsys)
            assert (code, out, err) == (0, "", ""), args
    hcl(KNN, capsys)  # the level is the command line's, not left over from the run before
    assert capsys.readouterr().err == "" and Path("m.json").is_file()


@pytest.mark.usefixtures("embeddings")
@pytest.mark.parametrize("verbose", ["-v", "--verbose"])
def test_verbose_adds_debug_lines_to_the_status_lines(capsys: pytest.CaptureFixture[str], verbose: str) -> None:
    code, _, err = hcl([*KNN, verbose], capsys)
    lines = err.splitlines()
    debug = [line for line in lines if ": debug: " in line]
    assert code == 0 and any(line.startswith("hcl knn-eval: wrote m.json") for line in lines), err
    assert any(line.startswith("hcl knn-eval: debug: parameters {'k': 10") for line in debug), err
    assert any(line.startswith("hcl: debug: wrote m.json (kNN metrics") for line in debug), err
    assert not any(": debug: " in line for line in hcl(KNN, capsys)[2].splitlines()), "no debug line by default"


@pytest.mark.usefixtures("embeddings")
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["-q", *KNN[:-4], "--k", "0"], 2, "hcl knn-eval: error: --k must be >= 1 (got 0); its range is [1, 1048576]"),
        (["-q", "knn-eval", "--embeddings", "missing.safetensors", "--out", "m.json"], 2, "hcl knn-eval: error: "),
        (["-v", *KNN[:-4], "--k", "0"], 2, "hcl knn-eval: error: --k must be >= 1 (got 0); its range is [1, 1048576]"),
    ],
)
def test_an_error_is_one_line_and_its_exit_code_at_every_level(
    capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str
) -> None:
    exit_code, out, err = hcl(args, capsys)
    assert exit_code == code and out == "" and err.startswith(message) and err.count("\n") == 1, err
