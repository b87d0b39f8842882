"""The router's web fallback with a real SearXNG client behind it, end to end."""

from __future__ import annotations

import pytest
from crag_testkit import FixtureEngine, FixtureReply, fixture_item

from crag_heuristic import Chunk, Evaluator, EvaluatorConfig, ScoreKind
from crag_heuristic._router.router import CRAG
from crag_heuristic.testing import ListRetriever
from crag_heuristic.web import SearxngClient

QUERY = "How do honeybees tell each other where the flowers are?"
OFF_TOPIC = Chunk(
    id="doc-1",
    text="Basalt columns form when thick lava flows cool and contract.",
    score=0.31,
    score_kind=ScoreKind.COSINE,
    source="geology.txt",
)
BEES = [
    fixture_item(
        "https://bees.example.org/waggle-dance",
        "The <b>waggle dance</b>",
        "Honeybees dance to tell their hive mates the direction and distance to flowers.",
    ),
    fixture_item(
        "https://bees.example.org/round-dance",
        "Round dance",
        "For flowers close to the hive, honeybees perform a round dance.",
    ),
]


@pytest.fixture
def crag(searxng: object, client: SearxngClient) -> CRAG:
    never_enough = Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": 1.0, "partial": 1.0}
        )
    )
    return CRAG(ListRetriever([OFF_TOPIC]), never_enough, web=client)


def test_irrelevant_retrieval_is_replaced_by_web_chunks(
    crag: CRAG, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.default = FixtureReply(items=BEES)
    result = crag.retrieve(QUERY, 3)
    assert result.web_search_used
    assert result.web_error is None
    sources = [chunk.source for chunk in result.chunks]
    assert sources[:2] == [item["link"] for item in BEES]
    assert all(chunk.score_kind is ScoreKind.WEB for chunk in result.chunks[:2])
    assert fixture_engine.requests  # the rewritten query reached the engine


async def test_engine_failure_becomes_web_error_and_keeps_the_chunks(
    crag: CRAG, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.default = FixtureReply(status=500)
    result = await crag.aretrieve(QUERY, 3)
    assert not result.web_search_used
    assert result.web_error is not None
    assert result.web_error.startswith("WebSearchEnginesFailed")
    assert [chunk.id for chunk in result.chunks] == ["doc-1"]
