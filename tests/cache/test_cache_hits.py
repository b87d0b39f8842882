"""A cache hit that pays for itself (issue 27): what makes it cheap must not make it
wrong.

A hit used to cost as much as the evaluation it saved: a SHA-256 over every
chunk's text for the key, then a JSON parse and a full check of the value. Now
each chunk's part of the key is computed once, a value read again as the same
text is not parsed nor checked again, and the corrected route's evaluations
are cached too. Each shortcut is tested here for what it must keep: a fresh
object per hit, a changed or tampered value checked again, every corrected
evaluation served from the cache on a repeated query. (The timings are in
``benchmarks/evaluator_micro.py --sections cache``, not here.)
"""

from __future__ import annotations

import asyncio

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import (
    CRAG,
    BM25Retriever,
    CacheError,
    Chunk,
    CRAGResult,
    Evaluator,
    MemoryCache,
    RedisCache,
)
from crag_heuristic._router.cached import OpenedEvaluations
from crag_heuristic.sample import load_sample_corpus, sample_retriever
from crag_heuristic.testing import RecordingWebSearcher

QUERIES = [
    "How do honeybees communicate the distance to food?",  # PARTIAL: fused with BM25
    "Why is the sky blue?",  # IRRELEVANT: the web
    "How were Roman roads built?",
]


@pytest.fixture(scope="module")
def parts() -> tuple[object, BM25Retriever]:
    return sample_retriever(), BM25Retriever(load_sample_corpus())


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_repeated_query_evaluates_nothing_on_any_route(
    parts: tuple[object, BM25Retriever], asynchronous: bool
) -> None:
    retriever, lexical = parts
    web = RecordingWebSearcher([("Sky", "https://example.org/sky", "Rayleigh scattering.")])
    crag = CRAG(retriever, web=web, cache=MemoryCache(), lexical=lexical)  # type: ignore[arg-type]
    uncached = CRAG(retriever, web=web, cache=False, lexical=lexical)  # type: ignore[arg-type]

    def run(router: CRAG, query: str) -> CRAGResult:
        return (
            asyncio.run(router.aretrieve(query, 5)) if asynchronous else router.retrieve(query, 5)
        )

    for query in QUERIES:
        first, again, fresh = run(crag, query), run(crag, query), run(uncached, query)
        assert first.strategy.value != "none" or query == QUERIES[2]
        assert again.cache_hit and "evaluate" not in again.timings_ms
        assert "re_evaluate" not in again.timings_ms  # the corrected list's evaluation too
        assert again.evaluation == first.evaluation == fresh.evaluation
        assert [c.id for c in again.chunks] == [c.id for c in fresh.chunks]


def test_each_hit_is_a_copy_of_its_own() -> None:
    chunks = [
        Chunk(id=f"c{i}", text=f"solar panel text {i}", score=0.9 - i / 10, score_kind="cosine")
        for i in range(3)
    ]
    evaluation = Evaluator().evaluate("solar panels", chunks)
    opened = OpenedEvaluations()
    opened.put("k", "the text", evaluation)
    one, two = opened.get("k", "the text"), opened.get("k", "the text")
    assert one == two == evaluation and one is not two
    assert one is not None and two is not None
    one.details["bands"]["relevant"] = -1.0  # what a caller does to its result
    one.chunks[0].features["similarity"] = 99.0  # type: ignore[index]
    three = opened.get("k", "the text")
    assert three == evaluation and three is not None
    assert two.details == evaluation.details
    assert opened.get("k", "another text") is None  # another text: opened again
    assert opened.get("other", "the text") is None


def test_a_value_read_again_as_another_text_is_checked_again(
    redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    """The Redis cache parses a text once; a value that changed under its key is
    parsed (and refused) again."""
    cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    cache.set("k", '{"a": 1}')
    assert cache.get("k") == cache.get("k") == '{"a": 1}'
    admin.set(f"{namespace}:k", b'{"a": 1')  # cut short
    with pytest.raises(CacheError) as info:
        cache.get("k")
    assert info.value.kind == "payload"
    admin.set(f"{namespace}:k", b'{"a": 2}')
    assert cache.get("k") == '{"a": 2}'


def test_a_signed_value_read_again_is_the_text_verified_and_never_a_forged_one(
    redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    """A signed Redis cache opens a payload once: the same bytes read again give the text
    it verified (the same object), never another payload's (a forged one under the same
    key, or the genuine one under another key), and an expired one is refused."""
    from crag_heuristic._cache.signing import Signer

    now = [1_700_000_000.0]
    signer = Signer("a-secret-of-32-characters-long!!", clock=lambda: now[0])
    cache = RedisCache(url=redis_server.url, namespace=namespace, secret=signer)  # type: ignore[arg-type]
    cache.set("k", '{"a": 1}', ttl=60)
    first = cache.get("k")
    assert first == '{"a": 1}' and cache.get("k") is first  # opened once, reused
    genuine = admin.get(f"{namespace}:k")
    assert isinstance(genuine, bytes)
    forged = genuine.replace(b'{"a": 1}', b'{"a": 2}')
    admin.set(f"{namespace}:k", forged)
    with pytest.raises(CacheError, match="does not match") as info:
        cache.get("k")
    assert info.value.kind == "signature"
    admin.set(f"{namespace}:other", genuine)  # moved to another key: signed for "k" only
    with pytest.raises(CacheError, match="does not match"):
        cache.get("other")
    admin.set(f"{namespace}:k", genuine)
    assert cache.get("k") == '{"a": 1}'
    assert cache.get("k") is cache.get("k")
    now[0] += 61  # past its expiry: the same bytes, remembered, are refused
    with pytest.raises(CacheError, match="expired"):
        cache.get("k")
    with pytest.raises(CacheError, match="expired"):
        asyncio.run(cache.aget("k"))
