"""The files ``hcl table`` owns, by the rule every stage follows (:mod:`hcl_cli.artifacts.outputs`): ``OUT/NAME.json``
(the results) and ``OUT/NAME.md`` (the table) are written over only when ``OUT``'s record lists them as hcl's, with
their present sha256 (:mod:`hcl_cli.artifacts.record`); a user's file, or a symbolic link, at either is refused before
any work, and left as it is. A part that ``--merge`` joins must be a results file hcl wrote there."""

from __future__ import annotations

import os
from pathlib import Path

from hcl_cli.artifacts import check_replaceable, recorded_output, write_output
from hcl_cli.errors import UsageError, shown

RESULTS_OUTPUT = recorded_output("table results")
MARKDOWN_OUTPUT = recorded_output("table")


def check_owned(results: Path, markdown: bool, merged: dict[str, Path]) -> None:
    """Refuse, in one line, a results file (and its Markdown, where ``markdown``) that hcl may not replace, and a merged
    part (by name) that is not a results file hcl wrote."""
    check_replaceable("--name", results, RESULTS_OUTPUT)
    if markdown:
        check_replaceable("--name", results.with_suffix(".md"), MARKDOWN_OUTPUT)
    for name, path in merged.items():
        if not os.path.lexists(path):
            continue
        found = "a symbolic link" if path.is_symlink() else None if path.is_file() else "not a regular file"
        found = found or RESULTS_OUTPUT.foreign(path)
        if found is not None:
            raise UsageError(
                f"--merge {name}: {shown(path)} is {found}; hcl merges only the results files it wrote: move it away, or merge another part"
            )


def write_owned(path: Path, text: str, markdown: bool = False) -> None:
    """Write the results file (or, where ``markdown``, the table) ``path`` and list it in its folder's record."""
    write_output(path, text, MARKDOWN_OUTPUT if markdown else RESULTS_OUTPUT, "--name")
