"""Reciprocal Rank Fusion against hand-computed numbers."""

from __future__ import annotations

from typing import Any

import pytest

from crag_heuristic import Chunk, InputError, ScoreKind
from crag_heuristic._expansion.fusion import fuse, reciprocal_rank_fusion


def ranking(*ids: str, kind: str = "cosine") -> list[Chunk]:
    return [Chunk(id=i, text=i, score=1.0 - n / 10, score_kind=kind) for n, i in enumerate(ids)]


def test_scores_by_hand() -> None:
    # list 1: a b c ; list 2: b d a   (k = 60, ranks from 1)
    # a: 1/61 + 1/63 = 0.032266 ; b: 1/62 + 1/61 = 0.032522 ; c: 1/63 ; d: 1/62
    fused = reciprocal_rank_fusion([ranking("a", "b", "c"), ranking("b", "d", "a", kind="bm25")])
    assert [c.id for c in fused] == ["b", "a", "d", "c"]
    assert [c.score for c in fused] == pytest.approx(
        [1 / 62 + 1 / 61, 1 / 61 + 1 / 63, 1 / 62, 1 / 63]
    )
    assert all(c.score_kind is ScoreKind.RRF for c in fused)
    assert fused[1].metadata["rrf_ranks"] == [1, 3]
    assert fused[2].metadata["rrf_ranks"] == [None, 2]


def test_weights_and_k() -> None:
    # k = 0, weights 2 and 1: a = 2/1 + 1/2 = 2.5 ; b = 2/2 = 1 ; c = 1/1 = 1
    fused = fuse([ranking("a", "b"), ranking("c", "a")], k=0, weights=[2, 1])
    assert [(f.chunk.id, f.score) for f in fused] == [("a", 2.5), ("c", 1.0), ("b", 1.0)]
    # c and b tie at 1.0: c's best rank (1) beats b's (2)


def test_ties_fall_back_to_first_appearance_then_id() -> None:
    # x and y both rank 1 in one list each, same score: x appears first (list 0)
    fused = fuse([ranking("x"), ranking("y")])
    assert [f.chunk.id for f in fused] == ["x", "y"]
    assert fused[0].score == fused[1].score == pytest.approx(1 / 61)


def test_keep_scores_keeps_the_first_appearance() -> None:
    first = ranking("a", "b")
    fused = reciprocal_rank_fusion([first, ranking("b", "a", kind="bm25")], keep_scores=True)
    by_id = {c.id: c for c in fused}
    assert by_id["a"].score == first[0].score and by_id["a"].score_kind is ScoreKind.COSINE
    assert by_id["b"].score_kind is ScoreKind.COSINE  # from list 0, not the bm25 list
    assert by_id["a"].metadata["rrf_score"] == pytest.approx(1 / 61 + 1 / 62)


def test_a_weight_of_zero_keeps_the_chunk_with_zero_contribution() -> None:
    fused = fuse([ranking("a"), ranking("b")], weights=[1, 0])
    assert [(f.chunk.id, f.score) for f in fused] == [("a", pytest.approx(1 / 61)), ("b", 0.0)]


def test_empty_inputs() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []


@pytest.mark.parametrize(
    ("rankings", "kwargs", "message"),
    [
        ([ranking("a", "a")], {}, "twice"),
        ([ranking("a")], {"k": -1}, "k must be"),
        ([ranking("a")], {"k": float("nan")}, "k must be"),
        ([ranking("a")], {"weights": [1, 2]}, "weights"),
        ([ranking("a")], {"weights": [-1]}, "weights"),
        (["abc"], {}, "not a sequence"),
        ([["not a chunk"]], {}, "not a Chunk"),
        ("abc", {}, "sequence"),
    ],
)
def test_bad_input(rankings: object, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        fuse(rankings, **kwargs)  # type: ignore[arg-type]
