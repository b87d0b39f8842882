"""Each score kind maps to [0, 1] by its documented formula (hand-computed values)."""

from __future__ import annotations

import math

import pytest

from crag_heuristic import Chunk, ScoreKind
from crag_heuristic._scores import similarity, to_cosine


def sim(score: float | None, kind: str, **band: float) -> float | None:
    return similarity(Chunk(id="x", text="", score=score, score_kind=kind), **band)


def test_cosine_is_taken_as_is_and_negatives_clip_to_zero() -> None:
    assert sim(0.62, "cosine") == pytest.approx(0.62)
    assert sim(-0.3, "cosine") == 0.0


def test_squared_l2_between_unit_vectors() -> None:
    # |a - b|^2 = 2 - 2 cos  ->  cos = 1 - d / 2
    assert sim(0.5, "squared_l2") == pytest.approx(0.75)
    assert sim(2.0, "squared_l2") == pytest.approx(0.0)  # orthogonal
    assert sim(4.0, "squared_l2") == 0.0  # opposite, clipped
    assert to_cosine(0.0, ScoreKind.SQUARED_L2) == 1.0


def test_plain_l2_is_squared_first() -> None:
    # d = 0.5 -> d^2 = 0.25 -> cos = 0.875
    assert sim(0.5, "l2") == pytest.approx(0.875)


def test_inner_product_of_unnormalised_vectors_is_squashed() -> None:
    assert sim(0.0, "inner_product") == pytest.approx(0.0)
    assert sim(2.0, "inner_product") == pytest.approx(2 / (1 + math.exp(-2)) - 1)
    assert sim(1e6, "inner_product") == pytest.approx(1.0)


def test_generic_distance_bm25_and_probability() -> None:
    assert sim(1.0, "distance") == pytest.approx(0.5)
    assert sim(10.0, "bm25") == pytest.approx(0.5)
    assert sim(30.0, "bm25", bm25_saturation=10.0) == pytest.approx(0.75)
    assert sim(0.3, "probability") == pytest.approx(0.3)


def test_cosine_band_rescales_before_clipping() -> None:
    # band (0.1, 0.7): 0.4 -> 0.5, 0.05 -> 0, 0.9 -> 1
    assert sim(0.4, "cosine", cosine_floor=0.1, cosine_ceiling=0.7) == pytest.approx(0.5)
    assert sim(0.05, "cosine", cosine_floor=0.1, cosine_ceiling=0.7) == 0.0
    assert sim(0.9, "cosine", cosine_floor=0.1, cosine_ceiling=0.7) == 1.0
    # the band applies to converted distances too: d = 0.8 -> cos 0.6 -> 5/6
    assert sim(0.8, "squared_l2", cosine_floor=0.1, cosine_ceiling=0.7) == pytest.approx(5 / 6)


@pytest.mark.parametrize("kind", ["rrf", "web", "unknown"])
def test_kinds_without_absolute_meaning_give_none(kind: str) -> None:
    assert sim(0.5, kind) is None


def test_missing_score_gives_none() -> None:
    assert sim(None, "cosine") is None


def test_to_cosine_rejects_non_cosine_kinds() -> None:
    with pytest.raises(ValueError):
        to_cosine(1.0, ScoreKind.BM25)
