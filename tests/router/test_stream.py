"""Stage events: CRAG.stream / astream on the real sample index, every route.

The stream is the router's own flow driven with its events on: the last event's
result is what retrieve returns, and the first event (the retrieval) reaches the
caller before the gate has graded it (checked by the order of the calls, not by
timing).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    CRAGResult,
    Evaluation,
    Evaluator,
    InvalidQueryError,
    RetrieverError,
    WebSearchTimeout,
)
from crag_heuristic._text.corpus import CorpusStats
from crag_heuristic.events import (
    Corrected,
    Done,
    Evaluated,
    ParentsExpanded,
    Refined,
    Retrieved,
    Stage,
    StageEvent,
    WebSearched,
)
from crag_heuristic.testing import ListRetriever, RecordingWebSearcher

QUERY = "How do honeybees communicate the distance to food?"
WEB = [("Bee dance", "https://example.org/bees", "The waggle dance encodes distance.")]


def stable(result: CRAGResult) -> CRAGResult:
    """The result without what differs from run to run (timings; cache flags: a
    second run reads what the first cached)."""
    web = dataclasses.replace(result.web, cache_hit=False)
    return dataclasses.replace(result, timings_ms={}, cache_hit=False, web=web)


async def collect(crag: CRAG, query: str = QUERY, k: int = 5) -> list[StageEvent]:
    return [event async for event in crag.astream(query, k)]


def streamed(crag: CRAG, query: str = QUERY, k: int = 5) -> list[StageEvent]:
    """The sync and the async stream of one query: same stages, same result as
    retrieve (timings and cache flags aside); returns the sync events."""
    events = list(crag.stream(query, k))
    asynchronous = asyncio.run(collect(crag, query, k))
    assert [e.stage for e in asynchronous] == [e.stage for e in events]
    done = events[-1]
    assert isinstance(done, Done) and isinstance(asynchronous[-1], Done)
    assert stable(done.result) == stable(crag.retrieve(query, k))
    assert stable(asynchronous[-1].result) == stable(done.result)
    for event in events:
        json.dumps(event.to_dict())  # JSON-ready, for SSE
        assert event.to_dict()["stage"] == event.stage.value
    return events


def stages(events: Sequence[StageEvent]) -> list[str]:
    return [event.stage.value for event in events]


class Recorder:
    """Who was called, in order: the retriever's searches and the gate's evaluations."""

    def __init__(self) -> None:
        self.calls: list[str] = []


class RecordingRetriever(ListRetriever):
    def __init__(self, chunks: Sequence[Chunk], recorder: Recorder) -> None:
        super().__init__(chunks)
        self.recorder = recorder

    def search(self, query: str, k: int) -> list[Chunk]:
        self.recorder.calls.append("search")
        return super().search(query, k)


class RecordingEvaluator(Evaluator):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def evaluate(
        self,
        query: str,
        chunks: Sequence[Chunk],
        corpus_stats: CorpusStats | None = None,
        **kwargs: Any,
    ) -> Evaluation:
        self.recorder.calls.append("evaluate")
        return super().evaluate(query, chunks, corpus_stats, **kwargs)


def recording_router(retriever: Any) -> tuple[CRAG, Recorder]:
    recorder = Recorder()
    chunks = retriever.search(QUERY, 5)
    crag = CRAG(RecordingRetriever(chunks, recorder), RecordingEvaluator(recorder), cache=False)
    return crag, recorder


def test_the_retrieval_arrives_before_the_gate_grades_it(retriever: Any) -> None:
    crag, recorder = recording_router(retriever)
    events = crag.stream(QUERY, 5)
    assert recorder.calls == []  # nothing runs until the caller asks
    first = next(events)
    assert isinstance(first, Retrieved) and first.stage is Stage.RETRIEVED
    assert recorder.calls == ["search"]  # retrieved, not yet graded
    assert [c.id for c in first.chunks] == [c.id for c in retriever.search(QUERY, 5)]
    second = next(events)
    assert isinstance(second, Evaluated)
    assert recorder.calls == ["search", "evaluate"]
    assert [g.chunk_id for g in second.evaluation.chunks] == [c.id for c in first.chunks]
    assert isinstance(list(events)[-1], Done)


async def test_async_the_retrieval_arrives_before_the_gate_grades_it(retriever: Any) -> None:
    crag, recorder = recording_router(retriever)
    events = crag.astream(QUERY, 5)
    first = await events.__anext__()
    assert isinstance(first, Retrieved)
    assert recorder.calls == ["search"]
    assert isinstance(await events.__anext__(), Evaluated)
    assert recorder.calls == ["search", "evaluate"]
    assert [e.stage async for e in events] == [Stage.DONE]


def test_fast_path(retriever: Any, always_relevant: Evaluator) -> None:
    events = streamed(CRAG(retriever, always_relevant))
    assert stages(events) == ["retrieved", "evaluated", "done"]
    retrieved, evaluated, done = events
    assert isinstance(retrieved, Retrieved) and isinstance(evaluated, Evaluated)
    assert isinstance(done, Done)
    assert done.result.initial_evaluation == evaluated.evaluation
    assert done.result.retrieved == retrieved.chunks
    assert retrieved.elapsed_ms <= evaluated.elapsed_ms <= done.elapsed_ms


def test_partial_correction(retriever: Any, bm25: Any, always_partial: Evaluator) -> None:
    events = streamed(CRAG(retriever, always_partial, lexical=bm25))
    assert stages(events) == ["retrieved", "evaluated", "corrected", "done"]
    corrected, done = events[2], events[3]
    assert isinstance(corrected, Corrected) and isinstance(done, Done)
    assert corrected.chunks == done.result.chunks
    assert corrected.evaluation == done.result.evaluation
    assert corrected.rankings == 1 and corrected.strategy.value == "query_expansion"


def test_irrelevant_web_then_the_expansion_when_the_web_fails(
    retriever: Any, bm25: Any, always_irrelevant: Evaluator
) -> None:
    web = RecordingWebSearcher(WEB)
    events = streamed(CRAG(retriever, always_irrelevant, web=web, cache=False))
    assert stages(events) == ["retrieved", "evaluated", "web", "done"]
    searched = events[2]
    assert isinstance(searched, WebSearched)
    assert searched.used and searched.results == 1 and searched.error is None
    assert searched.chunks[0].source == "https://example.org/bees"

    failing = RecordingWebSearcher(error=WebSearchTimeout("too slow"))
    events = streamed(CRAG(retriever, always_irrelevant, web=failing, lexical=bm25))
    assert stages(events) == ["retrieved", "evaluated", "web", "corrected", "done"]
    searched = events[2]
    assert isinstance(searched, WebSearched) and not searched.used
    assert searched.error is not None and searched.error.startswith("WebSearchTimeout")
    assert searched.miss == "the web search failed"
    assert searched.summary()["error"] == "WebSearchTimeout"  # the type only


def test_combined_partial_then_web(retriever: Any, bm25: Any, always_partial: Evaluator) -> None:
    crag = CRAG(
        retriever, always_partial, lexical=bm25, web=RecordingWebSearcher(WEB),
        config={"web_on_partial": True},
    )  # fmt: skip
    events = streamed(crag)
    assert stages(events) == ["retrieved", "evaluated", "corrected", "web", "done"]


def test_parents_and_refinement(retriever: Any, always_relevant: Evaluator) -> None:
    chunks = [c.replace(parent_id="p-" + c.id) for c in retriever.search(QUERY, 5)]
    parents = {c.parent_id: c.text + " More on the same topic." for c in chunks}
    crag = CRAG(ListRetriever(chunks), always_relevant, parents=parents, config={"refine": True})
    events = streamed(crag)
    assert stages(events) == ["retrieved", "evaluated", "parents", "refined", "done"]
    expanded, refined, done = events[2:]
    assert isinstance(expanded, ParentsExpanded) and isinstance(refined, Refined)
    assert isinstance(done, Done)
    assert expanded.used == done.result.counts.get("parents_used", 0)
    assert expanded.evaluation == done.result.evaluation
    assert done.result.refinement == refined.refinement


def test_events_are_frozen_and_their_summary_holds_no_text(
    retriever: Any, always_partial: Evaluator, bm25: Any
) -> None:
    events = list(CRAG(retriever, always_partial, lexical=bm25).stream(QUERY, 5))
    for event in events:
        with pytest.raises(dataclasses.FrozenInstanceError):
            event.elapsed_ms = 0.0  # type: ignore[misc]
        summary = json.dumps(event.summary())
        assert "honeybees communicate" not in summary
        assert not any(c.text[:40] in summary for c in retriever.search(QUERY, 5))
    evaluated = events[1]
    assert isinstance(evaluated, Evaluated)
    grades = evaluated.summary()["grades"].split()
    assert [g.split(":")[0] for g in grades] == [g.chunk_id for g in evaluated.evaluation.chunks]


def test_bad_input_is_refused_at_once_a_failed_retrieval_on_iteration(
    always_relevant: Evaluator,
) -> None:
    crag = CRAG(ListRetriever([]), always_relevant)
    with pytest.raises(InvalidQueryError):
        crag.stream("   ")
    with pytest.raises(InvalidQueryError):
        crag.astream("")

    class Broken:
        def search(self, query: str, k: int) -> list[Chunk]:
            raise RuntimeError("index offline")

    events = CRAG(Broken(), always_relevant).stream(QUERY)
    with pytest.raises(RetrieverError, match="index offline"):
        next(events)
