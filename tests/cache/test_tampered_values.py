"""Cache values are untrusted input: every kind of tampered value in a real Redis is
flagged, recomputed and overwritten, in the sync and the async router (issue 18).

Each case stores a good value through the router, edits it in Redis as someone
with access to the server could, and queries again: the router must not raise,
must not serve the edited value (``cache_hit`` / ``web_cache_hit`` false, the
grader asked again), must say so (``cache_error``), and must leave the entry
repaired: the next query is a clean hit.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from typing import Any

import pytest
import redis
from crag_testkit import RedisServer

from crag_heuristic import (
    CRAG,
    Chunk,
    CRAGResult,
    Evaluator,
    EvaluatorConfig,
    RedisCache,
)
from crag_heuristic._retrievers.faiss import FaissRetriever
from crag_heuristic._sample import sample_retriever
from crag_heuristic.grading import Escalation
from crag_heuristic.testing import RecordingWebSearcher

QUERY = "How do honeybees communicate the distance to food?"
OTHER_QUERY = "Why is the sky blue?"
WEB = [
    ("Bee dance", "https://example.org/bees", "The waggle dance encodes distance."),
    ("Round dance", "https://example.org/round", "Bees dance in circles near the hive."),
]
BIG = "__BIG__"  # replaced by a number too long for Python to read as a float

Tamper = Callable[[dict[str, Any], "Context"], bytes | None]


class Context:
    """What a tamper may use: the admin client, the entry's key, other routers' entries."""

    def __init__(self, admin: redis.Redis, key: str, other: dict[str, bytes]) -> None:
        self.admin = admin
        self.key = key
        self.other = other


def dumped(data: Any) -> bytes:
    text = json.dumps(data)  # allow_nan: NaN is written as the bare word NaN
    return text.replace(f'"{BIG}"', "9" * 5000).encode()


def on_value(change: Callable[[Any], Any]) -> Tamper:
    """Edit the stored value (a copy) with ``change``, keeping its seal (the stored
    JSON is the value itself in the layout before schema 2)."""

    def tamper(stored: Any, ctx: Context) -> bytes | None:
        copy = json.loads(json.dumps(stored))
        sealed = isinstance(copy, dict) and copy.keys() == {"key", "value"}
        value = copy["value"] if sealed else copy
        replaced = change(value)
        if replaced is not None:
            value = replaced
        return dumped({**copy, "value": value} if sealed else value)

    return tamper


def raw(data: bytes) -> Tamper:
    return lambda sealed, ctx: data


def wrong_type(sealed: dict[str, Any], ctx: Context) -> bytes | None:
    ctx.admin.delete(ctx.key)
    ctx.admin.rpush(ctx.key, "x")  # a Redis list where a string belongs
    return None


def from_other(name: str) -> Tamper:
    """Another entry's stored value (well formed, made for another key)."""
    return lambda sealed, ctx: ctx.other[name]


def setter(path: Sequence[Any], value: Any) -> Callable[[Any], Any]:
    def change(data: Any) -> None:
        for step in path[:-1]:
            data = data[step]
        data[path[-1]] = value

    return change


