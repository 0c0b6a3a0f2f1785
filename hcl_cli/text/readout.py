"""SentEval's classification protocol on fixed sentence features (Conneau & Kiela, "SentEval: An Evaluation Toolkit for
Universal Sentence Representations", LREC 2018, Sec. 4: logistic regression, its L2 strength chosen by cross-validation),
the readout of quick-thought vectors in HCL Sec. 5.3 / Table 2 and UnDiMix Sec. 4.2 / Table 4.

As SentEval's ``senteval/tools/validation.py`` does it with scikit-learn's logistic regression (``usepytorch=False``):

- MR, CR, SUBJ, MPQA (``InnerKFoldClassifier``): a stratified, shuffled ``folds``-fold split of all sentences; in each
  training fold an inner stratified, shuffled ``folds``-fold split (the same seed) picks ``C`` from
  :data:`CROSS_VALIDATED_C_GRID` (``2**-2 .. 2**3``) by mean accuracy, ties to the smaller ``C``; the classifier refitted
  on the whole training fold is scored on the test fold, and the task's accuracy is the mean over the test folds.
- TREC and MRPC (``KFoldClassifier``): ``C`` from :data:`SPLIT_C_GRID` (``2**-1 .. 2**5``) by a stratified, shuffled
  ``folds``-fold cross-validation on the train split, refitted on the whole train split, scored on the test split.
  MRPC's features are ``[|u - v|, u * v]`` of its pair's embeddings (``mrpc.py``), scored by accuracy and F1.

``folds`` is 10, SentEval's ``kfold`` in its examples and the quick-thought papers' protocol. The features are not
standardised (SentEval does not). Every split is seeded from ``seed`` (SentEval's 1111 by default) and the solver is
deterministic, so the same features give the same numbers bit for bit. Differences, each named: scikit-learn's current
``LogisticRegression`` (L-BFGS on the multinomial loss, ``max_iter`` :data:`MAX_ITERATIONS`) where SentEval's ran
liblinear's one-against-rest of its time; the mean inner accuracy is compared unrounded (SentEval rounds it to 0.01 %
first); accuracies are fractions, not percentages; and SentEval's folds are drawn over its samples sorted by length,
ours over the file order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hcl_cli.errors import HclError, UsageError
from hcl_cli.progress import progress
from hcl_cli.text.senteval import CROSS_VALIDATED, check_task

if TYPE_CHECKING:
    from sklearn.model_selection import GridSearchCV

SENTEVAL_SEED = 1111
FOLDS = 10
CROSS_VALIDATED_C_GRID = tuple(2.0**t for t in range(-2, 4))
"""``InnerKFoldClassifier``'s ``regs = [2**t for t in range(-2, 4, 1)]``."""
SPLIT_C_GRID = tuple(2.0**t for t in range(-1, 6))
"""``KFoldClassifier``'s ``regs = [2**t for t in range(-1, 6, 1)]``."""
MAX_ITERATIONS = 1000


@dataclass(frozen=True)
class ReadoutResult:
    """A task's test ``accuracy`` (the mean over the test folds of a cross-validated task, else on the test split) and,
    for MRPC, the test ``f1`` of the paraphrase class; ``dev_accuracy`` the mean inner accuracy of the chosen ``C``
    (averaged over the test folds); ``fold_accuracies`` and ``chosen_c`` per test fold (one each for a split task)."""

    accuracy: float
    f1: float | None
    dev_accuracy: float
    fold_accuracies: tuple[float, ...]
    chosen_c: tuple[float, ...]
    folds: int
    c_grid: tuple[float, ...]
    seed: int


