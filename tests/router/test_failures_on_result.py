"""Typed failures on the result, one stage at a time, with real parts that fail: a real
SearXNG client aimed at a closed port, web searchers, graders, parents lookups,
expanders and lexical retrievers that raise. (A real Redis that dies: in
tests/cache/test_cache_failures_on_result.py.)

Each failure is a ``Failure(stage, error)`` with the library's error (the part's own
exception its ``__cause__``); the result's old string flags read the same text as
before (``describe(error)``: ``"Type: message"``, credentials masked)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import faiss
import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    CragError,
    Evaluator,
    EvaluatorConfig,
    Failure,
    FailureStage,
    FaissRetriever,
    InputError,
    ParentLookupError,
    RetrieverError,
    SearxngClient,
    WebOutcome,
    WebSearchConnectionError,
    WebSearchError,
    WebSearchTimeout,
)
from crag_heuristic._redact import describe
from crag_heuristic.events import Done, ParentsExpanded, WebSearched
from crag_heuristic.grading import CallableGrader, Escalation, GraderError
from crag_heuristic.sample import LsaEmbedder
from crag_heuristic.testing import RecordingWebSearcher, StaticExpander

QUERY = "How do honeybees communicate the distance to food?"
WEB = [("Bee dance", "https://example.org/bees", "The waggle dance encodes distance.")]
FLAGS = {
    FailureStage.WEB: "web_error",
    FailureStage.CACHE: "cache_error",
    FailureStage.GRADER: "grader_error",
    FailureStage.PARENTS: "parent_error",
}


def both(crag: CRAG, k: int = 5, query: str = QUERY) -> Any:
    """The sync and the async result: the same failures, in the same order."""
    sync = crag.retrieve(query, k)
    asynchronous = asyncio.run(crag.aretrieve(query, k))
    assert sync.failures == asynchronous.failures
    json.dumps(sync.to_dict())
    return sync


def assert_views(result: Any) -> None:
    """Each old flag is the text of the last failure of its stage (or ``None``): the
    text it had before (``describe(error)``; a parents lookup's own exception by its
    own name, see test_a_parents_lookup_that_raises)."""
    for stage, flag in FLAGS.items():
        last = [f for f in result.failures if f.stage is stage]
        expected = last[-1].text if last else None
        assert getattr(result, flag) == expected == result.to_dict()[flag], flag
        if last and not isinstance(last[-1].error, ParentLookupError):
            assert expected == describe(last[-1].error)
    web = [f for f in result.failures if f.stage is FailureStage.WEB]
    assert result.web.failure is (web[-1] if web else None)


def test_nothing_failed_is_no_failures(retriever: Any, always_relevant: Evaluator) -> None:
    result = both(CRAG(retriever, always_relevant, web=RecordingWebSearcher(WEB)))
    assert result.failures == ()
    assert result.to_dict()["failures"] == []
    assert result.web == WebOutcome()
    assert_views(result)
    done = list(CRAG(retriever, always_relevant, cache=False).stream(QUERY, 5))[-1]
    assert isinstance(done, Done)
    summary = done.summary()
    assert [summary[f] for f in FLAGS.values()] == [None] * 4


def test_a_web_timeout(retriever: Any, always_irrelevant: Evaluator) -> None:
    crag = CRAG(
        retriever,
        always_irrelevant,
        web=RecordingWebSearcher(error=WebSearchTimeout("slow")),
        cache=False,
        expander=False,
    )
    result = both(crag)
    (failure,) = result.failures
    assert failure.stage is FailureStage.WEB and isinstance(failure.error, WebSearchTimeout)
    assert result.web_error == "WebSearchTimeout: slow" == failure.text
    assert result.web == WebOutcome(
        query=result.web_query, miss="the web search failed", failure=failure
    )
    assert result.web.error is failure.error and not result.web_search_used
    assert_views(result)


def test_a_real_client_that_cannot_connect(retriever: Any, always_irrelevant: Evaluator) -> None:
    web = SearxngClient("http://user:secret@127.0.0.1:9", max_retries=0)
    crag = CRAG(retriever, always_irrelevant, web=web, cache=False, expander=False)
    result = crag.retrieve(QUERY, 5)
    asynchronous = asyncio.run(crag.aretrieve(QUERY, 5))  # httpx words it otherwise
    assert [type(f.error) for f in asynchronous.failures] == [WebSearchConnectionError]
    (failure,) = result.failures
    error = failure.error
    assert isinstance(error, WebSearchConnectionError) and error.__cause__ is not None
    assert result.web_error == describe(error)
    assert result.web_error.startswith("WebSearchConnectionError: cannot connect to http://***@")
    assert "secret" not in json.dumps(result.to_dict())  # the text and the attributes, masked
    assert_views(result)
    events = list(CRAG(retriever, always_irrelevant, web=web, cache=False).stream(QUERY, 5))
    (searched,) = [e for e in events if isinstance(e, WebSearched)]
    assert searched.web.failure == failure and searched.error == result.web_error
    assert searched.summary()["error"] == "WebSearchConnectionError"
    assert events[-1].summary()["web_error"] == "WebSearchConnectionError"


def test_a_web_searcher_raising_its_own_error(retriever: Any, always_irrelevant: Evaluator) -> None:
    web = RecordingWebSearcher(error=KeyError("results"))
    result = both(CRAG(retriever, always_irrelevant, web=web, cache=False, expander=False))
    (failure,) = result.failures
    assert type(failure.error) is WebSearchError and isinstance(failure.error.__cause__, KeyError)
    assert result.web_error == "WebSearchError: the web searcher raised KeyError: 'results'"
    assert failure.type_name == "WebSearchError"
    assert_views(result)


def boom(query: str, texts: list[str]) -> list[float]:
    raise RuntimeError("the LLM service said 500")


def test_a_grader_that_raises(retriever: Any) -> None:
    grader = CallableGrader(boom, name="boom")
    everything = Escalation(band=(0.0, 1.0), budget=1.0)
    crag = CRAG(retriever, expander=False, cache=False, grader=grader, escalation=everything)
    result = both(crag)
    (failure,) = result.failures
    assert failure.stage is FailureStage.GRADER and type(failure.error) is GraderError
    assert isinstance(failure.error.__cause__, RuntimeError)
    assert (
        result.grader_error
        == "GraderError: the grader raised RuntimeError: the LLM service said 500"
    )
    assert result.cascade is not None and result.cascade.failure is failure
    assert result.cascade.error == result.grader_error and not result.cascade.applied
    assert_views(result)


SECTIONS = {
    "bees": [
        "A forager bee returns to the hive after finding nectar.",
        "She performs a waggle dance on the comb for the other workers.",
        "The length of the waggle run tells the distance to the food.",
    ],
    "bread": [
        "Bread dough is made of flour, water, salt and yeast.",
        "Kneading develops the gluten that traps gas.",
    ],
}


@pytest.fixture(scope="module")
def sections() -> FaissRetriever:
    chunks = [
        Chunk(id=f"{name}-{i}", text=text, source=f"{name}.md", parent_id=name)
        for name, sentences in SECTIONS.items()
        for i, text in enumerate(sentences)
    ]
    embed = LsaEmbedder([c.text for c in chunks], n_components=4)
    index = faiss.IndexFlatIP(embed.dimension)
    index.add(embed.embed_many([c.text for c in chunks]))
    return FaissRetriever(index, chunks, embed, normalized=True)


def every_chunk_partial() -> Evaluator:
    """The fast path, every chunk PARTIAL on its own: each one's parent is looked up."""
    config = EvaluatorConfig.from_profile("synapse").replace(
        thresholds={"relevant": 0.0, "partial": 0.0},
        chunk_thresholds={"relevant": 1.0, "partial": 0.0},
    )
    return Evaluator(config)


