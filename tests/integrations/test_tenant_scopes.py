"""Two tenants in one index, down the routes ``test_tenants.py`` does not walk: parent
expansion, per-call filters, filters that mix a field with ``$or`` / ``$not``, parts
replaced after construction, and the lexical statistics.

The sample corpus is split between tenants ``a`` (even positions) and ``b`` (odd).
Each tenant-a document names, as its ``parent_id``, a parent that belongs to
tenant b (a forged or mistaken id): the parent's text is the child's own text
followed by a tenant-b document's, so it grades at least as well and would be
kept if it were found. The routes run over FAISS and Qdrant (local mode) with a
filtered BM25 and a real SearXNG (the test kit's, fed by a loopback engine), on
every band of the gate; the web's results are not a tenant's and are left out of
the count. A control claims a scope it does not apply and shows the leak the
check prevents.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest
from crag_testkit import FixtureEngine, FixtureReply, SearxngServer, fixture_item
from frameworks_support import LsaEmbeddings, langchain_faiss, tenant_qdrant
from langchain_core.documents import Document
from qdrant_client import models

from crag_heuristic import (
    CRAG,
    BM25Retriever,
    Chunk,
    Evaluator,
    EvaluatorConfig,
    FaissRetriever,
    MemoryCache,
)
from crag_heuristic.integrations.langchain import CRAGRetriever
from crag_heuristic.integrations.qdrant import QdrantRetriever
from crag_heuristic.retrievers import ScopedParents, ScopeError
from crag_heuristic.sample import LsaEmbedder, load_sample_queries
from crag_heuristic.web import SearxngClient

TENANTS = ("a", "b")
QUERIES = [q["text"] for q in load_sample_queries()]
ROUTES = {  # the gate's set bands (relevant, partial): the fast path, PARTIAL, IRRELEVANT
    "fast path": (0.0, 0.0),
    "partial": (1.0, 0.0),
    "irrelevant": (1.0, 1.0),
}
WEB_TEXT = "A page from the open web about roads, bees and volcanoes."


def tenant_of(position: int) -> str:
    return TENANTS[position % 2]


def gate(route: str) -> Evaluator:
    relevant, partial = ROUTES[route]
    return Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": relevant, "partial": partial}
        )
    )


@pytest.fixture(scope="module")
def documents(corpus: list[Chunk]) -> list[Chunk]:
    """The corpus with tenants; each tenant-a document's parent id names a b parent."""
    out = []
    for i, chunk in enumerate(corpus):
        tenant = tenant_of(i)
        parent = f"parent-b-{i}" if tenant == "a" else f"parent-b-own-{i}"
        out.append(chunk.replace(metadata={"tenant": tenant}, parent_id=parent))
    return out


@pytest.fixture(scope="module")
def parents(documents: list[Chunk]) -> dict[str, Chunk]:
    """Every parent a document names, each tenant b's: a's child text + a b document's."""
    b_texts = [c.text for c in documents if c.metadata["tenant"] == "b"]
    found = {}
    for i, chunk in enumerate(documents):
        assert chunk.parent_id is not None
        text = f"{chunk.text}\n{b_texts[i % len(b_texts)]}"
        found[chunk.parent_id] = Chunk(
            id=chunk.parent_id, text=text, metadata={"tenant": "b"}, score=None
        )
    return found


@pytest.fixture(scope="module")
def owner(documents: list[Chunk], parents: dict[str, Chunk]) -> dict[str, str]:
    """Each text's tenant (documents and parents)."""
    known = {c.text: c.metadata["tenant"] for c in documents}
    known.update({p.text: p.metadata["tenant"] for p in parents.values()})
    return known


@pytest.fixture(scope="module")
def bm25(documents: list[Chunk]) -> BM25Retriever:
    return BM25Retriever(documents)


@pytest.fixture(scope="module")
def web(searxng_python: Path) -> Iterator[SearxngClient]:
    """A real SearXNG whose one engine answers every query with two pages."""
    with FixtureEngine() as engine:
        engine.default = FixtureReply(
            items=[
                fixture_item("https://example.org/roads", "Roads", WEB_TEXT),
                fixture_item("https://example.org/bees", "Bees", WEB_TEXT + " More."),
            ]
        )
        with SearxngServer(searxng_python, engine.url, engine_timeout=2.0) as server:
            yield SearxngClient(server.url, timeout=10.0)


