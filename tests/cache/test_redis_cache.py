"""RedisCache against a real redis-server: round trips, TTLs, JSON only, corrupt payloads."""

from __future__ import annotations

import asyncio
import gc
import json
import time

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import CacheError, ConfigError, InputError
from crag_heuristic._cache.codec import dumps
from crag_heuristic._cache.redis import RedisCache
from crag_heuristic._protocols import AsyncCache, Cache


@pytest.fixture
def cache(redis_server: RedisServer, namespace: str, admin: redis.Redis) -> RedisCache:
    return RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")


def test_implements_both_cache_protocols(cache: RedisCache) -> None:
    assert isinstance(cache, Cache)
    assert isinstance(cache, AsyncCache)


def test_round_trip_and_counters(cache: RedisCache) -> None:
    value = dumps({"verdict": "partial", "score": 0.61, "text": "Wärme ☀"})
    assert cache.get("crag:v1:eval:abc") is None
    cache.set("crag:v1:eval:abc", value)
    assert cache.get("crag:v1:eval:abc") == value
    stats = cache.stats
    assert (stats.hits, stats.misses, stats.sets, stats.errors) == (1, 1, 1, 0)
    assert cache.healthy and cache.ping()


def test_values_are_stored_as_json_text_under_the_namespace(
    cache: RedisCache, admin: redis.Redis, namespace: str
) -> None:
    value = '{"a":[1,2],"b":"caf\u00e9"}'
    cache.set("k", value)
    raw = admin.get(f"{namespace}:k")
    assert isinstance(raw, bytes)
    assert raw == value.encode("utf-8")  # exactly the JSON text, UTF-8
    assert not raw.startswith(b"\x80")  # not a pickle stream
    assert json.loads(raw.decode("utf-8")) == {"a": [1, 2], "b": "café"}
    assert admin.get("k") is None  # nothing outside the namespace


def test_ttl_is_set_in_milliseconds(cache: RedisCache, admin: redis.Redis, namespace: str) -> None:
    cache.set("t30", "1", ttl=30)
    pttl = admin.pttl(f"{namespace}:t30")
    assert 0 < pttl <= 30_000
    cache.set("tdefault", "1")
    assert 3_600_000 < admin.pttl(f"{namespace}:tdefault") <= 86_400_000  # one day by default
    forever = RedisCache(
        url=cache_url(admin), namespace=namespace, default_ttl=None, unsigned="allow"
    )
    forever.set("tnone", "1")
    assert admin.pttl(f"{namespace}:tnone") == -1  # no expiry
    forever.close()


