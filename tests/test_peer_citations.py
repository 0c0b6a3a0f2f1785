"""Every citation of the official HCL graph code by file and line in hcl_cli/ holds what it claims.

A citation names a file of the peer code (``../shared/peers/hcl-graph``) by its name or the end of
its path, then its lines, and names the code it points at in double backquotes, right after the
lines or right before the file::

    deepinfomax.py line 126: ``if max_degree < 1000``
    gan_losses.py lines 76-89, ``JSD_hard``
    the official ``svc_classify`` (evaluate_embedding.py lines 14-28)

Lines are ``N``, ``A-B`` or several joined by "and". The named code, blanks ignored, must appear
within the cited lines, so a citation that drifts from its line fails here. The peer code is not
in a clone of the repository: without it the test skips.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT.parent / "shared" / "peers" / "hcl-graph"

SPAN = r"(?P<line>lines? \d+(?:-\d+)?(?: and \d+(?:-\d+)?)*)"
CITATION = re.compile(r"(?:``(?P<before>[^`]+)`` \()?(?P<file>[\w./-]+\.py) " + SPAN + r"(?:[:,] ``(?P<after>[^`]+)``)?")
"""A citation in whitespace-collapsed text: the file, its lines, and the code named before or after them."""
MENTION = re.compile(r"[\w./-]+\.py\W{0,3}lines?\b")
"""Anything that looks like a file-and-line citation, in the form above or not."""


@dataclass(frozen=True)
class Citation:
    where: str
    file: str
    span: str
    code: tuple[str, ...]

    @property
    def lines(self) -> tuple[int, ...]:
        return cited_lines(self.span)

    def __str__(self) -> str:
        return f"{self.where}: {self.file} {self.span} naming {' and '.join(map(repr, self.code)) or 'no code'}"


def cited_lines(text: str) -> tuple[int, ...]:
    """``"lines 17 and 58"`` -> (17, 58); ``"lines 20-33"`` -> 20 .. 33."""
    numbers: list[int] = []
    for part in text.split(" ", 1)[1].split(" and "):
        first, _, last = part.partition("-")
        numbers += range(int(first), int(last or first) + 1)
    return tuple(numbers)


def citations_in(path: Path) -> tuple[list[Citation], list[str]]:
    """The citations of ``path`` and the mentions of a file and line that are not in the citation form."""
    text = " ".join(path.read_text().split())
    where = path.relative_to(ROOT).as_posix()
    found, spans = [], []
    for match in CITATION.finditer(text):
        code = tuple(claim for claim in (match["before"], match["after"]) if claim)
        found.append(Citation(where, match["file"], match["line"], code))
        spans.append(match.span("file"))
    malformed = [
        f"{where}: {text[max(mention.start() - 40, 0) : mention.end() + 40]!r}"
        for mention in MENTION.finditer(text)
        if not any(start == mention.start() for start, _ in spans)
    ]
    return found, malformed


def peer_file(name: str) -> Path:
    """The one file of the peer code whose path ends with ``name``."""
    matches = [path for path in PEER.rglob("*.py") if path.as_posix().endswith("/" + name.lstrip("./"))]
    assert len(matches) == 1, f"{name} names {len(matches)} files of {PEER}"
    return matches[0]


def blank_free(text: str) -> str:
    return "".join(text.split())


def test_the_citation_form_reads_lines_and_code() -> None:
    text = "as ``svc_classify`` (evaluate_embedding.py lines 14-28) does; gan_losses.py lines 17 and 58-59, ``x``; a.py, line 3"
    matches = list(CITATION.finditer(text))
    assert [(m["file"], cited_lines(m["line"]), m["before"], m["after"]) for m in matches] == [
        ("evaluate_embedding.py", tuple(range(14, 29)), "svc_classify", None),
        ("gan_losses.py", (17, 58, 59), None, "x"),
    ]
    assert len(list(MENTION.finditer(text))) == 3, "the third is a mention not in the form"


@pytest.mark.skipif(
    not PEER.is_dir(), reason="needs the official HCL graph code (HCL's repository, its graph/ folder), which a clone of hcl does not hold"
)
def test_every_peer_citation_in_hcl_cli_holds_the_code_it_names() -> None:
    citations, problems = [], []
    for path in sorted((ROOT / "hcl_cli").rglob("*.py")):
        found, malformed = citations_in(path)
        citations += found
        problems += [f"not in the citation form: {mention}" for mention in malformed]
    for citation in citations:
        if not citation.code:
            problems.append(f"names no code: {citation}")
            continue
        lines = peer_file(citation.file).read_text().splitlines()
        if citation.lines[-1] > len(lines):
            problems.append(f"past the end of the file ({len(lines)} lines): {citation}")
            continue
        held = blank_free("".join(lines[number - 1] for number in citation.lines))
        problems += [f"the cited lines do not hold {code!r}: {citation}" for code in citation.code if blank_free(code) not in held]
    assert len(citations) >= 10, "the graph modules cite the peer code by line"
    assert not problems, "\n".join(problems)
