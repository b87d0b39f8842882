"""refit_stage: a fitted stage moved towards new labels, with sample weights, by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from crag_heuristic import InputError
from crag_heuristic.calibration import refit_stage
from crag_heuristic.config import LogisticStage, ModelTerm


def _stage(weight: float, *, mean: float = 0.0, scale: float = 1.0) -> LogisticStage:
    return LogisticStage(
        intercept=0.0,
        terms=(ModelTerm(feature="similarity_top", weight=weight, mean=mean, scale=scale),),
    )


def test_unequal_weights_by_hand() -> None:
    # Rows z = +1 (good, weight 3) and z = -1 (failed, weight 1); rescaled to mean 1 the
    # weights are 1.5 and 0.5. With C = 1 and the stage's weight beta0 = -0.75, the
    # gradient of  C sum w logloss + (beta - beta0)^2 / 2  vanishes at b = ln 3, beta = 0:
    #   d/db:    1.5 (sigmoid(ln 3) - 1) + 0.5 sigmoid(ln 3) = 1.5 (-1/4) + 0.5 (3/4) = 0
    #   d/dbeta: 1.5 (-1/4) (+1) + 0.5 (3/4) (-1) + (0 - (-0.75)) = -0.75 + 0.75 = 0
    rows = [{"similarity_top": 1.0}, {"similarity_top": -1.0}]
    refit = refit_stage(_stage(-0.75), rows, [True, False], weights=[3.0, 1.0], c=1.0)
    assert refit.intercept == pytest.approx(math.log(3), abs=1e-4)
    assert refit.terms[0].weight == pytest.approx(0.0, abs=1e-4)


def test_the_weights_scale_does_not_matter() -> None:
    rows = [{"similarity_top": 1.0}, {"similarity_top": -1.0}]
    small = refit_stage(_stage(-0.75), rows, [1, 0], weights=[3.0, 1.0], c=1.0)
    large = refit_stage(_stage(-0.75), rows, [1, 0], weights=[300.0, 100.0], c=1.0)
    assert large.intercept == pytest.approx(small.intercept, abs=1e-6)
    assert large.terms[0].weight == pytest.approx(small.terms[0].weight, abs=1e-6)


def test_the_features_are_standardised_as_the_stage_does() -> None:
    # raw 2.5 and -1.5 with mean 0.5 and scale 2 are z = +1 and -1; equal weights, C = 1:
    # by symmetry b = 0, and d/dbeta = -2 C sigmoid(-beta) + beta - beta0 = 0 at
    # beta = ln 3 (sigmoid(-ln 3) = 1/4) when beta0 = ln 3 - 1/2
    rows = [{"similarity_top": 2.5}, {"similarity_top": -1.5}]
    stage = _stage(math.log(3) - 0.5, mean=0.5, scale=2.0)
    refit = refit_stage(stage, rows, np.array([True, False]), c=1.0)
    assert refit.intercept == pytest.approx(0.0, abs=1e-4)
    assert refit.terms[0].weight == pytest.approx(math.log(3), abs=1e-4)
    assert (refit.terms[0].mean, refit.terms[0].scale) == (0.5, 2.0)


def test_a_small_c_keeps_the_stage_and_a_missing_feature_adds_nothing() -> None:
    rows: list[dict[str, float | None]] = [
        {"similarity_top": 1.0},
        {"similarity_top": None},
        {},
        {"similarity_top": -1.0},
    ]
    refit = refit_stage(_stage(2.0), rows, [1, 1, 0, 0], c=1e-6)
    assert refit.terms[0].weight == pytest.approx(2.0, abs=1e-4)
    # the two rows without the feature sit at the stage's mean: the intercept alone
    # explains them, one good and one failed
    refit = refit_stage(_stage(2.0), rows[1:3], [1, 0], c=1.0)
    assert refit.intercept == pytest.approx(0.0, abs=1e-6)
    assert refit.terms[0].weight == pytest.approx(2.0, abs=1e-6)


@pytest.mark.parametrize(
    ("labels", "options", "message"),
    [
        ([1, 1], {}, "both positive and negative"),
        ([1, 2], {}, "0/1"),
        ([1], {}, "one label per row"),
        ([1, 0], {"weights": [1.0]}, "one weight per row"),
        ([1, 0], {"weights": [1.0, -1.0]}, "non-negative"),
        ([1, 0], {"weights": [0.0, 0.0]}, "not all zero"),
        ([1, 0], {"weights": [1.0, float("nan")]}, "finite"),
        ([1, 0], {"c": 0.0}, "c must be"),
        ([1, 0], {"c": True}, "c must be"),
    ],
)
def test_bad_input_is_an_input_error(
    labels: list[int], options: dict[str, Any], message: str
) -> None:
    rows = [{"similarity_top": 1.0}, {"similarity_top": -1.0}]
    with pytest.raises(InputError, match=message):
        refit_stage(_stage(1.0), rows, labels, **options)


def test_rows_must_be_mappings() -> None:
    with pytest.raises(InputError, match="mappings"):
        refit_stage(_stage(1.0), [[1.0], [0.0]], [1, 0])  # type: ignore[list-item]
    with pytest.raises(InputError, match="finite"):
        refit_stage(_stage(1.0), [{"similarity_top": float("inf")}, {}], [1, 0])
