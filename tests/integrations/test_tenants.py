"""Two tenants in one index, on every adapter: a tenant's router never returns another
tenant's documents, on any route.

The sample corpus is split between tenants ``a`` (even positions) and ``b`` (odd)
and held in one real index per adapter: FAISS (an ID selector), Qdrant (local mode,
a payload filter), LangChain's FAISS store (a ``search_kwargs`` filter, and a
per-call ``invoke(q, filter=...)``), LlamaIndex (metadata filters on the index's
retriever, then the postprocessor). Each of the 24 sample queries runs down each
route, forced by the gate's bands: the fast path, PARTIAL (the retrieval fused
with the lexical retriever's rankings and an expanded query's) and IRRELEVANT
without web results (the same correction as a fallback). The lexical retriever
is a :class:`BM25Retriever` over the whole corpus, filtered the same way
(``with_filter``); one that is not is refused at construction. A control shows
the leak the filter prevents: the same lexical retriever unfiltered (its scope
claimed, so the router lets it in) brings the other tenant's documents in.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import faiss
import numpy as np
import pytest
from frameworks_support import LsaEmbedding, LsaEmbeddings, langchain_faiss, tenant_qdrant
from langchain_core.documents import Document
from qdrant_client import models

from crag_heuristic import (
    CRAG,
    BM25Retriever,
    Chunk,
    Evaluator,
    EvaluatorConfig,
    FaissRetriever,
    InputError,
    Strategy,
)
from crag_heuristic.integrations.langchain import CRAGRetriever
from crag_heuristic.integrations.qdrant import QdrantRetriever
from crag_heuristic.sample import LsaEmbedder, load_sample_queries
from crag_heuristic.testing import StaticExpander

TENANTS = ("a", "b")
ROUTES = {  # the gate's set bands (relevant, partial) forcing each route
    "fast path": (0.0, 0.0),
    "partial fused": (1.0, 0.0),
    "irrelevant fallback": (1.0, 1.0),
}
QUERIES = [q["text"] for q in load_sample_queries()]
EXPANDER = StaticExpander(["roman roads honeybee colony", "volcano eruption"])


def gate(route: str) -> Evaluator:
    relevant, partial = ROUTES[route]
    return Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": relevant, "partial": partial}
        )
    )


def tenant_of(position: int) -> str:
    return TENANTS[position % 2]


@pytest.fixture(scope="module")
def documents(corpus: list[Chunk]) -> list[Chunk]:
    """The corpus, each document with its tenant in its metadata."""
    return [
        c.replace(metadata={**c.metadata, "tenant": tenant_of(i)}) for i, c in enumerate(corpus)
    ]


@pytest.fixture(scope="module")
def owner(documents: list[Chunk]) -> dict[str, str]:
    """Each document's tenant by its text (ids differ between adapters)."""
    return {c.text: c.metadata["tenant"] for c in documents}


@pytest.fixture(scope="module")
def bm25(documents: list[Chunk]) -> BM25Retriever:
    return BM25Retriever(documents)


def leaks(texts: Iterable[str], tenant: str, owner: dict[str, str]) -> int:
    """How many of ``texts`` belong to another tenant."""
    found = list(texts)
    assert found and all(text in owner for text in found)  # corpus documents, all known
    return sum(owner[text] != tenant for text in found)


def every_route(
    route_of: Callable[[str, str], Callable[[str], list[str]]],
    owner: dict[str, str],
    queries: list[str] = QUERIES,
) -> dict[tuple[str, str], int]:
    """Leaks per (route, tenant) over every sample query; ``route_of(route, tenant)``
    answers a query with the final documents' texts."""
    counted = {}
    for route in ROUTES:
        for tenant in TENANTS:
            answer = route_of(route, tenant)
            counted[route, tenant] = sum(leaks(answer(q), tenant, owner) for q in queries)
    return counted


def corrected(result: Any, route: str) -> None:
    """The route forced is the one run (so the correction paths are exercised)."""
    if route == "fast path":
        assert result.strategy is Strategy.NONE
    else:
        assert result.strategy is Strategy.QUERY_EXPANSION and result.counts["expanded_rankings"]


class Unfiltered:
    """The control: a lexical retriever that claims a scope but searches everything."""

    scope = "claimed, not applied"

    def __init__(self, inner: BM25Retriever) -> None:
        self.inner = inner

    def search(self, query: str, k: int) -> list[Chunk]:
        return self.inner.search(query, k)