COMMON: dict[str, Tamper] = {
    "not-json-pickle": raw(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01."),
    "broken-json": raw(b'{"key": "'),
    "not-utf8": raw(b"\xff\xfe\x00"),
    "empty": raw(b""),
    "null": raw(b"null"),
    "deep-nesting": raw(b"[" * 100_000 + b"]" * 100_000),
    "redis-list": wrong_type,
    "unsealed": lambda sealed, ctx: dumped(sealed["value"]),  # the layout before schema 2
    "sealed-for-another-key": lambda sealed, ctx: dumped({**sealed, "key": sealed["key"] + "x"}),
    "seal-with-extra-field": lambda sealed, ctx: dumped({**sealed, "by": "me"}),
}

EVALUATION: dict[str, Tamper] = {
    **COMMON,
    "signals-empty-list": on_value(setter(["signals"], [])),
    "chunk-features-list": on_value(setter(["chunks", 0, "features"], [1])),
    "score-7": on_value(setter(["score"], 7)),
    "score-nan": on_value(setter(["score"], float("nan"))),
    "score-inf": on_value(setter(["score"], float("inf"))),
    "score-string": on_value(setter(["score"], "0.99")),
    "score-bool": on_value(setter(["score"], True)),
    "score-401-digits": on_value(setter(["score"], 10**400)),
    "score-5000-digits": on_value(setter(["score"], BIG)),
    "verdict-unknown": on_value(setter(["verdict"], "excellent")),
    "verdict-against-score": on_value(
        lambda ev: {**ev, "verdict": "relevant" if ev["verdict"] != "relevant" else "irrelevant"}
    ),
    "bands-moved": on_value(
        lambda ev: {
            **ev,
            "verdict": "relevant",
            "details": {**ev["details"], "bands": {"relevant": 0.0, "partial": 0.0}},
        }
    ),
    "no-grades-for-ten-chunks": on_value(setter(["chunks"], [])),
    "grades-not-a-list": on_value(setter(["chunks"], {"0": 1})),
    "one-grade-missing": on_value(lambda ev: {**ev, "chunks": ev["chunks"][:-1]}),
    "foreign-chunk-ids": on_value(
        lambda ev: {**ev, "chunks": [{**g, "chunk_id": "x" + g["chunk_id"]} for g in ev["chunks"]]}
    ),
    "grades-reordered": on_value(lambda ev: {**ev, "chunks": ev["chunks"][::-1]}),
    "grade-score-minus": on_value(setter(["chunks", 0, "score"], -0.5)),
    "grade-verdict-against-score": on_value(
        lambda ev: {
            **ev,
            "chunks": [
                {**g, "verdict": "relevant" if g["verdict"] != "relevant" else "irrelevant"}
                for g in ev["chunks"]
            ],
        }
    ),
    "grade-similarity-2": on_value(setter(["chunks", 0, "similarity"], 2.0)),
    "grade-signal-nan": on_value(setter(["chunks", 0, "signals", "keyword_overlap"], float("nan"))),
    "grade-feature-unknown": on_value(setter(["chunks", 0, "features", "nope"], 0.5)),
    "grade-feature-huge": on_value(setter(["chunks", 0, "features", "keyword_overlap"], 10**400)),
    "grade-feature-string": on_value(setter(["chunks", 0, "features", "keyword_overlap"], "x")),
    "grade-extra-field": on_value(setter(["chunks", 0, "extra"], 1)),
    "grade-not-an-object": on_value(setter(["chunks", 0], 0.5)),
    "signal-missing": on_value(lambda ev: {**ev, "signals": {"keyword_overlap": 0.5}}),
    "reasoning-number": on_value(setter(["reasoning"], 5)),
    "details-list": on_value(setter(["details"], [])),
    "field-missing": on_value(lambda ev: {k: v for k, v in ev.items() if k != "profile"}),
    # the same bands, another profile's name: only the profile check tells it apart
    "profile-renamed": on_value(setter(["profile"], "another-profile")),
    "value-a-list": on_value(lambda ev: [ev]),
    "another-profiles-evaluation": from_other("synapse-under-this-key"),
    "another-profiles-entry": from_other("synapse"),
    "an-all-evidence-entry": from_other("all-evidence"),
    "another-querys-entry": from_other("other-query"),
}


@pytest.fixture(scope="module")
def retriever() -> FaissRetriever:
    sample: FaissRetriever = sample_retriever()
    return sample


BOTH_ROUTERS = pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])


def run(crag: CRAG, asynchronous: bool, query: str = QUERY) -> CRAGResult:
    if asynchronous:
        return asyncio.run(crag.aretrieve(query, 10))
    return crag.retrieve(query, 10)


def entries(admin: redis.Redis, namespace: str, kind: str) -> dict[str, bytes]:
    found = {}
    for name in admin.scan_iter(match=f"{namespace}:*:{kind}:*"):
        value = admin.get(name)
        assert isinstance(value, bytes)
        found[name.decode()] = value
    return found


def only_entry(admin: redis.Redis, namespace: str, kind: str) -> tuple[str, bytes]:
    [(key, value)] = entries(admin, namespace, kind).items()
    return key, value


