"""The gate variants the nested protocol chooses among, fixed before it runs.

Every variant ever compared for the shipped gate is listed here with why it
is in the comparison; ``crag-heuristic bench --loco`` scores all of them by
nested leave-one-collection-out (:mod:`crag_heuristic._bench.selection`) and
writes the ledger (``benchmarks/results/loco/ledger.md``). A variant dropped
from a later comparison stays in the ledger's history section, not here.

With sentence vectors (``--sentences``), a second gate, the opt-in one that reads
each chunk's best sentence, is chosen the same way among :data:`EVIDENCE_VARIANTS`
and :data:`SENTENCE_VARIANTS`.

Two choices are made, each inside the training collections of an outer fold:

1. **Evidence** (:data:`EVIDENCE_VARIANTS`): the chunk and set features, by
   the mean failure AUC over the inner held-out collections.
2. **Bands** (:data:`BAND_VARIANTS`): the band targets of the evidence pick,
   by how many inner held-out collections meet the natural-traffic goal
   (:func:`meets_goal`), ties by the mean share of good natural retrievals on
   the fast path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._calibration.gate import DEFAULT_CHUNK_FEATURES
from .selection import GateVariant

_CHUNK = DEFAULT_CHUNK_FEATURES
_CHUNK_BM25 = (*DEFAULT_CHUNK_FEATURES, "bm25")
_CHUNK_LEAN = ("similarity", "keyword_overlap", "rank")
SHRINKS: tuple[float | None, ...] = (0.25, 0.5, 0.75, None)
"""How far from the top-1 cosine's fit the shrunk variants go (``None``: all the way)."""

LR_BASELINE = GateVariant(
    label="LR(top-1, max BM25)",
    chunk_features=_CHUNK,
    set_features=("similarity_top", "bm25_raw_max"),
    note="the audit's strongest fitted baseline: logistic regression on the top-1 cosine "
    "and the best chunk's BM25",
)
"""A baseline as well as a candidate: the nested gate is held against it."""

EVIDENCE_VARIANTS: tuple[GateVariant, ...] = (
    GateVariant(
        label="two-stage (issue 9 default)",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "best_chunk", "keyword_overlap"),
        note="the default shipped before this comparison",
    ),
    LR_BASELINE,
    GateVariant(
        label="top-1 + BM25 (first, best)",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "bm25_top", "bm25_raw_max"),
        note="the two BM25 predictors that win on SciFact and NFCorpus, beside the cosine",
    ),
    GateVariant(
        label="top-1 + BM25 (first, best over ln 2N)",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "bm25_top", "bm25_scaled_max"),
        note="added after the first nested run picked 'top-1 + BM25 (first, best)': the raw "
        "BM25 grows with ln N (the collections here hold 1k to 11k documents, a user's 64 or "
        "a million); over the largest idf, ln(2N + 2), it does not",
    ),
    GateVariant(
        label="top-1, gap + BM25 (first, best over ln 2N)",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "similarity_gap", "bm25_top", "bm25_scaled_max"),
        note="added after the third nested run, whose natural-traffic AUC stayed below the "
        "parameter-free score gap's (top cosine minus the k-th): the shipped pick with that gap",
    ),
    GateVariant(
        label="gap + BM25 (first, best over ln 2N)",
        chunk_features=_CHUNK,
        set_features=("similarity_gap", "bm25_top", "bm25_scaled_max"),
        note="added with the one above: the score gap in place of the top-1 cosine",
    ),
    GateVariant(
        label="top-1, mean + BM25",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "similarity_mean", "bm25_top", "bm25_raw_max"),
        note="the mean cosine wins on Medline (many relevant documents per query)",
    ),
    GateVariant(
        label="two-stage + BM25",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "best_chunk", "keyword_overlap", "bm25_raw_max"),
        note="the issue 9 default with the chunks' BM25",
    ),
    GateVariant(
        label="two-stage + BM25 + mean",
        chunk_features=_CHUNK,
        set_features=(
            "similarity_top",
            "similarity_mean",
            "best_chunk",
            "keyword_overlap",
            "bm25_top",
            "bm25_raw_max",
        ),
        note="every predictor that wins somewhere, with the chunk stage",
    ),
    GateVariant(
        label="wide",
        chunk_features=_CHUNK,
        set_features=(
            "similarity_top",
            "similarity_mean",
            "similarity_std",
            "best_chunk",
            "keyword_overlap",
            "keyword_coverage",
            "bm25_top",
            "bm25_raw_max",
            "lexical_coherence",
        ),
        note="nine set features: does more evidence transfer?",
    ),
    GateVariant(
        label="two-stage, chunk BM25",
        chunk_features=_CHUNK_BM25,
        set_features=("similarity_top", "best_chunk", "keyword_overlap"),
        note="the chunk stage also reads the chunk's BM25",
    ),
    GateVariant(
        label="two-stage, lean chunk stage",
        chunk_features=_CHUNK_LEAN,
        set_features=("similarity_top", "best_chunk", "keyword_overlap"),
        note="a chunk stage of three features",
    ),
    GateVariant(
        label="top-1 cosine alone",
        chunk_features=_CHUNK,
        set_features=("similarity_top",),
        note="issue 25: the floor itself as a candidate (its set stage ranks lists as the "
        "top-1 cosine does)",
    ),
    *(
        GateVariant(
            label=f"{label}, within{'' if shrink is None else f', shrunk {shrink:g}'}",
            chunk_features=_CHUNK,
            set_features=features,
            within_collection=True,
            shrink=shrink,
            note=f"issue 25: {why}; fitted within collections (one intercept each), "
            + (
                "unshrunk"
                if shrink is None
                else f"its coefficients {shrink:g} of the way from the top-1 cosine's fit"
            ),
        )
        for label, features, why in (
            (
                "top-1 + BM25 (first, best over ln 2N)",
                ("similarity_top", "bm25_top", "bm25_scaled_max"),
                "the default of issues 18 to 24, which fell below the top-1 cosine on unseen "
                "collections",
            ),
            (
                "top-1 + coherence",
                ("similarity_top", "lexical_coherence"),
                "added after an exploratory plain-LOCO look at the nine collections: list "
                "coherence helped where many documents answer (clinical trials, Medline)",
            ),
            (
                "top-1 + coverage + coherence",
                ("similarity_top", "keyword_coverage", "lexical_coherence"),
                "the same look: seed 004's term coverage beside coherence",
            ),
            (
                "top-1 + BM25 (first) + coverage + coherence",
                ("similarity_top", "bm25_top", "keyword_coverage", "lexical_coherence"),
                "the same look: the first chunk's BM25, coverage and coherence",
            ),
            (
                "top-1 + BM25 (first, best over ln 2N) + coherence",
                ("similarity_top", "bm25_top", "bm25_scaled_max", "lexical_coherence"),
                "the same look: the issue 18 default with coherence",
            ),
        )
        for shrink in SHRINKS
    ),
)
"""Step 1: the evidence of each stage (band targets at their defaults)."""

