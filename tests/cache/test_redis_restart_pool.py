"""After Redis restarts, no call is handed a pooled connection to the dead server.

Regression (found by benchmarks/load_faults.py): redis-py 8.1's asyncio pool
skips its stale-connection check while maintenance notifications are on
``"auto"`` (the default), so after a restart every connection that sat idle
in the pool failed one more call ("Connection closed by server") and marked
the cache down again: a burst of cache errors after Redis was back. A
connection-level failure now disconnects the pool's idle connections.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from crag_testkit import RedisServer

from crag_heuristic import CacheError
from crag_heuristic._cache.redis import RedisCache

BURST = 20


def outcome_of(answer: object) -> str:
    """``"ok"``, or the kind of the error (``"connection"`` ...)."""
    if isinstance(answer, BaseException):
        return str(getattr(answer, "kind", type(answer).__name__))
    return "ok"


async def test_async_burst_after_restart_finds_no_stale_connection(
    local_redis: RedisServer,
) -> None:
    cache = RedisCache(url=local_redis.url, retry_interval=0.25, unsigned="allow")
    try:
        # fill the pool with BURST connections to the first server process
        await asyncio.gather(*(cache.aset(f"k{i}", '"v"') for i in range(BURST)))
        idle = len(cache.async_client.connection_pool._available_connections)
        assert idle > 1  # otherwise the test proves nothing
        local_redis.kill()
        with pytest.raises(CacheError) as info:
            await cache.aget("k0")  # the failure that tells the cache Redis is gone
        assert info.value.kind == "connection"
        local_redis.restart()
        assert await cache.aping()  # up again, now
        answers = await asyncio.gather(
            *(cache.aget(f"k{i}") for i in range(BURST)), return_exceptions=True
        )
        # the restarted server is empty: every get is a clean miss, none a failure
        assert [outcome_of(answer) for answer in answers] == ["ok"] * BURST
        assert answers == [None] * BURST
        assert cache.healthy
    finally:
        await cache.aclose()


def test_sync_burst_after_restart_finds_no_stale_connection(local_redis: RedisServer) -> None:
    cache = RedisCache(url=local_redis.url, retry_interval=0.25, unsigned="allow")

    def burst() -> list[str]:
        def one(i: int) -> str:
            try:
                cache.get(f"k{i}")
            except CacheError as exc:
                return outcome_of(exc)
            return "ok"

        with ThreadPoolExecutor(BURST) as pool:
            return list(pool.map(one, range(BURST)))

    try:
        assert burst() == ["ok"] * BURST
        local_redis.kill()
        with pytest.raises(CacheError) as info:
            cache.get("k0")
        assert info.value.kind == "connection"
        local_redis.restart()
        assert cache.ping()
        assert burst() == ["ok"] * BURST
        assert cache.healthy
    finally:
        cache.close()
