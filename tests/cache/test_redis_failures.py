"""RedisCache when Redis fails for real: killed, restarted, full, paused, password-protected.

Each test runs its own redis-server (``local_redis``) so it can kill or fill it.
Time bounds here only prove that nothing hangs; they are generous on purpose.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import CacheError
from crag_heuristic._cache.redis import RedisCache

BOUND = 60.0  # seconds: "did not hang" (on a loaded machine too), not a performance claim


def _raises(call: Callable[[], Any]) -> CacheError:
    started = time.monotonic()
    with pytest.raises(CacheError) as info:
        call()
    assert time.monotonic() - started < BOUND
    return info.value


def test_killed_server_fails_fast_then_recovers_after_restart_by_itself(
    local_redis: RedisServer, clock: Any
) -> None:
    cache = RedisCache(url=local_redis.url, retry_interval=1.0, clock=clock, unsigned="allow")
    client = cache.client
    cache.set("k", '"before"')
    local_redis.kill()  # SIGKILL mid-run

    error = _raises(lambda: cache.get("k"))
    assert (error.backend, error.operation, error.kind) == ("redis", "get", "connection")
    assert not cache.healthy

    # Marked down: calls fail at once without touching the network.
    skipped = _raises(lambda: cache.set("k", '"during"'))
    assert skipped.kind == "down" and skipped.operation == "set"
    assert skipped.retry_after is not None and 0 < skipped.retry_after <= 1.0
    assert _raises(lambda: cache.get("k")).kind == "down"

    local_redis.restart()  # same port, empty
    assert _raises(lambda: cache.get("k")).kind == "down"  # still inside the window
    clock.advance(1.0)
    assert cache.get("k") is None  # the probe reaches the new server: data was lost
    assert cache.healthy
    cache.set("k", '"after"')
    assert cache.get("k") == '"after"'
    assert cache.client is client  # no new client was needed

    stats = cache.stats
    assert stats.errors_by_kind == {"connection": 1}
    assert stats.skipped == 3
    assert (stats.sets, stats.hits, stats.misses) == (2, 1, 1)
    cache.close()


def test_a_failed_probe_marks_it_down_for_another_window(
    local_redis: RedisServer, clock: Any
) -> None:
    cache = RedisCache(url=local_redis.url, retry_interval=2.0, clock=clock, unsigned="allow")
    local_redis.kill()
    assert _raises(lambda: cache.get("k")).kind == "connection"
    clock.advance(2.0)
    assert _raises(lambda: cache.get("k")).kind == "connection"  # the probe went through
    assert _raises(lambda: cache.get("k")).kind == "down"  # and failed: down again
    clock.advance(1.9)
    assert _raises(lambda: cache.get("k")).kind == "down"
    assert cache.stats.errors_by_kind == {"connection": 2}
    assert cache.ping() is False  # ping always asks, and never raises


def test_recovers_on_the_real_clock_too(local_redis: RedisServer) -> None:
    cache = RedisCache(url=local_redis.url, retry_interval=0.1, unsigned="allow")
    local_redis.kill()
    assert _raises(lambda: cache.get("k")).kind == "connection"
    local_redis.restart()
    deadline = time.monotonic() + BOUND
    kinds = set()
    while time.monotonic() < deadline:
        try:
            cache.set("k", "1")
            break
        except CacheError as exc:
            kinds.add(exc.kind)
            time.sleep(0.05)
    assert kinds <= {"down"}  # waiting out the window, never a slow failure
    assert cache.get("k") == "1" and cache.healthy
    cache.close()


def test_ping_brings_it_back_up_without_waiting(local_redis: RedisServer, clock: Any) -> None:
    cache = RedisCache(url=local_redis.url, retry_interval=60, clock=clock, unsigned="allow")
    local_redis.kill()
    _raises(lambda: cache.get("k"))
    local_redis.restart()
    assert cache.ping() is True
    assert cache.healthy
    assert cache.get("k") is None


def test_full_redis_refuses_sets_but_serves_gets(local_redis: RedisServer) -> None:
    cache = RedisCache(url=local_redis.url, unsigned="allow")
    cache.set("kept", '{"v":1}')
    admin = local_redis.client()
    admin.config_set("maxmemory", 1)  # noeviction: every write that allocates fails with OOM
    error = _raises(lambda: cache.set("new", '{"v":2}'))
    assert (error.operation, error.kind) == ("set", "oom")
    assert "maxmemory" in str(error)
    assert cache.healthy  # the server answered: reads go on
    assert cache.get("kept") == '{"v":1}'
    assert cache.get("new") is None
    admin.config_set("maxmemory", 0)
    cache.set("new", '{"v":2}')
    assert cache.stats.errors_by_kind == {"oom": 1}
    admin.close()


def test_server_started_full_refuses_the_first_set() -> None:
    with RedisServer(maxmemory=1) as server:
        cache = RedisCache(url=server.url, unsigned="allow")
        assert _raises(lambda: cache.set("k", "1")).kind == "oom"
        assert cache.get("k") is None and cache.healthy
        cache.close()


def _pause(server: RedisServer, milliseconds: int) -> redis.Redis:
    admin = server.client(socket_timeout=10)
    admin.execute_command("CLIENT", "PAUSE", milliseconds)  # type: ignore[no-untyped-call]
    return admin


def test_slow_redis_times_out_within_the_socket_timeout(
    local_redis: RedisServer, clock: Any
) -> None:
    cache = RedisCache(url=local_redis.url, socket_timeout=0.2, clock=clock, unsigned="allow")
    cache.set("k", "1")
    admin = _pause(local_redis, 1500)  # every client's commands wait 1.5 s
    error = _raises(lambda: cache.get("k"))
    assert (error.operation, error.kind) == ("get", "timeout")
    assert _raises(lambda: cache.get("k")).kind == "down"
    admin.ping()  # returns once the pause is over
    clock.advance(cache.retry_interval)
    assert cache.get("k") == "1"  # the timed-out connection was dropped, not reused
    assert cache.stats.errors_by_kind == {"timeout": 1}
    admin.close()


def test_wrong_password_is_an_auth_error_and_right_one_works() -> None:
    with RedisServer(password="s3cret") as server:
        anonymous = RedisCache(url=server.url.replace(":s3cret@", ""), unsigned="allow")
        assert _raises(lambda: anonymous.get("k")).kind == "auth"
        wrong = RedisCache(url=server.url.replace("s3cret", "nope"), unsigned="allow")
        assert _raises(lambda: wrong.set("k", "1")).kind == "auth"
        right = RedisCache(url=server.url, unsigned="allow")
        right.set("k", "1")
        assert right.get("k") == "1"
        for cache in (anonymous, wrong, right):
            cache.close()


def test_nothing_listening_at_all(clock: Any) -> None:
    with RedisServer() as server:
        url = server.url
    cache = RedisCache(
        url=url, clock=clock, unsigned="allow"
    )  # the server is gone: connection refused
    assert _raises(lambda: cache.get("k")).kind == "connection"
    assert _raises(lambda: cache.set("k", "1")).kind == "down"


def test_threads_during_an_outage_only_see_cache_errors(local_redis: RedisServer) -> None:
    cache = RedisCache(url=local_redis.url, retry_interval=0.05, unsigned="allow")
    outcomes: dict[str, int] = {}
    lock = threading.Lock()
    foreign: list[BaseException] = []

    def work() -> None:
        for i in range(200):
            try:
                cache.set(f"k{i % 7}", "1")
                cache.get(f"k{i % 7}")
                kind = "ok"
            except CacheError as exc:
                kind = exc.kind
            except BaseException as exc:  # must never happen
                foreign.append(exc)
                return
            with lock:
                outcomes[kind] = outcomes.get(kind, 0) + 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    local_redis.kill()
    local_redis.restart()
    for thread in threads:
        thread.join(timeout=60)
    assert not foreign
    assert set(outcomes) <= {"ok", "down", "connection", "timeout"}
    deadline = time.monotonic() + BOUND
    while not cache.ping():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    cache.set("final", "1")
    assert cache.get("final") == "1"
    cache.close()


# -- async ------------------------------------------------------------------------------


async def _araises(call: Callable[[], Any]) -> CacheError:
    started = time.monotonic()
    with pytest.raises(CacheError) as info:
        await call()
    assert time.monotonic() - started < BOUND
    return info.value


async def test_async_killed_then_restarted(local_redis: RedisServer, clock: Any) -> None:
    async with RedisCache(url=local_redis.url, clock=clock, unsigned="allow") as cache:
        client = cache.async_client
        await cache.aset("k", '"before"')
        assert await cache.aget("k") == '"before"'
        local_redis.kill()
        error = await _araises(lambda: cache.aget("k"))
        assert (error.operation, error.kind) == ("get", "connection")
        assert (await _araises(lambda: cache.aset("k", "1"))).kind == "down"
        local_redis.restart()
        clock.advance(cache.retry_interval)
        assert await cache.aget("k") is None
        await cache.aset("k", '"after"')
        assert await cache.aget("k") == '"after"'
        assert cache.async_client is client
        assert await cache.aping() is True
        assert cache.stats.errors_by_kind == {"connection": 1}


async def test_async_full_redis(local_redis: RedisServer) -> None:
    async with RedisCache(url=local_redis.url, unsigned="allow") as cache:
        await cache.aset("kept", "[1]")
        admin = local_redis.client()
        admin.config_set("maxmemory", 1)
        assert (await _araises(lambda: cache.aset("new", "[2]"))).kind == "oom"
        assert await cache.aget("kept") == "[1]"
        admin.config_set("maxmemory", 0)
        admin.close()


async def test_async_slow_redis_times_out(local_redis: RedisServer, clock: Any) -> None:
    async with RedisCache(
        url=local_redis.url, socket_timeout=0.2, clock=clock, unsigned="allow"
    ) as cache:
        await cache.aset("k", "1")
        admin = _pause(local_redis, 1500)
        assert (await _araises(lambda: cache.aget("k"))).kind == "timeout"
        assert not cache.healthy
        admin.ping()
        clock.advance(cache.retry_interval)
        assert await cache.aget("k") == "1"
        admin.close()


async def test_async_corrupt_payload_is_a_payload_error(local_redis: RedisServer) -> None:
    admin = local_redis.client()
    admin.set("bad", b"\x80\x04K\x01.")
    async with RedisCache(url=local_redis.url, unsigned="allow") as cache:
        assert (await _araises(lambda: cache.aget("bad"))).kind == "payload"
        assert cache.stats.errors_by_kind == {"payload": 1}
        assert cache.stats.misses == 1
    admin.close()
