"""CRAGRetriever: a real LangChain BaseRetriever, in real LCEL chains, over real stores."""

from __future__ import annotations

import numpy as np
import pytest
from frameworks_support import (
    ANSWERED,
    UNANSWERED,
    FixedRetriever,
    LsaEmbeddings,
    langchain_faiss,
    lc_documents,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from crag_heuristic import Chunk, InputError, ScoreKind, WebSearchTimeout
from crag_heuristic.integrations.langchain import CRAGRetriever, LangChainRetriever
from crag_heuristic.retrievers import UnknownScoresWarning
from crag_heuristic.sample import sample_retriever
from crag_heuristic.testing import RecordingWebSearcher
from crag_heuristic.text import Analyzer

CRAG_KEYS = {
    "chunk_id", "origin", "verdict", "initial_verdict", "set_score", "grade", "strategy",
    "score", "score_kind", "raw_score", "metric", "web_search_used", "web_error",
    "cache_error", "notes",
}  # fmt: skip


def format_docs(documents: list[Document]) -> str:
    return "\n\n".join(doc.page_content for doc in documents)


def test_is_a_real_base_retriever_over_an_in_memory_store(
    memory_store: InMemoryVectorStore,
) -> None:
    retriever = CRAGRetriever(base=memory_store, k=4)
    assert isinstance(retriever, BaseRetriever)
    assert retriever.score_semantics.startswith("cosine similarity")
    documents = retriever.invoke(ANSWERED)
    assert documents[0].id == "rome-4"
    raw = {d.id: s for d, s in memory_store.similarity_search_with_score(ANSWERED, k=4)}
    for doc in documents:
        crag = doc.metadata["crag"]
        assert set(crag) == CRAG_KEYS
        assert crag["verdict"] == "relevant" and crag["strategy"] == "none"
        assert crag["origin"] == "retrieval" and crag["score_kind"] == "cosine"
        # InMemoryVectorStore's score is already a cosine: kept as it is
        assert crag["score"] == pytest.approx(raw[doc.id]) == crag["raw_score"]
        assert crag["grade"]["verdict"] in ("relevant", "partial", "irrelevant")
        assert 0.0 <= crag["grade"]["score"] <= 1.0
        assert doc.metadata["source"] == doc.id  # the user's metadata is kept
        assert "raw_score" not in doc.metadata  # the adapter's keys live under "crag"
    assert documents[0].metadata["crag"]["grade"]["verdict"] == "relevant"


async def test_lcel_chain_invoke_and_ainvoke_agree(memory_store: InMemoryVectorStore) -> None:
    chain = CRAGRetriever(base=memory_store, k=3) | RunnableLambda(format_docs)
    text = chain.invoke(ANSWERED)
    assert text.startswith("How Roman roads were built")
    assert await chain.ainvoke(ANSWERED) == text


async def test_async_retriever_matches_sync(memory_store: InMemoryVectorStore) -> None:
    retriever = CRAGRetriever(base=memory_store, k=4, cache=False)
    sync = retriever.invoke(UNANSWERED)
    asynchronous = await retriever.ainvoke(UNANSWERED)
    assert [d.id for d in asynchronous] == [d.id for d in sync]
    assert [d.metadata["crag"] for d in asynchronous] == [d.metadata["crag"] for d in sync]
    crag = sync[0].metadata["crag"]
    assert crag["initial_verdict"] == "irrelevant"
    assert "no web searcher configured: the original chunks are kept" in crag["notes"]


def test_web_results_come_back_as_documents(memory_store: InMemoryVectorStore) -> None:
    web = RecordingWebSearcher(
        results=[
            ("Chess openings for beginners", "https://chess.example.org/openings",
             "Beginners do well with the Italian Game and the London System openings in chess."),
        ]
    )  # fmt: skip
    documents = CRAGRetriever(base=memory_store, k=4, web=web).invoke(UNANSWERED)
    assert web.calls, "the router went to the web"
    first = documents[0]
    assert first.metadata["crag"]["origin"] == "web"
    assert first.metadata["source"] == "https://chess.example.org/openings"
    assert first.metadata["crag"]["strategy"] == "web_search"
    assert first.metadata["crag"]["web_search_used"] is True
    assert first.metadata["crag"]["score_kind"] == "web"
    assert "Italian Game" in first.page_content
    assert all(d.metadata["crag"]["origin"] == "retrieval" for d in documents[1:])


def test_a_failed_web_search_is_a_flag_not_an_exception(
    memory_store: InMemoryVectorStore,
) -> None:
    web = RecordingWebSearcher(error=WebSearchTimeout("engine too slow"))
    documents = CRAGRetriever(base=memory_store, k=4, web=web).invoke(UNANSWERED)
    assert documents, "the original documents are kept"
    crag = documents[0].metadata["crag"]
    assert crag["web_error"].startswith("WebSearchTimeout")
    assert crag["web_search_used"] is False and crag["origin"] == "retrieval"


def test_faiss_store_squared_l2_becomes_cosine(
    corpus: list[Chunk], lc_embeddings: LsaEmbeddings
) -> None:
    store = langchain_faiss().from_documents(lc_documents(corpus), lc_embeddings, normalize_L2=True)
    retriever = CRAGRetriever(base=store, k=4)
    assert retriever.score_semantics == "cosine = 1 - d/2 from squared L2 of unit vectors"
    documents = retriever.invoke(ANSWERED)
    raw = {d.id: s for d, s in store.similarity_search_with_score(ANSWERED, k=4)}
    query = np.asarray(lc_embeddings.embed_query(ANSWERED))
    by_id = {c.id: c for c in corpus}
    for doc in documents:
        crag = doc.metadata["crag"]
        assert crag["score_kind"] == "cosine" and crag["metric"] == "l2"
        assert crag["score"] == pytest.approx(1 - raw[doc.id] / 2, abs=1e-6)
        assert doc.id is not None
        vector = np.asarray(lc_embeddings.embed_query(by_id[doc.id].text))
        assert crag["score"] == pytest.approx(float(query @ vector), abs=1e-5)


def test_as_retriever_is_unwrapped_so_scores_are_kept(
    memory_store: InMemoryVectorStore,
) -> None:
    wrapped = memory_store.as_retriever(search_kwargs={"k": 2})
    retriever = CRAGRetriever(base=wrapped, k=4)
    assert isinstance(retriever.retriever, LangChainRetriever)
    assert retriever.retriever.base is memory_store
    assert retriever.retriever.score_kind is ScoreKind.COSINE
    documents = retriever.invoke(ANSWERED)
    assert len(documents) == 4  # CRAGRetriever's k, not the wrapped retriever's
    assert documents[0].metadata["crag"]["score_kind"] == "cosine"


@pytest.mark.parametrize("kind", ["memory", "faiss"])
def test_stores_of_documents_give_analyses_their_chunks_find(
    kind: str,
    memory_store: InMemoryVectorStore,
    corpus: list[Chunk],
    lc_embeddings: LsaEmbeddings,
) -> None:
    store = (
        memory_store
        if kind == "memory"
        else langchain_faiss().from_documents(lc_documents(corpus), lc_embeddings)
    )
    retriever = LangChainRetriever(store)
    stats = retriever.corpus_stats()
    assert stats is not None and stats.analyses is not None
    chunks = retriever.search(ANSWERED, 4)
    assert chunks
    for chunk in chunks:  # the ids the searches give are those the analyses are kept by
        assert stats.analyses.get(chunk.id, chunk.text) == Analyzer().analyze(chunk.text)


def test_plain_retriever_has_no_scores_and_the_gate_says_so(corpus: list[Chunk]) -> None:
    rome = [c for c in corpus if c.id.startswith("rome")][:5]
    base = FixedRetriever(documents=lc_documents(rome))
    with pytest.warns(
        UnknownScoresWarning, match=r"Pass the vector store itself \(base=vectorstore"
    ):
        retriever = CRAGRetriever(base=base, k=3)
    assert retriever.score_semantics.startswith("no scores (a plain retriever)")
    result = retriever.router.retrieve(ANSWERED, 3)
    assert [c.id for c in result.retrieved] == [c.id for c in rome[:3]]
    assert all(c.score is None and c.score_kind is ScoreKind.UNKNOWN for c in result.retrieved)
    assert "semantic coherence unavailable: no chunk has a score" in (
        result.initial_evaluation.reasoning
    )


def test_plain_retriever_with_a_named_metadata_score(corpus: list[Chunk]) -> None:
    rome = [c for c in corpus if c.id.startswith("rome")][:3]
    documents = [
        Document(id=c.id, page_content=c.text, metadata={"source": c.source, "sim": 0.9 - i / 10})
        for i, c in enumerate(rome)
    ]
    base = FixedRetriever(documents=documents)
    declared = CRAGRetriever(base=base, score_key="sim", score_kind="cosine")
    chunks = declared.retriever.search(ANSWERED, 3)  # type: ignore[union-attr]
    assert [c.score for c in chunks] == pytest.approx([0.9, 0.8, 0.7])
    assert {c.score_kind for c in chunks} == {ScoreKind.COSINE}
    with pytest.warns(UnknownScoresWarning, match=r"Declare its kind: score_kind='cosine'"):
        undeclared = LangChainRetriever(base, score_key="sim")
    assert {c.score_kind for c in undeclared.search(ANSWERED, 3)} == {ScoreKind.UNKNOWN}
    assert "of unknown kind" in undeclared.score_semantics


def test_over_a_crag_heuristic_retriever() -> None:
    inner = sample_retriever()
    retriever = CRAGRetriever(base=inner, k=3)
    assert retriever.retriever is inner
    documents = retriever.invoke(ANSWERED)
    assert documents[0].id == "rome-4"
    assert documents[0].metadata["crag"]["metric"] == "inner_product"
    with pytest.raises(InputError, match="score_kind: options for LangChain stores"):
        CRAGRetriever(base=inner, score_kind="cosine")


def test_constructor_errors(memory_store: InMemoryVectorStore) -> None:
    with pytest.raises(InputError, match="base must be a LangChain VectorStore"):
        CRAGRetriever(base=object())  # type: ignore[arg-type]
    with pytest.raises(InputError, match="k must be a positive integer"):
        CRAGRetriever(base=memory_store, k=0)
    with pytest.raises(InputError, match="score_kind must be one of"):
        CRAGRetriever(base=memory_store, score_kind="similarity")
    with pytest.raises(InputError, match="score_key"):
        CRAGRetriever(base=FixedRetriever(documents=[]), require_scores=True)
