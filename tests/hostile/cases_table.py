"""``hcl table`` owns its files (issue 52, item 4): a user's ``OUT/NAME.md`` or ``OUT/NAME.json`` (or a symbolic link at
either), a ``--merge`` part hcl did not write, a results file whose summary is not its runs' and a time budget of NaN
are each refused with one line, exit 2, the user's file as it was; so are they for a sentence table (``--sentences``,
issue 51), and a ``--page`` without the generated markers, and for an image table (``--images``, issue 53)."""

from __future__ import annotations

import json
from pathlib import Path

from .checks import all_of, says, unchanged
from .harness import Case, usage
from .setups import both, write

TABLE = (
    "table",
    "--name",
    "t",
    "--datasets",
    "mutag",
    "--methods",
    "ucl",
    "--seeds",
    "1",
    "--epochs",
    "1",
    "--data",
    ".",
    "--out",
    "tables",
)
"""A one-run table into ``tables/`` (``--data .`` exists: the refusals come before any data is read)."""
SENTENCES = ("table", "--name", "t", "--sentences", ".", "--senteval", ".", "--seeds", "1", "--epochs", "1", "--out", "tables")
"""A one-run sentence table into ``tables/`` (the refusals come before the corpus and the tasks are looked for)."""
IMAGES = ("table", "--name", "t", "--images", "x=.", "--methods", "ucl", "--seeds", "1", "--epochs", "5", "--out", "tables")
"""A one-run image table into ``tables/`` (the refusals come before the images are looked for)."""
ROW = {"seeds": [0, 1], "accuracies": [80.0, 90.0], "mean": 85.0, "std": 5.0, "parameters": {"sampler": "ucl"}}


def kept(name: str, *args: str, path: str, content: str, fragment: str, setup_link: str | None = None) -> Case:
    """A refusal (exit 2, one line holding ``fragment``) that leaves the user's ``path`` (or the target of a link to it
    at ``setup_link``) byte for byte as it was."""
    record, same = unchanged(path)

    def link(work: Path) -> None:
        if setup_link is not None:
            (work / setup_link).parent.mkdir(parents=True, exist_ok=True)
            (work / setup_link).symlink_to(work / path)

    return usage(name, *args, setup=both(write(path, content), link, record), check=all_of(same, says(fragment)))


def results(mean: float) -> str:
    return json.dumps({"protocol": "inductive", "datasets": {"MUTAG": {"methods": {"ucl": {**ROW, "mean": mean}}}}})


CASES: list[Case] = [
    kept("table over a user's NAME.md", *TABLE, path="tables/t.md", content="# my table\n", fragment="hcl has no record of writing"),
    kept("table over a user's NAME.json", *TABLE, path="tables/t.json", content='{"mine": 1}\n', fragment="hcl has no record of writing"),
    kept(
        "table NAME.json a symlink",
        *TABLE,
        path="mine.json",
        content='{"mine": 1}\n',
        fragment="is a symbolic link",
        setup_link="tables/t.json",
    ),
    kept(
        "table --merge a part hcl did not write",
        *TABLE,
        "--merge",
        "part",
        path="tables/part.json",
        content=results(85.0),
        fragment="--merge part: tables/part.json is a file hcl has no record of writing",
    ),
    kept(
        "table --verify a summary that is not its runs'",
        "table",
        "--verify",
        "r.json",
        path="r.json",
        content=results(87.0),
        fragment="is not the one their accuracies give: MUTAG/ucl (mean 87.0",
    ),
    kept(
        "table --time-budget nan",
        *TABLE,
        "--time-budget",
        "nan",
        path="tables/t.md",
        content="# my table\n",
        fragment="--time-budget must be a finite number",
    ),
    kept(
        "table --sentences over a user's NAME.md",
        *SENTENCES,
        path="tables/t.md",
        content="# mine\n",
        fragment="hcl has no record of writing",
    ),
    kept(
        "table --sentences over a user's NAME.json",
        *SENTENCES,
        path="tables/t.json",
        content="{}\n",
        fragment="hcl has no record of writing",
    ),
    kept(
        "table --sentences NAME.md a symlink",
        *SENTENCES,
        path="mine.md",
        content="# mine\n",
        fragment="is a symbolic link",
        setup_link="tables/t.md",
    ),
    kept(
        "table --sentences --merge a part hcl did not write",
        *SENTENCES,
        "--merge",
        "part",
        path="tables/part.json",
        content='{"modality": "text"}\n',
        fragment="--merge part: tables/part.json is a file hcl has no record of writing",
    ),
    kept(
        "table --sentences --page without the markers",
        *SENTENCES,
        "--page",
        "page.md",
        path="page.md",
        content="# My page\n",
        fragment="--page page.md: not a page holding the generated markers",
    ),
    kept(
        "table --sentences --time-budget inf",
        *SENTENCES,
        "--time-budget",
        "inf",
        path="tables/t.md",
        content="# my table\n",
        fragment="--time-budget must be a finite number",
    ),
    kept("table --images over a user's NAME.md", *IMAGES, path="tables/t.md", content="# mine\n", fragment="hcl has no record of writing"),
    kept("table --images over a user's NAME.json", *IMAGES, path="tables/t.json", content="{}\n", fragment="hcl has no record of writing"),
    kept(
        "table --images --merge a part hcl did not write",
        *IMAGES,
        "--merge",
        "part",
        path="tables/part.json",
        content='{"modality": "image"}\n',
        fragment="--merge part: tables/part.json is a file hcl has no record of writing",
    ),
]
