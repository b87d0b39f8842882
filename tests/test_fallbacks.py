"""Fallback gates: an input without similarities or corpus statistics gets the gate fitted
without them, not a model whose missing features sit at zero."""

from __future__ import annotations

import pytest

from crag_heuristic import Chunk, ConfigError, Evaluator, EvaluatorConfig, Verdict
from crag_heuristic._evaluator.model import sigmoid
from crag_heuristic.text import CorpusStats

MAIN = {
    "chunk": {"intercept": 0.0, "terms": [{"feature": "similarity", "weight": 1.0}]},
    "set": {"intercept": 0.0, "terms": [{"feature": "best_chunk", "weight": 1.0}]},
}
WITHOUT_SIMILARITY = {
    "missing": ["similarity"],
    "chunk": {"intercept": -1.0, "terms": [{"feature": "keyword_overlap", "weight": 4.0}]},
    "set": {"intercept": 0.0, "terms": [{"feature": "best_chunk", "weight": 2.0}]},
    "thresholds": {"relevant": 0.8, "partial": 0.7},
}
CONFIG = EvaluatorConfig.from_dict(
    {
        "profile": "synapse",
        "name": "with-fallback",
        "model": {**MAIN, "fallbacks": [WITHOUT_SIMILARITY]},
        "thresholds": {"relevant": 0.9, "partial": 0.5},
    }
)
STATS = CorpusStats(n_docs=10, doc_freq={"solar": 1})


def test_no_scores_selects_the_gate_fitted_without_similarities() -> None:
    chunks = [Chunk(id="a", text="solar power"), Chunk(id="b", text="wind")]
    ev = Evaluator(CONFIG).evaluate("solar power", chunks, STATS)
    # keyword overlap, IDF-weighted: a holds both terms (1.0), b neither (0.0)
    p_a, p_b = sigmoid(-1.0 + 4.0), sigmoid(-1.0)
    assert [g.score for g in ev.chunks] == pytest.approx([p_a, p_b])
    assert ev.score == pytest.approx(sigmoid(2.0 * p_a))
    assert ev.verdict is Verdict.RELEVANT  # 0.86 > the fallback's own band 0.8 (< the main 0.9)
    assert ev.details["bands"] == {"relevant": 0.8, "partial": 0.7, "fallback_for": ["similarity"]}
    assert any("fitted without similarity" in note for note in ev.details["notes"])
    assert ev.details["model"]["missing"] == []


def test_with_scores_the_main_gate_is_used() -> None:
    chunks = [Chunk(id="a", text="solar power", score=0.5, score_kind="cosine")]
    ev = Evaluator(CONFIG).evaluate("solar power", chunks, STATS)
    assert ev.chunks[0].score == pytest.approx(sigmoid(0.5))


def test_without_a_matching_fallback_missing_features_are_noted() -> None:
    chunks = [Chunk(id="a", text="solar power", score=0.5, score_kind="cosine")]
    ev = Evaluator(CONFIG).evaluate("solar power", chunks)  # no corpus statistics: no fallback
    assert ev.chunks[0].score == pytest.approx(sigmoid(0.5))
    no_scores = Evaluator(CONFIG).evaluate("solar power", [Chunk(id="a", text="solar")])
    assert "similarity" in no_scores.details["model"]["missing"]  # two groups lack: main gate


def test_fallbacks_are_validated() -> None:
    with pytest.raises(ConfigError, match="unknown evidence group"):
        EvaluatorConfig.from_dict({"model": {"fallbacks": [{"missing": ["vibes"]}]}})
    with pytest.raises(ConfigError, match="non-empty list"):
        EvaluatorConfig.from_dict({"model": {"fallbacks": [{"missing": []}]}})
    twice = {"missing": ["similarity"]}
    with pytest.raises(ConfigError, match="same evidence"):
        EvaluatorConfig.from_dict({"model": {"fallbacks": [twice, twice]}})