class DownStore:
    """A parents lookup whose store is down."""

    def get(self, parent_id: str) -> str:
        raise ConnectionError(f"store down for {parent_id}")


def test_a_parents_lookup_that_raises(sections: FaissRetriever) -> None:
    crag = CRAG(sections, every_chunk_partial(), parents=DownStore(), cache=False)
    result = both(crag, k=3)
    assert [f.stage for f in result.failures] == [FailureStage.PARENTS] * 2
    for failure, parent_id in zip(result.failures, ("bees", "bread"), strict=True):
        error = failure.error
        assert isinstance(error, ParentLookupError) and error.parent_id == parent_id
        assert (
            isinstance(error.__cause__, ConnectionError) and error.cause_type == "ConnectionError"
        )
        assert failure.type_name == "ConnectionError"
        assert failure.text == f"ConnectionError: store down for {parent_id}"  # as before
    assert result.parent_error == "ConnectionError: store down for bread"  # the last one
    assert_views(result)
    events = list(crag.stream(QUERY, 3))
    (parents,) = [e for e in events if isinstance(e, ParentsExpanded)]
    assert parents.failures == result.failures and parents.error == result.parent_error
    assert parents.summary()["error"] == "ConnectionError"
    assert events[-1].summary()["parent_error"] == "ConnectionError"


