"""The harness's AUC by ranks: hand-computed values, and scikit-learn's on tied data."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from crag_heuristic._calibration.auc import auc, failure_auc
from crag_heuristic._exceptions import InputError


def test_hand_computed_values() -> None:
    # positives 0.8, 0.4; negatives 0.6, 0.2: pairs (0.8>0.6) (0.8>0.2) (0.4<0.6) (0.4>0.2) -> 3/4
    assert auc([1, 0, 1, 0], [0.8, 0.6, 0.4, 0.2]) == 0.75
    # a tie between a positive and a negative counts one half: (1 + 0.5) / 2
    assert auc([1, 1, 0], [0.5, 0.9, 0.5]) == 0.75
    assert auc([0, 1], [0.1, 0.2]) == 1.0
    assert auc([0, 1], [0.2, 0.1]) == 0.0
    assert auc([0, 1, 0, 1], [3.0, 3.0, 3.0, 3.0]) == 0.5


def test_failure_auc_reads_a_high_score_as_not_failed() -> None:
    failed = np.array([True, False, False])
    assert failure_auc(failed, np.array([0.1, 0.7, 0.9])) == 1.0
    assert failure_auc(failed, np.array([0.9, 0.7, 0.1])) == 0.0
    assert failure_auc(np.array([True, True]), np.array([0.1, 0.2])) is None


@pytest.mark.parametrize("seed", range(20))
def test_equals_scikit_learn_on_tied_scores(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    y = rng.random(n) < rng.uniform(0.05, 0.95)
    y[0], y[1] = True, False
    score = np.round(rng.normal(size=n), int(rng.integers(0, 3)))  # coarse: many ties
    assert auc(y, score) == pytest.approx(roc_auc_score(y, score), abs=1e-12)


@pytest.mark.parametrize(
    ("positive", "score", "message"),
    [
        ([1, 1], [0.1, 0.2], "both classes"),
        ([1, 0], [0.1, float("nan")], "finite"),
        ([1, 0, 1], [0.1, 0.2], "one length"),
    ],
)
def test_refuses_what_has_no_auc(positive: list[int], score: list[float], message: str) -> None:
    with pytest.raises(InputError, match=message):
        auc(positive, score)
