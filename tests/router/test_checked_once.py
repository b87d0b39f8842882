"""The query is checked once, at the door it comes in by, and trusted inside.

Every route of the router (RELEVANT, PARTIAL with expansion and a lexical
retriever, IRRELEVANT with the web, a cache, a cascade's grader) runs on the
real FAISS index of the sample corpus with the one check counted: the user's
query is checked exactly once, and so is each query the flow makes (expanded,
rewritten for the web). What a user gets back holds plain strings.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    Evaluator,
    InvalidQueryError,
    MemoryCache,
    Strategy,
)
from crag_heuristic._cache.keys import evaluation_key, grade_key, web_key
from crag_heuristic._checks import CheckedQuery, check_query
from crag_heuristic.expansion import PRFExpander, SynonymExpander
from crag_heuristic.grading import Cascade, Escalation
from crag_heuristic.refinement import refine
from crag_heuristic.testing import RecordingWebSearcher, StaticExpander
from crag_heuristic.web import keyword_query

QUERY = "How do honeybees communicate the distance to food?"
WEB = [("Bee dance", "https://example.org/bees", "The waggle dance encodes distance.")]


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What the one check was asked to check, in order (the real check still runs)."""
    seen: list[object] = []
    check = CheckedQuery.__new__

    def counting(cls: type[CheckedQuery], query: object) -> CheckedQuery:
        seen.append(query)
        return check(cls, query)

    monkeypatch.setattr(CheckedQuery, "__new__", counting)
    return seen


class Grader:
    """A cascade grader: P(relevant) from a keyword."""

    fingerprint = "waggle"

    def grade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
        return [0.9 if "waggle" in chunk.text.lower() else 0.1 for chunk in chunks]


def _forced(relevant: float, partial: float) -> Evaluator:
    return Evaluator(
        Evaluator().config.replace(thresholds={"relevant": relevant, "partial": partial})
    )


ROUTES = {
    "relevant": (_forced(0.0, 0.0), Strategy.NONE),
    "partial": (_forced(1.0, 0.0), Strategy.QUERY_EXPANSION),
    "irrelevant": (_forced(1.0, 1.0), Strategy.WEB_SEARCH),
}


def _router(retriever: Any, bm25: Any, evaluator: Evaluator, **parts: Any) -> CRAG:
    return CRAG(
        retriever,
        evaluator,
        expander=StaticExpander(["waggle dance distance", "bees nectar location"]),
        lexical=bm25,
        web=RecordingWebSearcher(WEB),
        cache=MemoryCache(),
        config={"expand_on": "both"},
        **parts,
    )


def _each_once(seen: list[object], query: str) -> None:
    counts = Counter(str(value) for value in seen)
    assert sum(1 for value in seen if value is query) == 1, seen
    assert counts[query] == 1 and max(counts.values()) == 1, counts


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_query_through_the_router_is_checked_once(
    route: str, retriever: Any, bm25: Any, checked: list[object]
) -> None:
    evaluator, strategy = ROUTES[route]
    crag = _router(retriever, bm25, evaluator)
    query = "".join(QUERY)  # an object of its own, told apart by identity
    result = crag.retrieve(query, 5)
    assert result.strategy is strategy
    _each_once(checked, query)
    expected = {query, *result.expanded_queries} | ({result.web.query} - {None})
    assert {str(value) for value in checked} == expected  # what the flow made, once each

    checked.clear()
    again = crag.retrieve(query, 5)  # the cache answers: still one check
    assert again.cache_hit
    _each_once(checked, query)

    checked.clear()
    asyncio.run(crag.aretrieve(query, 5))
    _each_once(checked, query)
    checked.clear()
    events = list(crag.stream(query, 5))
    _each_once(checked, query)
    json.dumps([event.to_dict() for event in events])