# -- FAISS: one index, an ID selector per tenant ---------------------------------------------


@pytest.fixture(scope="module")
def faiss_parts(documents: list[Chunk], lsa: LsaEmbedder) -> tuple[Any, Any]:
    index = faiss.IndexFlatIP(lsa.dimension)
    index.add(lsa.embed_many([c.text for c in documents]))
    return index, lsa


def faiss_retriever(parts: tuple[Any, Any], documents: list[Chunk], tenant: str) -> Any:
    index, lsa = parts
    ids = np.array([i for i in range(len(documents)) if tenant_of(i) == tenant], dtype=np.int64)
    params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(ids))  # type: ignore[call-arg]
    return FaissRetriever(index, documents, lsa, normalized=True, search_params=params)


def test_faiss_tenants_on_every_route(
    faiss_parts: tuple[Any, Any], documents: list[Chunk], bm25: BM25Retriever,
    owner: dict[str, str],
) -> None:  # fmt: skip
    def route_of(route: str, tenant: str) -> Callable[[str], list[str]]:
        retriever = faiss_retriever(faiss_parts, documents, tenant)
        lexical = bm25.with_filter({"tenant": tenant})
        crag = CRAG(retriever, gate(route), expander=EXPANDER, lexical=lexical, cache=False)

        def answer(query: str) -> list[str]:
            result = crag.retrieve(query, 5)
            corrected(result, route)
            return [c.text for c in result.chunks]

        return answer

    assert set(every_route(route_of, owner).values()) == {0}


def test_faiss_control_the_unfiltered_lexical_retriever_leaks(
    faiss_parts: tuple[Any, Any], documents: list[Chunk], bm25: BM25Retriever,
    owner: dict[str, str],
) -> None:  # fmt: skip
    retriever = faiss_retriever(faiss_parts, documents, "a")
    with pytest.raises(InputError, match=r"faiss id selector.*with_filter"):
        CRAG(retriever, lexical=bm25)
    crag = CRAG(retriever, gate("partial fused"), lexical=Unfiltered(bm25), cache=False)
    leaked = sum(leaks([c.text for c in crag.retrieve(q, 5).chunks], "a", owner) for q in QUERIES)
    assert leaked > 0  # what the filter prevents: the test above would see it


# -- Qdrant: local mode, a payload filter per tenant -----------------------------------------


@pytest.fixture(scope="module")
def qdrant(documents: list[Chunk], lsa: LsaEmbedder) -> QdrantRetriever:
    return tenant_qdrant(documents, lsa)  # type: ignore[no-any-return]


def tenant_filter(tenant: str) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))]
    )


def test_qdrant_tenants_on_every_route(
    qdrant: QdrantRetriever, bm25: BM25Retriever, owner: dict[str, str]
) -> None:
    def route_of(route: str, tenant: str) -> Callable[[str], list[str]]:
        retriever = qdrant.with_filter(tenant_filter(tenant))
        lexical = bm25.with_filter({"tenant": tenant})
        crag = CRAG(retriever, gate(route), expander=EXPANDER, lexical=lexical, cache=False)

        def answer(query: str) -> list[str]:
            result = asyncio.run(crag.aretrieve(query, 5))  # the async driver, here
            corrected(result, route)
            return [c.text for c in result.chunks]

        return answer

    assert set(every_route(route_of, owner).values()) == {0}
    assert qdrant.scope is None and qdrant.with_filter(tenant_filter("a")).scope
    with pytest.raises(InputError, match=r"QdrantRetriever searches within a filter \(qdrant"):
        CRAG(qdrant.with_filter(tenant_filter("a")), lexical=bm25)


# -- LangChain: a real FAISS store, a search_kwargs filter and a per-call one ----------------


@pytest.fixture(scope="module")
def lc_store(documents: list[Chunk], lc_embeddings: LsaEmbeddings) -> Any:
    lc_documents = [Document(page_content=c.text, metadata=dict(c.metadata)) for c in documents]
    with warnings.catch_warnings():  # the store gives each document a uuid id
        warnings.simplefilter("ignore", DeprecationWarning)
        return langchain_faiss().from_documents(lc_documents, lc_embeddings)


