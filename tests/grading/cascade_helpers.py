"""Shared inputs of the cascade tests (imported by name: tests/ has no packages)."""

from __future__ import annotations

from typing import Any

from crag_heuristic import Chunk, EvaluatorConfig

# P(chunk i relevant) = sigmoid(ln(1 + i)) = (1 + i) / (2 + i): 1/2, 2/3, 3/4
# P(good set) = sigmoid(2 * (best_chunk - 0.5) / 0.25)
MODEL = {
    "fallbacks": [],  # none of the default profile's fallback gates
    "chunk": {"intercept": 0.0, "terms": [{"feature": "rank", "weight": 1.0}]},
    "set": {
        "intercept": 0.0,
        "terms": [{"feature": "best_chunk", "weight": 2.0, "mean": 0.5, "scale": 0.25}],
    },
}
CONFIG = EvaluatorConfig().replace(
    model=MODEL,
    thresholds={"relevant": 0.9, "partial": 0.5},
    chunk_thresholds={"relevant": 0.7, "partial": 0.55},
    name="by-hand",
)
CHUNKS = [
    Chunk(id=name, text=f"text about {name}", score=0.5, score_kind="cosine") for name in "abc"
]


def grade_record(
    query: int, *, score: float, good: bool, audited: bool = True, grader: str = "g", **fields: Any
) -> dict[str, Any]:
    """A whole grade-log record (every required field of ``RECORD_FIELDS``), of query
    number ``query`` (its digest stands in for the SHA-256 of a text), with ``fields``
    over it."""
    return {
        "v": 1,
        "time": "2025-01-01T00:00:00+00:00",
        "query": f"{query:064x}",
        "profile": "",
        "profile_name": "",
        "grader": grader,
        "score": score,
        "band": [0.0, 0.6],
        "in_band": score <= 0.6,
        "audited": audited,
        "grader_score": 1.0 if good else 0.0,
        "grader_good": good,
        "chunks": 5,
        "features": {"top_cosine": score},
        **fields,
    }
