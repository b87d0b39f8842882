"""What a retriever (or a web searcher) hands back is checked at the router's door.

Any iterable of chunks is accepted (a list, a tuple, a generator: materialised
once, a generator's own failure is the retriever's failure); anything else
raises :class:`RetrieverError` naming the retriever on the first retrieval,
and is a note on a re-retrieval (as a failed re-retrieval is). A web searcher
that answers nonsense is a ``web_error``, never a crash.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from crag_heuristic import CRAG, Chunk, Evaluator, RetrieverError, ScoreKind, Strategy
from crag_heuristic.testing import ListRetriever, RecordingWebSearcher, StaticExpander

QUERY = "How do honeybees communicate the distance to food?"


def chunks(n: int = 3) -> list[Chunk]:
    return [
        Chunk(id=f"c{i}", text=f"bees dance number {i}", score=0.9 - i / 10,
              score_kind=ScoreKind.COSINE)
        for i in range(n)
    ]  # fmt: skip


class Returns:
    """A retriever answering ``value`` (a callable makes a fresh one per call)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def search(self, query: str, k: int) -> Any:
        return self.value() if callable(self.value) else self.value


def run_both(crag: CRAG, k: int = 3) -> list[Any]:
    return [crag.retrieve(QUERY, k), asyncio.run(crag.aretrieve(QUERY, k))]


@pytest.mark.parametrize(
    "make",
    [
        list,
        tuple,
        lambda cs: (c for c in cs),
        lambda cs: iter(cs),
    ],
    ids=["list", "tuple", "generator", "iterator"],
)
def test_any_iterable_of_chunks_is_accepted(make: Any, always_relevant: Evaluator) -> None:
    expected = chunks()
    for result in run_both(CRAG(Returns(lambda: make(expected)), always_relevant, cache=False)):
        assert list(result.retrieved) == expected
        assert list(result.chunks) == expected


def test_an_async_generator_is_accepted_by_aretrieve(always_relevant: Evaluator) -> None:
    class AsyncGen:
        async def asearch(self, query: str, k: int) -> AsyncIterator[Chunk]:
            for chunk in chunks():
                yield chunk

    result = asyncio.run(CRAG(AsyncGen(), always_relevant).aretrieve(QUERY, 3))
    assert list(result.retrieved) == chunks()


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (None, "NoneType"),
        (42, "int"),
        ("c0 c1", "str"),
        (b"bytes", "bytes"),
        ({"c0": "text"}, "dict"),
        ([chunks(1)[0], "not a chunk"], "str at position 1"),
        ([None], "NoneType at position 0"),
    ],
    ids=["none", "int", "str", "bytes", "dict", "str-element", "none-element"],
)
def test_anything_else_is_a_retriever_error_naming_it(
    value: Any, what: str, always_relevant: Evaluator
) -> None:
    crag = CRAG(Returns(value), always_relevant)
    with pytest.raises(RetrieverError, match=f"Returns.search returned .*{what}") as sync:
        crag.retrieve(QUERY, 3)
    assert sync.value.retriever == "Returns"
    with pytest.raises(RetrieverError, match=f"Returns.search returned .*{what}") as asyn:
        asyncio.run(crag.aretrieve(QUERY, 3))
    assert asyn.value.retriever == "Returns"


def test_a_generator_that_fails_midway_is_the_retrievers_failure(
    always_relevant: Evaluator,
) -> None:
    def failing() -> Iterator[Chunk]:
        yield chunks(1)[0]
        raise OSError("shard went away")

    crag = CRAG(Returns(failing), always_relevant)
    with pytest.raises(RetrieverError, match=r"Returns\.search failed: OSError: shard went away"):
        crag.retrieve(QUERY, 3)
    with pytest.raises(RetrieverError, match="shard went away"):
        asyncio.run(crag.aretrieve(QUERY, 3))


def test_a_nonsense_re_retrieval_is_a_note(always_partial: Evaluator) -> None:
    first = chunks()

    class NonsenseOnExpansions(ListRetriever):
        def search(self, query: str, k: int) -> Any:
            return super().search(query, k) if query == QUERY else None

    class NonsenseLexical:
        def search(self, query: str, k: int) -> Any:
            return 7

    crag = CRAG(
        NonsenseOnExpansions(first),
        always_partial,
        expander=StaticExpander(["bee waggle"]),
        lexical=NonsenseLexical(),
        cache=False,
    )
    for result in run_both(crag):
        assert list(result.chunks) == first
        notes = " | ".join(result.notes)
        assert re.search(r"NonsenseOnExpansions\.a?search returned NoneType", notes)
        assert "NonsenseLexical.search returned int" in notes
        assert "every re-retrieval failed" in notes


@pytest.mark.parametrize(
    ("value", "what"),
    [(None, "NoneType"), (3, "int"), ([object()], "object at position 0")],
    ids=["none", "int", "object-element"],
)
def test_a_nonsense_web_answer_is_a_web_error(
    value: Any, what: str, always_irrelevant: Evaluator
) -> None:
    class OddWeb(RecordingWebSearcher):
        def search(self, query: str, max_results: int = 5) -> Any:
            return value

    crag = CRAG(ListRetriever(chunks()), always_irrelevant, web=OddWeb(), cache=False)
    for result in run_both(crag):
        assert result.web_error is not None
        assert re.search(rf"OddWeb\.a?search returned {what}, not a", result.web_error)
        assert result.strategy in (Strategy.WEB_SEARCH, Strategy.QUERY_EXPANSION)
        assert result.chunks


def test_web_chunks_must_come_from_http_pages(always_irrelevant: Evaluator) -> None:
    """Whatever searcher is plugged in, a web chunk whose source is not an http(s) URL
    is dropped, counted and noted."""
    web = RecordingWebSearcher(
        [
            ("Local file", "file:///etc/hosts", "127.0.0.1 localhost"),
            ("FTP", "ftp://example.org/x", "a file"),
            ("Bees", "https://example.org/bees", "The waggle dance encodes distance."),
        ]
    )
    crag = CRAG(ListRetriever(chunks()), always_irrelevant, web=web, cache=False)
    for result in run_both(crag):
        sources = [c.source for c in result.chunks if c.score_kind is ScoreKind.WEB]
        assert sources == ["https://example.org/bees"]
        assert result.counts["web_dropped"] == 2 and result.counts["web_results"] == 1
        assert "dropped 2 web result(s) whose source is not an http(s) URL" in result.notes
