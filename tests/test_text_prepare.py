"""``hcl prepare --dataset text``: a folder of .txt files, one sentence a line, tokenised into a prepared corpus; every
input error one line, exit 2, nothing written; and ``hcl pretrain`` on it (quick-thought behind the modality seam)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hcl_cli.cli import main
from hcl_cli.config import PretrainConfig
from hcl_cli.text.corpus import tokenise
from hcl_cli.text.prepared import load_split, load_text_card, load_vocabulary


def invoke(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        main(argv)
    except SystemExit as exit_info:
        return int(exit_info.code or 0), capsys.readouterr().err
    return 0, capsys.readouterr().err


def corpus(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a.txt").write_text("The cat sat.\n\nIt purred, loudly!\nThe end .\n", encoding="utf-8")
    (folder / "b.txt").write_bytes("Caf\xe9 au lait .\nThe cat came back .\n".encode("latin-1"))
    (folder / "notes.md").write_text("not part of the corpus\n")
    return folder


def test_tokens_are_lower_case_with_punctuation_split() -> None:
    assert tokenise("It purred, LOUDLY!") == ["it", "purred", ",", "loudly", "!"]


def test_prepare_keeps_file_then_line_order_documents_and_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = invoke(
        ["prepare", "--dataset", "text", "--path", str(corpus(tmp_path / "books")), "--out", str(tmp_path / "out"), "--vocab-size", "8"],
        capsys,
    )
    assert code == 0, err
    assert "b.txt is not UTF-8: read as latin-1" in err
    card = load_text_card(tmp_path / "out")
    assert card.counts == {"train": 5} and card.documents == 2 and card.skipped_lines == 1
    assert card.encodings == {"a.txt": "utf-8", "b.txt": "latin-1"} and card.vocab_size == 8
    vocabulary = load_vocabulary(tmp_path / "out")
    assert vocabulary[:4] == ["<pad>", "<unk>", ".", "the"]  # then by count, ties by text
    split = load_split(tmp_path / "out", "train")
    assert split["documents"].tolist() == [0, 0, 0, 1, 1]
    assert split["lengths"].tolist() == [4, 5, 3, 4, 5]
    assert vocabulary[int(split["tokens"][3, 0])] in ("café", "<unk>")
    unknown = int((split["tokens"] == 1).sum())
    assert card.unknown_share == pytest.approx(unknown / card.tokens)


def test_prepare_cuts_sentences_at_max_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "long"
    source.mkdir()
    (source / "a.txt").write_text(" ".join(["word"] * 40) + "\nshort one\n")
    code, err = invoke(["prepare", "--dataset", "text", "--path", str(source), "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    assert load_split(tmp_path / "out", "train")["lengths"].tolist() == [30, 2]
    assert load_text_card(tmp_path / "out").truncated == 1


def bad_sources(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    empty, only_md, blank, nul, folder_txt, plain = (tmp_path / name for name in ("empty", "md", "blank", "nul", "dirtxt", "file"))
    for folder in (empty, only_md, blank, nul, folder_txt):
        folder.mkdir()
    (only_md / "a.md").write_text("a line\n")
    (blank / "a.txt").write_text("\n  \n")
    (nul / "a.txt").write_bytes(b"a\0b\n")
    (folder_txt / "a.txt").mkdir()
    plain.write_text("a sentence\n")
    return {
        "missing": (tmp_path / "nowhere", "not a folder"),
        "a file": (plain, "not a folder"),
        "no txt": (only_md, "holds no .txt file"),
        "empty folder": (empty, "holds no .txt file"),
        "no sentence": (blank, "hold no sentence"),
        "binary": (nul, "NUL bytes"),
        "txt folder": (folder_txt, "not a regular file"),
    }


@pytest.mark.parametrize("case", ["missing", "a file", "no txt", "empty folder", "no sentence", "binary", "txt folder"])
def test_every_input_error_is_one_line_exit_2_and_writes_nothing(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source, message = bad_sources(tmp_path)[case]
    out = tmp_path / "out"
    code, err = invoke(["prepare", "--dataset", "text", "--path", str(source), "--out", str(out)], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines[-1].startswith("hcl prepare: error: ") and message in lines[-1], err
    assert not out.exists() and not any(path.name.startswith(".out") for path in tmp_path.iterdir())


def test_pretrain_trains_quick_thought_and_refuses_label_samplers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "books"
    source.mkdir()
    (source / "a.txt").write_text("".join(f"sentence number {i} of the first book .\n" for i in range(40)))
    (source / "b.txt").write_text("".join(f"line {i} of another book !\n" for i in range(30)))
    data = tmp_path / "prepared"
    assert invoke(["prepare", "--dataset", "text", "--path", str(source), "--out", str(data)], capsys)[0] == 0
    common = ["pretrain", "--data", str(data), "--batch-size", "16", "--qt-hidden", "8", "--word-dim", "4", "--epochs", "1"]
    probe_default = ["--eval-every", str(PretrainConfig.eval_every)]  # as the root params.yaml gives it to every modality
    for sampler in ("ucl", "hucl", "undimix"):
        out = tmp_path / sampler
        given = probe_default if sampler == "ucl" else []
        code, err = invoke(
            [*common, *given, "--sampler", sampler, "--out", str(out), "--live-dir", str(tmp_path / f"live-{sampler}")], capsys
        )
        assert code == 0, err
        sidecar = json.loads((out / "encoder.json").read_text())
        assert sidecar["kind"] == "text encoder" and sidecar["vocabulary"] == load_text_card(data).vocabulary
        assert sidecar["config"]["lr"] == 3e-3  # the CPU-sized default on sentences
        assert sidecar["config"]["eval_every"] == (PretrainConfig.eval_every if given else 0)  # no probe on sentences
        assert not (tmp_path / f"live-{sampler}" / "plots" / "metrics" / "knn_top1.tsv").exists()
    code, err = invoke([*common, "--sampler", "scl", "--out", str(tmp_path / "scl"), "--live-dir", str(tmp_path / "live-scl")], capsys)
    assert code == 2 and "a text corpus has none" in err.strip().splitlines()[-1]
    assert not (tmp_path / "scl" / "encoder.safetensors").exists()
    code, err = invoke([*common, "--eval-every", "1", "--out", str(tmp_path / "knn"), "--live-dir", str(tmp_path / "live-knn")], capsys)
    assert code == 2 and "a text corpus has none: use 0" in err.strip().splitlines()[-1]
