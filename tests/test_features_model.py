"""Gate features and the fitted-model scoring, against hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from crag_heuristic import Chunk, ConfigError, Evaluator, EvaluatorConfig, Verdict
from crag_heuristic._evaluator.model import sigmoid
from crag_heuristic.text import CorpusStats

CHUNKS = [
    # content terms: solar(2) panel(1) power(1)    -> dl 4
    Chunk(id="a", text="Solar panels: solar power.", score=0.8, score_kind="cosine"),
    # content terms: wind(2) power(1)              -> dl 3
    Chunk(id="b", text="Wind power, wind.", score=0.4, score_kind="cosine"),
]


def bm25_part(tf: int, dl: float, avgdl: float, k1: float = 1.5, b: float = 0.75) -> float:
    return tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


def test_bm25_contrast_and_similarity_z_by_hand() -> None:
    ev = Evaluator(all_evidence=True).evaluate("solar power", CHUNKS)
    a, b = (grade.features for grade in ev.chunks)
    avgdl = (4 + 3) / 2  # no corpus statistics: the list's mean
    top = 2 * 2.5  # two terms of weight 1, each at most k1 + 1
    bm25_a = (bm25_part(2, 4, avgdl) + bm25_part(1, 4, avgdl)) / top
    bm25_b = bm25_part(1, 3, avgdl) / top
    assert a["bm25"] == pytest.approx(bm25_a)
    assert b["bm25"] == pytest.approx(bm25_b)
    assert a["lexical_contrast"] == pytest.approx(bm25_a - (bm25_a + bm25_b) / 2)
    assert b["lexical_contrast"] == pytest.approx(-(a["lexical_contrast"] or 0.0))
    # similarities 0.8 and 0.4: mean 0.6, std 0.2 -> z = +1 / -1
    assert (a["similarity_z"], b["similarity_z"]) == (pytest.approx(1.0), pytest.approx(-1.0))
    assert (a["keyword_overlap"], b["keyword_overlap"]) == (1.0, 0.5)
    features = ev.details["features"]
    assert features["similarity_std"] == pytest.approx(0.2)
    assert features["similarity_gap"] == pytest.approx(0.4)
    assert features["bm25_max"] == pytest.approx(bm25_a)


def test_bm25_uses_corpus_idf_and_avgdl() -> None:
    stats = CorpusStats(n_docs=100, doc_freq={"solar": 1, "power": 50}, avg_doc_len=10.0)
    ev = Evaluator(all_evidence=True).evaluate("solar power", CHUNKS, corpus_stats=stats)
    a = ev.chunks[0].features
    w_solar, w_power = stats.idf("solar"), stats.idf("power")
    expected = (w_solar * bm25_part(2, 4, 10.0) + w_power * bm25_part(1, 4, 10.0)) / (
        2.5 * (w_solar + w_power)
    )
    assert a["bm25"] == pytest.approx(expected)


MODEL = {
    "chunk": {
        "intercept": -1.0,
        "terms": [
            {"feature": "similarity", "weight": 2.0, "mean": 0.5, "scale": 0.1},
            {"feature": "keyword_overlap", "weight": 1.0},
        ],
    },
    "set": {
        "intercept": 0.5,
        "terms": [
            {"feature": "best_chunk", "weight": 4.0, "mean": 0.5},
            {"feature": "similarity_std", "weight": -1.0, "scale": 0.1},
        ],
    },
}


def test_a_fitted_model_scores_by_hand() -> None:
    config = EvaluatorConfig.from_profile("synapse").replace(
        model=MODEL, thresholds={"relevant": 0.9, "partial": 0.5}, name="fitted"
    )
    ev = Evaluator(config).evaluate("solar power", CHUNKS)
    # chunk a: -1 + 2*(0.8-0.5)/0.1 + 1*1.0 = 6   ; chunk b: -1 + 2*(0.4-0.5)/0.1 + 0.5 = -2.5
    p_a, p_b = sigmoid(6.0), sigmoid(-2.5)
    assert [g.score for g in ev.chunks] == pytest.approx([p_a, p_b])
    # set: 0.5 + 4*(p_a - 0.5) - (0.2 / 0.1)
    assert ev.score == pytest.approx(sigmoid(0.5 + 4 * (p_a - 0.5) - 2.0))
    assert ev.verdict is Verdict.PARTIAL  # 0.5 < 0.80 <= 0.9
    assert ev.details["model"]["set"]["best_chunk"] == pytest.approx(4 * (p_a - 0.5))
    assert ev.details["model"]["best_chunk_by_signal"] == pytest.approx(
        {"semantic_coherence": 6.0, "keyword_overlap": 1.0}
    )
    assert "best chunk (logit parts): semantic coherence +6.00" in ev.reasoning
    assert ev.signals.keyword_overlap == 1.0  # the named signals are still reported


def test_missing_model_features_sit_at_their_mean_and_are_noted() -> None:
    config = EvaluatorConfig.from_profile("synapse").replace(model=MODEL)
    unscored = [c.replace(score=None) for c in CHUNKS]
    ev = Evaluator(config).evaluate("solar power", unscored)
    # chunk a: -1 + keyword 1.0 = 0 -> 0.5 ; the set: similarity_std missing too
    assert ev.chunks[0].score == pytest.approx(0.5)
    assert ev.score == pytest.approx(sigmoid(0.5 + 4 * (0.5 - 0.5)))
    assert ev.details["model"]["missing"] == ["similarity", "similarity_std"]
    assert "model features unavailable: similarity, similarity_std" in ev.reasoning


def test_model_config_round_trips_and_validates() -> None:
    config = EvaluatorConfig.from_profile("synapse").replace(model=MODEL)
    assert EvaluatorConfig.from_dict(config.to_dict()) == config
    assert config.fingerprint() != EvaluatorConfig.from_profile("synapse").fingerprint()
    with pytest.raises(ConfigError, match="unknown set feature"):
        EvaluatorConfig.from_profile("synapse").replace(
            model={"set": {"terms": [{"feature": "similarity", "weight": 1}]}}
        )


def test_sigmoid_is_stable() -> None:
    assert sigmoid(1000.0) == 1.0 and sigmoid(-1000.0) == 0.0
    assert sigmoid(0.0) == 0.5 and sigmoid(2.0) == pytest.approx(1 / (1 + math.exp(-2)))
