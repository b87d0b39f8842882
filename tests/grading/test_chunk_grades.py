"""Evaluator.evaluate(chunk_grades=...): outside grades replace chunk probabilities
for the chunk verdicts and the set stage, against hand-computed numbers."""

from __future__ import annotations

import math

import pytest
from cascade_helpers import CHUNKS, CONFIG, MODEL

from crag_heuristic import Chunk, Evaluator, EvaluatorConfig, InputError, Verdict


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def test_the_gate_alone_by_hand() -> None:
    ev = Evaluator(CONFIG).evaluate("text", CHUNKS)
    assert [g.score for g in ev.chunks] == pytest.approx([1 / 2, 2 / 3, 3 / 4])
    assert [g.verdict for g in ev.chunks] == [Verdict.IRRELEVANT, Verdict.PARTIAL, Verdict.RELEVANT]
    assert ev.score == pytest.approx(sigmoid(2.0))  # best 3/4: 2 * 0.25 / 0.25
    assert ev.details["chunk_bands"] == {"partial": 0.55, "relevant": 0.7}
    assert "external_grades" not in ev.details


def test_a_lower_outside_grade_lowers_the_set() -> None:
    ev = Evaluator(CONFIG).evaluate("text", CHUNKS, chunk_grades={"c": 0.2})
    assert [g.score for g in ev.chunks] == pytest.approx([1 / 2, 2 / 3, 0.2])
    assert ev.chunks[2].verdict is Verdict.IRRELEVANT
    # best is now b = 2/3: z = 2 * (1/6) / 0.25 = 4/3
    assert ev.score == pytest.approx(sigmoid(4 / 3)) == pytest.approx(0.791391, abs=1e-6)
    assert ev.verdict is Verdict.PARTIAL
    assert ev.details["external_grades"] == {"c": 0.2}
    assert ev.details["features"]["best_chunk"] == pytest.approx(2 / 3)
    assert "1 chunk grade(s) from an outside grader" in ev.reasoning
    # the best chunk is the gate's: its logit parts are still reported
    assert "best chunk (logit parts)" in ev.reasoning


def test_a_higher_outside_grade_raises_the_set() -> None:
    ev = Evaluator(CONFIG).evaluate("text", CHUNKS, chunk_grades={"a": 1.0, "b": 0.0})
    assert [g.score for g in ev.chunks] == pytest.approx([1.0, 0.0, 3 / 4])
    assert ev.score == pytest.approx(sigmoid(4.0)) == pytest.approx(0.982014, abs=1e-6)
    assert ev.verdict is Verdict.RELEVANT
    assert "best chunk (logit parts)" not in ev.reasoning  # the best grade is not the gate's
    assert ev.chunks[0].features["rank"] == 0.0  # the gate's evidence is kept


def test_the_linear_gate_takes_outside_grades_per_chunk() -> None:
    linear = EvaluatorConfig.from_profile("synapse")
    plain = Evaluator(linear).evaluate("text", CHUNKS)
    graded = Evaluator(linear).evaluate("text", CHUNKS, chunk_grades={"b": 0.99})
    assert graded.chunks[1].score == 0.99 and graded.chunks[1].verdict is Verdict.RELEVANT
    assert graded.chunks[0] == plain.chunks[0]
    assert graded.score == plain.score  # the linear set score reads the signals, not the chunks


@pytest.mark.parametrize(
    ("grades", "message"),
    [
        ({"zz": 0.5}, "not among the chunks"),
        ({"a": math.nan}, "number in"),
        ({"a": 1.5}, "number in"),
        ({"a": -0.1}, "number in"),
        ({"a": "0.5"}, "number in"),
        ({"a": True}, "number in"),
        ([0.5], "mapping"),
    ],
)
def test_bad_outside_grades_are_input_errors(grades: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Evaluator(CONFIG).evaluate("text", CHUNKS, chunk_grades=grades)  # type: ignore[arg-type]


def test_a_fallback_gate_records_its_own_chunk_bands() -> None:
    fallback = {
        "missing": ["similarity", "corpus_stats"],
        "chunk": {"intercept": 0.0, "terms": [{"feature": "rank", "weight": 1.0}]},
        "set": MODEL["set"],
        "chunk_thresholds": {"relevant": 0.6, "partial": 0.1},
    }
    config = CONFIG.replace(model={**MODEL, "fallbacks": [fallback]})
    unscored = [Chunk(id=c.id, text=c.text) for c in CHUNKS]
    ev = Evaluator(config).evaluate("text", unscored)
    assert ev.details["chunk_bands"] == {"partial": 0.1, "relevant": 0.6}


def test_numpy_grades_are_numbers() -> None:
    """A model's answers are often NumPy numbers (a cross-encoder's float32)."""
    import numpy as np

    plain = Evaluator(CONFIG).evaluate("text", CHUNKS, chunk_grades={"c": 0.25})
    for value in (np.float32(0.25), np.float64(0.25)):
        ev = Evaluator(CONFIG).evaluate("text", CHUNKS, chunk_grades={"c": value})
        assert ev.score == plain.score and ev.chunks[2].score == 0.25
    with pytest.raises(InputError, match="must be a number in"):
        Evaluator(CONFIG).evaluate("text", CHUNKS, chunk_grades={"c": np.bool_(True)})  # type: ignore[dict-item]
