"""The evidence registry: every feature one definition; the new list features by hand."""

from __future__ import annotations

import pytest

from crag_heuristic import Chunk, ConfigError, Evaluator, EvaluatorConfig
from crag_heuristic import _evidence as evidence

SIGNALS = {"keyword_overlap", "semantic_coherence", "length_adequacy", "source_diversity"}

CHUNKS = [
    Chunk(id="a", text="solar panel power", score=0.9, score_kind="cosine"),
    Chunk(id="b", text="solar wind power", score=0.6, score_kind="cosine"),
    Chunk(id="c", text="coffee bean", score=0.3, score_kind="cosine"),
]


def test_every_feature_is_one_documented_definition() -> None:
    for level, registry in (("chunk", evidence.CHUNK), ("set", evidence.SET)):
        for name, feature in registry.items():
            assert feature.name == name and feature.level == level
            assert feature.doc, f"{level} feature {name} has no docstring"
            assert feature.signal in SIGNALS | {"chunk_model"}
    assert tuple(evidence.CHUNK) == evidence.CHUNK_FEATURES
    assert tuple(evidence.SET) == evidence.SET_FEATURES


def test_a_model_may_name_any_registered_feature_and_nothing_else() -> None:
    terms = [{"feature": name, "weight": 0.1} for name in evidence.SET_FEATURES]
    EvaluatorConfig.from_dict({"model": {"set": {"terms": terms}}})
    with pytest.raises(ConfigError, match="unknown set feature"):
        EvaluatorConfig.from_dict({"model": {"set": {"terms": [{"feature": "x", "weight": 1}]}}})


def test_list_features_by_hand() -> None:
    ev = Evaluator("synapse", all_evidence=True).evaluate("solar power", CHUNKS)
    rows = [g.features for g in ev.chunks]
    # term sets: a {solar, panel, power}, b {solar, wind, power}, c {coffe, bean}
    # pairs: |a&b| = 2, |a&c| = 0, |b&c| = 0; unions 4, 5, 5 -> pooled Jaccard 2 / 14
    f = ev.details["features"]
    assert f["lexical_coherence"] == pytest.approx(2 / 14)
    # first chunk against the others: shared 2 + 0, unions 4 + 5
    assert f["top_lexical_coherence"] == pytest.approx(2 / 9)
    assert f["keyword_coverage"] == 1.0  # solar and power are both found
    assert [r["similarity_drop"] for r in rows] == pytest.approx([0.0, -0.3, -0.6])
    assert [r["rank"] for r in rows] == pytest.approx([0.0, 0.6931471805599453, 1.0986122886681098])


def test_only_what_the_gate_reads_is_computed_by_default() -> None:
    lean = Evaluator("synapse").evaluate("solar power", CHUNKS)
    assert set(lean.chunks[0].features) == {
        "keyword_overlap",
        "similarity",
        "length_adequacy",
        "source_diversity",
    }
    assert "lexical_coherence" not in lean.details["features"]
    full = Evaluator("synapse", all_evidence=True).evaluate("solar power", CHUNKS)
    assert set(full.chunks[0].features) == set(evidence.CHUNK_FEATURES)
    assert lean.score == full.score and lean.verdict is full.verdict


def test_signal_of_reports_the_refined_signal() -> None:
    assert evidence.signal_of("lexical_contrast") == "keyword_overlap"
    assert evidence.signal_of("similarity_z") == "semantic_coherence"
    assert evidence.signal_of("best_chunk", "set") == "chunk_model"
    assert evidence.signal_of("no such thing") == "chunk_model"


def test_bm25_features_by_hand() -> None:
    """No statistics: every query term weighs 1 and avgdl is the list's mean length.
    Query terms solar, power; a = {solar, panel, power} (3 terms), b = {solar, wind,
    power} (3), c = {coffe, bean} (2): avgdl 8/3; with k1 = 1.5 and b = 0.75, for a
    and b each term scores tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))
    = 2.5 / (1 + 1.5 * 1.09375)."""
    ev = Evaluator("synapse", all_evidence=True).evaluate("solar power", CHUNKS)
    term = 2.5 / (1 + 1.5 * (0.25 + 0.75 * 3 / (8 / 3)))
    rows = [g.features for g in ev.chunks]
    assert [r["bm25_raw"] for r in rows] == pytest.approx([2 * term, 2 * term, 0.0])
    # the normalised bm25 is the raw score over its maximum, sum of w (k1 + 1) = 5
    assert [r["bm25"] for r in rows] == pytest.approx([2 * term / 5, 2 * term / 5, 0.0])
    f = ev.details["features"]
    assert f["bm25_raw_max"] == pytest.approx(2 * term)
    assert f["bm25_raw_top"] == pytest.approx(2 * term)
    assert f["bm25_top"] == pytest.approx(2 * term / 5)
    reversed_list = Evaluator("synapse", all_evidence=True).evaluate(
        "solar power",
        CHUNKS[::-1],
        ranked=False,  # reordered after scoring
    )
    assert reversed_list.details["features"]["bm25_top"] == 0.0  # coffee first
    assert reversed_list.details["features"]["bm25_raw_max"] == pytest.approx(2 * term)


@pytest.mark.parametrize("path", ["stored, not decoded", "stored, decoded", "mixed", "tokenised"])
def test_list_features_by_hand_on_the_corpus_analyses(path: str) -> None:
    """The same hand-computed coherences whichever way the chunks' terms are read: from
    the stored analyses' term ids (every chunk a stored row not yet decoded), from
    decoded rows, from a list mixing stored rows and a new text, or tokenised."""
    from crag_heuristic.text import CorpusStats

    stats = CorpusStats.build(
        [c.text for c in CHUNKS] + ["unrelated filler text"],
        ids=[c.id for c in CHUNKS] + ["z"],
        analyses=True,
    )
    evaluator = Evaluator("synapse", all_evidence=True)
    chunks = list(CHUNKS)
    if path == "stored, decoded":
        evaluator.evaluate("wind", chunks, stats)  # another query decodes the rows
    if path == "mixed":
        chunks[2] = Chunk(
            id="new", text="bean coffee", score=0.3, score_kind="cosine"
        )  # not stored
    ev = evaluator.evaluate("solar power", chunks, None if path == "tokenised" else stats)
    f = ev.details["features"]
    assert f["lexical_coherence"] == pytest.approx(2 / 14)
    assert f["top_lexical_coherence"] == pytest.approx(2 / 9)
