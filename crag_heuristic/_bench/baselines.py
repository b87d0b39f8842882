"""Reference gates the benchmarks compare the evaluator against.

``seed_design``
    The design the project started from, as written: keyword overlap = the
    share of query words longer than 2 letters and not stop words that occur
    as *substrings* of the pooled lower-cased text; coherence = mean x (1 -
    min(variance, 0.3)) of the similarity scores; length adequacy =
    min(1, words x 1.3 / (100 x chunks)); diversity = distinct sources /
    chunks; weights 0.30 / 0.40 / 0.15 / 0.15. It is here to be measured, not
    used: substring tests make "cat" match "category".

``seed004``
    A later seed's design, also parameter-free: ``(mean of the top-3
    similarities + the share of the query's terms found anywhere in the
    list) / 2`` (terms as the analyzer makes them, unweighted).

``top1``, ``score_gap``, ``nqc``, ``mean_score``, ``wig``
    Query-performance predictors over the similarity list alone: the top
    score; the gap between the top score and the k-th; NQC (Shtok et al.,
    2012: the standard deviation of the top-k scores over the corpus-level
    score, here the mean similarity of the query to the corpus when given);
    the mean of the top-k scores; and WIG (Zhou and Croft, 2007: the mean
    top-k score minus the corpus-level score; for unit vectors the mean
    cosine of the query to the whole corpus is its cosine-weighted dot
    product with the corpus centroid, ``q . mean(d)``).

The lexical ones (the top-1 or the best chunk's BM25 over the query's idf
mass, keyword coverage) are evidence features the evaluator computes
(``bm25_top``, ``bm25_max``, ``keyword_coverage`` in ``crag_heuristic._evidence``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from .._text.analyzer import DEFAULT_STOP_WORDS

_WORD_RE = re.compile(r"\w+")


def seed_design(
    query: str, texts: Sequence[str], similarities: Sequence[float], sources: Sequence[str]
) -> float:
    """The seed design's weighted score in [0, 1] (see the module docstring)."""
    n = len(texts)
    if n == 0:
        return 0.0
    pooled = " ".join(texts).lower()
    words = [
        w for w in _WORD_RE.findall(query.lower()) if len(w) > 2 and w not in DEFAULT_STOP_WORDS
    ]
    keyword = sum(1 for w in words if w in pooled) / len(words) if words else 0.0
    mean = sum(similarities) / len(similarities) if similarities else 0.0
    variance = (
        sum((s - mean) ** 2 for s in similarities) / len(similarities) if similarities else 0.0
    )
    coherence = mean * (1 - min(variance, 0.3))
    n_words = sum(len(text.split()) for text in texts)
    length = min(1.0, n_words * 1.3 / (100 * n))
    diversity = len(set(sources)) / n
    return 0.30 * keyword + 0.40 * coherence + 0.15 * length + 0.15 * diversity


def top1(similarities: Sequence[float]) -> float:
    """The highest similarity (0 for none)."""
    return max(similarities, default=0.0)


def score_gap(similarities: Sequence[float]) -> float:
    """Top similarity minus the last one of the list (0 for fewer than 2)."""
    if len(similarities) < 2:
        return 0.0
    ordered = sorted(similarities, reverse=True)
    return ordered[0] - ordered[-1]


def nqc(similarities: Sequence[float], corpus_score: float | None = None) -> float:
    """Normalised query commitment: std of the scores over ``|corpus_score|``.

    Without a corpus score the plain standard deviation is returned.
    """
    n = len(similarities)
    if n == 0:
        return 0.0
    mean = sum(similarities) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in similarities) / n)
    if corpus_score is None or corpus_score == 0:
        return std
    return std / abs(corpus_score)


def mean_score(similarities: Sequence[float]) -> float:
    """The mean of the scores (0 for none)."""
    return sum(similarities) / len(similarities) if similarities else 0.0


def wig(similarities: Sequence[float], corpus_score: float) -> float:
    """Weighted information gain (Zhou and Croft 2007): the mean score minus the
    query's mean score over the whole corpus."""
    return mean_score(similarities) - corpus_score


def seed004(similarities: Sequence[float], term_coverage: float) -> float:
    """Seed 004's design: ``(mean of the top-3 similarities + term_coverage) / 2``,
    ``term_coverage`` the share of the query's terms found in the list (module doc)."""
    best = sorted(similarities, reverse=True)[:3]
    return (mean_score(best) + term_coverage) / 2.0
