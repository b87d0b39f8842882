"""L2-penalised logistic regression with sample weights and a prior, for fitting gates.

For standardised features ``x_i``, labels ``y_i`` in {0, 1} and sample
weights ``w_i``, the fit minimises::

    C * sum_i w_i * logloss(y_i, sigmoid(b + x_i . beta))  +  1/2 * |beta - beta0|^2

over the intercept ``b`` (not penalised) and the coefficients ``beta``. With
``beta0 = 0`` and unit weights this is scikit-learn's ``LogisticRegression``
(L2, lbfgs) objective; a non-zero ``beta0`` is a Gaussian prior centred on
another gate's coefficients (maximum a posteriori), so a small ``C`` keeps the
fit near the prior and a large one lets the data move it (Gelman et al.,
*Bayesian Data Analysis*, ch. 16). Solved with L-BFGS (scipy), gradient exact.

**Strata (fixed effects).** With ``strata`` (one label per row: the collection
it came from), each stratum ``s`` gets its own unpenalised intercept ``b_s``::

    C * sum_i w_i * logloss(y_i, sigmoid(b_{s(i)} + x_i . beta))  +  1/2 * |beta - beta0|^2

so ``beta`` is learnt from differences *within* strata only: a collection whose
queries fail more often, or whose cosines all run higher, moves its own
intercept, not the coefficients (the fixed-effects logit of panel data, e.g.
Wooldridge, *Econometric Analysis of Cross Section and Panel Data*, ch. 15.8).
A failure AUC is a within-collection ranking, which is what these coefficients
are fitted for. The one intercept a gate applies to a new collection is then
refitted on every row with ``beta`` fixed (:func:`fit_intercept`).

**Shrinking towards an anchor** (:func:`shrink_towards`): the coefficients
``beta_a + lambda * (beta - beta_a)``, where ``beta_a`` is the fit on the anchor
columns alone (zero elsewhere): ``lambda = 0`` is the anchor's gate (the top-1
cosine, say), ``1`` the full fit, in between a gate that moves only part of the
way from the anchor towards what the fitting collections suggest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._optional import requires

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LogisticFit:
    """A fitted model on standardised features: ``sigmoid(intercept + x @ coef)``."""

    intercept: float
    coef: Array

    def logit(self, x: Array) -> Array:
        out: Array = self.intercept + x @ self.coef
        return out

    def predict(self, x: Array) -> Array:
        z = np.clip(self.logit(x), -35.0, 35.0)
        out: Array = 1.0 / (1.0 + np.exp(-z))
        return out


def weighted_standardizer(x: Array, weights: Array | None = None) -> tuple[Array, Array]:
    """Column means and standard deviations under ``weights`` (a 0 std becomes 1)."""
    w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=float)
    mean = np.average(x, axis=0, weights=w)
    std = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=w))
    return mean, np.where(std > 0, std, 1.0)


def fit_logistic(
    x: Array,
    y: Array,
    *,
    c: float = 1.0,
    weights: Array | None = None,
    prior: Array | None = None,
    prior_intercept: float = 0.0,
    strata: npt.ArrayLike | None = None,
) -> LogisticFit:
    """Fit the model of the module doc on already standardised ``x``.

    Args:
        x: ``[n, p]`` standardised features.
        y: ``n`` labels (0/1 or booleans); both classes must be present.
        c: the inverse penalty strength (scikit-learn's ``C``).
        weights: ``n`` non-negative sample weights (default 1 each).
        prior: ``p`` coefficients the penalty pulls towards (default 0).
        prior_intercept: where the intercept starts (it is not penalised).
        strata: ``n`` labels (any hashable values): one intercept per stratum
            while fitting (module doc); the returned intercept is refitted on
            every row with the coefficients fixed. ``None``: one intercept.
    """
    with requires("calibrate", "fitting a gate"):
        from scipy.optimize import minimize

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, p = x.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    beta0 = np.zeros(p) if prior is None else np.asarray(prior, dtype=float)
    if strata is None:
        codes, m = np.zeros(n, dtype=np.intp), 1
    else:
        labels = np.asarray(strata)
        if len(labels) != n:
            raise ValueError(f"strata must label every row ({len(labels)} for {n})")
        _, codes = np.unique(labels, return_inverse=True)
        m = int(codes.max()) + 1 if n else 1

    def objective(theta: Array) -> tuple[float, Array]:
        b, beta = theta[:m], theta[m:]
        z = b[codes] + x @ beta
        # logloss = log(1 + e^z) - y z, computed stably
        loss = np.logaddexp(0.0, z) - y * z
        diff = beta - beta0
        value = c * float(w @ loss) + 0.5 * float(diff @ diff)
        residual = c * w * (1.0 / (1.0 + np.exp(-np.clip(z, -35.0, 35.0))) - y)
        grad = np.concatenate([np.bincount(codes, residual, minlength=m), x.T @ residual + diff])
        return value, grad

    start = np.concatenate([np.full(m, prior_intercept), beta0])
    result = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    coef = np.asarray(result.x[m:], dtype=float)
    if strata is None:
        return LogisticFit(intercept=float(result.x[0]), coef=coef)
    return LogisticFit(intercept=fit_intercept(x @ coef, y, weights=w), coef=coef)


def fit_intercept(offset: Array, y: Array, *, weights: Array | None = None) -> float:
    """The intercept ``b`` maximising the weighted likelihood of ``sigmoid(b + offset)``
    (the coefficients fixed: ``offset = x @ beta``): the root of the likelihood's
    derivative ``sum w (sigmoid(b + offset) - y)``, which only grows with ``b``, by
    bisection (it cannot diverge as Newton's steps can on large offsets). With labels
    of one class the optimum is at infinity: ``b`` is kept within ``[-50, 50]`` plus the
    offsets' range."""
    offset = np.asarray(offset, dtype=float)
    y = np.asarray(y, dtype=float)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)

    def slope(b: float) -> float:
        p = 1.0 / (1.0 + np.exp(-np.clip(b + offset, -500.0, 500.0)))
        return float(w @ (p - y))

    low = -50.0 - float(offset.max(initial=0.0))
    high = 50.0 - float(offset.min(initial=0.0))
    for _ in range(200):
        mid = (low + high) / 2.0
        if slope(mid) > 0.0:
            high = mid
        else:
            low = mid
        if high - low < 1e-12 * max(1.0, abs(mid)):
            break
    return (low + high) / 2.0


def shrink_towards(full: Array, anchor: Array, amount: float) -> Array:
    """``anchor + amount * (full - anchor)``: coefficients ``amount`` of the way from
    the anchor's fit (zero outside its columns) to the full fit (module doc)."""
    start = np.asarray(anchor, dtype=float)
    out: Array = start + amount * (np.asarray(full, dtype=float) - start)
    return out
