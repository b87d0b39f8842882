"""The usage hook: any grader that returns a Graded (or raises a GraderError with a
usage) has its cost on the cascade's report, through both drivers; a plain grader
needs nothing and reports None."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from cascade_helpers import CHUNKS, CONFIG

from crag_heuristic import CRAG, Chunk, Evaluator, MemoryCache
from crag_heuristic.grading import (
    CallableGrader,
    Cascade,
    Graded,
    GraderOutputError,
    GraderUsage,
    SetEscalation,
)
from crag_heuristic.testing import ListRetriever, capture_events

COST = GraderUsage(requests=2, retries=1, prompt_tokens=120, completion_tokens=8, ms=3.5)
EVERY_LIST = SetEscalation(band=(0.0, 1.0))


class Priced:
    """Answers 0.9 for every chunk and says what it cost; or fails, with the cost."""

    fingerprint = "priced"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def grade(self, query: str, chunks: Sequence[Chunk]) -> Graded:
        if self.fail:
            error = GraderOutputError("the answer held 1 grade for 3 chunks", grader="priced")
            error.usage = COST
            raise error
        return Graded([0.9] * len(chunks), COST)

    async def agrade(self, query: str, chunks: Sequence[Chunk]) -> Graded:
        return self.grade(query, chunks)


@pytest.mark.parametrize("fail", [False, True])
def test_the_cascade_reports_the_grader_s_usage_both_ways(fail: bool) -> None:
    cascade = Cascade(Evaluator(CONFIG), Priced(fail), EVERY_LIST)
    for result in (
        cascade.evaluate("bees", CHUNKS),
        asyncio.run(cascade.aevaluate("bees", CHUNKS)),
    ):
        assert result.report.usage == COST
        assert result.report.to_dict()["usage"] == {**COST.to_dict(), "tokens": 128}
        assert (result.grader_error is not None) is fail


def test_the_router_reports_it_and_logs_the_counts_not_the_cached_answers() -> None:
    crag = CRAG(
        ListRetriever(CHUNKS),
        Evaluator(CONFIG),
        expander=False,
        cache=MemoryCache(),
        grader=Priced(),
        escalation=EVERY_LIST,
    )
    with capture_events() as events:
        first = crag.retrieve("bees", 3)
        again = asyncio.run(crag.aretrieve("bees", 3))
    assert first.cascade is not None and first.cascade.usage == COST
    assert again.cascade is not None and again.cascade.usage is None  # all from the cache
    grades = [e for e in events if e["event"] == "crag.grade"]
    assert [(e["grader_requests"], e["grader_tokens"]) for e in grades] == [(2, 128), (None, None)]


def test_a_plain_grader_reports_no_usage() -> None:
    plain = CallableGrader(lambda q, texts: [0.5] * len(texts), name="plain")
    result = Cascade(Evaluator(CONFIG), plain, EVERY_LIST).evaluate("bees", CHUNKS)
    assert result.report.usage is None and result.report.to_dict()["usage"] is None
    assert result.report.applied
