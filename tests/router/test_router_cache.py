"""The router with its caches: in-process by default, a real Redis, and Redis dying."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from crag_testkit import RedisServer

from crag_heuristic import Evaluator
from crag_heuristic._cache.memory import MemoryCache
from crag_heuristic._cache.redis import RedisCache
from crag_heuristic._router.router import CRAG
from crag_heuristic.testing import RecordingWebSearcher

QUERY = "How do honeybees communicate the distance to food?"
WEB = [("Bee dance", "https://example.org/bees", "The waggle dance encodes distance.")]


def test_in_process_cache_is_the_default(retriever: Any) -> None:
    crag = CRAG(retriever)
    assert isinstance(crag.cache, MemoryCache)
    first, second = crag.retrieve(QUERY, 5), crag.retrieve(QUERY, 5)
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.initial_evaluation == first.initial_evaluation  # JSON round trip is exact
    assert "cache" in second.timings_ms and "evaluate" not in second.timings_ms
    assert CRAG(retriever, cache=False).cache is None


def test_a_different_config_never_reads_another_configs_entry(
    retriever: Any, always_partial: Evaluator
) -> None:
    cache = MemoryCache()
    CRAG(retriever, cache=cache).retrieve(QUERY, 5)
    other = CRAG(retriever, always_partial, cache=cache).retrieve(QUERY, 5)
    assert other.cache_hit is False


def test_web_results_are_cached(retriever: Any, always_irrelevant: Evaluator) -> None:
    web = RecordingWebSearcher(WEB)
    crag = CRAG(retriever, always_irrelevant, web=web)
    first = crag.retrieve(QUERY, 5)
    second = asyncio.run(crag.aretrieve(QUERY, 5))
    assert len(web.calls) == 1  # the second query never reached the searcher
    assert (first.web_cache_hit, second.web_cache_hit) == (False, True)
    assert second.chunks == first.chunks and second.web_search_used


def test_failed_web_searches_are_not_cached(retriever: Any, always_irrelevant: Evaluator) -> None:
    from crag_heuristic import WebSearchTimeout

    web = RecordingWebSearcher(error=WebSearchTimeout("slow"))
    crag = CRAG(retriever, always_irrelevant, web=web)
    crag.retrieve(QUERY, 5)
    crag.retrieve(QUERY, 5)
    assert len(web.calls) == 2


@pytest.fixture
def server() -> Any:
    with RedisServer() as running:
        yield running


def test_a_real_redis_is_shared_between_routers(retriever: Any, server: RedisServer) -> None:
    a = CRAG(retriever, cache=RedisCache(url=server.url, namespace="t", unsigned="allow"))
    b = CRAG(retriever, cache=RedisCache(url=server.url, namespace="t", unsigned="allow"))
    assert a.retrieve(QUERY, 5).cache_hit is False
    assert b.retrieve(QUERY, 5).cache_hit is True
    assert asyncio.run(b.aretrieve(QUERY, 5)).cache_hit is True
    keys = server.client().keys("t:*")  # bytes: the client does not decode
    assert len(keys) == 1 and isinstance(keys[0], bytes) and keys[0].startswith(b"t:crag:v")


def test_redis_dying_is_a_flag_not_a_failure(
    retriever: Any, always_irrelevant: Evaluator, server: RedisServer
) -> None:
    prometheus = pytest.importorskip("prometheus_client")
    from crag_heuristic._metrics import PrometheusMetrics

    registry = prometheus.CollectorRegistry()
    cache = RedisCache(url=server.url, retry_interval=0.2, unsigned="allow")
    web = RecordingWebSearcher(WEB)
    crag = CRAG(
        retriever, always_irrelevant, web=web, cache=cache, metrics=PrometheusMetrics(registry)
    )
    healthy = crag.retrieve(QUERY, 5)
    assert healthy.cache_error is None and healthy.web_search_used

    server.kill()
    down = crag.retrieve(QUERY, 5)
    assert down.cache_error is not None and down.cache_error.startswith("CacheError")
    assert down.chunks == healthy.chunks and down.web_search_used  # nothing lost
    assert any("cache failed" in note for note in down.notes)
    assert (
        sum(
            s.value
            for m in registry.collect()
            if m.name == "crag_cache_errors"
            for s in m.samples
            if s.name.endswith("_total")
        )
        >= 1
    )
    also_down = asyncio.run(crag.aretrieve(QUERY, 5))
    assert also_down.cache_error is not None and also_down.chunks == healthy.chunks

    server.restart()
    deadline = time.monotonic() + 10
    while True:  # the cache comes back by itself once its retry interval has passed
        back = crag.retrieve(QUERY, 5)
        if back.cache_error is None or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert back.cache_error is None
    assert crag.retrieve(QUERY, 5).cache_hit is True  # writing and reading again
