"""Signed values expire (issue 32): a value captured from a shared Redis and written back
after its time to live is refused, like a forged one.

Redis drops an entry when its ``PX`` runs out, but anyone who can write to the server
can write the captured bytes back, with no expiry at all. The expiry inside the signed
envelope is what refuses them then. The clocks here are moved by hand (a ``Signer``
with its own clock), never waited on.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import CRAG, CacheError, CRAGResult, RedisCache, RouterConfig, Verdict
from crag_heuristic._cache.signing import Signer
from crag_heuristic._retrievers.faiss import FaissRetriever
from crag_heuristic._sample import sample_retriever
from crag_heuristic.cache import MemoryCache, TieredCache

SECRET = "a-secret-of-32-characters-long!!"
NOW = 1_700_000_000.0  # seconds since the epoch: the wall clock a signer reads
IRRELEVANT_QUERY = "Why is the sky blue?"
BOTH = pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])


class FakeClock:
    """A clock moved by hand."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def retriever() -> FaissRetriever:
    sample: FaissRetriever = sample_retriever()
    return sample


def run(crag: CRAG, asynchronous: bool) -> CRAGResult:
    if asynchronous:
        return asyncio.run(crag.aretrieve(IRRELEVANT_QUERY, 10))
    return crag.retrieve(IRRELEVANT_QUERY, 10)


def test_the_expiry_is_signed_with_the_value() -> None:
    wall = FakeClock(NOW)
    signer = Signer(SECRET, clock=wall)
    stored = signer.sign("k", '{"a":1}', 60)
    assert json.loads(stored) == {"mac": json.loads(stored)["mac"], "exp": NOW + 60, "v": {"a": 1}}
    assert signer.unseal("k", stored) == '{"a":1}'
    assert signer.remaining(stored) == 60
    moved = stored.replace(str(int(NOW + 60)), str(int(NOW + 10**6)))
    with pytest.raises(ValueError, match="does not match"):
        signer.unseal("k", moved)  # a later expiry written in: the MAC covers it
    wall.advance(60)
    assert signer.unseal("k", stored) == '{"a":1}'  # at its expiry still
    wall.advance(1)
    with pytest.raises(ValueError, match="expired"):
        signer.unseal("k", stored)
    forever = signer.sign("k", '{"a":1}')
    assert json.loads(forever)["exp"] is None and signer.remaining(forever) is None
    wall.advance(10**9)
    assert signer.unseal("k", forever) == '{"a":1}'
    first_layout = '{"mac":"' + "0" * 64 + '","v":{"a":1}}'
    with pytest.raises(ValueError, match="without an expiry"):
        signer.unseal("k", first_layout)
    for junk in ('{"mac":"' + "0" * 64 + '","exp":-5,"v":1}', '{"mac":"x","exp":1,"v":1}', "1"):
        with pytest.raises(ValueError, match="not signed"):
            signer.unseal("k", junk)


@BOTH
def test_a_redis_value_written_back_after_its_ttl_is_refused(
    redis_server: RedisServer, admin: redis.Redis, namespace: str, asynchronous: bool
) -> None:
    wall = FakeClock(NOW)
    cache = RedisCache(
        url=redis_server.url,
        namespace=namespace,
        secret=Signer(SECRET, clock=wall),  # type: ignore[arg-type]
    )
    cache.set("k", '{"a": 1}', ttl=60)
    captured = admin.get(f"{namespace}:k")
    assert isinstance(captured, bytes) and json.loads(captured)["exp"] == NOW + 60
    assert 0 < admin.pttl(f"{namespace}:k") <= 60_000  # Redis drops it itself
    wall.advance(59)
    assert cache.get("k") == '{"a": 1}'
    wall.advance(2)  # Redis dropped it; someone writes the captured bytes back, for ever
    admin.set(f"{namespace}:k", captured)

    def read() -> str | None:
        return asyncio.run(cache.aget("k")) if asynchronous else cache.get("k")

    with pytest.raises(CacheError, match="expired") as info:
        read()
    assert info.value.kind == "signature" and info.value.operation == "get"
    assert cache.stats.errors_by_kind == {"signature": 1}


def test_the_default_ttl_goes_into_the_envelope(
    redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    wall = FakeClock(NOW)
    signer = Signer(SECRET, clock=wall)
    cache = RedisCache(url=redis_server.url, namespace=namespace, secret=signer)  # type: ignore[arg-type]
    cache.set("k", "1")
    assert json.loads(admin.get(f"{namespace}:k") or b"")["exp"] == NOW + 86_400
    forever = RedisCache(
        url=redis_server.url,
        namespace=namespace,
        default_ttl=None,
        secret=signer,  # type: ignore[arg-type]
    )
    forever.set("k", "1")
    assert json.loads(admin.get(f"{namespace}:k") or b"")["exp"] is None


@BOTH
@pytest.mark.parametrize("signs", ["router", "redis-cache"])
def test_an_evaluation_replayed_after_its_ttl_is_refused_and_recomputed(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    signs: str,
    asynchronous: bool,
) -> None:
    """The router's own memo of opened evaluations (a value read again as the same text
    is not opened again) checks the expiry again too."""
    wall = FakeClock(NOW)
    signer = Signer(SECRET, clock=wall)
    if signs == "router":
        cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
        crag = CRAG(retriever, cache=cache, cache_secret=signer)  # type: ignore[arg-type]
    else:
        cache = RedisCache(url=redis_server.url, namespace=namespace, secret=signer)  # type: ignore[arg-type]
        crag = CRAG(retriever, cache=cache)
    ttl = RouterConfig().evaluation_ttl
    first = run(crag, asynchronous)
    assert first.initial_evaluation.verdict is Verdict.IRRELEVANT and not first.cache_hit
    [name] = list(admin.scan_iter(match=f"{namespace}:*:eval:*"))
    captured = admin.get(name)
    assert isinstance(captured, bytes) and json.loads(captured)["exp"] == NOW + ttl
    wall.advance(ttl - 1)
    assert run(crag, asynchronous).cache_hit  # within its time to live: a hit
    wall.advance(2)  # past it: Redis dropped it; the captured bytes are written back
    admin.set(name, captured)
    again = run(crag, asynchronous)
    assert not again.cache_hit and again.cache_error is not None
    assert "expired" in again.cache_error
    assert "a cached evaluation was refused: recomputed and overwritten" in again.notes
    assert again.initial_evaluation == first.initial_evaluation
    rewritten = admin.get(name)
    assert isinstance(rewritten, bytes) and json.loads(rewritten)["exp"] == wall.now + ttl
    assert run(crag, asynchronous).cache_hit


def test_a_tiered_cache_keeps_a_signed_value_in_process_no_longer_than_it_lives(
    redis_server: RedisServer, namespace: str
) -> None:
    wall = FakeClock(NOW)
    ticks = FakeClock(0.0)  # the in-process tier's monotonic clock
    far = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    writer = TieredCache(far, secret=Signer(SECRET, clock=wall), near_kinds=("eval",))  # type: ignore[arg-type]
    key = "crag:v0:eval:abc"
    writer.set(key, '{"x": 1}', ttl=30)
    near = MemoryCache(clock=ticks)
    reader = TieredCache(
        far,
        near=near,
        near_ttl=600,
        secret=Signer(SECRET, clock=wall),  # type: ignore[arg-type]
        near_kinds=("eval",),
    )
    wall.advance(10)
    assert reader.get(key) == '{"x": 1}'  # read from Redis, kept in process for 20 s
    ticks.advance(19)
    assert near.get(key) == '{"x": 1}'
    ticks.advance(2)
    assert near.get(key) is None
