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


def test_nothing_passes_sends_the_chunks_whole_when_they_fit(chunks: list[Chunk]) -> None:
    # every strip (6 + 5 + 6 + 4 + 5 = 26 words, 33.8 tokens) fits the default 512
    result = refine("quantum chromodynamics", chunks)
    assert result.cut and len(result.kept) == len(result.strips) == 5
    assert [c.text for c in result.chunks] == [DOC1, DOC2]
    assert result.tokens == pytest.approx(26 * 1.3)


# tokens_per_word 1 below: a strip's estimated tokens are its words
ONE_PER_WORD = Evaluator().config.replace(length={"tokens_per_word": 1.0})
CUT = [
    Chunk(id="c1", text="Alpha beta gamma delta. Epsilon zeta eta theta iota."),  # 4 + 5 words
    Chunk(id="c2", text="Kappa lambda mu."),  # 3 words
]


def cut(budget: int) -> tuple[list[tuple[str, str]], float]:
    result = refine("quantum chromodynamics", CUT, config=ONE_PER_WORD, token_budget=budget)
    assert result.cut  # no strip passes: the chunks are cut to fit
    assert result.tokens <= budget
    return [(c.id, c.text) for c in result.chunks], result.tokens


def test_nothing_passes_cuts_the_chunks_to_the_budget() -> None:
    # 12 words in all: a budget of 12 holds everything, exactly (a strip that fills the
    # budget to the token fits: <=, not <)
    assert cut(12) == ([("c1", CUT[0].text), ("c2", CUT[1].text)], 12.0)
    # 11: c1's 9 words, then c2's first 2; nothing after the cut
    assert cut(11) == ([("c1", CUT[0].text), ("c2", "Kappa lambda")], 11.0)
    # 9: c1 exactly, c2 left out (no room for a word)
    assert cut(9) == ([("c1", CUT[0].text)], 9.0)
    # 7: the first strip (4), then 3 words of the second; the strips kept say so
    assert cut(7) == ([("c1", "Alpha beta gamma delta. Epsilon zeta eta")], 7.0)
    result = refine("quantum chromodynamics", CUT, config=ONE_PER_WORD, token_budget=7)
    assert [(s.chunk_id, s.index) for s in result.kept] == [("c1", 0), ("c1", 1)]
    assert result.chunks[0].metadata["refined_strips"] == [0, 1]
    # 3: the first strip is cut
    assert cut(3) == ([("c1", "Alpha beta gamma")], 3.0)


def test_a_passing_strip_too_big_for_the_budget_also_cuts_to_fit() -> None:
    chunks = [Chunk(id="c1", text="Quantum chromodynamics binds quarks into protons and neutrons.")]
    result = refine("quantum chromodynamics", chunks, config=ONE_PER_WORD, token_budget=4)
    assert result.cut and result.text == "Quantum chromodynamics binds quarks"
    assert result.tokens == 4.0


def test_a_budget_that_holds_no_word_sends_nothing() -> None:
    tokens = Evaluator().config.replace(length={"tokens_per_word": 2.0})
    result = refine("quantum", CUT, config=tokens, token_budget=1)
    assert result.cut and result.chunks == () and result.text == "" and result.tokens == 0
    assert result.kept == ()


def test_the_budget_is_never_exceeded() -> None:
    """Whatever the budget, what is sent holds at most that many estimated tokens (the
    default 1.3 tokens a word)."""
    for budget in range(1, 20):
        result = refine("quantum chromodynamics", CUT, token_budget=budget)
        assert result.tokens <= budget
        assert Evaluator().analyzer.analyze(result.text).n_tokens * 1.3 == pytest.approx(
            result.tokens
        )


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