def leaks(chunks: Sequence[Chunk], tenant: str, owner: dict[str, str]) -> int:
    """How many of the final chunks belong to another tenant (web pages left out)."""
    ours = [c for c in chunks if c.source is None or not c.source.startswith("https://example")]
    assert all(c.text in owner for c in ours), [c.id for c in ours if c.text not in owner]
    return sum(owner[c.text] != tenant for c in ours)


class ClaimedParents:
    """The control: a parents lookup that claims a scope but answers for any id."""

    scope = "claimed, not applied"

    def __init__(self, inner: dict[str, Chunk]) -> None:
        self.inner = inner

    def get(self, parent_id: str) -> Chunk | None:
        return self.inner.get(parent_id)


# -- parent expansion over FAISS and Qdrant, with BM25 and the web ---------------------------


@pytest.fixture(scope="module")
def faiss_index(documents: list[Chunk], lsa: LsaEmbedder) -> Any:
    index = faiss.IndexFlatIP(lsa.dimension)
    index.add(lsa.embed_many([c.text for c in documents]))
    return index


def faiss_for(index: Any, documents: list[Chunk], lsa: LsaEmbedder, tenant: str) -> Any:
    ids = np.array([i for i in range(len(documents)) if tenant_of(i) == tenant], dtype=np.int64)
    params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(ids))  # type: ignore[call-arg]
    return FaissRetriever(index, documents, lsa, normalized=True, search_params=params)


@pytest.fixture(scope="module")
def qdrant(documents: list[Chunk], lsa: LsaEmbedder) -> QdrantRetriever:
    return tenant_qdrant(documents, lsa)  # type: ignore[no-any-return]


def qdrant_for(qdrant: QdrantRetriever, tenant: str) -> QdrantRetriever:
    where = models.Filter(
        must=[models.FieldCondition(key="tenant", match=models.MatchValue(value=tenant))]
    )
    return qdrant.with_filter(where)


@pytest.mark.parametrize("store", ["faiss", "qdrant"])
def test_parents_and_web_never_serve_another_tenants_text(
    store: str, faiss_index: Any, qdrant: QdrantRetriever, documents: list[Chunk],
    lsa: LsaEmbedder, bm25: BM25Retriever, parents: dict[str, Chunk], owner: dict[str, str],
    web: SearxngClient,
) -> None:  # fmt: skip
    counted: dict[tuple[str, str], int] = {}
    refused = fetched = web_used = 0
    cache = MemoryCache()  # shared by the tenants: its keys hold each chunk's digest
    for route in ROUTES:
        for tenant in TENANTS:
            where = {"tenant": tenant}
            retriever = (
                faiss_for(faiss_index, documents, lsa, tenant)
                if store == "faiss"
                else qdrant_for(qdrant, tenant)
            )
            crag = CRAG(
                retriever, gate(route), web=web, cache=cache,
                lexical=bm25.with_filter(where), parents=ScopedParents(parents, where),
                config={"web_on_partial": True, "parent_token_budget": 10_000},
            )  # fmt: skip
            leaked = 0
            for query in QUERIES:
                result = asyncio.run(crag.aretrieve(query, 5)) if store == "qdrant" else (
                    crag.retrieve(query, 5)
                )  # fmt: skip
                leaked += leaks(result.chunks, tenant, owner)
                refused += result.counts.get("parents_missing", 0)
                fetched += result.counts.get("parents_fetched", 0)
                web_used += int(result.web_search_used)
            counted[route, tenant] = leaked
    assert set(counted.values()) == {0}, counted
    assert refused > 0 and web_used > 0  # the parent and web routes were walked
    assert fetched > 0  # tenant b's own parents are found (it names b parents too)


def test_control_a_lookup_that_claims_its_scope_serves_the_other_tenants_parent(
    faiss_index: Any, documents: list[Chunk], lsa: LsaEmbedder, bm25: BM25Retriever,
    parents: dict[str, Chunk], owner: dict[str, str],
) -> None:  # fmt: skip
    retriever = faiss_for(faiss_index, documents, lsa, "a")
    lexical = bm25.with_filter({"tenant": "a"})
    config = {"parent_token_budget": 10_000}
    crag = CRAG(retriever, gate("partial"), cache=False, lexical=lexical,
                parents=ClaimedParents(parents), config=config)  # fmt: skip
    leaked = sum(leaks(crag.retrieve(q, 5).chunks, "a", owner) for q in QUERIES)
    assert leaked > 0  # what the scoped lookup prevents: the test above would see it