def test_an_unusable_parent_is_the_library_error_itself(sections: FaissRetriever) -> None:
    crag = CRAG(sections, every_chunk_partial(), parents={"bees": 42, "bread": 7}, cache=False)  # type: ignore[dict-item]
    result = both(crag, k=3)
    assert {type(f.error) for f in result.failures} == {RetrieverError}
    assert result.parent_error == describe(result.failures[-1].error)
    assert "is a int" in result.parent_error


class BrokenExpander:
    def expand(self, query: str, *, chunks: Any = (), corpus_stats: Any = None) -> Any:
        raise InputError("the synonym table is empty")


class DownLexical:
    """A lexical retriever whose backend is down."""

    def search(self, query: str, k: int) -> list[Chunk]:
        raise RuntimeError("bm25 backend down")


def test_expansion_and_re_retrieval_failures(retriever: Any, always_partial: Evaluator) -> None:
    crag = CRAG(retriever, always_partial, expander=BrokenExpander(), lexical=DownLexical())
    result = both(crag)
    expansion, again = result.failures
    assert expansion.stage is FailureStage.EXPANSION and type(expansion.error) is InputError
    assert f"query expansion failed ({describe(expansion.error)})" in result.notes
    assert again.stage is FailureStage.RE_RETRIEVAL and isinstance(again.error, RetrieverError)
    assert (
        isinstance(again.error.__cause__, RuntimeError) and again.error.retriever == "DownLexical"
    )
    assert f"re-retrieval for {QUERY!r} failed ({describe(again.error)})" in result.notes
    assert_views(result)  # no flag of their own: notes, and the failures


def test_each_failed_re_retrieval_is_one_failure(retriever: Any, always_partial: Evaluator) -> None:
    expander = StaticExpander(["waggle dance distance", "bee foraging"])
    result = both(CRAG(retriever, always_partial, expander=expander, lexical=DownLexical()))
    failed = [n for n in result.notes if n.startswith("re-retrieval for")]
    assert len(failed) >= 1 and len(result.failures) == len(failed)
    assert {f.stage for f in result.failures} == {FailureStage.RE_RETRIEVAL}
    assert "every re-retrieval failed: the retrieval is kept" not in result.notes  # primary ok


def test_the_result_checks_its_failures(retriever: Any, always_irrelevant: Evaluator) -> None:
    import dataclasses

    crag = CRAG(
        retriever, always_irrelevant, web=RecordingWebSearcher(error=WebSearchTimeout("slow"))
    )
    result = crag.retrieve(QUERY, 5)
    with pytest.raises(InputError, match="last web one"):
        dataclasses.replace(result, failures=())  # the web outcome's failure gone
    with pytest.raises(InputError, match="Failure objects"):
        dataclasses.replace(result, failures=(*result.failures, "WebSearchTimeout: slow"))  # type: ignore[arg-type]
    listed = dataclasses.replace(result, failures=list(result.failures))  # type: ignore[arg-type]
    assert listed.failures == result.failures and isinstance(listed.failures, tuple)
    other = Failure(FailureStage.WEB, WebSearchTimeout("slow"))
    assert other == result.web.failure and other is not result.web.failure
    with pytest.raises(InputError):
        dataclasses.replace(result, failures=(other,))  # equal, not the same one
    # read-only (a frozen dataclass with slots raises TypeError for a non-field on 3.11)
    with pytest.raises((AttributeError, TypeError)):
        result.web_error = None  # type: ignore[misc]
    assert isinstance(result.web.error, CragError)
