"""SentEval's six transfer tasks read from SentEval's own files (Conneau & Kiela, "SentEval: An Evaluation Toolkit for
Universal Sentence Representations", LREC 2018), as facebookresearch/SentEval's ``senteval/binary.py``, ``trec.py`` and
``mrpc.py`` read them; HCL Sec. 5.3 / Table 2 and UnDiMix Sec. 4.2 / Table 4 read quick-thought vectors out on them.

- MR ``rt-polarity.pos/neg``, CR ``custrev.pos/neg``, SUBJ ``subj.objective/subjective``, MPQA ``mpqa.pos/neg``: one
  sentence a line, Latin-1 (``binary.py``'s ``loadFile``); the first file's sentences are label 1, the second's label 0,
  in that order, as ``BinaryClassifierEval(pos, neg)`` concatenates them (SUBJ's objective sentences are its "pos").
  A blank line is an empty sentence, as SentEval reads it (CR's and MPQA's files hold a few; their published counts,
  CR 3,775 and MPQA 10,606, include them).
- TREC ``train_5500.label`` (train) and ``TREC_10.label`` (test): ``COARSE:fine question`` a line, Latin-1; the label
  is the coarse class of six (ABBR, DESC, ENTY, HUM, LOC, NUM in ``trec.py``'s order).
- MRPC ``msr_paraphrase_train.txt`` / ``msr_paraphrase_test.txt``: UTF-8 (a byte-order mark allowed), a header line,
  then ``Quality <tab> #1 ID <tab> #2 ID <tab> #1 String <tab> #2 String``; the label is Quality (1: paraphrase).

Sentences come back raw (stripped of surrounding white space; the modality tokenises them). One difference from
SentEval's reading: only ``\\n`` (with an optional ``\\r`` before it) ends a line, where SentEval's ``splitlines()``
would also break a Latin-1 line at byte 0x85 (NEL), a Windows-1252 ellipsis in the original MR and SUBJ files
(SentEval's download script escapes such bytes with ``cat -v`` first). Every malformed input is a one-line
:class:`InputError` that names the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hcl_cli.errors import InputError, UsageError, shown

TASKS = ("MR", "CR", "SUBJ", "MPQA", "TREC", "MRPC")
CROSS_VALIDATED = ("MR", "CR", "SUBJ", "MPQA")
"""The tasks SentEval reads out by 10-fold cross-validation over all their sentences (their split is ``all``)."""

BINARY_FILES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "MR": (("rt-polarity.pos", "rt-polarity.neg"), ("negative", "positive")),
    "CR": (("custrev.pos", "custrev.neg"), ("negative", "positive")),
    "SUBJ": (("subj.objective", "subj.subjective"), ("subjective", "objective")),
    "MPQA": (("mpqa.pos", "mpqa.neg"), ("negative", "positive")),
}
"""Each binary task's (label-1 file, label-0 file) in ``binary.py``'s reading order, and its class names by label."""
TREC_FILES = ("train_5500.label", "TREC_10.label")
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
"""``trec.py``'s ``tgt2idx``: the coarse classes, label i the i-th."""
MRPC_FILES = ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt")
MRPC_CLASSES = ("not paraphrase", "paraphrase")
MRPC_HEADER = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")
FETCHED = "senteval"
"""Where a task's fetched files go under the raw data folder: ``PATH/senteval/TASK/`` (``text/senteval_fetch.py``)."""


@dataclass(frozen=True)
class SentEvalTask:
    """One task's items in file order: ``sentences[i]`` (and, for MRPC, its pair's second sentence ``seconds[i]``), its
    label ``labels[i]`` (an index into ``classes``) and its split ``splits[i]``: ``all`` for the cross-validated tasks,
    ``train`` or ``test`` for TREC and MRPC."""

    task: str
    sentences: tuple[str, ...]
    seconds: tuple[str, ...] | None
    labels: tuple[int, ...]
    splits: tuple[str, ...]
    classes: tuple[str, ...]


def task_files(task: str) -> tuple[str, ...]:
    """The names of ``task``'s files in SentEval's layout (``data/downstream/TASK/NAME``)."""
    check_task(task)
    if task in BINARY_FILES:
        return BINARY_FILES[task][0]
    return TREC_FILES if task == "TREC" else MRPC_FILES


def check_task(task: str) -> None:
    if task not in TASKS:
        raise UsageError(f"unknown SentEval task {shown(task)!r}: expected one of {', '.join(TASKS)}")


def task_folder(path: Path, task: str) -> Path | None:
    """The folder holding every file of ``task``: ``path`` itself, ``path/TASK`` (SentEval's ``data/downstream``
    layout) or ``path/senteval/TASK`` (where they are fetched to, once all are there), the first that holds any of them;
    None where none does. ``path`` or ``path/TASK`` holding some of the files but not all is an :class:`InputError`."""
    names = task_files(task)
    for folder in (path, path / task, path / FETCHED / task):
        present = [name for name in names if (folder / name).exists()]
        missing = [name for name in names if name not in present]
        if present and not missing:
            return folder
        if present and folder != path / FETCHED / task:
            raise InputError(f"{shown(folder)} holds {present[0]} but not {missing[0]}: SentEval's {task} needs {' and '.join(names)}")
    return None


