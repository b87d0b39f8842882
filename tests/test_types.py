from __future__ import annotations

import json
import math
from typing import Any

import pytest

from crag_heuristic import (
    Chunk,
    DuplicateChunkError,
    Evaluation,
    Evaluator,
    InputError,
    InvalidChunkError,
    ScoreKind,
    Verdict,
)


def test_verdict_aliases_follow_the_crag_paper() -> None:
    assert Verdict.CORRECT is Verdict.RELEVANT
    assert Verdict.AMBIGUOUS is Verdict.PARTIAL
    assert Verdict.INCORRECT is Verdict.IRRELEVANT
    assert [v.value for v in Verdict] == ["relevant", "partial", "irrelevant"]
    assert Verdict.RELEVANT.rank > Verdict.PARTIAL.rank > Verdict.IRRELEVANT.rank


def test_score_kind_accepts_strings_and_numpy_floats() -> None:
    np = pytest.importorskip("numpy")
    chunk = Chunk(id="x", text="t", score=np.float32(0.5), score_kind="squared_l2")
    assert chunk.score_kind is ScoreKind.SQUARED_L2
    assert type(chunk.score) is float and chunk.score == 0.5


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
def test_non_finite_scores_are_rejected(score: float) -> None:
    with pytest.raises(InvalidChunkError) as info:
        Chunk(id="x", text="t", score=score, score_kind=ScoreKind.COSINE)
    assert info.value.field == "score" and info.value.chunk_id == "x"


@pytest.mark.parametrize("kind", ["squared_l2", "l2", "distance", "bm25", "probability", "rrf"])
def test_negative_scores_are_rejected_where_meaningless(kind: str) -> None:
    with pytest.raises(InvalidChunkError, match="cannot be negative"):
        Chunk(id="x", text="t", score=-0.5, score_kind=kind)


def test_tiny_negative_distance_from_float_error_is_clamped() -> None:
    assert Chunk(id="x", text="t", score=-1e-9, score_kind="squared_l2").score == 0.0


def test_negative_cosine_is_a_valid_score() -> None:
    assert Chunk(id="x", text="t", score=-0.2, score_kind="cosine").score == -0.2


def test_probability_above_one_is_rejected() -> None:
    with pytest.raises(InvalidChunkError, match="probability"):
        Chunk(id="x", text="t", score=1.5, score_kind="probability")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"id": "", "text": "t"}, "id"),
        ({"id": "   ", "text": "t"}, "id"),
        ({"id": 3, "text": "t"}, "id"),
        ({"id": "x", "text": b"bytes"}, "text"),
        ({"id": "x", "text": None}, "text"),
        ({"id": "x", "text": "t", "score": "0.5"}, "score"),
        ({"id": "x", "text": "t", "score": True}, "score"),
        ({"id": "x", "text": "t", "score_kind": "cosinus"}, "score_kind"),
        ({"id": "x", "text": "t", "source": 7}, "source"),
        ({"id": "x", "text": "t", "metadata": []}, "metadata"),
    ],
)
def test_bad_fields_raise_typed_errors_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidChunkError) as info:
        Chunk(**kwargs)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)  # catchable as a ValueError too


def test_bytes_text_error_says_how_to_fix_it() -> None:
    with pytest.raises(InvalidChunkError, match="decode bytes"):
        Chunk(id="x", text=b"\xff\xfe")  # type: ignore[arg-type]


def test_from_dict_accepts_beir_rows() -> None:
    chunk = Chunk.from_dict({"_id": 12, "title": "Title", "text": "Body.", "extra": 1})
    assert chunk.id == "12"
    assert chunk.text == "Title\nBody."
    assert chunk.metadata == {"extra": 1}
    assert chunk.score_kind is ScoreKind.UNKNOWN


def test_from_dict_missing_text_names_the_chunk() -> None:
    with pytest.raises(InvalidChunkError) as info:
        Chunk.from_dict({"id": "q"})
    assert info.value.field == "text" and info.value.chunk_id == "q"


def test_chunk_round_trips_through_json() -> None:
    chunk = Chunk(
        id="a",
        text="x",
        score=0.3,
        score_kind="bm25",
        source="s",
        metadata={"k": [1]},
        parent_id="p",
    )
    assert Chunk.from_dict(json.loads(json.dumps(chunk.to_dict()))) == chunk


def test_source_key_falls_back_to_parent_then_id() -> None:
    assert Chunk(id="a", text="", source="s", parent_id="p").source_key == "s"
    assert Chunk(id="a", text="", parent_id="p").source_key == "p"
    assert Chunk(id="a", text="").source_key == "a"


def test_duplicate_ids_are_rejected_with_both_positions() -> None:
    chunks = [Chunk(id="a", text="x"), Chunk(id="b", text="y"), Chunk(id="a", text="z")]
    with pytest.raises(DuplicateChunkError) as info:
        Evaluator().evaluate("query", chunks)
    assert info.value.first_index == 0 and info.value.index == 2


@pytest.mark.parametrize("chunks", ["text", None, 5, [{"id": "a", "text": "x"}]])
def test_wrong_container_or_element_types_are_input_errors(chunks: object) -> None:
    with pytest.raises(InputError):
        Evaluator().evaluate("query", chunks)  # type: ignore[arg-type]


def test_evaluation_round_trips_through_json(solar_chunks: list[Chunk]) -> None:
    evaluation = Evaluator().evaluate("solar panel efficiency", solar_chunks)
    again = Evaluation.from_dict(json.loads(json.dumps(evaluation.to_dict())))
    assert again == evaluation
    assert again.chunk("b").verdict is evaluation.chunk("b").verdict
