"""The papers' SVM protocol on frozen graph embeddings (HCL App. D.2; HCL's graph/evaluate_embedding.py).

As the official ``svc_classify`` (evaluate_embedding.py lines 14-28) does it: the labels encoded
0..k-1, then ``StratifiedKFold(10, shuffle=True)`` over all graphs; inside each training fold a
``GridSearchCV(SVC(), {"C": [0.001, ..., 1000]}, cv=5, scoring="accuracy")`` picks C (its ``cv=5``
is an unshuffled stratified 5-fold split, and ties go to the smaller C) and refits on the whole
training fold; the fold's score is the test accuracy. ``SVC`` keeps sklearn's defaults (RBF kernel,
``gamma="scale"``) and the embeddings are not standardised, as in the code.

Differences, each a parameter: the code draws its outer split from an unseeded generator and runs
it once per trained encoder (``range(1)``), where here every split is seeded from ``seed``, so the
protocol is deterministic, and ``repeats`` re-splits the same embeddings (the papers' 10 repeats
retrain the encoder from scratch: run this once per trained encoder for those).

The inductive protocol (docs/protocol-graphs.md), for an encoder that read labels in pretraining: one fold of the
above whose split is given (:func:`heldout_svm`), fitted on the graphs the encoder pretrained on and scored on the
held-out graphs it never saw; :func:`inductive_fold` draws the tables' split, run seed s holding out fold s of one
seeded 10-fold split, so that ten seeds score every graph once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hcl_cli.errors import HclError, UsageError
from hcl_cli.progress import progress

if TYPE_CHECKING:
    from sklearn.model_selection import GridSearchCV

INDUCTIVE_SPLIT_SEED = 0
"""The seed of the one outer split the inductive protocol's folds come from (:func:`inductive_fold`)."""

PAPER_C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
"""evaluate_embedding.py line 22: ``params = {'C':[0.001, 0.01,0.1,1,10,100,1000]}``."""
PAPER_FOLDS = 10
PAPER_INNER_FOLDS = 5


@dataclass(frozen=True)
class SvmResult:
    """Test accuracies of every fold of every repeat, and their summaries.

    ``mean`` and ``std`` are over all ``repeats * folds`` fold accuracies (std with ddof 0, as
    numpy's default that the papers' tables use); ``repeat_means`` is each repeat's mean (the number
    the official code reports per run) and ``repeat_std`` their std; ``chosen_c[r][f]`` is the C
    the grid search picked in fold f of repeat r. ``top5`` is the mean over folds of the share of
    test graphs whose class is among the 5 highest of the chosen SVC's ``decision_function``
    (``fold_top5`` per fold; 1.0 with 5 classes or fewer, as :func:`hcl_cli.metrics.topk_accuracy` caps k).
    """

    mean: float
    std: float
    repeat_means: list[float]
    repeat_std: float
    fold_accuracies: list[list[float]]
    top5: float
    fold_top5: list[list[float]]
    chosen_c: list[list[float]]
    folds: int
    inner_folds: int
    c_grid: list[float]
    seed: int


def split_seed(seed: int, repeat: int) -> int:
    """The seed of repeat ``repeat``'s outer split: independent streams per (seed, repeat)."""
    return int(np.random.SeedSequence([seed, repeat]).generate_state(1)[0])


