"""examples/langgraph_crag.py with ``--searxng``: its web branch against a real SearXNG."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from crag_testkit import FixtureEngine, FixtureReply, SearxngServer, fixture_item

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_crag.py"
QUESTION = "Which chess openings are best for beginners?"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("langgraph_crag_example_web", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # LangGraph resolves the state's type hints through it
    spec.loader.exec_module(module)
    return module


def test_example_searches_the_web_when_the_gate_says_so(
    searxng: SearxngServer, fixture_engine: FixtureEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture_engine.default = FixtureReply(
        items=[
            fixture_item(
                "https://chess.example.org/openings",
                "Chess openings for beginners",
                "The Italian Game and the London System are sound first openings.",
            )
        ]
    )
    assert load_example().main(["--query", QUESTION, "--searxng", searxng.url]) == 0
    out = capsys.readouterr().out
    assert "-> transform_query -> web_search -> generate" in out
    assert "web: web search: 1 results" in out
    assert "Context [https://chess.example.org/openings]: Chess openings for beginners" in out
    assert [query for _, query in fixture_engine.requests] == ["chess openings best beginners"]


def test_example_reports_a_failed_web_search(
    searxng: SearxngServer, fixture_engine: FixtureEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture_engine.default = FixtureReply(status=500)
    assert load_example().main(["--query", QUESTION, "--searxng", searxng.url]) == 0
    assert "web: web search failed:" in capsys.readouterr().out
