"""Every string from outside hcl enters the report's markdown here, as literal text or a code span.

The title, paths, names and values read from params.yaml, the dataset card, the encoder's sidecar
and the metrics files pass through :func:`inline` or :func:`code`, so that no value can add a
heading, a link, an image, HTML or a table cell: the report's structure is hcl's alone.
"""

from __future__ import annotations

import re
import unicodedata

LINE_BREAKS = re.compile(r"[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]+")
"""What ``str.splitlines`` breaks lines at: in a value, each run of them becomes one space."""
INVISIBLE = frozenset(("Cc", "Cf", "Cs", "Co", "Cn"))
"""Unicode categories that show nothing or reorder what follows: control characters (NUL, ESC), format characters
(the bidirectional overrides U+202E and U+2066..U+2069, zero-width ones), surrogates, private and unassigned code
points. Each is written as its Python escape (``\\x00``, ``\\u202e``), so a value cannot hide or reverse text."""
MARKUP = re.compile(r"([\\\[\]<>|#&])")
"""Characters that could start a link or image (``[``), HTML (``<``, ``&``), a heading's closing ``#``,
a table cell (``|``), or escape hcl's own escapes (``\\``); each is backslash-escaped (CommonMark 2.4)."""


def inline(value: object) -> str:
    """``value`` as literal text on one markdown line: line breaks become spaces, markup characters are escaped.

    Emphasis and code characters (``*``, ``_``, backticks) are kept: they style text within the line but
    cannot change the report's structure, and a title with shell syntax reads as written.
    """
    return MARKUP.sub(r"\\\1", visible(LINE_BREAKS.sub(" ", str(value))))


def code(value: object, *, cell: bool = False) -> str:
    """``value`` as a code span (a path, a name): on one line, fenced by more backticks than it holds.

    In a table ``cell``, ``|`` is escaped too (GitHub's tables split cells before code spans).
    """
    text = visible(LINE_BREAKS.sub(" ", str(value)))
    if cell:
        text = text.replace("|", "\\|")
    fence = "`" * (1 + max(map(len, re.findall("`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def visible(text: str) -> str:
    """``text`` with each character of an :data:`INVISIBLE` category written as its Python escape."""
    return "".join(repr(char)[1:-1] if unicodedata.category(char) in INVISIBLE else char for char in text)
