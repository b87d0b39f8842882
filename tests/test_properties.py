"""Property tests: bounds hold and bad input never escapes as a foreign exception."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crag_heuristic import Chunk, CragError, Evaluator, InvalidQueryError, ScoreKind
from crag_heuristic.refinement import refine

EVALUATOR = Evaluator()
kinds = st.sampled_from(list(ScoreKind))
RANGES = {
    ScoreKind.COSINE: (-1, 1),
    ScoreKind.SQUARED_L2: (0, 4),
    ScoreKind.L2: (0, 2),
    ScoreKind.COSINE_DISTANCE: (0, 2),
}
texts = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=300)


@st.composite
def chunk_lists(draw: st.DrawFn) -> list[Chunk]:
    n = draw(st.integers(min_value=0, max_value=12))
    chunks = []
    for i in range(n):
        kind = draw(kinds)
        score = draw(st.one_of(st.none(), st.floats(min_value=0, max_value=1e6, allow_nan=False)))
        if kind is ScoreKind.PROBABILITY and score is not None:
            score = min(score, 1.0)
        if kind is ScoreKind.INNER_PRODUCT and score is not None:
            score = draw(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False))
        if score is not None and kind in RANGES:  # each kind's own range
            score = draw(st.floats(*RANGES[kind], allow_nan=False))
        chunks.append(
            Chunk(
                id=f"c{i}",
                text=draw(texts),
                score=score,
                score_kind=kind,
                source=draw(st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))),
            )
        )
    return chunks


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.text(min_size=1, max_size=80).filter(lambda q: q.strip()), chunks=chunk_lists())
def test_scores_and_signals_stay_in_bounds(query: str, chunks: list[Chunk]) -> None:
    evaluation = EVALUATOR.evaluate(query, chunks, ranked=False)  # in any order, not ranked
    assert 0.0 <= evaluation.score <= 1.0
    for value in evaluation.signals.as_dict().values():
        assert value is None or 0.0 <= value <= 1.0
    assert len(evaluation.chunks) == len(chunks)
    for grade in evaluation.chunks:
        assert 0.0 <= grade.score <= 1.0 and math.isfinite(grade.score)
        assert grade.similarity is None or 0.0 <= grade.similarity <= 1.0
    bands = evaluation.details["bands"]  # the profile's, or its fallback gate's
    expected = (
        "relevant"
        if evaluation.score > bands["relevant"]
        else "partial"
        if evaluation.score > bands["partial"]
        else "irrelevant"
    )
    assert evaluation.verdict.value == expected


@settings(max_examples=200, deadline=None)
@given(
    query=st.text(min_size=1, max_size=60).filter(lambda q: q.strip()),
    chunks=chunk_lists(),
    budget=st.integers(min_value=1, max_value=400),
)
def test_refinement_respects_budget_and_order(query: str, chunks: list[Chunk], budget: int) -> None:
    result = refine(query, chunks, token_budget=budget)
    assert result.tokens <= budget + 1e-9
    order = [(int(s.chunk_id[1:]), s.index) for s in result.kept]
    assert order == sorted(order)
    if result.cut:  # no strip kept on its score: the chunks' beginning, cut to the budget
        assert [s.kept for s in result.strips] == sorted(
            (s.kept for s in result.strips), reverse=True
        )
    else:
        assert all(s.score >= result.threshold for s in result.kept)


@settings(max_examples=300, deadline=None)
@given(
    ident=st.one_of(st.text(max_size=5), st.integers(), st.none()),
    text=st.one_of(st.text(max_size=20), st.binary(max_size=5), st.none(), st.integers()),
    score=st.one_of(st.none(), st.floats(), st.integers(), st.text(max_size=3), st.booleans()),
    kind=st.one_of(kinds, st.text(max_size=8)),
)
def test_bad_chunk_fields_raise_crag_errors_only(
    ident: object, text: object, score: object, kind: object
) -> None:
    try:
        chunk = Chunk(id=ident, text=text, score=score, score_kind=kind)  # type: ignore[arg-type]
    except CragError:
        return
    EVALUATOR.evaluate("query", [chunk])


@settings(max_examples=200, deadline=None)
@given(query=st.one_of(st.text(max_size=10), st.none(), st.integers(), st.binary(max_size=4)))
def test_any_query_gives_a_result_or_an_invalid_query_error(query: object) -> None:
    chunk = Chunk(id="x", text="some text", score=0.5, score_kind="cosine")
    if isinstance(query, str) and query.strip():
        assert EVALUATOR.evaluate(query, [chunk]).chunks[0].chunk_id == "x"
    else:
        with pytest.raises(InvalidQueryError):
            EVALUATOR.evaluate(query, [chunk])  # type: ignore[arg-type]
