"""Shared fixtures. Tests build their own small data; none reads ../shared."""

from __future__ import annotations

import pytest

from crag_heuristic import Chunk, ScoreKind


@pytest.fixture
def solar_chunks() -> list[Chunk]:
    """Two chunks whose signals are worked out by hand in the tests."""
    return [
        Chunk(
            id="a",
            text="Solar panels convert sunlight. Their efficiency is about twenty percent.",
            score=0.8,
            score_kind=ScoreKind.COSINE,
            source="s1",
        ),
        Chunk(
            id="b",
            text="Wind turbines spin in the wind.",
            score=0.4,
            score_kind=ScoreKind.COSINE,
            source="s2",
        ),
    ]
