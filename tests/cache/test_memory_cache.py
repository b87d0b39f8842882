"""MemoryCache: LRU order, TTL on an injected clock, JSON-only values, threads, async."""

from __future__ import annotations

import random
import threading

import pytest

from crag_heuristic import CacheError, ConfigError, InputError
from crag_heuristic._cache.memory import MemoryCache
from crag_heuristic._protocols import AsyncCache, Cache


def test_implements_both_cache_protocols() -> None:
    cache = MemoryCache()
    assert isinstance(cache, Cache)
    assert isinstance(cache, AsyncCache)


def test_get_set_round_trip_and_miss() -> None:
    cache = MemoryCache()
    assert cache.get("k") is None
    cache.set("k", '{"verdict":"relevant"}')
    assert cache.get("k") == '{"verdict":"relevant"}'
    stats = cache.stats
    assert (stats.hits, stats.misses, stats.sets) == (1, 1, 1)
    assert stats.hit_rate == 0.5


def test_least_recently_used_entry_is_evicted_first() -> None:
    cache = MemoryCache(max_entries=3)
    for key in "abc":
        cache.set(key, "1")
    assert cache.get("a") == "1"  # a is now the most recently used
    cache.set("d", "2")  # evicts b, the least recently used
    assert "b" not in cache
    assert [k for k in "abcd" if k in cache] == ["a", "c", "d"]
    cache.set("c", "3")  # overwriting refreshes c
    cache.set("e", "4")  # evicts a
    assert [k for k in "abcde" if k in cache] == ["c", "d", "e"]
    assert cache.stats.evictions == 2
    assert len(cache) == 3


def test_ttl_expires_on_the_injected_clock(clock) -> None:
    cache = MemoryCache(clock=clock)
    cache.set("short", "1", ttl=10)
    cache.set("forever", "2")
    clock.advance(9.999)
    assert cache.get("short") == "1"
    clock.advance(0.001)  # exactly at the deadline: expired
    assert cache.get("short") is None
    assert cache.get("forever") == "2"
    stats = cache.stats
    assert stats.expirations == 1
    assert (stats.hits, stats.misses) == (2, 1)


def test_default_ttl_applies_when_set_gives_none(clock) -> None:
    cache = MemoryCache(default_ttl=5, clock=clock)
    cache.set("a", "1")
    cache.set("b", "1", ttl=60)
    clock.advance(5)
    assert "a" not in cache and "b" in cache
    assert len(cache) == 1  # len purges the expired entry
    assert cache.stats.expirations == 1


def test_purge_expired_counts_and_eviction_of_expired_counts_as_expiration(clock) -> None:
    cache = MemoryCache(max_entries=2, clock=clock)
    cache.set("old", "1", ttl=1)
    cache.set("new", "1")
    clock.advance(2)
    cache.set("newer", "1")  # pushes out "old", which had expired already
    stats = cache.stats
    assert (stats.evictions, stats.expirations) == (0, 1)
    cache.set("x", "1", ttl=1)
    clock.advance(1)
    assert cache.purge_expired() == 1


def test_delete_and_clear() -> None:
    cache = MemoryCache()
    cache.set("a", "1")
    cache.set("b", "2")
    assert cache.delete("a") is True
    assert cache.delete("a") is False
    cache.clear()
    assert len(cache) == 0
    assert cache.stats.deletes == 2


def test_values_must_be_json_text() -> None:
    cache = MemoryCache()
    with pytest.raises(CacheError) as info:
        cache.set("k", "{not json")
    assert (info.value.backend, info.value.operation, info.value.kind) == (
        "memory",
        "set",
        "payload",
    )
    with pytest.raises(CacheError):
        cache.set("k", '"lone \ud800 surrogate"')  # not encodable as UTF-8
    with pytest.raises(InputError):
        cache.set("k", {"a": 1})  # type: ignore[arg-type]
    with pytest.raises(InputError):
        cache.set("k", b"{}")  # type: ignore[arg-type]
    assert "k" not in cache
    assert cache.stats.errors_by_kind == {"payload": 2}


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), True, "10"])
def test_bad_ttl_is_an_input_error(ttl: object) -> None:
    with pytest.raises(InputError):
        MemoryCache().set("k", "1", ttl=ttl)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["", None, 3, b"k"])
def test_bad_key_is_an_input_error(key: object) -> None:
    cache = MemoryCache()
    with pytest.raises(InputError):
        cache.get(key)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        cache.set(key, "1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("max_entries", {"max_entries": 0}),
        ("max_entries", {"max_entries": 1.5}),
        ("max_entries", {"max_entries": True}),
        ("default_ttl", {"default_ttl": 0}),
        ("default_ttl", {"default_ttl": float("nan")}),
        ("clock", {"clock": 3}),
    ],
)
def test_bad_configuration_names_the_field(field: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        MemoryCache(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_threads_hammering_one_cache_keep_it_consistent() -> None:
    cache = MemoryCache(max_entries=50)
    gets = [0] * 8
    sets = [0] * 8
    failures: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(index: int) -> None:
        rng = random.Random(index)
        barrier.wait()
        try:
            for _ in range(1500):
                key = f"k{rng.randrange(120)}"
                if rng.random() < 0.5:
                    cache.set(key, f'{{"v":{index}}}', ttl=rng.choice([None, 60.0]))
                    sets[index] += 1
                else:
                    value = cache.get(key)
                    assert value is None or value.startswith('{"v":')
                    gets[index] += 1
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures
    stats = cache.stats
    assert stats.hits + stats.misses == sum(gets)
    assert stats.sets == sum(sets)
    assert len(cache) == 50  # 120 keys over thousands of sets: full, never above the bound
    assert stats.evictions > 0


async def test_async_api_shares_the_store() -> None:
    cache = MemoryCache()
    await cache.aset("k", "[1,2]", ttl=30)
    assert await cache.aget("k") == "[1,2]"
    assert cache.get("k") == "[1,2]"
    assert await cache.adelete("k") is True
    assert await cache.aget("k") is None
    assert await cache.aping() is True and cache.healthy
    await cache.aclose()
