from __future__ import annotations

import pytest

from crag_heuristic import Chunk, ConfigError, Evaluator
from crag_heuristic.refinement import refine
from crag_heuristic.text import CorpusStats

DOC1 = (
    "Solar panels turn sunlight into electricity. "
    "The weather was nice yesterday. "
    "Panel efficiency is about twenty percent."
)
DOC2 = "Unrelated text about cooking. Solar ovens cook food slowly."


@pytest.fixture
def chunks() -> list[Chunk]:
    return [
        Chunk(id="d1", text=DOC1, score=0.7, score_kind="cosine", source="s1"),
        Chunk(id="d2", text=DOC2, score=0.5, score_kind="cosine", source="s2"),
    ]


def test_keeps_relevant_strips_in_original_order(chunks: list[Chunk]) -> None:
    result = refine("solar panel efficiency", chunks)
    assert [(s.chunk_id, s.index) for s in result.kept] == [("d1", 0), ("d1", 2), ("d2", 1)]
    # scores: d1#0 covers solar+panel (2/3), d1#2 panel+effici (2/3), d2#1 solar (1/3)
    assert [s.score for s in result.kept] == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert result.text == (
        "Solar panels turn sunlight into electricity. Panel efficiency is about twenty percent. "
        "Solar ovens cook food slowly."
    )
    assert [c.id for c in result.chunks] == ["d1", "d2"]
    assert result.chunks[0].metadata["refined_strips"] == [0, 2]
    assert result.chunks[0].score == 0.7 and result.chunks[0].source == "s1"
    assert len(result.strips) == 5


def test_token_budget_prefers_high_scores_then_restores_order(chunks: list[Chunk]) -> None:
    # strip tokens (words * 1.3): d1#0 6 -> 7.8, d1#2 6 -> 7.8, d2#1 5 -> 6.5
    result = refine("solar panel efficiency", chunks, token_budget=16)
    assert [(s.chunk_id, s.index) for s in result.kept] == [("d1", 0), ("d1", 2)]
    assert result.tokens == pytest.approx(15.6)
    assert result.tokens <= result.token_budget


def test_a_strip_too_big_is_skipped_for_smaller_ones(chunks: list[Chunk]) -> None:
    result = refine("solar panel efficiency", chunks, token_budget=7)
    assert [(s.chunk_id, s.index) for s in result.kept] == [("d2", 1)]


def test_threshold(chunks: list[Chunk]) -> None:
    result = refine("solar panel efficiency", chunks, threshold=0.5)
    assert [(s.chunk_id, s.index) for s in result.kept] == [("d1", 0), ("d1", 2)]


def test_nothing_passes_gives_an_empty_refinement(chunks: list[Chunk]) -> None:
    result = refine("quantum chromodynamics", chunks)
    assert result.kept == () and result.text == "" and result.chunks == ()
    assert len(result.strips) == 5


def test_idf_weights_change_strip_scores(chunks: list[Chunk]) -> None:
    stats = CorpusStats(n_docs=100, doc_freq={"solar": 50, "panel": 50, "effici": 1})
    result = refine("solar panel efficiency", chunks, corpus_stats=stats, threshold=0.5)
    # efficiency is rare: only the strip that has it passes 0.5
    assert [(s.chunk_id, s.index) for s in result.kept] == [("d1", 2)]


def test_evaluator_refine_uses_its_config(chunks: list[Chunk]) -> None:
    evaluator = Evaluator(Evaluator().config.replace(refine={"strip_threshold": 0.5}))
    assert len(evaluator.refine("solar panel efficiency", chunks).kept) == 2
    assert len(evaluator.refine("solar panel efficiency", chunks, threshold=0.1).kept) == 3


@pytest.mark.parametrize(
    ("budget", "threshold"), [(0, None), (-1, None), (None, 1.5), (None, -0.1)]
)
def test_bad_budget_or_threshold(
    chunks: list[Chunk], budget: int | None, threshold: float | None
) -> None:
    with pytest.raises(ConfigError):
        refine("solar", chunks, token_budget=budget, threshold=threshold)


def test_to_dict_is_json_ready(chunks: list[Chunk]) -> None:
    import json

    data = json.loads(json.dumps(refine("solar", chunks).to_dict()))
    assert data["strips"][0]["chunk_id"] == "d1"