def svm_protocol(
    embeddings: np.ndarray,
    labels: Sequence[int] | np.ndarray,
    *,
    folds: int = PAPER_FOLDS,
    repeats: int = 1,
    c_grid: Sequence[float] = PAPER_C_GRID,
    inner_folds: int = PAPER_INNER_FOLDS,
    seed: int = 0,
    progress_as: tuple[str, str] = ("hcl linear-eval", "SVM folds"),
) -> SvmResult:
    """Run the protocol of the module docstring on ``embeddings`` (n, d) and their ``labels`` (n,); its progress lines
    begin with ``progress_as`` (the command that runs it, and what it reads out).

    Deterministic for a given ``seed``. Invalid settings (fewer than 2 folds, a class with fewer
    graphs than folds or, in an outer training fold, than inner folds, an empty or non-positive C
    grid) are a :class:`UsageError`; non-finite embeddings (a diverged encoder) an :class:`HclError`.
    scikit-learn is imported here: at the top it would cost every ``hcl linear-eval`` of images its
    import (benchmarks/results/stage_imports.json).
    """
    from sklearn.model_selection import StratifiedKFold
    from sklearn.preprocessing import LabelEncoder

    x = np.asarray(embeddings, dtype=np.float64)
    y_raw = np.asarray(labels)
    if x.ndim != 2 or y_raw.ndim != 1 or len(x) != len(y_raw):
        raise UsageError(f"the SVM protocol needs embeddings (n, d) and n labels, got {list(x.shape)} and {list(y_raw.shape)}")
    if not np.isfinite(x).all():
        raise HclError("the embeddings contain NaN or infinite values (did the training diverge?)")
    if folds < 2 or inner_folds < 2:
        raise UsageError(f"the SVM protocol needs at least 2 folds and 2 inner folds, got {folds} and {inner_folds}")
    if repeats < 1:
        raise UsageError(f"the SVM protocol needs at least 1 repeat, got {repeats}")
    grid = [float(c) for c in c_grid]
    if not grid or not all(np.isfinite(c) and c > 0 for c in grid):
        raise UsageError(f"the C grid must be positive numbers, got {list(c_grid)}")
    y = LabelEncoder().fit_transform(y_raw)
    counts = np.bincount(y)
    if len(counts) < 2:
        raise UsageError("the SVM protocol needs at least 2 classes")
    if counts.min() < folds:
        raise UsageError(f"the smallest class has {counts.min()} graphs, fewer than the {folds} folds of the SVM protocol")
    smallest = int(counts.min())
    in_training = smallest - math.ceil(smallest / folds)  # a stratified test fold holds at most ceil(count / folds) of a class
    if in_training < inner_folds:
        raise UsageError(
            f"the smallest class has {smallest} graphs, {in_training} in an outer training fold: fewer than the "
            f"{inner_folds} inner folds of the SVM protocol's search for C (lower --svm-inner-folds or --svm-folds)"
        )

    accuracies: list[list[float]] = [[] for _ in range(repeats)]
    top5: list[list[float]] = [[] for _ in range(repeats)]
    chosen: list[list[float]] = [[] for _ in range(repeats)]
    splits = [
        (repeat, train, test)
        for repeat in range(repeats)
        for train, test in StratifiedKFold(n_splits=folds, shuffle=True, random_state=split_seed(seed, repeat)).split(x, y)
    ]
    for repeat, train, test in progress(splits, len(splits), progress_as[1], "fold", progress_as[0]):
        fold = score_fold(x, y, train, test, grid, inner_folds)
        accuracies[repeat].append(fold.accuracy)
        top5[repeat].append(fold.top5)
        chosen[repeat].append(fold.c)
    every = np.array(accuracies)
    repeat_means = every.mean(axis=1)
    return SvmResult(
        mean=float(every.mean()),
        std=float(every.std()),
        repeat_means=[float(m) for m in repeat_means],
        repeat_std=float(repeat_means.std()),
        fold_accuracies=accuracies,
        top5=float(np.mean(top5)),
        fold_top5=top5,
        chosen_c=chosen,
        folds=folds,
        inner_folds=inner_folds,
        c_grid=grid,
        seed=seed,
    )


@dataclass(frozen=True)
class FoldScore:
    """One outer fold: the held-out accuracy, its top-5 share and the C the inner search chose."""

    accuracy: float
    top5: float
    c: float


def score_fold(x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray, grid: Sequence[float], inner_folds: int) -> FoldScore:
    """evaluate_embedding.py's fold: ``GridSearchCV(SVC(), {"C": grid}, cv=inner_folds)`` on the training graphs
    ``x[train]`` (labels ``y``, encoded 0..k-1), refitted on all of them, scored on ``x[test]``."""
    from sklearn.metrics import accuracy_score
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    search = GridSearchCV(SVC(), {"C": list(grid)}, cv=inner_folds, scoring="accuracy")
    search.fit(x[train], y[train])
    classes = int(y.max()) + 1
    return FoldScore(
        float(accuracy_score(y[test], search.predict(x[test]))),
        top5_share(search, x[test], y[test], classes),
        float(search.best_params_["C"]),
    )