def test_a_query_through_a_cascade_is_checked_once(
    retriever: Any, bm25: Any, checked: list[object]
) -> None:
    everything = Escalation(band=(0.0, 1.0), budget=1.0)
    crag = _router(retriever, bm25, ROUTES["partial"][0], grader=Grader(), escalation=everything)
    query = "".join(QUERY)
    assert crag.retrieve(query, 5).cascade is not None
    assert sum(1 for value in checked if value is query) == 1
    chunks = retriever.search(QUERY, 5)
    cascade = Cascade(None, Grader(), everything, cache=MemoryCache())
    checked.clear()
    assert cascade.evaluate(query, chunks).report.escalated
    assert checked == [query]
    checked.clear()
    asyncio.run(cascade.aevaluate(query, chunks))
    assert checked == [query]


@pytest.mark.parametrize("bad", ["", " \n ", None, 3, b"bees"])
def test_a_checked_query_is_trusted_and_a_bad_one_refused_at_every_door(
    bad: Any, retriever: Any, bm25: Any
) -> None:
    query = check_query(QUERY)
    assert check_query(query) is query and type(query) is CheckedQuery
    with pytest.raises(AttributeError):  # it holds nothing but its text
        query.extra = 1  # type: ignore[attr-defined]
    chunks = retriever.search(QUERY, 3)
    crag = _router(retriever, bm25, ROUTES["partial"][0])
    cascade = Cascade(None, Grader(), Escalation(band=(0.0, 1.0), budget=1.0))
    doors: list[Callable[[], object]] = [
        lambda: crag.retrieve(bad),
        lambda: asyncio.run(crag.aretrieve(bad)),
        lambda: crag.stream(bad),
        lambda: crag.astream(bad),
        lambda: Evaluator().evaluate(bad, chunks),
        lambda: Evaluator().refine(bad, chunks),
        lambda: refine(bad, chunks),
        lambda: keyword_query(bad),
        lambda: SynonymExpander().expand(bad),
        lambda: PRFExpander().expand(bad, chunks=chunks),
        lambda: retriever.search(bad, 3),
        lambda: bm25.search(bad, 3),
        lambda: cascade.evaluate(bad, chunks),
        lambda: evaluation_key(bad, chunks, config_fingerprint="c"),
        lambda: web_key(bad, 5, searcher_fingerprint="s"),
        lambda: grade_key(bad, chunks[0], grader_fingerprint="g"),
    ]
    for door in doors:
        with pytest.raises(InvalidQueryError):
            door()


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_what_a_user_gets_back_holds_plain_strings(route: str, retriever: Any, bm25: Any) -> None:
    crag = _router(retriever, bm25, ROUTES[route][0])
    for result in (crag.retrieve(QUERY, 5), asyncio.run(crag.aretrieve(QUERY, 5))):
        assert type(result.query) is str and result.query == QUERY
        assert all(type(q) is str for q in result.expanded_queries)
        assert result.web.query is None or type(result.web.query) is str
    for event in crag.stream(QUERY, 5):
        _plain(event.to_dict())


def _plain(value: Any) -> None:
    """No checked query anywhere in a payload."""
    assert not isinstance(value, CheckedQuery)
    if isinstance(value, dict):
        for item in value.values():
            _plain(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _plain(item)


def test_a_checked_query_is_its_text_to_hashes_json_and_cache_keys() -> None:
    query = check_query(QUERY)
    assert query == QUERY and hash(query) == hash(QUERY) and str(query) == QUERY
    assert json.dumps({"q": query}) == json.dumps({"q": QUERY})
    assert type(str(query)) is str and type(query.lower()) is str
    chunks = [Chunk(id="a", text="bees dance", score=0.5, score_kind="cosine")]
    assert evaluation_key(query, chunks, config_fingerprint="c") == evaluation_key(
        QUERY, chunks, config_fingerprint="c"
    )
    assert web_key(query, 5, searcher_fingerprint="s") == web_key(
        QUERY, 5, searcher_fingerprint="s"
    )
    assert grade_key(query, chunks[0], grader_fingerprint="g") == grade_key(
        QUERY, chunks[0], grader_fingerprint="g"
    )
