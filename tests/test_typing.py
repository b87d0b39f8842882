"""The router's collaborators are typed with the project's protocols, and mypy reads
the benchmarks, the research and the tests as well as the package."""

from __future__ import annotations

import configparser
import inspect
from pathlib import Path

from crag_heuristic import CRAG
from crag_heuristic._router.context import Context
from crag_heuristic._router.flow import Search
from crag_heuristic.expansion import Expansion, QueryExpander
from crag_heuristic.testing import StaticExpander

ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    "retriever": "Retriever | AsyncRetriever",
    "expander": "QueryExpander | Literal[False] | None",
    "web": "WebSearcher | AsyncWebSearcher | None",
    "cache": "Cache | AsyncCache | Literal[False] | None",
    "lexical": "Retriever | AsyncRetriever | None",
    "parents": "ParentLookup | AsyncParentLookup | None",
    "metrics": "MetricsSink | None",
    "logger": "EventLogger | None",
    "grader": "Grader | AsyncGrader | None",
}


def test_crag_collaborators_are_typed_with_protocols() -> None:
    params = inspect.signature(CRAG.__init__).parameters
    assert {name: params[name].annotation for name in EXPECTED} == EXPECTED


def test_the_flow_types_its_parts() -> None:
    assert Search.__annotations__["retriever"] == "Retriever | AsyncRetriever"
    assert Context.__annotations__["retriever"] == "Retriever | AsyncRetriever"
    assert Context.__annotations__["lexical"] == "Retriever | AsyncRetriever | None"
    assert "Any" not in Context.__annotations__["get_expander"]


def test_the_testing_expander_is_a_query_expander() -> None:
    expander = StaticExpander(["bee dance"])
    assert isinstance(expander, QueryExpander)
    assert expander.expand("bees") == Expansion(
        original="bees", queries=("bee dance",), method="static"
    )


def test_mypy_reads_benchmarks_research_and_tests() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    files = [part.strip() for part in config["mypy"]["files"].split(",")]
    assert files == ["crag_heuristic", "benchmarks", "research", "tests"]
    assert config["mypy"]["strict"] == "True"
    assert "mypy-benchmarks.*" not in config  # benchmarks: no relaxation
    assert "mypy-research.*" not in config