@pytest.fixture(scope="module")
def module_admin(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client(socket_timeout=5, socket_connect_timeout=5)
    yield client
    client.close()


def stored_by(
    crag: Callable[[RedisCache], CRAG],
    server: RedisServer,
    admin: redis.Redis,
    kind: str,
    query: str = QUERY,
) -> bytes:
    """The one ``kind`` entry a router stores for ``query`` (removed again)."""
    space = f"tamper-others-{os.getpid()}"
    run(crag(RedisCache(url=server.url, namespace=space, unsigned="allow")), False, query)
    key, value = only_entry(admin, space, kind)
    admin.delete(key)
    return value


@pytest.fixture(scope="module")
def other_evaluations(
    retriever: FaissRetriever, redis_server: RedisServer, module_admin: redis.Redis
) -> dict[str, bytes]:
    """Entries that other routers stored: another profile, all evidence, another query."""

    def by(evaluator: Evaluator, query: str = QUERY) -> bytes:
        return stored_by(
            lambda cache: CRAG(retriever, evaluator, cache=cache),
            redis_server,
            module_admin,
            "eval",
            query,
        )

    return {
        "synapse": by(Evaluator("synapse")),
        "all-evidence": by(Evaluator(all_evidence=True)),
        "other-query": by(Evaluator(), OTHER_QUERY),
    }


def rerun_tampered(
    crag: CRAG, asynchronous: bool, tamper: Tamper, ctx: Context, good: bytes, what: str
) -> CRAGResult:
    """Apply ``tamper`` to the entry ``ctx.key`` (holding ``good``), run the query
    again: it must not raise, and must flag the refused ``what``."""
    tampered = tamper(json.loads(good), ctx)
    if tampered is not None:
        ctx.admin.set(ctx.key, tampered)
    again = run(crag, asynchronous)
    assert again.cache_error is not None and again.cache_error.startswith("CacheError: ")
    assert f"a cached {what} was refused: recomputed and overwritten" in again.notes
    return again


def seal_under(key: str, stored: bytes) -> bytes:
    """``stored``'s value sealed with the key of ``key`` (a forged seal)."""
    plain_key = key.split(":", 1)[1]  # without the RedisCache namespace
    return json.dumps({"key": plain_key, "value": json.loads(stored)["value"]}).encode()


@BOTH_ROUTERS
@pytest.mark.parametrize("case", sorted(EVALUATION))
def test_a_tampered_evaluation_is_flagged_recomputed_and_overwritten(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    other_evaluations: dict[str, bytes],
    case: str,
    asynchronous: bool,
) -> None:
    crag = CRAG(
        retriever, cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    )
    first = run(crag, asynchronous)
    assert first.cache_hit is False and first.cache_error is None
    key, good = only_entry(admin, namespace, "eval")
    assert len(first.initial_evaluation.chunks) == 10
    other = dict(other_evaluations)
    other["synapse-under-this-key"] = seal_under(key, other["synapse"])
    ctx = Context(admin, key, other)
    again = rerun_tampered(crag, asynchronous, EVALUATION[case], ctx, good, "evaluation")
    assert again.cache_hit is False  # the edited value was not used
    assert again.initial_evaluation == first.initial_evaluation
    assert admin.get(key) == good  # overwritten with the recomputed value

    clean = run(crag, asynchronous)
    assert clean.cache_hit is True and clean.cache_error is None


def test_all_evidence_and_default_evaluators_never_share_an_entry(
    retriever: FaissRetriever, redis_server: RedisServer, admin: redis.Redis, namespace: str
) -> None:
    def crag(evaluator: Evaluator) -> CRAG:
        return CRAG(
            retriever,
            evaluator,
            cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
        )

    default = crag(Evaluator()).retrieve(QUERY, 10)
    everything = crag(Evaluator(all_evidence=True)).retrieve(QUERY, 10)
    assert everything.cache_hit is False and everything.cache_error is None
    assert len(entries(admin, namespace, "eval")) == 2
    features = {len(g.features) for g in everything.initial_evaluation.chunks}
    assert features != {len(g.features) for g in default.initial_evaluation.chunks}
    assert crag(Evaluator()).retrieve(QUERY, 10).initial_evaluation == default.initial_evaluation


# -- web results ---------------------------------------------------------------------------

WEB_RESULTS: dict[str, Tamper] = {
    **COMMON,
    "not-a-list": on_value(lambda results: {"results": results}),
    "empty-list": on_value(lambda results: []),
    "result-not-an-object": on_value(lambda results: ["https://example.org"]),
    "result-field-missing": on_value(
        lambda results: [{k: v for k, v in results[0].items() if k != "text"}]
    ),
    "result-extra-field": on_value(lambda results: [{**results[0], "rank": 1}]),
    "cosine-score-5": on_value(
        lambda results: [{**results[0], "score": 5.0, "score_kind": "cosine"}]
    ),
    "score-401-digits": on_value(lambda results: [{**results[0], "score": 10**400}]),
    "text-a-number": on_value(lambda results: [{**results[0], "text": 5}]),
    "metadata-a-list": on_value(lambda results: [{**results[0], "metadata": [1]}]),
    "another-querys-entry": from_other("other-query"),
}


def web_router(retriever: FaissRetriever, web: RecordingWebSearcher, cache: RedisCache) -> CRAG:
    """A router that always searches the web; only web results are cached."""
    return CRAG(retriever, irrelevant(), web=web, cache=cache, config={"cache_evaluations": False})


def irrelevant() -> Evaluator:
    return Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": 1.0, "partial": 1.0}
        )
    )


