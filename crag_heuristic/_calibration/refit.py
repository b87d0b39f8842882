"""A fitted logistic stage refitted on new labelled rows, starting from it and pulled towards it.

A gate in use meets labels its fit never saw (a grader's verdicts on the lists it
escalated, an audit sample). :func:`refit_stage` moves one stage of the gate
(``ModelConfig.chunk`` or ``ModelConfig.set``) towards them without forgetting
it: the features are standardised as the stage standardises them (each term's
``mean`` and ``scale`` kept) and the coefficients are the maximum a posteriori
fit of :func:`~crag_heuristic._calibration.logistic.fit_logistic` with the
stage's own weights as the prior's centre::

    C * sum_i w_i * logloss(y_i, sigmoid(b + z_i . beta))  +  1/2 * |beta - beta_stage|^2

with ``z_i`` the standardised features, ``b`` the intercept (it starts at the
stage's and is not penalised) and ``C`` the inverse strength of the pull: a small
``C`` keeps the stage nearly as it was, a large one lets the rows decide
(Gelman et al., *Bayesian Data Analysis*, ch. 16).

**Sample weights.** Rows drawn with unequal probabilities (a cascade escalates
the uncertain lists more often than the rest) are weighted ``w_i = 1 / p_i``,
``p_i`` the probability that row ``i`` was labelled, so that the weighted sum
estimates the sum over every row (Horvitz and Thompson 1952). The weights are
rescaled to mean 1 before the fit (the self-normalised estimator): ``C`` then
means the same whatever their scale, and multiplying every weight by a constant
changes nothing.

A feature missing from a row (``None`` or absent) sits at the stage's mean, as
the evaluator applies the stage (:mod:`crag_heuristic._evaluator.model`): it adds
nothing to the row's logit and nothing to its coefficient's gradient.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from .._config import LogisticStage
from .._exceptions import InputError
from .logistic import fit_logistic

DEFAULT_REFIT_C = 0.1
"""The pull's default inverse strength (the one a grader's refit starts with)."""


def refit_stage(
    stage: LogisticStage,
    rows: Sequence[Mapping[str, float | None]],
    labels: Sequence[bool] | npt.ArrayLike,
    *,
    weights: npt.ArrayLike | None = None,
    c: float = DEFAULT_REFIT_C,
) -> LogisticStage:
    """``stage`` refitted on ``rows`` and ``labels``, pulled towards its own weights
    (the module doc).

    Args:
        stage: the fitted stage to start from (its terms' features, means and scales
            are kept; its weights are the prior's centre, its intercept the start).
        rows: one mapping per labelled row, feature name -> value (what an
            evaluation records: ``ChunkEvaluation.features`` for the chunk stage,
            ``Evaluation.details["features"]`` for the set stage); features the
            stage does not read are ignored.
        labels: one per row: relevant (chunk stage) or good (set stage).
        weights: one per row, finite and non-negative, not all zero (e.g.
            ``1 / propensity``); rescaled to mean 1. ``None``: each row weighs 1.
        c: the inverse strength of the pull towards the stage (``> 0``).

    Returns:
        A new stage with the same terms' features, means and scales, and the
        refitted weights and intercept.

    Raises:
        InputError: rows, labels and weights of different lengths, labels that are
            not 0/1 or of one class only, a value or weight that is not a finite
            number, negative or all-zero weights, or ``c`` not a positive number.
    """
    if isinstance(rows, Mapping) or not all(isinstance(row, Mapping) for row in rows):
        raise InputError("rows must be a sequence of mappings, feature name -> value")
    n = len(rows)
    y = np.asarray(labels, dtype=float)
    if y.shape != (n,):
        raise InputError(f"labels must give one label per row ({n} rows), got shape {y.shape}")
    if not np.isin(y, (0.0, 1.0)).all():
        raise InputError("labels must be 0/1 or booleans")
    if len(set(y.tolist())) < 2:
        raise InputError("refitting needs both positive and negative labels")
    if isinstance(c, bool) or not isinstance(c, int | float) or not (0.0 < c < math.inf):
        raise InputError(f"c must be a positive number, got {c!r}")
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (n,):
        raise InputError(f"weights must give one weight per row ({n} rows), got shape {w.shape}")
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise InputError("weights must be finite, non-negative and not all zero")
    z = np.zeros((n, len(stage.terms)))
    for j, term in enumerate(stage.terms):
        for i, row in enumerate(rows):
            value = row.get(term.feature)
            if value is not None:
                z[i, j] = (float(value) - term.mean) / term.scale
    if not np.isfinite(z).all():
        raise InputError("feature values must be finite numbers")
    fit = fit_logistic(
        z,
        y,
        c=float(c),
        weights=w * (n / w.sum()),
        prior=np.array([term.weight for term in stage.terms], dtype=float),
        prior_intercept=stage.intercept,
    )
    return LogisticStage(
        intercept=fit.intercept,
        terms=tuple(
            dataclasses.replace(term, weight=float(weight))
            for term, weight in zip(stage.terms, fit.coef, strict=True)
        ),
    )