def test_an_unscoped_parents_lookup_is_refused_at_construction_and_on_every_call(
    faiss_index: Any, documents: list[Chunk], lsa: LsaEmbedder, bm25: BM25Retriever,
    parents: dict[str, Chunk],
) -> None:  # fmt: skip
    retriever = faiss_for(faiss_index, documents, lsa, "a")
    lexical = bm25.with_filter({"tenant": "a"})
    with pytest.raises(ScopeError, match=r"parents lookup dict answers for any id.*ScopedParents"):
        CRAG(retriever, lexical=lexical, parents=parents)
    crag = CRAG(retriever, lexical=lexical, parents=ScopedParents(parents, {"tenant": "a"}))
    assert crag.retrieve(QUERIES[0], 3).chunks
    crag.parents = parents  # replaced later: refused on the next call, sync and async
    with pytest.raises(ScopeError, match="parents lookup"):
        crag.retrieve(QUERIES[0], 3)
    with pytest.raises(ScopeError, match="parents lookup"):
        asyncio.run(crag.aretrieve(QUERIES[0], 3))
    with pytest.raises(ScopeError, match="parents lookup"):
        crag.stream(QUERIES[0], 3)
    crag.parents, crag.lexical = ScopedParents(parents, {"tenant": "a"}), bm25
    with pytest.raises(ScopeError, match="lexical retriever BM25Retriever searches everything"):
        crag.retrieve(QUERIES[0], 3)
    # a lookup for another part of the corpus is filtered too: a BM25 view answers get()
    assert bm25.with_filter({"tenant": "a"}).get(documents[1].id) is None


# -- per-call filters: narrowed, never replaced ------------------------------------------------


@pytest.fixture(scope="module")
def lc_store(documents: list[Chunk], lc_embeddings: LsaEmbeddings) -> Any:
    lc_documents = [
        Document(page_content=c.text, metadata={**c.metadata, "topic": c.id.split("-")[0]})
        for c in documents
    ]
    with warnings.catch_warnings():  # the store gives each document a uuid id
        warnings.simplefilter("ignore", DeprecationWarning)
        return langchain_faiss().from_documents(lc_documents, lc_embeddings)


@pytest.fixture(scope="module")
def lc_bm25(documents: list[Chunk]) -> BM25Retriever:
    return BM25Retriever(
        [c.replace(metadata={**c.metadata, "topic": c.id.split("-")[0]}) for c in documents]
    )


@pytest.mark.parametrize("route", list(ROUTES))
def test_a_per_call_filter_narrows_the_tenants_scope_never_replaces_it(
    route: str, lc_store: Any, lc_bm25: BM25Retriever, owner: dict[str, str],
    parents: dict[str, Chunk],
) -> None:  # fmt: skip
    where = {"tenant": "a"}
    retriever = CRAGRetriever(
        base=lc_store, k=5, search_kwargs={"filter": where, "fetch_k": 64},
        lexical=lc_bm25.with_filter(where), parents=ScopedParents(parents, where),
        evaluator=gate(route), cache=False,
    )  # fmt: skip
    for query in QUERIES[:8]:
        other = retriever.invoke(query, filter={"tenant": "b"})  # tenant b asked: nothing of b
        assert [d.page_content for d in other if owner.get(d.page_content) == "b"] == []
        again = asyncio.run(retriever.ainvoke(query, filter={"tenant": "b"}))
        assert [d.page_content for d in again if owner.get(d.page_content) == "b"] == []
        either = retriever.invoke(query, filter={"tenant": {"$in": ["a", "b"]}})
        assert {owner[d.page_content] for d in either} <= {"a"}
        narrower = retriever.invoke(query, filter={"topic": {"$in": ["honeybees", "roman"]}})
        assert {owner[d.page_content] for d in narrower} <= {"a"}


