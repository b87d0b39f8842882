"""The evidence a fitted gate reads: per-chunk and per-set features.

All are cheap (a pass over at most ``k`` chunks and the query's terms) and
computed from what the evaluator already has: the analysed chunks, the
retriever's similarities and, when given, the corpus statistics.

Per chunk ``i`` (with ``Q`` the query's distinct terms and ``w(t)`` their
weights, IDF with corpus statistics, 1 without):

``keyword_overlap``  ``sum(w(t) for t in Q if t in chunk) / sum(w(t) for t in Q)``
``bm25``             BM25 of the chunk normalised by its maximum for this query
                     (Robertson and Zaragoza 2009)::

                         sum_t w(t) * tf*(k1+1) / (tf + k1*(1 - b + b*dl/avgdl))
                         -------------------------------------------------------
                                       sum_t w(t) * (k1+1)

                     ``tf`` the term's count in the chunk, ``dl`` the chunk's
                     content terms, ``avgdl`` the corpus mean (the list mean
                     without statistics); in [0, 1)
``lexical_contrast`` ``bm25_i - mean_j bm25_j``: how much more of the query this
                     chunk holds than the others retrieved with it
``similarity``       the retriever's score mapped to [0, 1] (``None`` if none)
``similarity_z``     ``(s_i - mean_j s_j) / std_j s_j`` (0 when the std is 0)
``length_adequacy``, ``source_diversity``: the signals of the same name

Per set: ``best_chunk`` / ``top_chunk`` / ``mean_chunk`` (the highest, the
first and the mean chunk probability, filled in by the model's first stage),
``chunk_margin`` (the highest chunk probability minus the second),
``bm25_margin`` (the best chunk's ``bm25`` minus the second best: does one
chunk stand out?), ``agreement`` (1 when the lexically best chunk is also the
retriever's best, else 0),
``keyword_overlap`` (best chunk), ``bm25_max``, ``similarity_top``,
``similarity_mean``, ``similarity_std`` (the spread: the dense-retrieval
query-performance predictor of Shtok et al.'s NQC without its corpus
normaliser), ``similarity_gap`` (top minus last), ``coherence``,
``length_adequacy``, ``source_diversity``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .._text import QueryTerms, TextStats

__all__ = ["SIGNAL_OF", "bm25_norm", "chunk_rows", "set_row"]

# Which named signal each feature refines (for reporting a model's score by signal).
SIGNAL_OF = {
    "keyword_overlap": "keyword_overlap",
    "bm25": "keyword_overlap",
    "lexical_contrast": "keyword_overlap",
    "bm25_max": "keyword_overlap",
    "bm25_margin": "keyword_overlap",
    "agreement": "keyword_overlap",
    "similarity": "semantic_coherence",
    "similarity_z": "semantic_coherence",
    "similarity_top": "semantic_coherence",
    "similarity_mean": "semantic_coherence",
    "similarity_std": "semantic_coherence",
    "similarity_gap": "semantic_coherence",
    "coherence": "semantic_coherence",
    "length_adequacy": "length_adequacy",
    "source_diversity": "source_diversity",
}

Row = dict[str, float | None]


def bm25_norm(
    terms: QueryTerms,
    weights: Sequence[float],
    stats: TextStats,
    avgdl: float,
    k1: float,
    b: float,
) -> float:
    """The normalised BM25 of one analysed text (see the module doc)."""
    total = 0.0
    top = 0.0
    length = 1.0 - b + b * (stats.n_terms / avgdl if avgdl > 0 else 1.0)
    for term, weight in zip(terms.terms, weights, strict=True):
        top += weight * (k1 + 1.0)
        tf = stats.count(term, terms)
        if tf:
            total += weight * tf * (k1 + 1.0) / (tf + k1 * length)
    return total / top if top > 0 else 0.0


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / n)


def chunk_rows(
    keyword: Sequence[float],
    bm25: Sequence[float],
    sims: Sequence[float | None],
    length: Sequence[float],
    diversity: Sequence[float],
) -> list[Row]:
    """One feature row per chunk (see the module doc)."""
    bm25_mean = sum(bm25) / len(bm25)
    present = [s for s in sims if s is not None]
    sim_mean, sim_std = _mean_std(present) if present else (0.0, 0.0)
    rows: list[Row] = []
    for i, sim in enumerate(sims):
        z = None if sim is None else ((sim - sim_mean) / sim_std if sim_std > 0 else 0.0)
        rows.append(
            {
                "keyword_overlap": keyword[i],
                "bm25": bm25[i],
                "lexical_contrast": bm25[i] - bm25_mean,
                "similarity": sim,
                "similarity_z": z,
                "length_adequacy": length[i],
                "source_diversity": diversity[i],
            }
        )
    return rows


def set_row(
    rows: Sequence[Row],
    sims: Sequence[float | None],
    chunk_probs: Sequence[float],
    *,
    keyword: float,
    coherence: float | None,
    length: float,
    diversity: float,
) -> Row:
    """The set's feature row; ``chunk_probs`` are the chunks' scores in input order."""
    present = [s for s in sims if s is not None]
    bm25 = [r["bm25"] or 0.0 for r in rows]
    top_two_probs = sorted(chunk_probs, reverse=True)[:2]
    top_two_bm25 = sorted(bm25, reverse=True)[:2]
    lexical_best = max(range(len(bm25)), key=bm25.__getitem__)
    row: Row = {
        "best_chunk": top_two_probs[0],
        "top_chunk": chunk_probs[0],
        "mean_chunk": sum(chunk_probs) / len(chunk_probs),
        "chunk_margin": top_two_probs[0] - (top_two_probs[1] if len(top_two_probs) > 1 else 0.0),
        "bm25_margin": top_two_bm25[0] - (top_two_bm25[1] if len(top_two_bm25) > 1 else 0.0),
        "agreement": None,
        "keyword_overlap": keyword,
        "bm25_max": top_two_bm25[0],
        "coherence": coherence,
        "length_adequacy": length,
        "source_diversity": diversity,
        "similarity_top": None,
        "similarity_mean": None,
        "similarity_std": None,
        "similarity_gap": None,
    }
    if present:
        dense_best = max(
            (i for i, s in enumerate(sims) if s is not None), key=lambda i: sims[i] or 0.0
        )
        row["agreement"] = 1.0 if dense_best == lexical_best else 0.0
        ordered = sorted(present, reverse=True)
        mean, std = _mean_std(ordered)
        row.update(
            similarity_top=ordered[0],
            similarity_mean=mean,
            similarity_std=std,
            similarity_gap=ordered[0] - ordered[-1],
        )
    return row
