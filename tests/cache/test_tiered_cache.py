"""TieredCache: an in-process tier in front of a real Redis, with both tiers counted."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import CRAG, CacheError, ConfigError, MemoryCache, RedisCache
from crag_heuristic._cache.codec import dumps
from crag_heuristic._cache.keys import cache_key
from crag_heuristic._protocols import AsyncCache, Cache
from crag_heuristic.cache import TieredCache
from crag_heuristic.sample import sample_retriever

EVAL = cache_key("eval", {"q": 1})
GRADE = cache_key("grade", {"q": 2})
WEB = cache_key("web", {"q": 3})
VALUE = dumps({"answer": 42})


@pytest.fixture
def far(redis_server: RedisServer, namespace: str, admin: redis.Redis) -> Iterator[RedisCache]:
    cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    yield cache
    cache.close()


def test_implements_both_cache_protocols(far: RedisCache) -> None:
    tiered = TieredCache(far)
    assert isinstance(tiered, Cache) and isinstance(tiered, AsyncCache)
    assert "eval" in repr(tiered) and tiered.healthy and tiered.ping()


def test_each_kind_goes_to_its_tiers(far: RedisCache, admin: redis.Redis, namespace: str) -> None:
    assert TieredCache(far).far_kinds is None  # by default every kind is shared
    tiered = TieredCache(far, far_kinds=("grade", "web"))  # evaluations in process only
    for key in (EVAL, GRADE, WEB):
        tiered.set(key, VALUE, ttl=60)
    assert EVAL in tiered.near and GRADE in tiered.near and WEB not in tiered.near
    shared = {k.decode() for k in admin.keys(f"{namespace}:*")}  # type: ignore[union-attr]
    assert shared == {f"{namespace}:{GRADE}", f"{namespace}:{WEB}"}
    assert [tiered.get(key) for key in (EVAL, GRADE, WEB)] == [VALUE] * 3
    stats = tiered.stats
    assert (stats.hits, stats.misses, stats.sets) == (3, 0, 3)
    assert (stats.tiers["near"].hits, stats.tiers["far"].hits) == (2, 1)  # web: Redis only
    assert stats.to_dict()["tiers"]["far"]["backend"] == "redis"


def test_what_another_process_wrote_is_read_once_then_kept_in_process(far: RedisCache) -> None:
    writer, reader = TieredCache(far), TieredCache(far)
    writer.set(EVAL, VALUE)
    assert reader.get(EVAL) == VALUE  # from Redis, kept in process
    assert reader.get(EVAL) == VALUE  # from the process
    near, shared = reader.stats.tiers["near"], reader.stats.tiers["far"]
    assert (near.hits, near.misses, shared.hits) == (1, 1, 1)
    assert reader.get(cache_key("eval", {"other": 1})) is None
    assert reader.stats.misses == 1


def test_the_in_process_tier_is_bounded_in_size_and_time(far: RedisCache, clock: Any) -> None:
    near = MemoryCache(max_entries=2, clock=clock)
    tiered = TieredCache(far, near=near, near_ttl=5, far_kinds=None)
    keys = [cache_key("eval", {"i": i}) for i in range(3)]
    for key in keys:
        tiered.set(key, VALUE, ttl=3600)
    assert len(near) == 2 and tiered.stats.evictions == 1
    clock.advance(6)  # past near_ttl: gone from the process, still in Redis
    assert keys[2] not in near
    assert tiered.get(keys[2]) == VALUE and tiered.stats.tiers["far"].hits == 1
    tiered.set(keys[0], VALUE, ttl=1)  # a shorter ttl is kept
    clock.advance(2)
    assert keys[0] not in near


def test_redis_down_still_serves_the_process_tier(local_redis: RedisServer) -> None:
    tiered = TieredCache(
        RedisCache(url=local_redis.url, retry_interval=30, unsigned="allow"), far_kinds=None
    )
    tiered.set(EVAL, VALUE)
    local_redis.kill()
    assert tiered.get(EVAL) == VALUE  # no round trip: no error
    with pytest.raises(CacheError):
        tiered.get(cache_key("eval", {"missing": 1}))
    with pytest.raises(CacheError):
        tiered.set(GRADE, VALUE)
    assert tiered.get(GRADE) == VALUE  # written in process before Redis failed
    assert tiered.stats.errors >= 1 and not tiered.healthy
    tiered.close()


async def test_async_calls_use_the_async_client(far: RedisCache) -> None:
    tiered = TieredCache(far, far_kinds=None)
    await tiered.aset(EVAL, VALUE)
    other = TieredCache(far, far_kinds=None)
    assert await other.aget(EVAL) == VALUE
    assert await other.aget(EVAL) == VALUE
    assert other.stats.tiers["near"].hits == 1
    await tiered.aclose()


def test_bad_configuration_names_the_field(far: RedisCache) -> None:
    for kwargs, field in (
        ({"near_ttl": 0}, "near_ttl"),
        ({"near_kinds": "eval"}, "near_kinds"),
        ({"far_kinds": [""]}, "far_kinds"),
        ({"near": {}}, "near"),
    ):
        with pytest.raises(ConfigError) as caught:
            TieredCache(far, **kwargs)
        assert caught.value.field == field
    with pytest.raises(ConfigError):
        TieredCache(object())  # type: ignore[arg-type]


def test_the_router_repeats_a_query_from_the_process_and_reports_both_tiers(
    redis_server: RedisServer, namespace: str, admin: redis.Redis
) -> None:
    prometheus = pytest.importorskip("prometheus_client")
    from crag_heuristic._metrics import PrometheusMetrics

    registry = prometheus.CollectorRegistry()
    cache = TieredCache(RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"))
    crag = CRAG(sample_retriever(), cache=cache, metrics=PrometheusMetrics(registry))
    query = "How do honeybees tell each other where food is?"
    assert crag.retrieve(query, 5).cache_hit is False
    assert crag.retrieve(query, 5).cache_hit is True
    assert asyncio.run(crag.aretrieve(query, 5)).cache_hit is True
    samples = {
        (s.labels["tier"], s.labels["outcome"]): s.value
        for m in registry.collect()
        if m.name == "crag_cache_lookups"
        for s in m.samples
    }
    assert samples[("near", "hit")] == 2 and samples[("near", "miss")] == 1
    assert samples[("all", "hit")] == 2 and samples[("all", "miss")] == 1
    cache.close()
