"""Shared inputs of the cascade tests (imported by name: tests/ has no packages)."""

from __future__ import annotations

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