def cache_url(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"


def test_short_ttl_really_expires(cache: RedisCache, admin: redis.Redis, namespace: str) -> None:
    cache.set("brief", "1", ttl=0.05)
    assert 0 < admin.pttl(f"{namespace}:brief") <= 50
    deadline = time.monotonic() + 5
    while cache.get("brief") is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cache.get("brief") is None
    assert admin.exists(f"{namespace}:brief") == 0


@pytest.mark.parametrize(
    "raw",
    [b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.", b"{not json", b"\xff\xfe\x00", b""],
    ids=["pickle", "broken-json", "not-utf8", "empty"],
)
def test_corrupt_payload_is_a_payload_error_and_a_counted_miss(
    cache: RedisCache, admin: redis.Redis, namespace: str, raw: bytes
) -> None:
    admin.set(f"{namespace}:bad", raw)
    refused_as_payload(cache, "bad")  # said, not dropped: the router flags it
    stats = cache.stats
    assert stats.misses == 1 and stats.hits == 0
    assert stats.errors_by_kind == {"payload": 1}
    cache.set("bad", '"fixed"')  # the next set repairs it
    assert cache.get("bad") == '"fixed"'


def test_a_key_of_another_type_is_a_payload_error(
    cache: RedisCache, admin: redis.Redis, namespace: str
) -> None:
    admin.rpush(f"{namespace}:list", "x")
    refused_as_payload(cache, "list")


def refused_as_payload(cache: RedisCache, key: str) -> None:
    with pytest.raises(CacheError) as info:
        cache.get(key)
    assert (info.value.backend, info.value.operation, info.value.kind) == (
        "redis",
        "get",
        "payload",
    )
    assert cache.healthy  # the server answered: not marked down


def test_refuses_to_store_anything_but_json_text(
    cache: RedisCache, admin: redis.Redis, namespace: str
) -> None:
    with pytest.raises(CacheError) as info:
        cache.set("k", "not json at all")
    assert info.value.kind == "payload" and info.value.operation == "set"
    with pytest.raises(InputError):
        cache.set("k", {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(InputError):
        cache.set("k", "1", ttl=0)
    assert admin.exists(f"{namespace}:k") == 0
    assert cache.stats.errors_by_kind == {"payload": 1}


def test_delete_and_clear_stay_inside_the_namespace(
    cache: RedisCache, admin: redis.Redis, namespace: str
) -> None:
    admin.set("outside-" + namespace, "keep")
    try:
        for i in range(5):
            cache.set(f"k{i}", str(i))
        assert cache.delete("k0") is True
        assert cache.delete("k0") is False
        assert cache.clear() == 4
        assert cache.get("k1") is None
        assert admin.get("outside-" + namespace) == b"keep"
    finally:
        admin.delete("outside-" + namespace)


def test_clear_without_namespace_refuses(redis_server: RedisServer) -> None:
    cache = RedisCache(url=redis_server.url, unsigned="allow")
    with pytest.raises(CacheError) as info:
        cache.clear()
    assert info.value.kind == "unsupported"
    cache.close()


def test_injected_client_is_used_and_left_open(
    redis_server: RedisServer, namespace: str, admin: redis.Redis
) -> None:
    client = redis_server.client(socket_timeout=1, decode_responses=True)
    cache = RedisCache(client, namespace=namespace, unsigned="allow")
    assert cache.client is client and cache.async_client is None
    cache.set("k", '{"x":1}')
    assert cache.get("k") == '{"x":1}'  # decode_responses clients give str: fine too
    cache.close()
    assert client.ping()  # not closed by the cache
    client.close()


async def test_sync_only_cache_serves_async_calls_in_a_thread(
    redis_server: RedisServer, namespace: str, admin: redis.Redis
) -> None:
    client = redis_server.client(socket_timeout=1)
    cache = RedisCache(client, namespace=namespace, unsigned="allow")
    await cache.aset("k", "[1]")
    assert await cache.aget("k") == "[1]"
    assert await cache.adelete("k") is True
    assert await cache.aping() is True
    client.close()


async def test_async_only_cache_refuses_sync_calls(
    redis_server: RedisServer, namespace: str, admin: redis.Redis
) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_server.url, socket_timeout=1)
    cache = RedisCache(async_client=client, namespace=namespace, unsigned="allow")
    await cache.aset("k", "2")
    assert await cache.aget("k") == "2"
    with pytest.raises(CacheError) as info:
        cache.get("k")
    assert info.value.kind == "unsupported"
    assert cache.ping() is False
    await client.aclose()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "url"),
        ({"url": "http://localhost:6379"}, "url"),
        ({"client": object(), "url": "http://localhost:6379"}, "url"),
        ({"url": "redis://localhost", "socket_timeout": 0}, "socket_timeout"),
        ({"url": "redis://localhost", "socket_connect_timeout": -1}, "socket_connect_timeout"),
        ({"url": "redis://localhost", "retry_interval": float("inf")}, "retry_interval"),
        ({"url": "redis://localhost", "default_ttl": 0}, "default_ttl"),
        ({"url": "redis://localhost", "namespace": "has space"}, "namespace"),
        ({"url": "redis://localhost", "clock": "now"}, "clock"),
    ],
)
def test_bad_configuration_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        RedisCache(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


async def test_built_clients_have_bounded_timeouts_and_no_retries(
    redis_server: RedisServer,
) -> None:
    cache = RedisCache(
        url=redis_server.url, socket_timeout=0.3, socket_connect_timeout=0.2, unsigned="allow"
    )
    kwargs = cache.client.connection_pool.connection_kwargs
    assert kwargs["socket_timeout"] == 0.3 and kwargs["socket_connect_timeout"] == 0.2
    assert kwargs["retry"].get_retries() == 0
    akwargs = cache.async_client.connection_pool.connection_kwargs
    assert akwargs["socket_timeout"] == 0.3 and akwargs["retry"].get_retries() == 0
    assert cache.async_client is cache.async_client  # one per event loop
    await cache.aclose()


def test_one_cache_serves_successive_event_loops(
    redis_server: RedisServer, namespace: str, admin: redis.Redis
) -> None:
    cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    assert cache.async_client is None  # built per event loop, and there is none here

    async def round_trip(i: int) -> str | None:
        await cache.aset("k", str(i))
        return await cache.aget("k")

    assert [asyncio.run(round_trip(i)) for i in range(3)] == ["0", "1", "2"]
    assert cache.stats.errors == 0
    cache.close()


def test_each_event_loops_client_is_closed_with_its_loop(
    redis_server: RedisServer, namespace: str, admin: redis.Redis
) -> None:
    """asyncio.run() finalises the loop's async generators: the cache's client for
    that loop closes then, so short-lived loops leave no connection (and no
    ResourceWarning) behind."""
    cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    gc.collect()  # an earlier test's unreachable client would close during the count
    before = len(admin.client_list())

    async def round_trip(i: int) -> str | None:
        await cache.aset("k", str(i))
        return await cache.aget("k")

    assert [asyncio.run(round_trip(i)) for i in range(3)] == ["0", "1", "2"]
    gc.collect()
    assert len(admin.client_list()) == before
    cache.close()


@pytest.mark.slow
def test_works_through_redis_cluster_client() -> None:
    """A one-node Redis Cluster (all 16384 slots on one process), via RedisCluster."""
    from redis.cluster import RedisCluster

    with RedisServer(config={"cluster-enabled": "yes"}) as server:
        admin = server.client(socket_timeout=5)
        admin.execute_command("CLUSTER", "ADDSLOTS", *range(16384))  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + 10
        cluster_info = "CLUSTER", "INFO"
        while b"cluster_state:ok" not in admin.execute_command(*cluster_info):  # type: ignore[no-untyped-call]
            assert time.monotonic() < deadline, "cluster did not come up"
            time.sleep(0.05)
        assert server.port is not None
        client = RedisCluster(host=server.host, port=server.port, socket_timeout=1)
        cache = RedisCache(client, namespace="tenant", unsigned="allow")
        cache.set("crag:v1:eval:a", '{"v":1}', ttl=30)
        cache.set("crag:v1:web:b", '{"v":2}')
        assert cache.get("crag:v1:eval:a") == '{"v":1}'
        assert 0 < admin.pttl("tenant:crag:v1:eval:a") <= 30_000
        assert cache.delete("crag:v1:eval:a") is True
        assert cache.clear() == 1
        assert cache.ping()
        server.kill()
        with pytest.raises(CacheError) as info:
            cache.get("crag:v1:eval:a")
        assert info.value.kind in {"cluster", "connection"}
        assert not cache.healthy
        client.close()
        admin.close()
