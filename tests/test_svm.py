"""The papers' SVM protocol: the official evaluation transcribed, deterministic for a seed, mean and std over folds and repeats."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

from hcl_cli.errors import HclError, UsageError
from hcl_cli.graph.svm import PAPER_C_GRID, split_seed, svm_protocol


def noisy_classes(n: int = 90, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three overlapping Gaussian classes in 6 dimensions with string labels (the encoder must handle any labels)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.array(["-1", "1", "7"]), n // 3)
    x = rng.normal(size=(n, 6)) + np.repeat(np.eye(3, 6) * 1.2, n // 3, axis=0)
    return x, y


def official_svc_classify(x: np.ndarray, y: np.ndarray, random_state: int) -> float:
    """HCL graph/evaluate_embedding.py lines 14-28 (search=True), with the outer split seeded."""
    kf = StratifiedKFold(n_splits=10, shuffle=True, random_state=random_state)
    accuracies = []
    for train_index, test_index in kf.split(x, y):
        params = {"C": [0.001, 0.01, 0.1, 1, 10, 100, 1000]}
        classifier = GridSearchCV(SVC(), params, cv=5, scoring="accuracy", verbose=0)
        classifier.fit(x[train_index], y[train_index])
        accuracies.append(accuracy_score(y[test_index], classifier.predict(x[test_index])))
    return float(np.mean(accuracies))


def test_one_repeat_is_the_official_evaluation() -> None:
    x, y = noisy_classes()
    result = svm_protocol(x, y, seed=3)
    labels = np.searchsorted(np.unique(y), y)
    assert result.repeat_means == [pytest.approx(official_svc_classify(x, labels, split_seed(3, 0)), abs=1e-12)]
    assert 0.4 < result.mean < 1.0  # learnable but noisy data
    assert len(result.fold_accuracies) == 1 and len(result.fold_accuracies[0]) == 10
    assert all(c in PAPER_C_GRID for c in result.chosen_c[0])


def test_the_protocol_is_deterministic_for_a_seed() -> None:
    x, y = noisy_classes()
    settings = {"folds": 5, "repeats": 2, "c_grid": [0.01, 1.0, 100.0], "inner_folds": 3}
    first = svm_protocol(x, y, seed=11, **settings)
    assert svm_protocol(x, y, seed=11, **settings) == first
    other = svm_protocol(x, y, seed=12, **settings)
    assert other.fold_accuracies != first.fold_accuracies


def test_mean_and_std_are_over_every_fold_of_every_repeat() -> None:
    x, y = noisy_classes()
    result = svm_protocol(x, y, folds=4, repeats=3, c_grid=[0.1, 10.0], inner_folds=3, seed=0)
    every = np.array(result.fold_accuracies)
    assert every.shape == (3, 4) and np.array(result.chosen_c).shape == (3, 4)
    assert result.mean == pytest.approx(every.mean()) and result.std == pytest.approx(every.std())
    assert result.repeat_means == pytest.approx(every.mean(axis=1).tolist())
    assert result.repeat_std == pytest.approx(every.mean(axis=1).std())
    assert result.std > 0 and len(set(result.repeat_means)) > 1  # the repeats split differently
    assert set(np.ravel(result.chosen_c)) <= {0.1, 10.0} and result.c_grid == [0.1, 10.0]


def test_separable_embeddings_score_one() -> None:
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 30)
    x = rng.normal(size=(60, 4)) * 0.1 + y[:, None] * 5
    result = svm_protocol(x, y, folds=5, repeats=2, c_grid=[1.0, 10.0], inner_folds=3)
    assert result.mean == 1.0 and result.std == 0.0


def test_bad_settings_are_usage_errors_and_bad_embeddings_runtime_errors() -> None:
    x, y = noisy_classes(n=30)
    with pytest.raises(UsageError, match="smallest class has 10 graphs, fewer than the 11 folds"):
        svm_protocol(x, y, folds=11)
    with pytest.raises(UsageError, match="at least 2 folds"):
        svm_protocol(x, y, folds=1)
    with pytest.raises(UsageError, match="C grid"):
        svm_protocol(x, y, c_grid=[1.0, -1.0])
    with pytest.raises(UsageError, match="at least 2 classes"):
        svm_protocol(x, np.zeros(30, dtype=int))
    with pytest.raises(UsageError, match=r"embeddings \(n, d\) and n labels"):
        svm_protocol(x, y[:-1])
    x[4, 2] = np.nan
    with pytest.raises(HclError, match="NaN"):
        svm_protocol(x, y)