def test_per_call_filters_on_an_unscoped_retriever_reach_every_part(
    lc_store: Any, lc_bm25: BM25Retriever, parents: dict[str, Chunk], owner: dict[str, str]
) -> None:
    plain = CRAGRetriever(base=lc_store, k=5, lexical=lc_bm25, parents=parents, cache=False)
    with pytest.raises(ScopeError, match=r"parents lookup dict.*no with_filter"):
        plain.invoke(QUERIES[0], filter={"tenant": "a"})  # a dict cannot be filtered
    scoped = CRAGRetriever(
        base=lc_store, k=5, lexical=lc_bm25, parents=ScopedParents(parents, {}),
        evaluator=gate("partial"), cache=False, config={"parent_token_budget": 10_000},
    )  # fmt: skip
    for tenant in TENANTS:
        for query in QUERIES:
            texts = [d.page_content for d in scoped.invoke(query, filter={"tenant": tenant})]
            assert texts and all(owner[t] == tenant for t in texts), (tenant, query)


# -- filters the check cannot prove safe ----------------------------------------------------

UNSAFE = [
    {"tenant": "a", "$or": [{"topic": "honeybees"}, {"topic": "roman"}]},
    {"tenant": "a", "$not": {"topic": "honeybees"}},
    {"$and": [{"tenant": "a"}], "$or": [{"tenant": "b"}]},
    {"$and": [{"tenant": "a", "$or": [{"tenant": "b"}]}]},  # nested
]


@pytest.mark.parametrize("where", UNSAFE)
def test_a_field_mixed_with_or_or_not_is_refused_everywhere(
    where: dict[str, Any], lc_store: Any, lc_bm25: BM25Retriever, parents: dict[str, Chunk]
) -> None:
    with pytest.raises(ScopeError, match="beside"):
        CRAGRetriever(base=lc_store, search_kwargs={"filter": where}, cache=False)
    with pytest.raises(ScopeError, match="beside"):
        lc_bm25.with_filter(where)
    with pytest.raises(ScopeError, match="beside"):
        ScopedParents(parents, where)
    scoped = CRAGRetriever(
        base=lc_store, search_kwargs={"filter": {"tenant": "a"}},
        lexical=lc_bm25.with_filter({"tenant": "a"}), cache=False,
    )  # fmt: skip
    plain = CRAGRetriever(base=lc_store, lexical=lc_bm25, cache=False)
    for retriever in (scoped, plain):
        with pytest.raises(ScopeError, match="beside"):
            retriever.invoke(QUERIES[0], filter=where)


def test_the_same_conditions_written_as_an_and_list_hold(
    lc_store: Any, lc_bm25: BM25Retriever, owner: dict[str, str]
) -> None:
    where = {"$and": [{"tenant": "a"}, {"$or": [{"topic": "honeybees"}, {"topic": "roman"}]}]}
    retriever = CRAGRetriever(
        base=lc_store, k=5, search_kwargs={"filter": where, "fetch_k": 64},
        lexical=lc_bm25.with_filter(where), evaluator=gate("partial"), cache=False,
    )  # fmt: skip
    for query in QUERIES[:8]:
        texts = [d.page_content for d in retriever.invoke(query)]
        assert all(owner[t] == "a" for t in texts)


# -- the lexical statistics, shared or the tenant's own -------------------------------------


def test_isolated_statistics_keep_another_tenants_documents_out_of_the_scores(
    documents: list[Chunk],
) -> None:
    ours = [c for c in documents if c.metadata["tenant"] == "a"]
    theirs = [c for c in documents if c.metadata["tenant"] == "b"]
    # tenant b adds documents full of one term: it moves a's scores through the shared
    # statistics (IDF, mean length), never through the isolated ones
    added = [
        Chunk(id=f"b-extra-{i}", text="honeybee colony honeybee hive " * (i + 1),
              metadata={"tenant": "b"}, score=None)
        for i in range(8)
    ]  # fmt: skip
    query = "How do honeybees communicate?"
    where = {"tenant": "a"}

    def scores(corpus: list[Chunk], isolated: bool) -> dict[str, float]:
        view = BM25Retriever(corpus).with_filter(where, isolated=isolated)
        return {c.id: c.score for c in view.search(query, 10) if c.score is not None}

    before, after = scores(ours + theirs, False), scores(ours + theirs + added, False)
    assert before and before.keys() == after.keys() and before != after  # the leak
    alone, with_more = scores(ours + theirs, True), scores(ours + theirs + added, True)
    assert alone == with_more and alone.keys() == before.keys()
    view = BM25Retriever(ours + theirs).with_filter(where, isolated=True)
    assert view.scope is not None and "own statistics" in view.scope
    assert view.corpus_stats().n_docs == len(ours) and view.get(theirs[0].id) is None
    assert {c.id for c in view.search(query, 100)} <= {c.id for c in ours}
