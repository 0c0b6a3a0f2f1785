"""SentEval's readout on fixed features: the same accuracies as scikit-learn's own (nested) cross-validation on the same
folds, C chosen as SentEval's validation.py chooses it, MRPC's [|u-v|, u*v] features with accuracy and F1, and the
same numbers bit for bit on a rerun."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score

from hcl_cli.errors import HclError, UsageError
from hcl_cli.text.readout import (
    CROSS_VALIDATED_C_GRID,
    MAX_ITERATIONS,
    SPLIT_C_GRID,
    cross_validated_readout,
    pair_features,
    split_readout,
    task_readout,
)


def noisy_classes(n: int, classes: int, seed: int, dims: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping Gaussian classes: learnable, but not perfectly, so that C matters."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    return rng.normal(size=(n, dims)) + 0.8 * np.eye(classes, dims)[y], y


def searched(seed: int, grid: tuple[float, ...]) -> GridSearchCV:
    classifier = LogisticRegression(max_iter=MAX_ITERATIONS, random_state=seed)
    return GridSearchCV(classifier, {"C": list(grid)}, cv=StratifiedKFold(10, shuffle=True, random_state=seed), scoring="accuracy")


def sentevals_choice(x: np.ndarray, y: np.ndarray, grid: tuple[float, ...], seed: int) -> float:
    """validation.py's scan (KFoldClassifier.run, sklearn path): each C's mean accuracy over a seeded stratified 10-fold
    split, np.argmax over the grid (the first, smallest C on a tie)."""
    scores = []
    for c in grid:
        fold_scores = []
        for train, test in StratifiedKFold(n_splits=10, shuffle=True, random_state=seed).split(x, y):
            classifier = LogisticRegression(C=c, max_iter=MAX_ITERATIONS, random_state=seed).fit(x[train], y[train])
            fold_scores.append(classifier.score(x[test], y[test]))
        scores.append(np.mean(fold_scores))
    return grid[int(np.argmax(scores))]


def test_cross_validation_equals_scikit_learns_nested_cross_validation() -> None:
    x, y = noisy_classes(160, 2, seed=0)
    result = cross_validated_readout(x, y, seed=7)
    outer = StratifiedKFold(10, shuffle=True, random_state=7)
    expected = cross_val_score(searched(7, CROSS_VALIDATED_C_GRID), x, y, cv=outer, scoring="accuracy")
    assert result.fold_accuracies == tuple(expected)
    assert result.accuracy == float(np.mean(expected)) and 0.6 < result.accuracy < 1.0
    train, _ = next(outer.split(x, y))
    assert result.chosen_c[0] == sentevals_choice(x[train], y[train], CROSS_VALIDATED_C_GRID, 7)
    assert len(set(result.chosen_c)) > 1 or result.chosen_c[0] != CROSS_VALIDATED_C_GRID[0]  # the scan reaches past the first C
    assert result.c_grid == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def test_a_split_task_chooses_c_on_train_and_scores_test_as_scikit_learn() -> None:
    x, y = noisy_classes(240, 6, seed=1)
    train, test = np.arange(240) < 200, np.arange(240) >= 200
    result = task_readout("TREC", x, y, np.where(train, "train", "test"), seed=3)
    search = searched(3, SPLIT_C_GRID).fit(x[train], y[train])
    assert result.accuracy == search.score(x[test], y[test]) and result.f1 is None
    assert result.chosen_c == (search.best_params_["C"],) == (sentevals_choice(x[train], y[train], SPLIT_C_GRID, 3),)
    assert result.dev_accuracy == search.best_score_ and result.c_grid == (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


def test_mrpc_reads_out_pair_features_with_accuracy_and_f1() -> None:
    u = np.array([[1.0, -2.0], [0.5, 3.0]])
    v = np.array([[4.0, 1.0], [0.5, -1.0]])
    assert pair_features(u, v).tolist() == [[3.0, 3.0, 4.0, -2.0], [0.0, 4.0, 0.25, -3.0]]
    rng = np.random.default_rng(2)
    first = rng.normal(size=(200, 4))
    labels = np.arange(200) % 2
    second = first + rng.normal(size=(200, 4)) * np.where(labels == 1, 0.3, 1.5)[:, None]  # paraphrases lie close
    splits = np.where(np.arange(200) < 150, "train", "test")
    result = task_readout("MRPC", first, labels, splits, second, seed=5)
    features = pair_features(first, second)
    search = searched(5, SPLIT_C_GRID).fit(features[:150], labels[:150])
    predicted = search.predict(features[150:])
    assert result.accuracy == float(np.mean(predicted == labels[150:])) and result.accuracy > 0.6
    assert result.f1 == float(f1_score(labels[150:], predicted))


def test_the_same_features_give_the_same_numbers_bit_for_bit() -> None:
    x, y = noisy_classes(150, 2, seed=4, dims=8)
    splits = ["all"] * 150
    first = task_readout("MR", x, y, splits, seed=11, folds=4)
    assert task_readout("MR", x.copy(), y.copy(), splits, seed=11, folds=4) == first
    assert task_readout("MR", x, y, splits, seed=12, folds=4).fold_accuracies != first.fold_accuracies  # the seed draws the folds


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda x, y: cross_validated_readout(np.where(x > 2, np.nan, x), y), HclError, "NaN or infinite"),
        (lambda x, y: cross_validated_readout(x[:20], y[:20]), UsageError, "too few for 10 folds"),
        (lambda x, y: task_readout("MRPC", x, y, ["train"] * len(y)), UsageError, "second-sentence embeddings are needed"),
        (lambda x, y: task_readout("TREC", x, y, ["train"] * len(y)), UsageError, "both must hold items"),
        (lambda x, y: task_readout("CR", x, y[:10], ["all"] * len(y)), UsageError, "expected one each per item"),
        (lambda x, y: split_readout(x, y, x[:, :3], y), UsageError, "the test features 3"),
        (lambda x, y: cross_validated_readout(x, y, c_grid=[0.0, 1.0]), UsageError, "C grid must be positive"),
    ],
)
def test_unusable_inputs_are_refused_in_one_line(call, error: type[Exception], message: str) -> None:  # noqa: ANN001
    x, y = noisy_classes(160, 2, seed=0)
    with pytest.raises(error, match=message):
        call(x, y)