@pytest.fixture(scope="module")
def other_web(
    retriever: FaissRetriever, redis_server: RedisServer, module_admin: redis.Redis
) -> dict[str, bytes]:
    """The web results another query stored."""
    web = RecordingWebSearcher([("Sky", "https://example.org/sky", "Rayleigh scattering.")])
    value = stored_by(
        lambda cache: web_router(retriever, web, cache),
        redis_server,
        module_admin,
        "web",
        OTHER_QUERY,
    )
    return {"other-query": value}


@BOTH_ROUTERS
@pytest.mark.parametrize("case", sorted(WEB_RESULTS))
def test_tampered_web_results_are_flagged_searched_again_and_overwritten(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    other_web: dict[str, bytes],
    case: str,
    asynchronous: bool,
) -> None:
    web = RecordingWebSearcher(WEB)
    crag = web_router(
        retriever, web, RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow")
    )
    first = run(crag, asynchronous)
    assert first.web_search_used and first.web_cache_hit is False
    key, good = only_entry(admin, namespace, "web")
    ctx = Context(admin, key, other_web)
    again = rerun_tampered(crag, asynchronous, WEB_RESULTS[case], ctx, good, "web results")
    assert again.web_cache_hit is False and len(web.calls) == 2  # searched again
    assert again.chunks == first.chunks and again.web_search_used
    assert admin.get(key) == good

    clean = run(crag, asynchronous)
    assert clean.web_cache_hit is True and clean.cache_error is None and len(web.calls) == 2


# -- a cascade grader's answers ------------------------------------------------------------------

GRADES: dict[str, Tamper] = {
    **COMMON,
    "grade-7": on_value(lambda grade: 7),
    "grade-minus": on_value(lambda grade: -0.1),
    "grade-nan": on_value(lambda grade: float("nan")),
    "grade-string": on_value(lambda grade: "0.5"),
    "grade-bool": on_value(lambda grade: True),
    "grade-list": on_value(lambda grade: [grade]),
    "grade-401-digits": on_value(lambda grade: 10**400),
    "grade-5000-digits": on_value(lambda grade: BIG),
    "another-chunks-grade": from_other("another-chunk"),
}


class Counting:
    """A grader that counts the chunks it is asked about."""

    fingerprint = "counting"

    def __init__(self) -> None:
        self.asked: list[int] = []

    def grade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
        self.asked.append(len(chunks))
        return [0.9 if "dance" in c.text.lower() else 0.2 for c in chunks]


@BOTH_ROUTERS
@pytest.mark.parametrize("case", sorted(GRADES))
def test_a_tampered_grade_is_flagged_asked_again_and_overwritten(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    case: str,
    asynchronous: bool,
) -> None:
    grader = Counting()
    crag = CRAG(
        retriever,
        cache=RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
        grader=grader,
        escalation=Escalation(band=(0.0, 1.0), budget=1.0),
        config={"cache_evaluations": False},
    )
    first = run(crag, asynchronous)
    assert first.cascade is not None and len(first.cascade.grades) == 10
    stored = entries(admin, namespace, "grade")
    assert len(stored) == 10
    (key, good), (_, another) = sorted(stored.items())[:2]
    ctx = Context(admin, key, {"another-chunk": another})
    again = rerun_tampered(crag, asynchronous, GRADES[case], ctx, good, "grade")
    assert again.cascade is not None and len(again.cascade.cache_hits) == 9
    assert grader.asked == [10, 1]  # the tampered answer was asked again
    assert again.cascade.grades == first.cascade.grades
    assert admin.get(key) == good

    clean = run(crag, asynchronous)
    assert clean.cascade is not None and len(clean.cascade.cache_hits) == 10
    assert clean.cache_error is None and grader.asked == [10, 1]


def test_every_kind_of_value_has_its_cases() -> None:
    assert len(EVALUATION) >= 40 and len(WEB_RESULTS) >= 20 and len(GRADES) >= 19


class DatedWeb(RecordingWebSearcher):
    """Web results whose metadata holds a date: valid chunks, not JSON."""

    def search(self, query: str, max_results: int = 5) -> list[Chunk]:
        return [c.replace(metadata={"fetched": date(2024, 5, 1)}) for c in super().search(query)]


@BOTH_ROUTERS
def test_web_results_that_are_not_json_are_used_but_not_cached(
    retriever: FaissRetriever,
    redis_server: RedisServer,
    admin: redis.Redis,
    namespace: str,
    asynchronous: bool,
) -> None:
    crag = web_router(
        retriever,
        DatedWeb(WEB),
        RedisCache(url=redis_server.url, namespace=namespace, unsigned="allow"),
    )
    result = run(crag, asynchronous)  # raised TypeError on cab6cc6
    assert result.web_search_used and result.cache_error is not None
    assert "not JSON-serialisable" in result.cache_error
    assert entries(admin, namespace, "web") == {}