def inductive_fold(labels: Sequence[int] | np.ndarray, seed: int, folds: int = PAPER_FOLDS) -> tuple[np.ndarray, np.ndarray]:
    """The (training, held-out) graph indices of the inductive protocol's run ``seed`` (docs/protocol-graphs.md).

    One stratified ``folds``-fold split of all graphs, seeded by :data:`INDUCTIVE_SPLIT_SEED` (the same for every
    run), and run ``seed`` holds out its fold ``seed % folds``: ten seeds score each graph once, each with an encoder
    that never saw it. Both index arrays are sorted. Too small a class for the folds is a :class:`UsageError`.
    """
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(labels)
    smallest = int(np.unique(y, return_counts=True)[1].min()) if len(y) else 0
    if folds < 2 or smallest < folds:
        raise UsageError(
            f"the inductive protocol's {folds} folds need at least {folds} graphs of every class (the smallest has {smallest})"
        )
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=split_seed(INDUCTIVE_SPLIT_SEED, 0))
    train, test = list(splitter.split(np.zeros(len(y)), y))[seed % folds]
    return np.sort(train), np.sort(test)


def heldout_svm(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    *,
    c_grid: Sequence[float] = PAPER_C_GRID,
    inner_folds: int = PAPER_INNER_FOLDS,
) -> FoldScore:
    """The inductive protocol's readout: one fold of :func:`svm_protocol` whose split is given, the SVM (C by the
    inner search) fitted on the training graphs' embeddings and scored on the held-out graphs'. Too few training
    graphs of a class for the inner folds is a :class:`UsageError`; non-finite embeddings an :class:`HclError`."""
    from sklearn.preprocessing import LabelEncoder

    x = np.concatenate([np.asarray(train_x, dtype=np.float64), np.asarray(test_x, dtype=np.float64)])
    if not np.isfinite(x).all():
        raise HclError("the embeddings contain NaN or infinite values (did the training diverge?)")
    y = LabelEncoder().fit_transform(np.concatenate([np.asarray(train_y), np.asarray(test_y)]))
    train, test = np.arange(len(train_y)), np.arange(len(train_y), len(y))
    counts = np.bincount(y[train], minlength=int(y.max()) + 1)
    if len(counts) < 2 or counts.min() < inner_folds:
        raise UsageError(
            f"the training graphs hold {int(counts.min())} of a class, fewer than the {inner_folds} inner folds of the SVM's search for C"
        )
    return score_fold(x, y, train, test, [float(c) for c in c_grid], inner_folds)


def heldout_details(fold: FoldScore, c_grid: Sequence[float], inner_folds: int) -> dict[str, Any]:
    """What a metrics file records of :func:`heldout_svm` (its ``details.svm``): ``label_protocol: inductive``, the inner
    folds, the C grid and the chosen C."""
    return {"label_protocol": "inductive", "inner_folds": inner_folds, "c_grid": [float(c) for c in c_grid], "chosen_c": fold.c}


def svm_details(result: SvmResult) -> dict[str, Any]:
    """What a metrics file records of the protocol (its ``details.svm``): the std over the folds, the folds, repeats and inner
    folds, the C grid, per-repeat means and their std, every fold's accuracy and chosen C."""
    return {
        "std": result.std,
        "folds": result.folds,
        "repeats": len(result.repeat_means),
        "inner_folds": result.inner_folds,
        "c_grid": result.c_grid,
        "repeat_means": result.repeat_means,
        "repeat_std": result.repeat_std,
        "fold_accuracies": result.fold_accuracies,
        "chosen_c": result.chosen_c,
    }


def top5_share(search: GridSearchCV, x: np.ndarray, y: np.ndarray, classes: int) -> float:
    """The share of ``y`` among the 5 highest classes of the fitted search's ``decision_function`` (1.0 for 5 classes or fewer)."""
    if classes <= 5:
        return 1.0
    ranked = np.argsort(-search.decision_function(x), axis=1)[:, :5]
    return float((ranked == y[:, None]).any(axis=1).mean())
