"""Forged cache values (issue 26): a well-formed lie in a shared Redis is refused.

The shape checks of ``tests/cache/test_tampered_values.py`` refuse junk; they
cannot refuse a value that is well formed and sealed with the right key, written
by anyone who can reach the server. These tests forge such values in a real
Redis: an IRRELEVANT evaluation rewritten as RELEVANT 0.99, a grader's answer
raised to 0.99, 2,000 web results under a ``max_results=5`` key, a
``javascript:`` source. Without a secret the forged evaluation is served (the
threat, shown); with ``CRAG(cache_secret=...)``, or a secret on the
``RedisCache`` / ``TieredCache`` itself, every forged value is refused,
recomputed, overwritten and flagged on the result; the web bounds hold with or
without a secret.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Callable
from typing import Any

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import (
    CRAG,
    CacheError,
    ConfigError,
    CRAGResult,
    RedisCache,
    Verdict,
)
from crag_heuristic._cache.signing import Signer
from crag_heuristic._retrievers.faiss import FaissRetriever
from crag_heuristic._router.cached import seal
from crag_heuristic._sample import sample_retriever
from crag_heuristic.cache import MemoryCache, TieredCache, UnsignedStoreWarning
from crag_heuristic.grading import Escalation
from crag_heuristic.testing import RecordingWebSearcher

SECRET = "a-secret-of-32-characters-long!!"
OTHER_SECRET = "another-secret-of-32-characters!"
IRRELEVANT_QUERY = "Why is the sky blue?"
WEB = [
    ("Sky", "https://example.org/sky", "Rayleigh scattering makes the sky blue."),
    ("Blue", "https://example.org/blue", "Short wavelengths scatter more."),
]
BOTH = pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])


@pytest.fixture(scope="module")
def retriever() -> FaissRetriever:
    sample: FaissRetriever = sample_retriever()
    return sample


def run(crag: CRAG, asynchronous: bool, query: str = IRRELEVANT_QUERY) -> CRAGResult:
    if asynchronous:
        return asyncio.run(crag.aretrieve(query, 10))
    return crag.retrieve(query, 10)


def only(admin: redis.Redis, namespace: str, kind: str) -> tuple[str, bytes]:
    [name] = list(admin.scan_iter(match=f"{namespace}:*:{kind}:*"))
    value = admin.get(name)
    assert isinstance(value, bytes)
    return name.decode(), value


def plain_key(stored_name: str) -> str:
    """The router's key of a Redis entry (without the RedisCache namespace)."""
    return stored_name.split(":", 1)[1]


def inner(stored: bytes) -> dict[str, Any]:
    """The sealed ``{key, value}`` of a stored entry, signed or not."""
    data: dict[str, Any] = json.loads(stored)
    return data["v"] if "mac" in data else data


def as_relevant(evaluation: dict[str, Any]) -> dict[str, Any]:
    """An IRRELEVANT evaluation rewritten as RELEVANT 0.99: every check on its shape
    passes (the verdict follows from the score and the configuration's bands)."""
    return {**evaluation, "verdict": "relevant", "score": 0.99}


def flagged(result: CRAGResult, what: str) -> bool:
    return (
        result.cache_error is not None
        and f"a cached {what} was refused: recomputed and overwritten" in result.notes
    )


# -- a forged evaluation ------------------------------------------------------------------


def forge_evaluation(admin: redis.Redis, name: str, stored: bytes, mode: str) -> None:
    sealed = inner(stored)
    forged = {**sealed, "value": as_relevant(sealed["value"])}
    text = json.dumps(forged, separators=(",", ":"))
    if mode == "signed-with-another-secret":
        text = Signer(OTHER_SECRET).sign(plain_key(name), text)
    elif mode == "signature-of-the-original":
        original = json.loads(stored)
        text = (
            '{"mac":"' + original["mac"] + '","exp":' + str(original["exp"]) + ',"v":' + text + "}"
        )
    admin.set(name, text.encode())


