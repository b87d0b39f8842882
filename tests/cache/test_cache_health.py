"""Error kinds, the down window, and the crag.cache log events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from crag_testkit import RedisServer
from redis import exceptions as rex

from crag_heuristic import CacheError
from crag_heuristic._cache.health import DownWindow, classify
from crag_heuristic._cache.memory import MemoryCache
from crag_heuristic._cache.redis import RedisCache
from crag_heuristic.testing import capture_events


@pytest.mark.parametrize(
    ("exc", "kind", "unreachable"),
    [
        (rex.ConnectionError("refused"), "connection", True),
        (ConnectionRefusedError(111, "refused"), "connection", True),
        (rex.TimeoutError("slow"), "timeout", True),
        (TimeoutError("slow"), "timeout", True),
        (asyncio.TimeoutError(), "timeout", True),
        (rex.AuthenticationError("WRONGPASS"), "auth", True),
        (rex.BusyLoadingError("LOADING"), "loading", True),
        (rex.ClusterDownError("CLUSTERDOWN"), "cluster", True),
        (rex.OutOfMemoryError("command not allowed when used memory > 'maxmemory'"), "oom", False),
        (rex.ResponseError("OOM command not allowed"), "oom", False),
        (rex.ReadOnlyError("READONLY replica"), "readonly", False),
        (rex.NoPermissionError("NOPERM set"), "auth", False),
        (rex.ResponseError("WRONGTYPE Operation against a key"), "payload", False),
        (rex.ResponseError("ERR unknown"), "response", False),
        (rex.DataError("bad"), "error", False),
        (RuntimeError("Event loop is closed"), "client", False),
    ],
)
def test_classify_names_each_failure(exc: BaseException, kind: str, unreachable: bool) -> None:
    assert classify(exc) == (kind, unreachable)


def test_down_window_lets_one_probe_through(clock: Any) -> None:
    window = DownWindow(2.0, clock)
    assert window.up and window.admit() is None
    window.mark_down()
    assert not window.up
    assert window.admit() == 2.0
    clock.advance(2.0)
    assert window.admit() is None  # the probe
    assert window.admit() == 2.0  # concurrent callers still fail fast meanwhile
    assert window.mark_up() is True
    assert window.mark_up() is False
    assert window.admit() is None


def test_memory_cache_events() -> None:
    cache = MemoryCache()
    with capture_events() as events:
        cache.set("crag:v0.1.0:eval:abc", "1")
        cache.get("crag:v0.1.0:eval:abc")
        cache.get("crag:v0.1.0:web:def")
    assert [(e["event"], e["op"], e.get("hit")) for e in events] == [
        ("crag.cache", "set", None),
        ("crag.cache", "get", True),
        ("crag.cache", "get", False),
    ]
    assert {e["backend"] for e in events} == {"memory"}
    assert [e["key_prefix"] for e in events] == [
        "crag:v0.1.0:eval",
        "crag:v0.1.0:eval",
        "crag:v0.1.0:web",
    ]
    assert all(e["log_level"] == "debug" for e in events)


def test_redis_cache_events_for_hit_error_down_and_recovery(clock: Any) -> None:
    with RedisServer() as server:
        cache = RedisCache(url=server.url, clock=clock, unsigned="allow")
        admin: redis.Redis = server.client()
        admin.set("crag:v0.1.0:eval:bad", b"\x80not json")
        with capture_events() as events:
            cache.set("crag:v0.1.0:eval:ok", "1")
            cache.get("crag:v0.1.0:eval:ok")
            with pytest.raises(CacheError) as info:  # refused and said so, not a silent miss
                cache.get("crag:v0.1.0:eval:bad")
            assert info.value.kind == "payload"
            server.kill()
            with pytest.raises(CacheError):
                cache.get("crag:v0.1.0:eval:ok")
            with pytest.raises(CacheError):
                cache.get("crag:v0.1.0:eval:ok")
            server.restart()
            clock.advance(cache.retry_interval)
            cache.get("crag:v0.1.0:eval:ok")
        admin.close()
    assert all(e["event"] == "crag.cache" and e["backend"] == "redis" for e in events)
    summary = [
        (e["log_level"], e["op"], e.get("hit"), e.get("error"), e.get("state")) for e in events
    ]
    assert summary == [
        ("debug", "set", None, None, None),
        ("debug", "get", True, None, None),
        ("warning", "get", None, "payload", None),
        ("warning", "get", None, "connection", "down"),
        ("debug", "get", None, "down", None),
        ("info", "up", None, None, "up"),
        ("debug", "get", False, None, None),
    ]
    assert events[0]["key_prefix"] == "crag:v0.1.0:eval"
    assert all("crag:v0.1.0:eval:ok" not in repr(e) for e in events)  # keys only by prefix
