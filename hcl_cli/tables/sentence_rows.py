"""The rows of the sentence tables (``hcl table --sentences``): HCL Table 2's and UnDiMix Table 4's samplers at one recipe.

Each row is the sampler of its paper's preset (:mod:`hcl_cli.presets.sentences`): ``qt`` (ucl: quick-thought itself),
``debiased`` (tau+ 0.01), ``hard-beta1`` and ``hard-beta2`` (hucl at beta 1 and 2, tau+ 0: HCL Table 2; UnDiMix Table 4's
reimplemented HCL is ``hard-beta1``) and ``undimix``. What the presets share (quick-thought's encoders, the batch, the
optimiser) is the table's :class:`Recipe`, the same for every row, so that the rows differ in the sampler alone: by default
``hcl pretrain``'s CPU-sized defaults on sentences (the presets carry UnDiMix App. A's lr 5e-4, which learns nothing in a
few hundred steps). The papers' numbers stand beside ours from the same presets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hcl_cli.config import PretrainConfig
from hcl_cli.errors import UsageError
from hcl_cli.presets.sentences import HCL_COLUMNS, HCL_ROWS, QT_TRAINING, UNDIMIX_COLUMNS, UNDIMIX_ROWS
from hcl_cli.text.readout import FOLDS, SENTEVAL_SEED

SENTENCE_ROWS: dict[str, dict[str, str]] = {
    "qt": {"HCL Table 2": "qt", "UnDiMix Table 4": "qt"},
    "debiased": {"HCL Table 2": "debiased"},
    "hard-beta1": {"HCL Table 2": "hard-beta1", "UnDiMix Table 4": "hcl"},
    "hard-beta2": {"HCL Table 2": "hard-beta2"},
    "undimix": {"UnDiMix Table 4": "undimix"},
}
"""Row -> the paper's table it is a row of -> that row's key in :mod:`hcl_cli.presets.sentences`."""
PAPER_TABLES = {"HCL Table 2": (HCL_ROWS, HCL_COLUMNS), "UnDiMix Table 4": (UNDIMIX_ROWS, UNDIMIX_COLUMNS)}
SENTENCE_GROUPS = {
    "sentences": tuple(SENTENCE_ROWS),
    "hcl-table2": tuple(row for row, tables in SENTENCE_ROWS.items() if "HCL Table 2" in tables),
    "undimix-table4": tuple(row for row, tables in SENTENCE_ROWS.items() if "UnDiMix Table 4" in tables),
}
BASELINES = ("word-embeddings", "untrained")
"""The runs read out once, at seed 0, beside the rows: the mean untrained word embeddings and the untrained encoder."""
RECIPE_KEYS = ("epochs", "batch_size", "lr", "qt_hidden", "word_dim", "context")
"""The pretrain values every row shares (its sampler values aside)."""


def text_default(name: str) -> Any:
    """``hcl pretrain``'s default for ``name`` on sentences (:meth:`~hcl_cli.option.Option.default_for`)."""
    return next(option for option in PretrainConfig.declared_options() if option.name == name).default_for("text")


@dataclass(frozen=True)
class Recipe:
    """What every row of a sentence table shares: the training (None: ``hcl pretrain``'s default on sentences) and
    SentEval's folds (outer and inner; SentEval's default 10, its prototyping setting 5)."""

    epochs: int | None = None
    batch_size: int | None = None
    folds: int = FOLDS

    def values(self) -> dict[str, Any]:
        """The recipe as a record holds it: every pretrain value of :data:`RECIPE_KEYS`, the folds and the readout's seed."""
        given = {"epochs": self.epochs, "batch_size": self.batch_size}
        training = {key: given.get(key) or text_default(key) for key in RECIPE_KEYS}
        return training | {"folds": self.folds, "readout_seed": SENTEVAL_SEED}


def sampler_values(row: str) -> dict[str, Any]:
    """Row ``row``'s sampler values: its preset's pretrain values less the recipe's (quick-thought's training)."""
    table, key = next(iter(SENTENCE_ROWS[row].items()))
    sampler, options, _ = PAPER_TABLES[table][0][key]
    return {key: value for key, value in {"sampler": sampler, **options}.items() if key not in QT_TRAINING}


def sentence_rows(names: list[str]) -> dict[str, dict[str, Any]]:
    """Row names and groups -> each row's sampler values, qt first; an unknown name is a usage error."""
    out: dict[str, dict[str, Any]] = {"qt": sampler_values("qt")}
    for name in names:
        for item in SENTENCE_GROUPS.get(name, (name,)):
            if item not in SENTENCE_ROWS:
                raise UsageError(
                    f"unknown sentence row {item!r}; the rows: {', '.join(SENTENCE_ROWS)} (groups: {', '.join(SENTENCE_GROUPS)})"
                )
            out.setdefault(item, sampler_values(item))
    return out


def papers() -> dict[str, Any]:
    """Each paper's table as the results file holds it: its columns and, per row of ours, the paper's numbers."""
    return {
        f"{table} (BookCorpus)": {
            "columns": list(columns),
            "rows": {row: list(rows[tables[table]][2]) for row, tables in SENTENCE_ROWS.items() if table in tables},
        }
        for table, (rows, columns) in PAPER_TABLES.items()
    }