def test_without_a_secret_a_well_formed_forgery_is_served(
    retriever: FaissRetriever, redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    """The threat: the shape checks cannot tell a well-formed lie (and the cache says
    so when it is made)."""
    with pytest.warns(UnsignedStoreWarning, match="RedisCache has no secret"):
        cache = RedisCache(url=redis_server.url, namespace=namespace)
    crag = CRAG(retriever, cache=cache)
    first = crag.retrieve(IRRELEVANT_QUERY, 10)
    assert first.initial_evaluation.verdict is Verdict.IRRELEVANT
    name, stored = only(admin, namespace, "eval")
    forge_evaluation(admin, name, stored, "unsigned")
    lied = crag.retrieve(IRRELEVANT_QUERY, 10)
    assert lied.cache_hit and lied.cache_error is None
    assert lied.initial_evaluation.verdict is Verdict.RELEVANT and lied.strategy.value == "none"


@BOTH
@pytest.mark.parametrize(
    "mode", ["unsigned", "signed-with-another-secret", "signature-of-the-original"]
)
def test_a_forged_evaluation_is_refused_recomputed_and_flagged(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    mode: str,
    asynchronous: bool,
) -> None:
    cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    crag = CRAG(retriever, cache=cache, cache_secret=SECRET)  # the router signs
    first = run(crag, asynchronous)
    assert first.initial_evaluation.verdict is Verdict.IRRELEVANT and first.cache_error is None
    name, stored = only(admin, namespace, "eval")
    assert json.loads(stored).keys() == {"mac", "exp", "v"}  # signed
    forge_evaluation(admin, name, stored, mode)

    again = run(crag, asynchronous)
    assert again.cache_hit is False and flagged(again, "evaluation")
    assert again.cache_error is not None
    assert "not signed" in again.cache_error or "does not match" in again.cache_error
    assert again.initial_evaluation == first.initial_evaluation  # recomputed: IRRELEVANT
    assert admin.get(name) == stored  # overwritten with the signed original
    clean = run(crag, asynchronous)
    assert clean.cache_hit is True and clean.cache_error is None


def test_a_secret_on_the_redis_cache_alone_refuses_the_forgery_too(
    retriever: FaissRetriever, redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    cache = RedisCache(url=redis_server.url, namespace=namespace, secret=SECRET)
    crag = CRAG(retriever, cache=cache)  # no cache_secret: the backend signs
    first = crag.retrieve(IRRELEVANT_QUERY, 10)
    name, stored = only(admin, namespace, "eval")
    value = json.loads(stored)
    assert value.keys() == {"mac", "exp", "v"}
    forged = {**value["v"], "value": as_relevant(value["v"]["value"])}
    admin.set(name, json.dumps(forged).encode())  # a well-formed, unsigned evaluation
    again = crag.retrieve(IRRELEVANT_QUERY, 10)
    assert again.cache_hit is False and flagged(again, "evaluation")
    assert again.cache_error is not None and "not signed" in again.cache_error
    assert again.initial_evaluation == first.initial_evaluation
    assert cache.stats.errors_by_kind == {"signature": 1}
    assert crag.retrieve(IRRELEVANT_QUERY, 10).cache_hit


# -- a forged grade -----------------------------------------------------------------------


class Grader:
    fingerprint = "forgery-test-grader"

    def __init__(self) -> None:
        self.asked = 0

    def grade(self, query: str, chunks: Any) -> list[float]:
        self.asked += len(chunks)
        return [0.1] * len(chunks)


@BOTH
def test_a_forged_grade_is_refused_and_the_grader_asked_again(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    asynchronous: bool,
) -> None:
    grader = Grader()
    crag = CRAG(
        retriever,
        cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
        grader=grader,
        escalation=Escalation(band=(0.0, 1.0), budget=1.0),
        config={"cache_evaluations": False},
        cache_secret=SECRET,
    )
    first = run(crag, asynchronous)
    assert first.cascade is not None and grader.asked == 10
    names = sorted(n.decode() for n in admin.scan_iter(match=f"{namespace}:*:grade:*"))
    for name in names:  # every answer raised to 0.99, sealed with its key, unsigned
        admin.set(name, seal(plain_key(name), 0.99).encode())
    again = run(crag, asynchronous)
    assert again.cascade is not None and again.cascade.cache_hits == ()
    assert grader.asked == 20 and flagged(again, "grade")
    assert again.cascade.grades == first.cascade.grades


# -- web results: bounded by the key, http(s) only, signed --------------------------------


def web_router(retriever: FaissRetriever, cache: Any, **kwargs: Any) -> CRAG:
    return CRAG(
        retriever,
        web=kwargs.pop("web", None) or RecordingWebSearcher(WEB),
        cache=cache,
        config={"cache_evaluations": False, "web_max_results": 5},
        **kwargs,
    )


def many_results(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    one = value[0]
    return [
        {**one, "id": f"web:{i:016x}", "source": f"https://example.org/{i}"} for i in range(2000)
    ]


def javascript_source(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**value[0], "source": "javascript:alert(document.cookie)"}, *value[1:]]


WEB_FORGERIES: dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = {
    "2000-results-under-a-key-of-5": many_results,
    "a-javascript-source": javascript_source,
}


@BOTH
@pytest.mark.parametrize("secret", [None, SECRET], ids=["no-secret", "secret"])
@pytest.mark.parametrize("case", sorted(WEB_FORGERIES))
def test_forged_web_results_are_refused_and_searched_again(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    case: str,
    secret: str | None,
    asynchronous: bool,
) -> None:
    web = RecordingWebSearcher(WEB)
    cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    crag = web_router(retriever, cache, web=web, cache_secret=secret)
    first = run(crag, asynchronous)
    assert first.web_search_used and len(web.calls) == 1
    name, stored = only(admin, namespace, "web")
    sealed = inner(stored)
    forged = {**sealed, "value": WEB_FORGERIES[case](sealed["value"])}
    admin.set(name, json.dumps(forged).encode())  # sealed with the right key, unsigned

    again = run(crag, asynchronous)
    assert again.web_cache_hit is False and len(web.calls) == 2 and flagged(again, "web results")
    assert again.chunks == first.chunks and len(again.chunks) <= 5
    assert all(c.source and c.source.startswith("https://") for c in again.chunks)
    assert admin.get(name) == stored


class Generous(RecordingWebSearcher):
    """A searcher that answers more than asked, one result from a ``javascript:`` URL."""

    def search(self, query: str, max_results: int = 5) -> list[Any]:
        self.calls.append((query, max_results))
        found = [
            RecordingWebSearcher([("t", f"https://example.org/{i}", f"sky text {i}")]).search(
                query
            )[0]
            for i in range(12)
        ]
        found = [c.replace(id=f"web-{i}") for i, c in enumerate(found)]
        return [found[0].replace(id="js", source="javascript:alert(1)"), *found]


def test_what_is_cached_is_what_a_read_accepts(
    retriever: FaissRetriever, redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    """A searcher's extra results and non-http sources are dropped before the cache:
    the entry a later read refuses is never written."""
    web = Generous([])
    cache = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    crag = web_router(retriever, cache, web=web)
    first = crag.retrieve(IRRELEVANT_QUERY, 10)
    assert first.web_search_used and first.counts["web_dropped"] == 1
    assert any("returned 12 results for 5 asked" in note for note in first.notes)
    _, stored = only(admin, namespace, "web")
    assert len(inner(stored)["value"]) == 5
    again = crag.retrieve(IRRELEVANT_QUERY, 10)
    assert again.web_cache_hit and again.cache_error is None and again.chunks == first.chunks


# -- the caches' own secret ----------------------------------------------------------------


def test_a_redis_cache_with_a_secret_signs_and_checks_each_value(
    redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    cache = RedisCache(url=redis_server.url, namespace=namespace, secret=SECRET)
    cache.set("k1", '{"a": 1}')
    cache.set("k2", '{"a": 2}')
    assert cache.get("k1") == '{"a": 1}'
    assert asyncio.run(cache.aget("k2")) == '{"a": 2}'
    stored = admin.get(f"{namespace}:k1")
    assert isinstance(stored, bytes) and json.loads(stored)["v"] == {"a": 1}
    cases = {
        "unsigned": b'{"a": 1}',
        "moved-from-another-key": admin.get(f"{namespace}:k2"),
        "edited": stored.replace(b'{"a": 1}', b'{"a": 9}'),
        "bad-mac": b'{"mac":"' + b"z" * 64 + b'","exp":null,"v":{"a":1}}',
        "first-layout": b'{"mac":"' + b"0" * 64 + b'","v":{"a":1}}',
        "short": b'{"mac":"',
        "not-utf8": b"\xff\xfe",
    }
    for case, raw in cases.items():
        assert raw is not None
        admin.set(f"{namespace}:k1", raw)
        with pytest.raises(CacheError) as info:
            cache.get("k1")
        expected = "payload" if case == "not-utf8" else "signature"
        assert info.value.kind == expected and info.value.operation == "get", case
        with pytest.raises(CacheError):
            asyncio.run(cache.aget("k1"))
    other = RedisCache(url=redis_server.url, namespace=namespace, secret=OTHER_SECRET)
    cache.set("k1", '{"a": 1}')
    with pytest.raises(CacheError, match="does not match"):
        other.get("k1")
    assert cache.stats.errors_by_kind["signature"] == 2 * (len(cases) - 1)


def test_a_tiered_cache_with_a_secret_keeps_no_forged_value_in_process(
    redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    far = RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    tiered = TieredCache(far, secret=SECRET, near_kinds=("eval",))
    key = "crag:v0:eval:abc"
    tiered.set(key, '{"x": 1}')
    fresh = TieredCache(far, secret=SECRET, near_kinds=("eval",))  # another process
    assert fresh.get(key) == '{"x": 1}'
    admin.set(f"{namespace}:{key}", b'{"x": 2}')  # forged, unsigned
    another = TieredCache(far, secret=SECRET, near_kinds=("eval",))
    with pytest.raises(CacheError) as info:
        another.get(key)
    assert info.value.kind == "signature"
    assert key not in another.near and another.stats.errors_by_kind == {"signature": 1}


def test_secrets_are_checked_and_never_shown() -> None:
    for short in ("short", b"", "x" * 15):
        for build in (
            lambda s: RedisCache(url="redis://127.0.0.1:1/0", secret=s),
            lambda s: TieredCache(MemoryCache(), secret=s),
            lambda s: CRAG(sample_retriever(), cache_secret=s),
        ):
            with pytest.raises(ConfigError) as info:
                build(short)
            if isinstance(short, str) and short:
                assert short not in str(info.value) and short not in repr(info.value.value)
    with pytest.raises(ConfigError):
        RedisCache(url="redis://127.0.0.1:1/0", secret=12345678901234567890)  # type: ignore[arg-type]
    signer = Signer(SECRET)
    assert SECRET not in repr(signer)
    with pytest.raises(TypeError):
        pickle.dumps(signer)
    crag = CRAG(sample_retriever(), cache_secret=SECRET)
    assert SECRET not in repr(crag) and SECRET not in repr(vars(crag))
