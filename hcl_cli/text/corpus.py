"""A text corpus as ``hcl prepare --dataset text`` reads it: a folder of ``.txt`` files, one sentence a line.

The order of the text is the files' order by name, then their lines' (quick-thought's positives are
neighbouring lines; each file is one document, and no positive crosses two). A file is read as UTF-8
(a byte-order mark dropped) or, where it is not valid UTF-8, as Latin-1, which the card records and
prepare says. Tokens: the line lower-cased and split into runs of word characters and single
punctuation marks (``don't`` is ``don ' t``), as the papers' corpora are tokenised before training;
an empty line is no sentence and is skipped (counted). The vocabulary keeps the ``vocab_size - 2``
most frequent tokens seen at least ``min_count`` times (ties by the token's text), after the padding
token (id 0) and the unknown token (id 1); a sentence is cut at ``max_tokens`` (UnDiMix App. A: 30).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hcl_cli.errors import InputError

PAD, UNKNOWN = "<pad>", "<unk>"
"""The vocabulary's first two entries: id 0 pads a sentence to the batch's length, id 1 stands for every other token."""
TOKEN = re.compile(r"\w+|[^\w\s]")
"""A token: a run of word characters, or one punctuation mark."""
ENCODINGS = ("utf-8", "latin-1")
FILE_LIMIT = 1 << 30
"""The largest file prepare reads (1 GiB)."""


def tokenise(line: str) -> list[str]:
    """``line``'s tokens: lower case, punctuation split off (module docstring)."""
    return TOKEN.findall(line.lower())


@dataclass(frozen=True)
class TextFile:
    """One document of the corpus: its name, sha256, encoding and tokenised sentences (empty lines skipped)."""

    name: str
    sha256: str
    encoding: str
    sentences: list[list[str]]
    skipped: int


def decode(data: bytes) -> tuple[str, str]:
    """``data`` as text and the encoding it was read with: UTF-8 where it is valid, else Latin-1."""
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def read_text_file(path: Path) -> TextFile:
    """One ``.txt`` file of the corpus; a one-line :class:`~hcl_cli.errors.InputError` when it cannot be read."""
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")
    try:
        if path.stat().st_size > FILE_LIMIT:
            raise InputError(f"{path}: over {FILE_LIMIT >> 30} GiB, more than a corpus file prepare reads")
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    if b"\0" in data:
        raise InputError(f"{path}: holds NUL bytes, not text (one sentence a line)")
    text, encoding = decode(data)
    lines = text.splitlines()
    sentences = [tokens for tokens in map(tokenise, lines) if tokens]
    return TextFile(path.name, hashlib.sha256(data).hexdigest(), encoding, sentences, len(lines) - len(sentences))


def read_corpus(folder: Path) -> list[TextFile]:
    """The ``.txt`` files of ``folder`` in name order, each one document; a one-line InputError when there are none,
    or no sentence in them."""
    if not folder.is_dir():
        raise InputError(f"--path {folder}: not a folder (a text corpus is a folder of .txt files, one sentence a line)")
    paths = sorted(path for path in folder.iterdir() if path.suffix == ".txt")
    if not paths:
        raise InputError(f"--path {folder} holds no .txt file (a text corpus is a folder of .txt files, one sentence a line)")
    files = [read_text_file(path) for path in paths]
    if not any(file.sentences for file in files):
        raise InputError(f"--path {folder}: its .txt files hold no sentence (every line is empty)")
    return files


def build_vocabulary(sentences: Sequence[Sequence[str]], vocab_size: int, min_count: int) -> list[str]:
    """The vocabulary (module docstring): ``[PAD, UNKNOWN, most frequent tokens ...]``, at most ``vocab_size`` entries."""
    counts = Counter(token for sentence in sentences for token in sentence)
    kept = sorted((token for token, count in counts.items() if count >= min_count), key=lambda token: (-counts[token], token))
    return [PAD, UNKNOWN, *kept[: vocab_size - 2]]


def encode(sentences: Sequence[Sequence[str]], vocabulary: Sequence[str], max_tokens: int) -> tuple[list[list[int]], int, int]:
    """Each sentence's token ids cut at ``max_tokens``, the unknown tokens among the kept ones, and the sentences cut."""
    ids = {token: index for index, token in enumerate(vocabulary)}
    unknown_id = ids[UNKNOWN]
    encoded = [[ids.get(token, unknown_id) for token in sentence[:max_tokens]] for sentence in sentences]
    unknown = sum(row.count(unknown_id) for row in encoded)
    return encoded, unknown, sum(len(sentence) > max_tokens for sentence in sentences)