def test_langchain_tenants_on_every_route(
    lc_store: Any, bm25: BM25Retriever, owner: dict[str, str]
) -> None:
    def route_of(route: str, tenant: str) -> Callable[[str], list[str]]:
        where = {"tenant": tenant}
        retriever = CRAGRetriever(
            base=lc_store,
            k=5,
            search_kwargs={"filter": where, "fetch_k": 64},
            lexical=bm25.with_filter(where),
            expander=EXPANDER,
            evaluator=gate(route),
            cache=False,
        )

        def answer(query: str) -> list[str]:
            documents = retriever.invoke(query)
            assert {d.metadata["crag"]["strategy"] for d in documents} == {
                "none" if route == "fast path" else "query_expansion"
            }
            return [d.page_content for d in documents]

        return answer

    assert set(every_route(route_of, owner).values()) == {0}


def test_langchain_per_call_filters_reach_the_lexical_retriever(
    lc_store: Any, bm25: BM25Retriever, owner: dict[str, str]
) -> None:
    for route in ROUTES:
        # one retriever for every tenant: the filter comes with each call
        retriever = CRAGRetriever(
            base=lc_store, k=5, lexical=bm25, expander=EXPANDER, evaluator=gate(route), cache=False
        )
        for tenant in TENANTS:
            for query in QUERIES[:8]:
                where = {"tenant": tenant}
                texts = [d.page_content for d in retriever.invoke(query, filter=where, fetch_k=64)]
                assert leaks(texts, tenant, owner) == 0
                again = asyncio.run(retriever.ainvoke(query, filter=where, fetch_k=64))
                assert leaks([d.page_content for d in again], tenant, owner) == 0
        assert len(retriever._lexical_views) == 2  # one filtered view per tenant, reused
    for year in range(40):  # the views kept are bounded: the last 32 filters
        retriever.invoke("roman roads", filter={"tenant": "a", "year": year})
    assert len(retriever._lexical_views) == 32


def test_langchain_filters_the_lexical_retriever_cannot_apply_are_refused(
    lc_store: Any, bm25: BM25Retriever
) -> None:
    with pytest.raises(InputError, match=r"search_kwargs filter=#\w+\), but the lexical"):
        CRAGRetriever(base=lc_store, search_kwargs={"filter": {"tenant": "a"}}, lexical=bm25)
    plain = CRAGRetriever(base=lc_store, lexical=Unfiltered(bm25), cache=False)
    with pytest.raises(InputError, match="it has no with_filter"):
        plain.invoke("roman roads", filter={"tenant": "a"})
    retriever = CRAGRetriever(base=lc_store, lexical=bm25, cache=False)
    with pytest.raises(InputError, match="only a metadata filter"):
        retriever.invoke("roman roads", filter=lambda metadata: metadata["tenant"] == "a")


# -- LlamaIndex: the index's retriever filtered, the postprocessor after it ------------------


def test_llamaindex_tenants_on_every_verdict(
    documents: list[Chunk], lsa: LsaEmbedder, owner: dict[str, str]
) -> None:
    from llama_index.core import Document as LlamaDocument
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import QueryBundle
    from llama_index.core.vector_stores import MetadataFilters

    from crag_heuristic.integrations.llamaindex import CRAGPostprocessor

    index = VectorStoreIndex.from_documents(
        [LlamaDocument(text=c.text, metadata={"tenant": c.metadata["tenant"]}) for c in documents],
        embed_model=LsaEmbedding(lsa),
    )

    def route_of(route: str, tenant: str) -> Callable[[str], list[str]]:
        filters = MetadataFilters.from_dicts([{"key": "tenant", "value": tenant}])
        retriever = index.as_retriever(similarity_top_k=5, filters=filters)
        postprocessor = CRAGPostprocessor.for_index(index, gate(route))

        def answer(query: str) -> list[str]:
            nodes = postprocessor.postprocess_nodes(
                retriever.retrieve(query), QueryBundle(query_str=query)
            )
            return [n.node.get_content() for n in nodes]

        return answer

    # LlamaIndex's cosine divides by the query's norm: the queries with an LSA vector
    known = [q for q in QUERIES if np.linalg.norm(lsa(q)) > 0]
    assert len(known) >= 20
    assert set(every_route(route_of, owner, known).values()) == {0}
