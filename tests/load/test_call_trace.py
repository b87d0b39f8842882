"""CallTrace and the traced wrappers: every call recorded, tagged with its query, unchanged."""

from __future__ import annotations

import asyncio
import dataclasses
from types import ModuleType
from typing import Any

import pytest

from crag_heuristic import (
    CRAG,
    CacheError,
    Chunk,
    Evaluator,
    EvaluatorConfig,
    MemoryCache,
    ScoreKind,
    WebSearchTimeout,
)
from crag_heuristic.testing import (
    CallTrace,
    ListRetriever,
    RecordingWebSearcher,
    TracedCache,
    TracedCall,
    TracedWebSearcher,
)

OFF_TOPIC = Chunk(
    id="doc-1",
    text="Basalt columns form when thick lava flows cool and contract.",
    score=0.31,
    score_kind=ScoreKind.COSINE,
    source="geology.txt",
)


class DownCache:
    """A cache whose every call fails the way a Redis outage does."""

    def get(self, key: str) -> str | None:
        raise CacheError("redis down", backend="redis", operation="get", kind="down")

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        raise CacheError("redis down", backend="redis", operation="set", kind="down")


def never_enough() -> Evaluator:
    return Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": 1.0, "partial": 1.0}
        )
    )


def test_sync_calls_are_recorded_with_their_tag_and_values_pass_through() -> None:
    trace = CallTrace()
    cache = TracedCache(MemoryCache(), trace)
    with trace.tagged("q1"):
        cache.set("k", '"v"', 60)
        assert cache.get("k") == '"v"'
    assert cache.get("missing") is None  # untagged
    calls = trace.calls
    assert [(c.tag, c.part, c.op, c.arg, c.ok) for c in calls] == [
        ("q1", "cache", "set", "k", True),
        ("q1", "cache", "get", "k", True),
        (None, "cache", "get", "missing", True),
    ]
    assert all(c.started <= c.ended for c in calls)
    assert set(trace.by_tag()) == {"q1", None}


def test_errors_are_recorded_with_their_kind_and_raised_unchanged() -> None:
    trace = CallTrace()
    cache = TracedCache(DownCache(), trace)
    with pytest.raises(CacheError) as info:
        cache.get("k")
    assert info.value.kind == "down"
    (call,) = trace.calls
    assert (call.ok, call.error_type, call.kind) == (False, "CacheError", "down")
    assert call.error is not None and call.error.startswith("CacheError: redis down")


async def test_tags_follow_each_query_into_its_tasks_and_threads() -> None:
    trace = CallTrace()
    cache = TracedCache(MemoryCache(), trace)  # async calls run in worker threads here
    web = TracedWebSearcher(RecordingWebSearcher(results=[("A", "https://a.org", "a")]), trace)

    async def query(tag: str) -> None:
        await asyncio.gather(cache.aget(tag), web.asearch(tag, 3))
        await cache.aset(tag, '"x"')

    tasks = []
    for tag in ("q1", "q2", "q3"):
        with trace.tagged(tag):
            tasks.append(asyncio.create_task(query(tag)))
    await asyncio.gather(*tasks)
    grouped = trace.by_tag()
    assert set(grouped) == {"q1", "q2", "q3"}
    for group, calls in grouped.items():
        assert sorted((c.part, c.op) for c in calls) == [
            ("cache", "get"),
            ("cache", "set"),
            ("web", "search"),
        ]
        assert {c.arg for c in calls} == {group}


