"""Small things a new user meets in the first hour (issue 39 item 7): ``hcl --version``, the ``--data`` default that
``--help`` shows, and skip reasons that say what to install rather than where another checkout keeps its files."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_benchmarks
import test_peer_citations

from hcl_cli import __version__
from hcl_cli.cli import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    return exited.value.code, " ".join(capsys.readouterr().out.split())


def test_hcl_version_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"], capsys) == (0, f"hcl {__version__}")


@pytest.mark.parametrize("command", ["pretrain", "embed", "linear-eval", "report"])
def test_the_data_default_in_help_names_the_pipelines_fallback(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run([command, "--help"], capsys)
    assert code == 0 and "[default: (runs/prepared if a hand hcl prepare made it, else data/prepared)]" in out


def test_skip_reasons_say_what_is_missing_not_where_another_checkout_keeps_it() -> None:
    (mark,) = [mark for mark in test_peer_citations.test_every_peer_citation_in_hcl_cli_holds_the_code_it_names.pytestmark]
    assert "shared" not in mark.kwargs["reason"] and "official HCL graph code" in mark.kwargs["reason"]
    assert "pip install -e '.[test,bench]'" in test_benchmarks.NEEDS_REASON


def test_a_failed_cifar_download_leaves_no_empty_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torchvision.datasets

    class Offline(torchvision.datasets.CIFAR10):
        def __init__(self, root: str, **arguments: object) -> None:
            Path(root).mkdir(parents=True, exist_ok=True)  # as torchvision's download does before it fails
            raise RuntimeError("<urlopen error [Errno -2] Name or service not known>")

    monkeypatch.setattr(torchvision.datasets, "CIFAR10", Offline)
    monkeypatch.chdir(tmp_path)
    code, _ = run(["prepare", "--dataset", "cifar10", "--path", "data/raw/cifar", "--out", "prepared"], capsys)
    assert code == 2 and sorted(tmp_path.iterdir()) == [], "no data/raw/cifar (nor data/raw, data) left behind"


def test_the_svm_folds_line_names_the_command_that_runs_them(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``hcl report`` reads the untrained encoder out by the SVM protocol after linear-eval wrote its metrics: its fold
    lines say ``hcl report``, so they are not taken for linear-eval's, printed after its ``wrote`` line."""
    import numpy as np

    import hcl_cli.progress
    import hcl_cli.report.baselines
    from hcl_cli.graph.svm import svm_protocol

    monkeypatch.setattr(hcl_cli.progress, "PLAIN_SECONDS", 0.0)
    monkeypatch.setattr(hcl_cli.progress.sys.stderr, "isatty", lambda: False)
    rng = np.random.default_rng(0)
    labels = np.arange(40) % 2
    embeddings = rng.normal(size=(40, 4)) + labels[:, None]
    svm_protocol(embeddings, labels, folds=3, inner_folds=2, c_grid=(1.0,), progress_as=("hcl report", "SVM folds (baseline)"))
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("hcl report: SVM folds (baseline): ") for line in lines)
    source = Path(hcl_cli.report.baselines.__file__).read_text()
    assert 'progress_as=("hcl report", ' in source
