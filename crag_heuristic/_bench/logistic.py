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
) -> LogisticFit:
    """Fit the model of the module doc on already standardised ``x``.

    Args:
        x: ``[n, p]`` standardised features.
        y: ``n`` labels (0/1 or booleans); both classes must be present.
        c: the inverse penalty strength (scikit-learn's ``C``).
        weights: ``n`` non-negative sample weights (default 1 each).
        prior: ``p`` coefficients the penalty pulls towards (default 0).
        prior_intercept: where the intercept starts (it is not penalised).
    """
    with requires("calibrate", "fitting a gate"):
        from scipy.optimize import minimize

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n, p = x.shape
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    beta0 = np.zeros(p) if prior is None else np.asarray(prior, dtype=float)

    def objective(theta: Array) -> tuple[float, Array]:
        b, beta = theta[0], theta[1:]
        z = b + x @ beta
        # logloss = log(1 + e^z) - y z, computed stably
        loss = np.logaddexp(0.0, z) - y * z
        diff = beta - beta0
        value = c * float(w @ loss) + 0.5 * float(diff @ diff)
        residual = c * w * (1.0 / (1.0 + np.exp(-np.clip(z, -35.0, 35.0))) - y)
        grad = np.concatenate([[residual.sum()], x.T @ residual + diff])
        return value, grad

    start = np.concatenate([[prior_intercept], beta0])
    result = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    return LogisticFit(intercept=float(result.x[0]), coef=np.asarray(result.x[1:], dtype=float))
