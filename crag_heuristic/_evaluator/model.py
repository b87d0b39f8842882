"""Applying a fitted logistic gate (``EvaluatorConfig.model``).

Each stage computes ``p = sigmoid(intercept + sum_f weight_f * (x_f - mean_f) / scale_f)``
over named features (see :mod:`crag_heuristic._evidence`). A
feature that is missing for this input (e.g. no similarity from a retriever
whose scores have no absolute meaning) sits at its mean: it adds nothing, and
the evaluation notes it. The contributions are kept so that the reasoning can
say which named signal moved the score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .._config import LogisticStage
from .._evidence import Level, signal_of


def sigmoid(z: float) -> float:
    """The logistic function, safe for any finite ``z``."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def apply(
    stage: LogisticStage, row: Mapping[str, float | None]
) -> tuple[float, dict[str, float], list[str]]:
    """``(probability, contribution per feature, missing features)`` for one row."""
    z = stage.intercept
    parts: dict[str, float] = {}
    missing: list[str] = []
    for term in stage.terms:
        value = row.get(term.feature)
        if value is None:
            missing.append(term.feature)
            continue
        contribution = term.weight * (value - term.mean) / term.scale
        parts[term.feature] = contribution
        z += contribution
    return sigmoid(z), parts, missing


def apply_columns(
    stage: LogisticStage, columns: Mapping[str, Sequence[float | None]], n: int
) -> tuple[list[float], set[str]]:
    """The probabilities of ``n`` rows given as feature columns, and the features
    missing somewhere: :func:`apply` for a whole list at once, without a dict per row."""
    z = [stage.intercept] * n
    missing: set[str] = set()
    for term in stage.terms:
        values = columns[term.feature]
        slope = term.weight / term.scale
        mean = term.mean
        for i, value in enumerate(values):
            if value is None:
                missing.add(term.feature)
            else:
                z[i] += slope * (value - mean)
    return [sigmoid(v) for v in z], missing


def by_signal(parts: Mapping[str, float], level: Level = "chunk") -> dict[str, float]:
    """Contributions of a ``level`` stage summed per named signal (``chunk_model`` for
    the chunk stage's outputs a set stage reads)."""
    grouped: dict[str, float] = {}
    for feature, value in parts.items():
        name = signal_of(feature, level)
        grouped[name] = grouped.get(name, 0.0) + value
    return grouped