def read_task(folder: Path, task: str) -> SentEvalTask:
    """Read ``task`` from the files in ``folder`` (named as :func:`task_files` gives them)."""
    check_task(task)
    if task in BINARY_FILES:
        return read_binary(folder, task)
    return read_trec(folder) if task == "TREC" else read_mrpc(folder)


def read_binary(folder: Path, task: str) -> SentEvalTask:
    """MR, CR, SUBJ or MPQA: the label-1 file's sentences, then the label-0 file's (``binary.py``)."""
    (first, second), classes = BINARY_FILES[task]
    ones = [line.strip() for _, line in text_lines(folder / first, "latin-1")]
    zeros = [line.strip() for _, line in text_lines(folder / second, "latin-1")]
    for name, lines in ((first, ones), (second, zeros)):
        if not lines:
            raise InputError(f"{shown(folder / name)} is empty: SentEval's {task} needs a sentence a line")
    sentences = (*ones, *zeros)
    return SentEvalTask(task, sentences, None, (1,) * len(ones) + (0,) * len(zeros), ("all",) * len(sentences), classes)


def read_trec(folder: Path) -> SentEvalTask:
    """TREC: the train file's questions, then the test file's, each labelled by its coarse class (``trec.py``)."""
    sentences: list[str] = []
    labels: list[int] = []
    splits: list[str] = []
    for name, split in zip(TREC_FILES, ("train", "test"), strict=True):
        file = folder / name
        lines = text_lines(file, "latin-1")
        if not lines:
            raise InputError(f"{shown(file)} is empty: TREC needs a 'COARSE:fine question' a line")
        for number, line in lines:
            coarse, colon, rest = line.strip().partition(":")
            fine, space, question = rest.partition(" ")
            if not colon or not fine or not space or not question.strip():
                raise InputError(f"{shown(file)} line {number}: expected 'COARSE:fine question', found {shown(line[:60])!r}")
            if coarse not in TREC_CLASSES:
                raise InputError(
                    f"{shown(file)} line {number}: unknown coarse class {shown(coarse)!r} (expected one of {', '.join(TREC_CLASSES)})"
                )
            sentences.append(question.strip())
            labels.append(TREC_CLASSES.index(coarse))
            splits.append(split)
    return SentEvalTask("TREC", tuple(sentences), None, tuple(labels), tuple(splits), TREC_CLASSES)


def read_mrpc(folder: Path) -> SentEvalTask:
    """MRPC: the train file's pairs, then the test file's, after each file's header (``mrpc.py``)."""
    firsts: list[str] = []
    seconds: list[str] = []
    labels: list[int] = []
    splits: list[str] = []
    for name, split in zip(MRPC_FILES, ("train", "test"), strict=True):
        file = folder / name
        lines = text_lines(file, "utf-8-sig")
        if not lines or tuple(field.strip() for field in lines[0][1].split("\t")) != MRPC_HEADER:
            raise InputError(f"{shown(file)} line 1: expected MRPC's header {chr(9).join(MRPC_HEADER)!r}")
        if len(lines) == 1:
            raise InputError(f"{shown(file)} holds no sentence pair after its header")
        for number, line in lines[1:]:
            fields = line.split("\t")
            if len(fields) != len(MRPC_HEADER):
                raise InputError(f"{shown(file)} line {number}: expected {len(MRPC_HEADER)} tab-separated fields, found {len(fields)}")
            quality, first, second = fields[0].strip(), fields[3].strip(), fields[4].strip()
            if quality not in ("0", "1"):
                raise InputError(f"{shown(file)} line {number}: Quality {shown(quality)!r} is neither 0 nor 1")
            if not first or not second:
                raise InputError(f"{shown(file)} line {number}: an empty sentence (#1 String and #2 String must be text)")
            firsts.append(first)
            seconds.append(second)
            labels.append(int(quality))
            splits.append(split)
    return SentEvalTask("MRPC", tuple(firsts), tuple(seconds), tuple(labels), tuple(splits), MRPC_CLASSES)


def text_lines(file: Path, encoding: str) -> list[tuple[int, str]]:
    """``file``'s lines with their 1-based numbers, each without its ``\\n`` or ``\\r\\n``, decoded from ``encoding``.
    Missing, unreadable, holding a NUL byte (no text file) or not decodable: an :class:`InputError` naming the line."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {shown(file)}: {exc.strerror or exc}") from exc
    if (nul := data.find(b"\0")) >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise InputError(f"{shown(file)} line {line}: a NUL byte: not a text file")
    raw = data.split(b"\n")
    if raw[-1] == b"":
        raw.pop()
    lines = []
    for number, line in enumerate(raw, start=1):
        try:
            text = line.removesuffix(b"\r").decode(encoding if number == 1 else encoding.removesuffix("-sig"))
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{shown(file)} line {number}: not {encoding.removesuffix('-sig').upper()} (byte 0x{line[exc.start]:02x})"
            ) from exc
        lines.append((number, text))
    return lines