def pair_features(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """MRPC's features of pairs (u, v), ``mrpc.py``'s ``np.c_[np.abs(u - v), u * v]``: (n, d) and (n, d) to (n, 2d)."""
    u, v = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if u.ndim != 2 or u.shape != v.shape:
        raise UsageError(f"pair features need two (n, d) arrays of one shape, got {list(u.shape)} and {list(v.shape)}")
    return np.concatenate([np.abs(u - v), u * v], axis=1)


def task_readout(
    task: str,
    embeddings: np.ndarray,
    labels: Sequence[int] | np.ndarray,
    splits: Sequence[str],
    seconds: np.ndarray | None = None,
    *,
    seed: int = SENTEVAL_SEED,
    folds: int = FOLDS,
) -> ReadoutResult:
    """Read ``task`` out on its items' ``embeddings`` (n, d), ``labels`` and ``splits`` (as
    :class:`hcl_cli.text.senteval.SentEvalTask` gives them; for MRPC ``embeddings`` are the first sentences' and
    ``seconds`` the second sentences'), by the protocol of the module docstring."""
    check_task(task)
    y = np.asarray(labels)
    split = np.asarray(splits)
    if (task == "MRPC") != (seconds is not None):
        raise UsageError(f"{task}: second-sentence embeddings are {'needed' if task == 'MRPC' else 'only for MRPC'}")
    x = pair_features(embeddings, seconds) if seconds is not None else np.asarray(embeddings, dtype=np.float64)
    if len(y) != len(x) or len(split) != len(x):
        raise UsageError(f"{task}: {len(x)} embeddings, {len(y)} labels and {len(split)} splits: expected one each per item")
    if task in CROSS_VALIDATED:
        return cross_validated_readout(x, y, seed=seed, folds=folds)
    train, test = split == "train", split == "test"
    if not train.any() or not test.any() or not (train | test).all():
        raise UsageError(f"{task}: every item must be in the train or the test split, and both must hold items")
    return split_readout(x[train], y[train], x[test], y[test], seed=seed, folds=folds, f1=task == "MRPC")


def cross_validated_readout(
    features: np.ndarray,
    labels: Sequence[int] | np.ndarray,
    *,
    folds: int = FOLDS,
    c_grid: Sequence[float] = CROSS_VALIDATED_C_GRID,
    seed: int = SENTEVAL_SEED,
) -> ReadoutResult:
    """``InnerKFoldClassifier``: C chosen by an inner cross-validation inside each of ``folds`` outer folds."""
    from sklearn.model_selection import StratifiedKFold

    x, y, grid = checked(features, labels, c_grid)
    smallest = int(np.unique(y, return_counts=True)[1].min())
    if smallest - -(-smallest // folds) < folds:  # a test fold takes at most ceil(count / folds) of a class
        raise UsageError(f"the smallest class has {smallest} items: too few for {folds} folds, each with {folds} inner folds")
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    accuracies, chosen, dev = [], [], []
    splits = list(splitter.split(x, y))
    for train, test in progress(splits, len(splits), "SentEval folds", "fold", "hcl linear-eval"):
        search = c_search(x[train], y[train], grid, folds, seed)
        accuracies.append(float(search.score(x[test], y[test])))
        chosen.append(float(search.best_params_["C"]))
        dev.append(float(search.best_score_))
    return ReadoutResult(float(np.mean(accuracies)), None, float(np.mean(dev)), tuple(accuracies), tuple(chosen), folds, grid, seed)


def split_readout(
    train_features: np.ndarray,
    train_labels: Sequence[int] | np.ndarray,
    test_features: np.ndarray,
    test_labels: Sequence[int] | np.ndarray,
    *,
    folds: int = FOLDS,
    c_grid: Sequence[float] = SPLIT_C_GRID,
    seed: int = SENTEVAL_SEED,
    f1: bool = False,
) -> ReadoutResult:
    """``KFoldClassifier``: C chosen by ``folds``-fold cross-validation on the train split, the classifier refitted on
    it and scored on the test split; with ``f1``, also the test F1 of class 1 (MRPC's paraphrases)."""
    from sklearn.metrics import f1_score

    x, y, grid = checked(train_features, train_labels, c_grid)
    test_x, test_y, _ = checked(test_features, test_labels, grid, classes=1)
    if test_x.shape[1] != x.shape[1]:
        raise UsageError(f"the train features have {x.shape[1]} dimensions, the test features {test_x.shape[1]}")
    smallest = int(np.unique(y, return_counts=True)[1].min())
    if smallest < folds:
        raise UsageError(f"the smallest class of the train split has {smallest} items, fewer than the {folds} folds")
    search = c_search(x, y, grid, folds, seed)
    predicted = search.predict(test_x)
    accuracy = float(np.mean(predicted == test_y))
    score = float(f1_score(test_y, predicted)) if f1 else None
    return ReadoutResult(accuracy, score, float(search.best_score_), (accuracy,), (float(search.best_params_["C"]),), folds, grid, seed)


def c_search(x: np.ndarray, y: np.ndarray, grid: tuple[float, ...], folds: int, seed: int) -> GridSearchCV:
    """Logistic regression with C chosen from ``grid`` by a stratified, shuffled ``folds``-fold split of ``(x, y)`` seeded by
    ``seed`` (mean accuracy, ties to the first, the smallest C), refitted on all of ``(x, y)``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    classifier = LogisticRegression(max_iter=MAX_ITERATIONS, random_state=seed)
    inner = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return GridSearchCV(classifier, {"C": list(grid)}, cv=inner, scoring="accuracy").fit(x, y)


def checked(
    features: np.ndarray, labels: Sequence[int] | np.ndarray, c_grid: Sequence[float], classes: int = 2
) -> tuple[np.ndarray, np.ndarray, tuple[float, ...]]:
    """The features as float64 (n, d), the labels (n,) and the grid, refused where unusable: a :class:`UsageError` for
    shapes, fewer than ``classes`` classes or a C that is not positive; an :class:`HclError` for non-finite features."""
    x, y = np.asarray(features, dtype=np.float64), np.asarray(labels)
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y) or not len(x):
        raise UsageError(f"the SentEval readout needs features (n, d) and n labels, got {list(x.shape)} and {list(y.shape)}")
    if not np.isfinite(x).all():
        raise HclError("the embeddings contain NaN or infinite values (did the training diverge?)")
    if len(np.unique(y)) < classes:
        raise UsageError(f"the SentEval readout needs at least {classes} classes, the labels hold {len(np.unique(y))}")
    grid = tuple(float(c) for c in c_grid)
    if not grid or not all(np.isfinite(c) and c > 0 for c in grid):
        raise UsageError(f"the C grid must be positive numbers, got {list(c_grid)}")
    return x, y, grid
