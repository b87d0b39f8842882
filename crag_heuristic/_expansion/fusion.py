"""Reciprocal Rank Fusion: merge several rankings of chunks into one.

RRF (Cormack, Clarke and Buettcher, 2009, "Reciprocal Rank Fusion
outperforms Condorcet and individual Rank Learning Methods", SIGIR) scores
each document by the ranks it reached in the input lists::

    rrf(d) = sum over lists L that contain d of  w_L / (k + rank_L(d))

with ranks counted from 1 in each list's own order (its best first), ``k``
a constant that damps the head (60 in the paper) and ``w_L`` an optional
per-list weight (1 by default). Only ranks matter, so lists with scores of
different kinds (cosine, BM25) fuse without any score normalisation.

A document in several lists is one entry (deduplicated by chunk id). Ties
in the fused score are broken deterministically: the better best rank
first, then the earlier first appearance (list order, then rank), then the
chunk id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._checks import is_finite_number
from .._exceptions import InputError, _short
from .._types import Chunk, ScoreKind


@dataclass(frozen=True, slots=True)
class FusedChunk:
    """One fused entry.

    Attributes:
        chunk: the chunk as it first appeared (list order, then rank), with
            its original score and kind.
        score: the RRF score.
        ranks: the chunk's rank in each input list (``None`` where absent).
    """

    chunk: Chunk
    score: float
    ranks: tuple[int | None, ...]


def fuse(
    rankings: Sequence[Sequence[Chunk]],
    k: float = 60,
    weights: Sequence[float] | None = None,
) -> list[FusedChunk]:
    """Fuse ``rankings`` with RRF; the full detail of :func:`reciprocal_rank_fusion`.

    Raises:
        InputError: ``k`` < 0 or not finite, weights of the wrong length or
            negative, a ranking that is not a sequence of chunks, or a chunk id
            repeated within one list.
    """
    lists: Any = rankings  # checked at run time: callers may pass anything
    if isinstance(lists, str | bytes) or not isinstance(lists, Sequence):
        raise InputError("rankings must be a sequence of chunk lists")
    if not is_finite_number(k) or k < 0:
        raise InputError(f"k must be a finite number >= 0, got {_short(k)}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if isinstance(weights, str | bytes) or not isinstance(weights, Sequence):
        raise InputError(f"weights must be a sequence of numbers or None, got {_short(weights)}")
    if len(weights) != len(rankings):
        raise InputError(f"got {len(weights)} weights for {len(rankings)} rankings")
    if any(not is_finite_number(w) or w < 0 for w in weights):
        raise InputError(f"weights must be finite and >= 0, got {_short(list(weights))}")

    n_lists = len(rankings)
    scores: dict[str, float] = {}
    first: dict[str, tuple[int, int]] = {}
    chunks: dict[str, Chunk] = {}
    ranks: dict[str, list[int | None]] = {}
    for li, ranking in enumerate(lists):
        if isinstance(ranking, str | bytes) or not isinstance(ranking, Sequence):
            raise InputError(f"ranking #{li} is not a sequence of chunks")
        seen: set[str] = set()
        for rank, chunk in enumerate(ranking, start=1):
            if not isinstance(chunk, Chunk):
                raise InputError(f"ranking #{li} holds a {type(chunk).__name__}, not a Chunk")
            if chunk.id in seen:
                raise InputError(f"chunk id {chunk.id!r} appears twice in ranking #{li}")
            seen.add(chunk.id)
            if chunk.id not in chunks:
                chunks[chunk.id] = chunk
                first[chunk.id] = (li, rank)
                ranks[chunk.id] = [None] * n_lists
                scores[chunk.id] = 0.0
            ranks[chunk.id][li] = rank
            scores[chunk.id] += weights[li] / (k + rank)

    def order(chunk_id: str) -> tuple[float, int, tuple[int, int], str]:
        best = min(r for r in ranks[chunk_id] if r is not None)
        return (-scores[chunk_id], best, first[chunk_id], chunk_id)

    return [
        FusedChunk(chunk=chunks[cid], score=scores[cid], ranks=tuple(ranks[cid]))
        for cid in sorted(chunks, key=order)
    ]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Chunk]],
    k: float = 60,
    weights: Sequence[float] | None = None,
    *,
    keep_scores: bool = False,
) -> list[Chunk]:
    """Merge rankings of chunks with Reciprocal Rank Fusion (see module doc).

    Args:
        rankings: lists of chunks, each best first.
        k: the RRF constant (60 as in Cormack et al.).
        weights: one non-negative weight per list (default all 1).
        keep_scores: by default each fused chunk's score is its RRF score
            (kind ``RRF``). With ``True`` chunks keep their original score and
            kind (from their first appearance), which the evaluator can still
            interpret; the RRF score is then in ``metadata["rrf_score"]``.

    Returns:
        The fused list, best first; ``metadata["rrf_ranks"]`` holds each
        chunk's rank per input list (``None`` where absent).
    """
    fused = fuse(rankings, k, weights)
    out = []
    for item in fused:
        metadata = {
            **item.chunk.metadata,
            "rrf_score": item.score,
            "rrf_ranks": list(item.ranks),
        }
        if keep_scores:
            out.append(item.chunk.replace(metadata=metadata))
        else:
            out.append(
                item.chunk.replace(score=item.score, score_kind=ScoreKind.RRF, metadata=metadata)
            )
    return out
