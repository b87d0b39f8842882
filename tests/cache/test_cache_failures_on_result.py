"""Cache failures as typed failures on the result, with a real Redis: one that is down,
and one that holds a value nobody should trust. The ``cache_error`` flag reads as it
did (the last failure's ``"CacheError: ..."``); the failures say each one, typed."""

from __future__ import annotations

import asyncio
import json

from crag_testkit import RedisServer

from crag_heuristic import (
    CRAG,
    CacheError,
    Failure,
    FailureStage,
    RedisCache,
    WebSearchTimeout,
)
from crag_heuristic._redact import describe
from crag_heuristic.events import Done
from crag_heuristic.grading import CallableGrader, Cascade, Escalation
from crag_heuristic.sample import sample_retriever
from crag_heuristic.testing import RecordingWebSearcher

QUERY = "How do honeybees communicate the distance to food?"


def test_redis_down_is_one_failure_per_failed_call(local_redis: RedisServer) -> None:
    cache = RedisCache(url=local_redis.url, namespace="typed", unsigned="allow")
    crag = CRAG(
        sample_retriever(),
        "synapse",
        cache=cache,
        web=RecordingWebSearcher(error=WebSearchTimeout("slow")),
        config={"web_on_partial": True},
    )
    local_redis.stop()
    for result in (crag.retrieve(QUERY, 5), asyncio.run(crag.aretrieve(QUERY, 5))):
        cached = [f for f in result.failures if f.stage is FailureStage.CACHE]
        assert cached, result.failures
        for failure in cached:
            assert isinstance(failure.error, CacheError) and failure.error.backend == "redis"
            assert failure.type_name == "CacheError"
        assert result.cache_error == describe(cached[-1].error) == cached[-1].text  # as before
        assert result.to_dict()["cache_error"] == result.cache_error
        assert result.cache_hit is False
    done = list(crag.stream(QUERY, 5))[-1]
    assert isinstance(done, Done) and done.summary()["cache_error"] == "CacheError"


def test_a_refused_cached_value_is_a_typed_failure(
    redis_server: RedisServer, namespace: str
) -> None:
    crag = CRAG(
        sample_retriever(),
        "synapse",
        cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
    )
    first = crag.retrieve(QUERY, 5)
    assert first.failures == ()
    admin = redis_server.client()
    (key,) = admin.keys(f"{namespace}:*")  # the first evaluation's entry
    admin.set(key, b"{not json")
    again = crag.retrieve(QUERY, 5)
    (failure,) = again.failures
    error = failure.error
    assert isinstance(error, CacheError) and error.kind == "payload"
    assert again.cache_error == describe(error)
    back = Failure.from_dict(json.loads(json.dumps(failure.to_dict())))
    assert back == failure and type(back.error) is CacheError
    assert isinstance(back.error, CacheError)
    assert (back.error.kind, back.error.operation, back.error.backend) == (
        error.kind,
        error.operation,
        error.backend,
    )


def test_a_cascade_without_the_router_has_its_failures_too(local_redis: RedisServer) -> None:
    retriever = sample_retriever()
    chunks = retriever.search(QUERY, 5)

    def boom(query: str, texts: list[str]) -> list[float]:
        raise TimeoutError("the model took too long")

    cascade = Cascade(
        grader=CallableGrader(boom, name="boom"),
        escalation=Escalation(band=(0.0, 1.0), budget=1.0),
        cache=RedisCache(url=local_redis.url, namespace="cascade", unsigned="allow"),
    )
    local_redis.stop()
    result = cascade.evaluate(QUERY, chunks)
    stages = [f.stage for f in result.failures]
    assert FailureStage.CACHE in stages and stages[-1] is FailureStage.GRADER
    grader = result.failures[-1]
    assert result.report.failure is grader and result.grader_error == grader.text
    assert grader.type_name == "GraderTimeout" and isinstance(grader.error.__cause__, TimeoutError)
    cached = [f for f in result.failures if f.stage is FailureStage.CACHE]
    assert result.cache_error == describe(cached[-1].error)
    assert result.to_dict()["failures"] == [f.to_dict() for f in result.failures]
