"""The penalised logistic regression behind calibration, against scikit-learn and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from crag_heuristic._calibration.logistic import fit_logistic, weighted_standardizer


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(300, 3))
    y = (x @ np.array([1.5, -1.0, 0.0]) + rng.normal(size=300) > 0).astype(float)
    return x, y


def test_without_prior_it_is_scikit_learns_objective(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    for c in (0.01, 1.0, 100.0):
        ours = fit_logistic(x, y, c=c)
        theirs = LogisticRegression(C=c, max_iter=10_000, tol=1e-10).fit(x, y)
        assert ours.coef == pytest.approx(theirs.coef_[0], abs=1e-4)
        assert ours.intercept == pytest.approx(theirs.intercept_[0], abs=1e-4)


def test_a_weight_of_two_is_the_sample_twice(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    weights = np.where(np.arange(len(y)) < 50, 2.0, 1.0)
    doubled = fit_logistic(np.vstack([x, x[:50]]), np.concatenate([y, y[:50]]), c=1.0)
    weighted = fit_logistic(x, y, c=1.0, weights=weights)
    assert weighted.coef == pytest.approx(doubled.coef, abs=1e-5)


def test_the_prior_pulls_the_coefficients(data: tuple[np.ndarray, np.ndarray]) -> None:
    x, y = data
    prior = np.array([0.0, 0.0, 3.0])  # far from the truth on every coefficient
    free = fit_logistic(x, y, c=1000.0)
    held = fit_logistic(x, y, c=1e-6, prior=prior)
    loose = fit_logistic(x, y, c=1000.0, prior=prior)
    assert held.coef == pytest.approx(prior, abs=1e-3)  # no data weight: the prior
    assert loose.coef == pytest.approx(free.coef, abs=0.05)  # much data weight: the data
    assert 0 < fit_logistic(x, y, c=0.01, prior=prior).coef[2] < 3.0


def test_predict_is_the_sigmoid_of_the_logit() -> None:
    x = np.array([[0.0], [1.0], [-1.0], [0.0], [2.0], [-2.0]])
    y = np.array([0, 1, 0, 1, 1, 0])
    fit = fit_logistic(x, y, c=1.0)
    assert fit.predict(x) == pytest.approx(
        1 / (1 + np.exp(-(fit.intercept + x[:, 0] * fit.coef[0])))
    )


def test_weighted_standardizer_by_hand() -> None:
    x = np.array([[1.0, 5.0], [3.0, 5.0]])
    mean, scale = weighted_standardizer(x, np.array([1.0, 3.0]))
    # weighted mean of (1, 3) with weights (1, 3) = 2.5; variance = (1*2.25 + 3*0.25)/4 = 0.75
    assert mean == pytest.approx([2.5, 5.0])
    assert scale == pytest.approx([np.sqrt(0.75), 1.0])  # a constant column keeps scale 1


def test_fit_intercept_by_hand() -> None:
    from crag_heuristic._calibration.logistic import fit_intercept

    y = np.array([1.0, 1.0, 0.0, 0.0, 0.0])
    # no offset: the log-odds of the base rate, ln(0.4 / 0.6)
    assert fit_intercept(np.zeros(5), y) == pytest.approx(np.log(0.4 / 0.6), abs=1e-9)
    # a weight of 2 on the positives: rate 4 / 7
    w = np.array([2.0, 2.0, 1.0, 1.0, 1.0])
    assert fit_intercept(np.zeros(5), y, weights=w) == pytest.approx(np.log(4 / 3), abs=1e-9)
    # a constant offset moves it by as much
    assert fit_intercept(np.full(5, 1.5), y) == pytest.approx(np.log(0.4 / 0.6) - 1.5, abs=1e-9)


def test_strata_learn_the_coefficients_within_them() -> None:
    """Two strata: within each, x says nothing about y; between them, the one with the
    higher x has the higher rate. A pooled fit reads x as evidence; a fit within strata
    does not."""
    rng = np.random.default_rng(3)
    n = 400
    stratum = np.repeat([0, 1], n // 2)
    x = rng.normal(size=(n, 1)) + 2.0 * stratum[:, None]
    y = (rng.random(n) < np.where(stratum == 1, 0.8, 0.2)).astype(float)
    pooled = fit_logistic(x, y, c=100.0)
    within = fit_logistic(x, y, c=100.0, strata=stratum)
    assert pooled.coef[0] > 0.5
    assert abs(within.coef[0]) < 0.15
    # the intercept returned is refitted on every row with the coefficient fixed
    from crag_heuristic._calibration.logistic import fit_intercept

    assert within.intercept == pytest.approx(fit_intercept(x @ within.coef, y), abs=1e-9)
    # one stratum is the plain fit
    same = fit_logistic(x, y, c=1.0, strata=np.zeros(n))
    plain = fit_logistic(x, y, c=1.0)
    assert same.coef == pytest.approx(plain.coef, abs=1e-5)
    assert same.intercept == pytest.approx(plain.intercept, abs=1e-5)
    with pytest.raises(ValueError, match="every row"):
        fit_logistic(x, y, strata=stratum[:-1])


def test_shrink_towards_by_hand() -> None:
    from crag_heuristic._calibration.logistic import shrink_towards

    full = np.array([2.0, 1.0, -1.0])
    anchor = np.array([1.0, 0.0, 0.0])
    assert shrink_towards(full, anchor, 0.25) == pytest.approx([1.25, 0.25, -0.25])
    assert shrink_towards(full, anchor, 1.0) == pytest.approx(full)


def test_fit_intercept_on_large_offsets() -> None:
    """Newton's steps diverged here (7331.8): the optimum is ln(1 / 1), the first three
    rows' two positives in three with the fourth certain to be positive at any sane b."""
    from crag_heuristic._calibration.logistic import fit_intercept

    b = fit_intercept(np.array([0.0, 0.0, 0.0, 40.0]), np.array([1.0, 0.0, 1.0, 0.0]))
    p = 1 / (1 + np.exp(-(b + np.array([0.0, 0.0, 0.0, 40.0]))))
    assert float(p @ np.ones(4)) == pytest.approx(2.0, abs=1e-6)  # the likelihood's root
    assert b == pytest.approx(-0.6931, abs=1e-3)
    rng = np.random.default_rng(0)
    for scale in (10.0, 100.0):
        offsets, y = rng.normal(scale=scale, size=50), (rng.random(50) < 0.5).astype(float)
        b = fit_intercept(offsets, y)
        p = 1 / (1 + np.exp(-np.clip(b + offsets, -500, 500)))
        assert float((p - y).sum()) == pytest.approx(0.0, abs=1e-6)