async def test_a_cancelled_web_call_is_recorded_as_such() -> None:
    trace = CallTrace()
    web = TracedWebSearcher(RecordingWebSearcher(delay=30.0), trace)
    task = asyncio.create_task(web.asearch("slow query"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (call,) = trace.calls
    assert (call.part, call.ok, call.error_type) == ("web", False, "CancelledError")


def test_web_fingerprint_is_the_inner_searchers() -> None:
    class Fingerprinted(RecordingWebSearcher):
        def fingerprint(self) -> str:
            return "searxng@host"

    trace = CallTrace()
    assert TracedWebSearcher(Fingerprinted(), trace).fingerprint() == "searxng@host"
    assert (
        TracedWebSearcher(RecordingWebSearcher(), trace).fingerprint()
        == "crag_heuristic.testing._fakes.RecordingWebSearcher"
    )


def router(web: Any, cache: Any, trace: CallTrace) -> CRAG:
    return CRAG(
        ListRetriever([OFF_TOPIC]),
        never_enough(),
        web=TracedWebSearcher(web, trace),
        cache=TracedCache(cache, trace),
    )


async def test_the_judge_sees_flagged_failures_and_catches_missing_flags(
    load_faults_report: ModuleType,
) -> None:
    trace = CallTrace()
    crag = router(RecordingWebSearcher(error=WebSearchTimeout("slow")), DownCache(), trace)
    with trace.tagged("q1"):
        result = await asyncio.create_task(crag.aretrieve("How do honeybees dance?", 1))
    calls = trace.by_tag()["q1"]
    judge = load_faults_report.judge

    truth = judge(result, calls, {}, None)
    assert truth.web_causes == ["not injected: WebSearchTimeout"]
    assert truth.web_failed and truth.cache_failed
    assert not truth.web_unflagged and not truth.cache_unflagged

    # the same calls with the flags taken off: both failures are caught as unflagged
    web = dataclasses.replace(result.web, failure=None)
    hidden = dataclasses.replace(result, failures=(), web=web)
    truth = judge(hidden, calls, {}, None)
    assert truth.web_unflagged and truth.cache_unflagged

    # an engine-side failure counts even when the client saw nothing wrong
    ok_trace = CallTrace()
    crag = router(
        RecordingWebSearcher(results=[("A", "https://a.org", "a")]), MemoryCache(), ok_trace
    )
    with ok_trace.tagged("q2"):
        result = await asyncio.create_task(crag.aretrieve("How do honeybees dance?", 1))
    calls = ok_trace.by_tag()["q2"]
    (web_call,) = [c for c in calls if c.part == "web"]
    assert result.web_error is None and not judge(result, calls, {}, None).web_failed
    truth = judge(result, calls, {web_call.arg: "garbage"}, None)
    assert truth.web_causes == ["injected: engine garbage"] and truth.web_unflagged

    # a cache call inside the certain outage must have failed: a success there is caught
    cache_calls = [c for c in calls if c.part == "cache"]
    outage = (cache_calls[0].started, max(c.ended for c in calls))
    truth = judge(result, calls, {}, outage)
    assert truth.cache_calls_in_outage and truth.cache_unflagged


def test_percentile_is_nearest_rank(load_faults_report: ModuleType) -> None:
    values = [float(v) for v in range(1, 101)]  # 1 .. 100
    assert load_faults_report.percentile(values, 50) == 50.0  # rank ceil(0.5 * 100) = 50
    assert load_faults_report.percentile(values, 99) == 99.0
    assert load_faults_report.percentile([7.0], 99) == 7.0
    assert load_faults_report.percentile([1.0, 2.0, 3.0], 50) == 2.0  # rank ceil(1.5) = 2
    assert load_faults_report.latency([3.0, 1.0, 2.0]) == {
        "n": 3,
        "p50": 2.0,
        "p99": 3.0,
        "max": 3.0,
    }
    assert load_faults_report.latency([]) == {"n": 0}


def test_the_query_mix_is_seeded_and_mostly_for_the_web(load_faults: ModuleType) -> None:
    settings = load_faults.LoadSettings(queries=1000)
    queries = load_faults.make_queries(settings)
    assert queries == load_faults.make_queries(settings)
    kinds = {q.kind for q in queries}
    assert kinds == {
        "generated",
        "repeat",
        "sample-answered",
        "sample-partial",
        "sample-unanswered",
    }
    generated = [q.text for q in queries if q.kind == "generated"]
    assert len(generated) > 600 and len(set(generated)) == len(generated)  # unique texts
    repeats = [q for q in queries if q.kind == "repeat"]
    assert repeats and all(q.text in generated for q in repeats)
    assert load_faults.make_queries(load_faults.LoadSettings(queries=1000, seed=1)) != queries


def _web_call(text: str, error: str | None = None) -> TracedCall:
    return TracedCall("q", "web", "search", text, 0.0, 1.0, error, None if error is None else "x")


def test_web_accounting_separates_faults_refusals_and_other_failures(
    load_faults_report: ModuleType,
) -> None:
    """Injected faults, circuit refusals and other failures, counted apart (by hand)."""
    failed_texts = {"b": "http_500", "c": "garbage"}
    calls = [
        _web_call("a"),  # answered
        _web_call(" b ", "WebSearchEnginesFailed"),  # met an injected fault
        _web_call("c", "CircuitOpenError"),  # refused; the engine would have failed it
        _web_call("d", "CircuitOpenError"),  # refused; the engine would have answered
        _web_call("e", "WebSearchTimeout"),  # failed, nothing injected
        TracedCall("q", "cache", "get", "k", 0.0, 1.0, "CacheError", "down"),  # not web
    ]
    served = {"ok": 2, "http_500": 1, "garbage": 0, "slow": 0}
    accounting = load_faults_report.web_accounting(calls, failed_texts, served)
    assert accounting == {
        "calls": 5,
        "answered": 1,
        "injected_faults_served": {"http_500": 1, "garbage": 0, "slow": 0},
        "calls_that_met_an_injected_fault": {"http_500": 1},
        "circuit_refusals": 2,
        "refusals_the_engine_would_have_failed": 1,
        "refusals_the_engine_would_have_answered": 1,
        "other_failures": {"WebSearchTimeout": 1},
    }
    classify = load_faults_report.classify_web_call
    assert [classify(c, failed_texts) for c in calls[:5]] == [
        "answered",
        "injected: engine http_500",
        "circuit refusal",
        "circuit refusal",
        "not injected: WebSearchTimeout",
    ]
