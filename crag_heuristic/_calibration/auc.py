"""ROC-AUC by ranks: the harness's one AUC, without scikit-learn's per-call checks.

The area under the ROC curve of ``score`` for telling ``positive`` rows from the
others is the Mann-Whitney statistic over the product of the class sizes
(Hanley and McNeil 1982)::

    AUC = (R+ - n+ (n+ + 1) / 2) / (n+ n-)

with ``R+`` the sum of the positives' ranks of ``score`` (1 for the lowest; tied
scores share the mean of their ranks, so a tie counts one half) and ``n+``,
``n-`` the class sizes. It is the trapezoidal area ``sklearn.metrics.roc_auc_score``
computes, to rounding (a test compares them on tied data), in one sort instead of
a ROC curve and input validation: the paired bootstrap of the transfer report
asks for two AUCs a thousand times per comparison.

The failure detector's convention (``failure_auc``): a retrieval *failed*, and a
high gate score should say it did not, so the AUC is of ``-score`` for ``failed``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .._exceptions import InputError


def auc(positive: npt.ArrayLike, score: npt.ArrayLike) -> float:
    """The ROC-AUC of ``score`` for the ``positive`` rows (see the module doc).

    Raises:
        InputError: the arrays differ in length, a score is not finite, or one
            class is empty (the AUC is undefined).
    """
    y = np.asarray(positive, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise InputError(f"auc needs two 1-d arrays of one length, got {y.shape} and {s.shape}")
    if not np.isfinite(s).all():
        raise InputError("auc needs finite scores")
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise InputError("auc needs rows of both classes")
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2.0
    rank_sum = float(mean_rank[inverse.reshape(-1)][y].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def failure_auc(failed: np.ndarray, score: np.ndarray) -> float | None:
    """The AUC of a high ``score`` for "not failed"; ``None`` when one class is absent."""
    if failed.all() or not failed.any():
        return None
    return auc(failed, -np.asarray(score, dtype=np.float64))
