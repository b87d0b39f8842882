"""Map a retriever's raw score to a similarity in [0, 1], one formula per kind.

The conversions (``d`` a distance, ``s`` a score, ``c`` a cosine):

==================  ===========================================================
``COSINE``          ``c``
``INNER_PRODUCT``   ``c = 2 / (1 + exp(-s)) - 1`` (a logistic onto [-1, 1]; only
                    a proxy: an inner product of unnormalised vectors has no
                    fixed scale)
``SQUARED_L2``      ``c = 1 - d / 2``: for unit vectors ``|a-b|^2 = 2 - 2 cos``.
                    FAISS ``METRIC_L2`` indexes return this squared distance.
``L2``              ``c = 1 - d^2 / 2`` (a plain Euclidean distance)
``COSINE_DISTANCE`` ``c = 1 - d`` (Chroma's ``cosine`` space returns ``1 - cos``)
``DISTANCE``        ``1 / (1 + d)`` for any other non-negative distance
``BM25``            ``s / (s + saturation)``: 0 for no match, 1/2 at ``saturation``
``PROBABILITY``     ``s``
==================  ===========================================================

Cosine-like values are then placed on [0, 1] by the configured band
``[cosine_floor, cosine_ceiling]``: ``(c - floor) / (ceiling - floor)``,
clipped. With the default band (0, 1) a negative cosine counts as 0; a model
whose unrelated texts sit at cosine 0.1 and whose answers at 0.7 is better
served by a band of (0.1, 0.7). ``RRF``, ``WEB`` and ``UNKNOWN`` scores have
no query-independent meaning: :func:`similarity` returns ``None`` for them.
"""

from __future__ import annotations

import math

from ._types import Chunk, ScoreKind

_COSINE_LIKE = (
    ScoreKind.COSINE,
    ScoreKind.INNER_PRODUCT,
    ScoreKind.SQUARED_L2,
    ScoreKind.L2,
    ScoreKind.COSINE_DISTANCE,
)


def to_cosine(score: float, kind: ScoreKind) -> float:
    """Convert a cosine-like raw score (cosine, IP, squared L2, L2, cosine distance)
    to a cosine.

    Raises:
        ValueError: for kinds that are not cosine-like.
    """
    if kind is ScoreKind.COSINE:
        return score
    if kind is ScoreKind.SQUARED_L2:
        return 1.0 - score / 2.0
    if kind is ScoreKind.L2:
        return 1.0 - score * score / 2.0
    if kind is ScoreKind.COSINE_DISTANCE:
        return 1.0 - score
    if kind is ScoreKind.INNER_PRODUCT:
        return 2.0 / (1.0 + math.exp(-max(-60.0, min(60.0, score)))) - 1.0
    raise ValueError(f"{kind.value} is not a cosine-like score kind")


def similarity(
    chunk: Chunk,
    *,
    cosine_floor: float = 0.0,
    cosine_ceiling: float = 1.0,
    bm25_saturation: float = 10.0,
) -> float | None:
    """The chunk's score as a similarity in [0, 1], or ``None`` if it has none.

    ``None`` is returned when the chunk has no score or when its kind has no
    query-independent meaning (``RRF``, ``WEB``, ``UNKNOWN``).
    """
    score = chunk.score
    kind = chunk.score_kind
    if score is None or not kind.is_comparable:
        return None
    if kind in _COSINE_LIKE:
        cosine = to_cosine(score, kind)
        value = (cosine - cosine_floor) / (cosine_ceiling - cosine_floor)
    elif kind is ScoreKind.DISTANCE:
        value = 1.0 / (1.0 + score)
    elif kind is ScoreKind.BM25:
        value = score / (score + bm25_saturation)
    else:  # PROBABILITY
        value = score
    return min(1.0, max(0.0, value))
