"""A shared store made without a secret says so (issue 32): once, when it is made, as a
``crag.store.unsigned`` event and an ``UnsignedStoreWarning``; or refuses to be made
(``unsigned="refuse"``); or is quiet when told nobody else writes to it."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from crag_testkit import RedisServer

from crag_heuristic import ConfigError, RedisCache
from crag_heuristic.cache import MemoryCache, TieredCache, UnsignedStoreWarning
from crag_heuristic.testing import capture_events

SECRET = "a-secret-of-32-characters-long!!"


class SharedDict:
    """A shared tier of one's own (get/set): the TieredCache's setting applies to it."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        self.values[key] = value


def made_quietly(build: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails
        with capture_events() as events:
            store = build()
    assert not [e for e in events if e["event"] == "crag.store.unsigned"]
    return store


def test_a_redis_cache_without_a_secret_warns_once_when_it_is_made(
    redis_server: RedisServer,
) -> None:
    with capture_events() as events, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = RedisCache(url=redis_server.url, namespace="unsigned")
        cache.set("k", "1")
        cache.get("k")  # used: no other warning
    assert [w.category for w in caught] == [UnsignedStoreWarning]
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line
    message = str(caught[0].message)
    assert "RedisCache has no secret" in message and "secret=" in message
    unsigned = [e for e in events if e["event"] == "crag.store.unsigned"]
    assert unsigned == [
        {"event": "crag.store.unsigned", "log_level": "warning", "store": "RedisCache"}
    ]
    assert not cache.signed
    cache.delete("k")


def test_the_unsigned_setting_refuses_or_allows(redis_server: RedisServer) -> None:
    with pytest.raises(ConfigError) as info:
        RedisCache(url=redis_server.url, unsigned="refuse")
    assert info.value.field == "secret" and "unsigned='refuse'" in str(info.value)
    with pytest.raises(ConfigError) as info:
        RedisCache(url=redis_server.url, unsigned="ignore")  # type: ignore[arg-type]
    assert info.value.field == "unsigned"
    assert not made_quietly(lambda: RedisCache(url=redis_server.url, unsigned="allow")).signed
    signed = made_quietly(
        lambda: RedisCache(url=redis_server.url, secret=SECRET, unsigned="refuse")
    )
    assert signed.signed


def test_a_tiered_cache_warns_only_for_a_shared_tier_of_ones_own(
    redis_server: RedisServer,
) -> None:
    far = made_quietly(lambda: RedisCache(url=redis_server.url, unsigned="allow"))
    assert not made_quietly(lambda: TieredCache(far)).signed  # the far tier applied its own
    signed_far = made_quietly(lambda: RedisCache(url=redis_server.url, secret=SECRET))
    assert made_quietly(lambda: TieredCache(signed_far)).signed
    made_quietly(lambda: TieredCache(MemoryCache()))  # in process: nothing shared
    with pytest.warns(UnsignedStoreWarning, match="TieredCache has no secret"):
        TieredCache(SharedDict())
    assert made_quietly(lambda: TieredCache(SharedDict(), secret=SECRET)).signed
    made_quietly(lambda: TieredCache(SharedDict(), unsigned="allow"))
    with pytest.raises(ConfigError, match="needs a secret"):
        TieredCache(SharedDict(), unsigned="refuse")


def test_strict_applications_make_the_warning_an_error(redis_server: RedisServer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsignedStoreWarning)
        with pytest.raises(UnsignedStoreWarning):
            RedisCache(url=redis_server.url)