_CHUNK_SENTENCE = (*DEFAULT_CHUNK_FEATURES, "sentence_similarity")

SENTENCE_VARIANTS: tuple[GateVariant, ...] = (
    GateVariant(
        label="LR(top-1, max BM25) + best sentence",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "bm25_raw_max", "sentence_similarity_max"),
        note="the LR baseline with the list's best sentence cosine",
    ),
    GateVariant(
        label="best sentence + max BM25",
        chunk_features=_CHUNK,
        set_features=("sentence_similarity_max", "bm25_raw_max"),
        note="the sentence cosine in place of the chunk cosine",
    ),
    GateVariant(
        label="top-1, first sentence + BM25 (first, best)",
        chunk_features=_CHUNK,
        set_features=("similarity_top", "sentence_similarity_top", "bm25_top", "bm25_raw_max"),
        note="the first chunk's sentence cosine and both BM25 predictors",
    ),
    GateVariant(
        label="two-stage + BM25, sentence chunk stage",
        chunk_features=_CHUNK_SENTENCE,
        set_features=("similarity_top", "best_chunk", "keyword_overlap", "bm25_raw_max"),
        note="the chunk stage reads each chunk's best sentence",
    ),
    GateVariant(
        label="two-stage + BM25 + best sentence",
        chunk_features=_CHUNK,
        set_features=(
            "similarity_top",
            "sentence_similarity_max",
            "best_chunk",
            "keyword_overlap",
            "bm25_raw_max",
        ),
        note="the two-stage gate with the list's best sentence",
    ),
)
"""The opt-in gate with sentence evidence (sentence vectors made at index time) is
chosen among these and :data:`EVIDENCE_VARIANTS` (it may pick one without sentences)."""

BAND_VARIANTS: tuple[Mapping[str, float], ...] = (
    {"target_precision": 0.90, "max_good_irrelevant": 0.15},
    {"target_precision": 0.95, "max_good_irrelevant": 0.15},
    {"target_precision": 0.90, "max_good_irrelevant": 0.10},
    {"target_precision": 0.95, "max_good_irrelevant": 0.10},
)
"""Step 2: the band targets tried on the evidence pick (fitted on out-of-fold
predictions: the fast path's precision on natural retrievals, the share of good
natural retrievals allowed below the PARTIAL band)."""

GOAL: dict[str, Any] = {
    "min_good_natural_fast_path": 0.30,
    "min_natural_fast_path_precision": 0.90,
    "max_good_natural_in_irrelevant": 0.15,
}
"""The natural-traffic goal a collection meets or not."""


def meets_goal(verdicts: Mapping[str, Any]) -> bool:
    """Whether a verdict table (:func:`~crag_heuristic._bench.failure.verdict_table`)
    meets :data:`GOAL` (a rate with nothing to measure does not)."""
    fast = verdicts.get("good_natural_fast_path")
    precision = verdicts.get("natural_fast_path_precision")
    irrelevant = verdicts.get("good_natural_in_irrelevant")
    if fast is None or precision is None or irrelevant is None:
        return False
    return bool(
        fast >= GOAL["min_good_natural_fast_path"]
        and precision >= GOAL["min_natural_fast_path_precision"]
        and irrelevant <= GOAL["max_good_natural_in_irrelevant"]
    )
