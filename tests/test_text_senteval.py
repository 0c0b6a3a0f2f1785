"""SentEval's six tasks read from tiny files in SentEval's formats (the real files never enter the repository): Latin-1
where SentEval reads Latin-1, TREC's coarse labels, MRPC's pairs after the header, blank lines as empty sentences, and
every malformed input a one-line InputError naming the file and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hcl_cli.errors import InputError, UsageError
from hcl_cli.text.senteval import TASKS, read_task, task_files, task_folder

MRPC_HEADER = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


def write(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def mrpc_files(train: str = "1\t1\t2\tA cat sat .\tThe cat sat .\n0\t3\t4\tIt rains .\tStocks fell .\n") -> dict[str, bytes]:
    test = "0\t5\t6\tNo .\tYes .\n"
    return {"msr_paraphrase_train.txt": (MRPC_HEADER + train).encode(), "msr_paraphrase_test.txt": (MRPC_HEADER + test).encode()}


def test_a_binary_task_reads_latin_1_with_the_first_file_labelled_one(tmp_path: Path) -> None:
    folder = write(tmp_path, {"rt-polarity.pos": b"caf\xe9 is good \x85 really\r\nfine .\n", "rt-polarity.neg": b"bad .\n\n"})
    task = read_task(folder, "MR")
    # 0x85 (a Windows-1252 ellipsis, NEL in Latin-1) breaks no line; \r\n ends one; a blank line is an empty sentence
    assert task.sentences == ("caf\xe9 is good \x85 really", "fine .", "bad .", "")
    assert task.labels == (1, 1, 0, 0) and task.splits == ("all",) * 4 and task.seconds is None
    assert task.classes[1] == "positive"


def test_subj_labels_its_objective_sentences_one_as_senteval_does(tmp_path: Path) -> None:
    folder = write(tmp_path, {"subj.objective": b"the film opens in 1950 .\n", "subj.subjective": b"a delight .\nawful .\n"})
    task = read_task(folder, "SUBJ")
    assert task.labels == (1, 0, 0) and task.classes[task.labels[0]] == "objective"


def test_trec_keeps_the_coarse_class_and_the_question(tmp_path: Path) -> None:
    folder = write(
        tmp_path,
        {
            "train_5500.label": b"DESC:manner How did serfdom develop ?\nNUM:date When did Hawaii become a state ?\n",
            "TREC_10.label": b"LOC:city Where is G\xf6teborg ?\n",
        },
    )
    task = read_task(folder, "TREC")
    assert task.sentences == ("How did serfdom develop ?", "When did Hawaii become a state ?", "Where is G\xf6teborg ?")
    assert [task.classes[label] for label in task.labels] == ["DESC", "NUM", "LOC"]
    assert task.splits == ("train", "train", "test")


def test_mrpc_reads_pairs_after_the_header_of_each_file(tmp_path: Path) -> None:
    task = read_task(write(tmp_path, mrpc_files()), "MRPC")
    assert task.sentences == ("A cat sat .", "It rains .", "No .")
    assert task.seconds == ("The cat sat .", "Stocks fell .", "Yes .")
    assert task.labels == (1, 0, 0) and task.splits == ("train", "train", "test")


def test_task_folder_finds_sentevals_layout_and_refuses_half_a_task(tmp_path: Path) -> None:
    assert task_folder(tmp_path, "CR") is None
    write(tmp_path / "CR", {"custrev.pos": b"good .\n", "custrev.neg": b"bad .\n"})
    assert task_folder(tmp_path, "CR") == tmp_path / "CR"
    write(tmp_path / "senteval" / "MPQA", {"mpqa.pos": b"good\n", "mpqa.neg": b"bad\n"})
    assert task_folder(tmp_path, "MPQA") == tmp_path / "senteval" / "MPQA"
    write(tmp_path, {"rt-polarity.pos": b"good .\n"})
    with pytest.raises(InputError, match=r"holds rt-polarity.pos but not rt-polarity.neg"):
        task_folder(tmp_path, "MR")
    assert [len(task_files(task)) for task in TASKS] == [2] * 6
    with pytest.raises(UsageError, match="unknown SentEval task 'SST'"):
        task_files("SST")


@pytest.mark.parametrize(
    ("task", "files", "message"),
    [
        ("MR", {"rt-polarity.pos": b"", "rt-polarity.neg": b"bad .\n"}, r"rt-polarity.pos is empty"),
        ("MR", {"rt-polarity.pos": b"ok\n", "rt-polarity.neg": b"bad\nnot\x00text\n"}, r"rt-polarity.neg line 2: a NUL byte"),
        ("CR", {"custrev.pos": b"ok\n"}, r"cannot read .*custrev.neg: No such file"),
        (
            "TREC",
            {"train_5500.label": b"DESC:manner How ?\nno colon here\n", "TREC_10.label": b"LOC:city Where ?\n"},
            r"train_5500.label line 2: expected 'COARSE:fine question'",
        ),
        (
            "TREC",
            {"train_5500.label": b"DESC:manner How ?\n", "TREC_10.label": b"LOC:city Where ?\nPLACE:city Where ?\n"},
            r"TREC_10.label line 2: unknown coarse class 'PLACE'",
        ),
        ("TREC", {"train_5500.label": b"DESC:manner\n", "TREC_10.label": b"LOC:city Where ?\n"}, r"train_5500.label line 1: expected"),
        (
            "MRPC",
            {**mrpc_files(), "msr_paraphrase_test.txt": b"0\t5\t6\tNo .\tYes .\n"},
            r"msr_paraphrase_test.txt line 1: expected MRPC's header",
        ),
        ("MRPC", mrpc_files("1\t1\t2\tA cat sat .\n"), r"msr_paraphrase_train.txt line 2: expected 5 tab-separated fields, found 4"),
        (
            "MRPC",
            mrpc_files("1\t1\t2\tA .\tB .\nyes\t3\t4\tC .\tD .\n"),
            r"msr_paraphrase_train.txt line 3: Quality 'yes' is neither 0 nor 1",
        ),
        ("MRPC", mrpc_files("1\t1\t2\t \tB .\n"), r"msr_paraphrase_train.txt line 2: an empty sentence"),
        (
            "MRPC",
            {**mrpc_files(), "msr_paraphrase_train.txt": (MRPC_HEADER + "1\t1\t2\tA\tB\n").encode() + b"0\t3\t4\tcaf\xe9\tC\n"},
            r"msr_paraphrase_train.txt line 3: not UTF-8 \(byte 0xe9\)",
        ),
        ("MRPC", {**mrpc_files(), "msr_paraphrase_test.txt": MRPC_HEADER.encode()}, r"msr_paraphrase_test.txt holds no sentence pair"),
    ],
)
def test_every_malformed_input_is_one_line_naming_the_file_and_line(
    tmp_path: Path, task: str, files: dict[str, bytes], message: str
) -> None:
    with pytest.raises(InputError, match=message) as raised:
        read_task(write(tmp_path, files), task)
    assert "\n" not in str(raised.value)
