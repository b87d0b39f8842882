"""The four signals, one pure function each. Every value lies in [0, 1].

keyword overlap
    The share of the query's terms a text contains, each term weighted by its
    IDF when corpus statistics are given (uniformly otherwise)::

        overlap = sum(w(t) for t in Q if t in T) / sum(w(t) for t in Q)

    ``Q`` are the query's distinct analyzed terms and ``T`` the text's. Terms
    are whole Snowball-stemmed tokens: "cells" matches "cell", "cat" never
    matches "category".

semantic coherence
    From the retriever's similarities ``s_1..s_n`` mapped to [0, 1] (see
    ``crag_heuristic._scores``). With mean ``m``, top ``t``, variance ``v``
    and the head-tail gap ``g = t - mean(tail)`` (``tail`` the lower half of
    the sorted list; 0 for one chunk)::

        coherence = (a*m + b*t + c*g) / (a + b + c) * (1 - min(v, cap))

    The defaults (a, b, c, cap) = (1, 0, 0, 0.3) reward a high mean and a low
    dispersion. The gap and the top score are the query-performance
    predictors of the dense-retrieval literature (cf. NQC, Shtok et al. 2012;
    WIG, Zhou and Croft 2007); a calibrated profile may weight them.

length adequacy
    Whether a chunk has enough content for an answer: with an estimate of
    ``words * tokens_per_word`` tokens, ``min(1, tokens / min_tokens)``. The
    set value is the mean over chunks.

source diversity
    Distinct sources over chunks. A chunk's own value is ``1 / (number of
    chunks that share its source)``, so the set value is the mean of those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


class CoherenceWeights(Protocol):
    """What :func:`coherence` reads (:class:`~crag_heuristic.config.CoherenceConfig` has
    it): the weights of the mean, top and gap levels and the variance cap. A protocol, so
    that this module, below the configuration, imports nothing from it."""

    @property
    def mean(self) -> float: ...
    @property
    def top(self) -> float: ...
    @property
    def gap(self) -> float: ...
    @property
    def variance_cap(self) -> float: ...


class LengthTarget(Protocol):
    """What :func:`length_adequacy` reads (:class:`~crag_heuristic.config.LengthConfig`)."""

    @property
    def min_tokens(self) -> int: ...
    @property
    def tokens_per_word(self) -> float: ...


def keyword_overlap(
    query_terms: Sequence[str], term_weights: Sequence[float], text_terms: frozenset[str] | set[str]
) -> float:
    """Weighted share of ``query_terms`` present in ``text_terms`` (0 if no terms)."""
    return weighted_share([term in text_terms for term in query_terms], term_weights)


def weighted_share(found: Sequence[object], term_weights: Sequence[float]) -> float:
    """Weighted share of the query terms found (``found[i]`` true: the text holds term
    ``i``, e.g. its count) -- :func:`keyword_overlap` from what was looked up."""
    total = 0.0
    hit = 0.0
    for present, weight in zip(found, term_weights, strict=True):
        total += weight
        if present:
            hit += weight
    return hit / total if total > 0 else 0.0


@dataclass(frozen=True, slots=True)
class CoherenceParts:
    """The parts semantic coherence is made of (kept as evidence)."""

    value: float
    mean: float
    top: float
    gap: float
    variance: float
    n: int

    def as_dict(self) -> dict[str, float]:
        return {
            "value": self.value,
            "mean": self.mean,
            "top": self.top,
            "gap": self.gap,
            "variance": self.variance,
            "n": self.n,
        }


def coherence(similarities: Sequence[float], config: CoherenceWeights) -> CoherenceParts | None:
    """Semantic coherence of similarities in [0, 1] (``None`` for an empty list)."""
    n = len(similarities)
    if n == 0:
        return None
    ordered = sorted(similarities, reverse=True)
    mean = sum(ordered) / n
    variance = sum((s - mean) ** 2 for s in ordered) / n
    top = ordered[0]
    tail = ordered[n // 2 :] if n > 1 else ordered
    gap = top - sum(tail) / len(tail) if n > 1 else 0.0
    level = (config.mean * mean + config.top * top + config.gap * gap) / (
        config.mean + config.top + config.gap
    )
    value = level * (1.0 - min(variance, config.variance_cap))
    return CoherenceParts(
        value=min(1.0, max(0.0, value)), mean=mean, top=top, gap=gap, variance=variance, n=n
    )


def length_adequacy(n_words: int, config: LengthTarget) -> float:
    """``min(1, n_words * tokens_per_word / min_tokens)``."""
    return min(1.0, n_words * config.tokens_per_word / config.min_tokens)


def diversity(sources: Iterable[str]) -> tuple[float, list[float]]:
    """Set diversity (distinct / total) and each chunk's ``1 / count(source)``."""
    keys = list(sources)
    if not keys:
        return 0.0, []
    counts = Counter(keys)
    return len(counts) / len(keys), [1.0 / counts[key] for key in keys]
