"""Where the tests find the user documentation: README.md, and the pages of the documentation site in docs/ (mkdocs.yml's
nav, in its order). A test that holds a text against the code reads it from the page that holds it now."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def nav_pages() -> list[Path]:
    """The site's pages in the order of mkdocs.yml's nav."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    return [DOCS / next(iter(entry.values())) for entry in nav]


def pages() -> list[Path]:
    """README.md, then every page of the site."""
    return [ROOT / "README.md", *nav_pages()]


def page(name: str) -> str:
    """The text of ``docs/NAME.md``."""
    return (DOCS / f"{name}.md").read_text(encoding="utf-8")
