"""The paired bootstrap: an interval for the difference of two failure AUCs.

Queries are resampled with replacement, each with all its lists (its natural
retrieval and its leave-relevant-out probe together), and both predictors are
scored on the same resample (Efron and Tibshirani 1993, ch. 13: the percentile
interval)::

    interval = percentiles 2.5 and 97.5 of { AUC_ours(b) - AUC_theirs(b) : b = 1..B }

with ``AUC(b)`` the failure AUC (``-score`` for ``failed``) on resample ``b``;
resamples of one class are skipped. The transfer report and the own-corpus
benchmark state a gain over the top-1 cosine with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._calibration.auc import auc


def paired_bootstrap(
    groups: Sequence[str],
    failed: np.ndarray,
    ours: np.ndarray,
    theirs: np.ndarray,
    *,
    rounds: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A 95 % interval for (our failure AUC - their failure AUC), resampling the
    ``groups`` (queries) with replacement, ``rounds`` times from ``seed``."""
    labels = np.asarray(groups)
    members = {g: np.flatnonzero(labels == g) for g in dict.fromkeys(labels.tolist())}
    keys = list(members)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(rounds):
        rows = np.concatenate([members[keys[i]] for i in rng.integers(len(keys), size=len(keys))])
        y = failed[rows]
        if y.all() or not y.any():
            continue
        diffs.append(auc(y, -ours[rows]) - auc(y, -theirs[rows]))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(low), float(high)
