"""Every route of the router, sync and async, on a real FAISS index."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from crag_heuristic import (
    Chunk,
    Evaluator,
    EvaluatorConfig,
    InputError,
    InvalidQueryError,
    RetrieverError,
    Verdict,
    WebSearchTimeout,
)
from crag_heuristic._expansion.fusion import reciprocal_rank_fusion
from crag_heuristic._router.result import Strategy
from crag_heuristic._router.router import CRAG
from crag_heuristic.testing import ListRetriever, RecordingWebSearcher, StaticExpander
from crag_heuristic.web import keyword_query

QUERY = "How do honeybees communicate the distance to food?"
WEB = [
    ("Bee dance", "https://example.org/bees", "The waggle dance encodes distance and direction.")
]


def stable(result: Any) -> dict[str, Any]:
    """A result's dict without the timings and cache flags (the parts that may differ:
    the second run reads what the first cached)."""
    data: dict[str, Any] = result.to_dict()
    for key in ("timings_ms", "cache_hit", "web_cache_hit"):
        data.pop(key)
    return data


def both(crag: CRAG, query: str = QUERY, k: int = 5) -> Any:
    """Run sync and async; assert they agree; return the sync result."""
    sync = crag.retrieve(query, k)
    asynchronous = asyncio.run(crag.aretrieve(query, k))
    assert stable(sync) == stable(asynchronous)
    json.dumps(sync.to_dict())  # JSON-serialisable, always
    return sync


def test_fast_path_returns_the_retrieval(retriever: Any, always_relevant: Evaluator) -> None:
    result = both(CRAG(retriever, always_relevant, web=RecordingWebSearcher(WEB)))
    assert result.strategy is Strategy.NONE
    assert result.verdict is Verdict.RELEVANT
    assert result.chunks == result.retrieved == tuple(retriever.search(QUERY, 5))
    assert not result.corrected and result.web_query is None
    assert {"retrieve", "evaluate", "total"} <= set(result.timings_ms)
    assert result.counts == {"retrieved": 5, "final": 5}


def test_fast_path_can_drop_chunks_graded_irrelevant(retriever: Any) -> None:
    config = EvaluatorConfig.from_profile("synapse").replace(
        thresholds={"relevant": 0.0, "partial": 0.0},
        chunk_thresholds={"relevant": 0.9, "partial": 0.62},
    )
    evaluator = Evaluator(config)
    result = both(CRAG(retriever, evaluator, config={"drop_irrelevant": True}))
    initial = result.initial_evaluation
    kept = [g.chunk_id for g in initial.chunks if g.verdict is not Verdict.IRRELEVANT]
    assert 0 < len(kept) < 5  # the bands above split this retrieval
    assert [c.id for c in result.chunks] == kept
    assert result.counts["dropped"] == 5 - len(kept)
    assert result.evaluation.chunks != initial.chunks  # re-graded on what is left


def test_partial_expands_reretrieves_and_fuses(retriever: Any, always_partial: Evaluator) -> None:
    expander = StaticExpander(["waggle dance distance", "bees nectar location"])
    result = both(CRAG(retriever, always_partial, expander=expander, config={"fetch_k": 8}))
    assert result.strategy is Strategy.QUERY_EXPANSION
    assert result.expanded_queries == ("waggle dance distance", "bees nectar location")
    expected = reciprocal_rank_fusion(
        [
            retriever.search(QUERY, 8),
            retriever.search("waggle dance distance", 8),
            retriever.search("bees nectar location", 8),
        ],
        k=60,
        keep_scores=True,
    )[:5]
    assert [c.id for c in result.chunks] == [c.id for c in expected]
    assert [c.metadata["rrf_score"] for c in result.chunks] == pytest.approx(
        [c.metadata["rrf_score"] for c in expected]
    )
    assert result.counts["expanded_rankings"] == 2 and result.retries == 1
    assert result.evaluation is not result.initial_evaluation
    assert {"expand", "re_retrieve", "fuse", "re_evaluate"} <= set(result.timings_ms)


def test_partial_with_a_lexical_retriever(
    retriever: Any, bm25: Any, always_partial: Evaluator
) -> None:
    result = both(CRAG(retriever, always_partial, lexical=bm25, expander=False))
    # no expander: the lexical ranking of the original query is fused in
    expected = reciprocal_rank_fusion(
        [retriever.search(QUERY, 5), bm25.search(QUERY, 5)], keep_scores=True
    )[:5]
    assert [c.id for c in result.chunks] == [c.id for c in expected]
    assert result.counts["expanded_rankings"] == 1


def test_no_expansion_by_default_the_partial_correction_fuses_bm25(
    retriever: Any, bm25: Any, always_partial: Evaluator
) -> None:
    from crag_heuristic.expansion import SynonymExpander

    query = "What are the warning signs of a heart attack?"
    crag = CRAG(retriever, always_partial, lexical=bm25)
    assert crag.expander is None and CRAG(retriever, expander=False).expander is None
    result = both(crag, query)
    assert result.strategy is Strategy.QUERY_EXPANSION and result.expanded_queries == ()
    expected = reciprocal_rank_fusion(
        [retriever.search(query, 5), bm25.search(query, 5)], keep_scores=True
    )[:5]
    assert [c.id for c in result.chunks] == [c.id for c in expected]
    # synonyms on request: the bundled sets expand the query
    synonyms = both(CRAG(retriever, always_partial, expander=SynonymExpander()), query)
    assert any("myocardial infarction" in q for q in synonyms.expanded_queries)


def test_partial_with_nothing_to_expand_with_keeps_the_retrieval(
    retriever: Any, always_partial: Evaluator
) -> None:
    # no lexical retriever and an expander with nothing to say: no correction happened,
    # and the route says so (it said query_expansion over an unchanged list)
    result = both(CRAG(retriever, always_partial, expander=StaticExpander([])))
    assert result.strategy is Strategy.NONE and result.retries == 0
    assert result.chunks == result.retrieved and result.expanded_queries == ()
    assert result.notes == (
        "no correction was possible (the expander gave no query and no lexical retriever: "
        "give the router lexical= or an expander): the retrieval is kept",
    )
    bare = both(CRAG(retriever, always_partial))  # the README's and the docs' snippets
    assert bare.strategy is Strategy.NONE and bare.chunks == bare.retrieved
    assert bare.notes[0].startswith("no correction was possible (no expander and no lexical")


def test_partial_with_nothing_to_expand_then_web_is_a_web_search(
    retriever: Any, always_partial: Evaluator
) -> None:
    crag = CRAG(
        retriever, always_partial, web=RecordingWebSearcher(WEB), config={"web_on_partial": True}
    )
    result = both(crag)
    assert result.web_search_used and result.expanded_queries == ()
    assert result.strategy is Strategy.WEB_SEARCH  # not "combined": nothing was expanded
    assert result.retries == 1


def test_irrelevant_goes_to_the_web_with_a_keyword_query(
    retriever: Any, always_irrelevant: Evaluator
) -> None:
    web = RecordingWebSearcher(WEB)
    result = both(CRAG(retriever, always_irrelevant, web=web))
    assert result.strategy is Strategy.WEB_SEARCH
    assert result.web_search_used and result.web_error is None
    assert result.web_query == keyword_query(QUERY) == "honeybees communicate distance food"
    assert web.calls[0] == (result.web_query, 5)
    assert result.chunks[0].source == "https://example.org/bees"
    assert result.counts["web_results"] == 1


def test_web_results_keep_the_original_chunks_graded_partial(retriever: Any) -> None:
    config = EvaluatorConfig.from_profile("synapse").replace(
        thresholds={"relevant": 1.0, "partial": 1.0},
        chunk_thresholds={"relevant": 1.0, "partial": 0.5},
    )
    result = both(CRAG(retriever, Evaluator(config), web=RecordingWebSearcher(WEB)))
    partial_ids = result.initial_evaluation.kept_ids(Verdict.PARTIAL)
    assert [c.id for c in result.chunks][1:] == partial_ids
    off = CRAG(
        retriever,
        Evaluator(config),
        web=RecordingWebSearcher(WEB),
        config={"keep_partial_on_web": False},
    ).retrieve(QUERY, 5)
    assert len(off.chunks) == 1


def test_web_failure_keeps_the_original_chunks_and_says_why(
    retriever: Any, always_irrelevant: Evaluator
) -> None:
    web = RecordingWebSearcher(error=WebSearchTimeout("engine took too long"))
    result = both(CRAG(retriever, always_irrelevant, web=web, expander=False))
    assert result.strategy is Strategy.WEB_SEARCH
    assert result.web_error == "WebSearchTimeout: engine took too long"
    assert not result.web_search_used
    assert result.chunks == result.retrieved and len(result.chunks) == 5
    assert any("web search failed" in note for note in result.notes)


def test_a_web_searcher_raising_anything_is_contained(
    retriever: Any, always_irrelevant: Evaluator
) -> None:
    result = both(
        CRAG(retriever, always_irrelevant, web=RecordingWebSearcher(error=KeyError("oops")))
    )
    assert result.web_error.startswith("WebSearchError: the web searcher raised KeyError")
    assert result.chunks == result.retrieved


def test_no_web_searcher(retriever: Any, always_irrelevant: Evaluator) -> None:
    result = both(CRAG(retriever, always_irrelevant, expander=False))
    assert result.strategy is Strategy.NONE and not result.web_search_used  # nothing corrected
    assert result.chunks == result.retrieved
    assert result.web_query is not None  # the rewrite still shows what would be asked
    assert any("no web searcher" in note for note in result.notes)


def test_without_web_results_the_router_expands_instead(
    retriever: Any, bm25: Any, always_irrelevant: Evaluator
) -> None:
    web = RecordingWebSearcher(error=WebSearchTimeout("down"))
    crag = CRAG(
        retriever, always_irrelevant, web=web, lexical=bm25, expander=StaticExpander(["waggle"])
    )
    result = both(crag)
    assert result.strategy is Strategy.QUERY_EXPANSION
    assert result.web_error == "WebSearchTimeout: down" and result.retries == 2
    assert result.expanded_queries == ("waggle",)
    expected = reciprocal_rank_fusion(
        [
            retriever.search(QUERY, 5),
            retriever.search("waggle", 5),
            bm25.search(QUERY, 5),
            bm25.search("waggle", 5),
        ],
        keep_scores=True,
    )[:5]
    assert [c.id for c in result.chunks] == [c.id for c in expected]
    assert "the web search failed: trying query expansion instead" in result.notes
    off = CRAG(retriever, always_irrelevant, lexical=bm25, config={"expand_without_web": False})
    assert off.retrieve(QUERY, 5).chunks == tuple(retriever.search(QUERY, 5))


def test_web_with_no_results(retriever: Any, always_irrelevant: Evaluator) -> None:
    result = both(CRAG(retriever, always_irrelevant, web=RecordingWebSearcher([]), expander=False))
    assert result.chunks == result.retrieved and result.web_error is None
    assert any("found nothing" in note for note in result.notes)


def test_combined_expansion_then_web(retriever: Any, always_partial: Evaluator) -> None:
    crag = CRAG(
        retriever,
        always_partial,
        expander=StaticExpander(["waggle dance"]),
        web=RecordingWebSearcher(WEB),
        config={"web_on_partial": True},
    )
    result = both(crag)
    assert result.strategy is Strategy.COMBINED
    assert result.web_search_used and result.expanded_queries == ("waggle dance",)
    assert result.retries == 2


def test_max_retries_bounds_the_corrections(retriever: Any, always_partial: Evaluator) -> None:
    common: dict[str, Any] = {
        "expander": StaticExpander(["waggle dance"]),
        "web": RecordingWebSearcher(WEB),
    }
    one = CRAG(
        retriever, always_partial, config={"web_on_partial": True, "max_retries": 1}, **common
    )
    result = one.retrieve(QUERY, 5)
    assert result.strategy is Strategy.QUERY_EXPANSION and result.retries == 1
    off = CRAG(retriever, always_partial, config={"max_retries": 0}, **common).retrieve(QUERY, 5)
    assert off.strategy is Strategy.NONE and off.chunks == off.retrieved
    assert any("correction is off" in note for note in off.notes)


def test_refinement_of_the_final_chunks(retriever: Any, always_relevant: Evaluator) -> None:
    result = both(CRAG(retriever, always_relevant, config={"refine": True}))
    assert result.refinement is not None
    assert [c.id for c in result.chunks] == [c.id for c in result.refinement.chunks]
    assert all(
        len(c.text) <= len(o.text) for c, o in zip(result.chunks, result.retrieved, strict=False)
    )


def test_refinement_where_no_strip_passes_cuts_the_chunks_to_the_budget(
    always_relevant: Evaluator,
) -> None:
    """The budget is a budget: 3 chunks of 9 words (11.7 estimated tokens each) against a
    budget of 20 send the first whole and 6 words of the second (7.8 tokens: 19.5 in all),
    with a note; the sync and async routes agree."""
    chunks = [
        Chunk(id=f"c{i}", text="Words that share nothing with the question at all.", score=0.9)
        for i in range(3)
    ]
    evaluator = Evaluator(always_relevant.config.replace(refine={"token_budget": 20}))
    crag = CRAG(ListRetriever(chunks), evaluator, config={"refine": True})
    result = both(crag, query="quantum physics")
    assert result.refinement.cut and result.refinement.tokens == pytest.approx(19.5)
    assert [c.text for c in result.chunks] == [
        chunks[0].text,
        "Words that share nothing with the",
    ]
    assert "refinement kept no strip on its score: the chunks are cut to the 20-token budget" in (
        result.notes
    )


def test_first_retrieval_failure_raises(always_relevant: Evaluator) -> None:
    class Broken:
        def search(self, query: str, k: int) -> list[Chunk]:
            raise OSError("index file gone")

    with pytest.raises(RetrieverError, match="index file gone"):
        CRAG(Broken(), always_relevant).retrieve(QUERY)
    with pytest.raises(RetrieverError, match="index file gone"):
        asyncio.run(CRAG(Broken(), always_relevant).aretrieve(QUERY))


def test_a_failed_re_retrieval_is_a_note(retriever: Any, always_partial: Evaluator) -> None:
    chunks = retriever.search(QUERY, 5)

    class FailsOnExpansions(ListRetriever):
        def search(self, query: str, k: int) -> list[Chunk]:
            if query != QUERY:
                raise ConnectionError("replica down")
            return super().search(query, k)

    result = both(CRAG(FailsOnExpansions(chunks), always_partial, expander=StaticExpander(["x y"])))
    assert result.chunks == tuple(chunks)
    assert any("replica down" in note for note in result.notes)


def test_async_only_parts(always_irrelevant: Evaluator, retriever: Any) -> None:
    class AsyncOnly:
        async def asearch(self, query: str, k: int) -> list[Chunk]:
            chunks: list[Chunk] = retriever.search(query, k)
            return chunks

    crag = CRAG(AsyncOnly(), always_irrelevant)
    assert len(asyncio.run(crag.aretrieve(QUERY, 3)).chunks) == 3
    with pytest.raises(RetrieverError, match="async-only"):
        crag.retrieve(QUERY, 3)


def test_expansions_run_concurrently_in_async(retriever: Any, always_partial: Evaluator) -> None:
    chunks = retriever.search(QUERY, 5)
    state = {"now": 0, "peak": 0}

    class Slow(ListRetriever):
        async def asearch(self, query: str, k: int) -> list[Chunk]:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            await asyncio.sleep(0.05)
            state["now"] -= 1
            return self.search(query, k)

    crag = CRAG(Slow(chunks), always_partial, expander=StaticExpander(["a b", "c d", "e f"]))
    asyncio.run(crag.aretrieve(QUERY, 5))
    assert state["peak"] == 3  # the three expanded queries were in flight together


def test_async_web_timeout_is_bounded(retriever: Any, always_irrelevant: Evaluator) -> None:
    web = RecordingWebSearcher(WEB, delay=5.0)
    crag = CRAG(retriever, always_irrelevant, web=web, config={"web_timeout": 0.1})

    async def run() -> Any:
        return await asyncio.wait_for(crag.aretrieve(QUERY, 5), timeout=4.0)

    result = asyncio.run(run())
    assert result.web_error.startswith("WebSearchTimeout")
    assert result.chunks == result.retrieved


def test_bad_arguments(retriever: Any) -> None:
    with pytest.raises(InvalidQueryError):
        CRAG(retriever).retrieve("   ")
    with pytest.raises(InputError):
        CRAG(retriever).retrieve(QUERY, k=0)
    with pytest.raises(InputError):
        CRAG(object())  # type: ignore[arg-type]
    with pytest.raises(InputError):
        CRAG(retriever, expander=object())  # type: ignore[arg-type]
    with pytest.raises(InputError):
        CRAG(retriever, web=object())  # type: ignore[arg-type]
    with pytest.raises(InputError):
        CRAG(retriever, config="fast")  # type: ignore[arg-type]


def test_gate_k_grades_the_head_and_returns_the_depth(
    retriever: Any, always_relevant: Evaluator
) -> None:
    result = both(CRAG(retriever, always_relevant, config={"k": 8, "gate_k": 3}), k=8)
    assert len(result.chunks) == 8
    assert [g.chunk_id for g in result.initial_evaluation.chunks] == [
        c.id for c in result.chunks[:3]
    ]


def test_expand_on_lexical_only(retriever: Any, bm25: Any, always_partial: Evaluator) -> None:
    crag = CRAG(
        retriever,
        always_partial,
        lexical=bm25,
        expander=StaticExpander(["waggle dance"]),
        config={"expand_on": "lexical"},
    )
    result = both(crag)
    expected = reciprocal_rank_fusion(
        [retriever.search(QUERY, 5), bm25.search(QUERY, 5), bm25.search("waggle dance", 5)],
        keep_scores=True,
    )[:5]
    assert [c.id for c in result.chunks] == [c.id for c in expected]
    assert result.counts["expanded_rankings"] == 2
