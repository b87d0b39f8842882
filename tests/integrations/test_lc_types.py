"""The frameworks' own types, taken as their users hand them over.

NumPy scores (LangChain's FAISS store returns ``np.float32``), Pydantic and dataclass
LangGraph states, the node's decision on ``stream_mode="custom"``, ``search_kwargs``
and per-call keywords merged as LangChain's ``VectorStoreRetriever`` merges them,
LangChain retrievers, tools and documents where a lexical retriever, a web searcher
or a docstore goes (adapted, or refused naming the adapter), statistics shared by
``configurable_fields`` copies, and a store keyed by uuids beside a BM25 retriever
keyed by the corpus's ids (one document, never twice).
"""

from __future__ import annotations

import dataclasses
import warnings
from types import SimpleNamespace
from typing import Any, TypedDict, cast

import faiss
import numpy as np
import pytest
from frameworks_support import FixedRetriever, LsaEmbeddings, langchain_faiss, lc_documents
from langchain_core.documents import Document
from langchain_core.runnables import ConfigurableField
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

import crag_heuristic._retrievers.langchain as lc_adapter
from crag_heuristic import (
    CRAG,
    BM25Retriever,
    Chunk,
    FaissRetriever,
    InputError,
    RetrieverError,
    WebSearchResponseError,
)
from crag_heuristic.integrations.langchain import (
    CRAGGradeNode,
    CRAGRetriever,
    LangChainRetriever,
    LangChainWebSearcher,
)
from crag_heuristic.sample import LsaEmbedder, load_sample_queries
from crag_heuristic.testing import StaticExpander


def fifty(corpus: list[Chunk]) -> list[str]:
    """50 queries: the 24 sample queries, then document titles."""
    queries = [q["text"] for q in load_sample_queries()]
    return (queries + [c.metadata["title"] for c in corpus])[:50]


@pytest.fixture(scope="module")
def faiss_store(corpus: list[Chunk], lc_embeddings: LsaEmbeddings) -> Any:
    """The sample in LangChain's FAISS store, its documents keyed by uuids (the store's
    default) and scored by squared L2 (float32, as FAISS answers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return langchain_faiss().from_documents(lc_documents(corpus, ids=False), lc_embeddings)


# -- LangGraph: the tutorial's graph on FAISS scores, three kinds of state ----------------


class DictState(TypedDict, total=False):
    question: str
    documents: list[Document]
    web_search: str
    crag: dict[str, Any]


class PydanticState(BaseModel):
    question: str
    documents: list[Document] = []
    web_search: str = ""
    crag: dict[str, Any] = {}


@dataclasses.dataclass
class DataclassState:
    question: str
    documents: list[Document] = dataclasses.field(default_factory=list)
    web_search: str = ""
    crag: dict[str, Any] = dataclasses.field(default_factory=dict)


@pytest.mark.parametrize("state", [DictState, PydanticState, DataclassState])
def test_the_tutorial_graph_on_faiss_scores_grades_fifty_of_fifty(
    state: type, faiss_store: Any, corpus: list[Chunk]
) -> None:
    def retrieve(s: Any) -> dict[str, Any]:
        question = s["question"] if isinstance(s, dict) else s.question
        found = faiss_store.similarity_search_with_score(question, k=4)
        assert isinstance(found[0][1], np.float32)  # what the tutorial's node hands over
        return {"documents": [Document(id=d.id, page_content=d.page_content,
                                       metadata={**d.metadata, "score": s}) for d, s in found]}  # fmt: skip

    grader = CRAGGradeNode(score_kind="squared_l2", evaluation_key="crag", state_schema=state)
    graph: Any = StateGraph(state)  # one of three state types: typed per case by LangGraph
    graph.add_node("retrieve", retrieve)
    graph.add_node("grade_documents", grader)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    graph.add_edge("grade_documents", END)
    app = graph.compile()
    graded = 0
    for question in fifty(corpus):
        events = list(app.stream({"question": question}, stream_mode=["custom", "values"]))
        custom = [data for mode, data in events if mode == "custom"]
        final = next(data for mode, data in reversed(events) if mode == "values")
        final = final if isinstance(final, dict) else vars(final)
        assert final["crag"]["evaluation"]["details"]["score_kinds"] == ["squared_l2"]
        [decision] = custom  # the node's decision, on stream_mode="custom"
        assert decision["crag_evaluation"]["verdict"] == final["crag"]["verdict"]
        assert len(decision["crag_evaluation"]["grades"]) == 4
        assert final["web_search"] == ("Yes" if final["crag"]["needs_correction"] else "No")
        graded += 1
    assert graded == 50


def test_the_node_outside_a_graph_writes_no_stream_and_reads_numpy_scores() -> None:
    node = CRAGGradeNode(score_kind="cosine")
    for score in (np.float32(0.8), np.float64(0.8), np.float16(0.8), 1, 0.8):
        document = Document(
            page_content="Roman roads were built in layers", metadata={"score": score}
        )
        update = node({"question": "How were Roman roads built?", "documents": [document]})
        assert update["documents"][0].metadata["crag"]["grade"]["similarity"] > 0
    for bad in (np.bool_(True), True, "0.8", np.array([0.8])):
        with pytest.raises(InputError, match="is not a number"):
            node(
                {
                    "question": "q",
                    "documents": [Document(page_content="x", metadata={"score": bad})],
                }
            )
    with pytest.raises(InputError, match="has no 'question'"):
        node(SimpleNamespace(documents=[]))  # an object state without the attribute
    with pytest.raises(InputError, match="has no 'question'"):
        node("a string is no state")


def test_score_key_reads_numpy_scores(corpus: list[Chunk]) -> None:
    documents = [
        Document(id=c.id, page_content=c.text, metadata={"relevance": np.float32(0.9 - i / 10)})
        for i, c in enumerate(corpus[:4])
    ]
    retriever = CRAGRetriever(
        base=FixedRetriever(documents=documents), score_key="relevance", score_kind="cosine", k=4
    )
    found = retriever.invoke("How were Roman roads built?")
    assert [d.metadata["crag"]["score"] for d in found][:1] == [pytest.approx(0.9)]
    assert {d.metadata["crag"]["score_kind"] for d in found} == {"cosine"}


# -- search_kwargs and per-call keywords ---------------------------------------------------


def test_search_kwargs_k_is_the_number_of_documents(
    memory_store: InMemoryVectorStore, faiss_store: Any
) -> None:
    question = "How were Roman roads built?"
    assert len(CRAGRetriever(base=memory_store, search_kwargs={"k": 3}).invoke(question)) == 3
    wrapped = faiss_store.as_retriever(search_kwargs={"k": 2})
    assert len(CRAGRetriever(base=wrapped).invoke(question)) == 2
    assert len(CRAGRetriever(base=wrapped, k=4).invoke(question)) == 4  # k= given: it wins
    with pytest.raises(InputError, match=r"k=4 and search_kwargs=\{'k': 3\} disagree"):
        CRAGRetriever(base=memory_store, k=4, search_kwargs={"k": 3})
    with pytest.raises(InputError, match="k must be a positive integer"):
        CRAGRetriever(base=memory_store, search_kwargs={"k": 0})
    with pytest.raises(InputError, match=r"search_kwargs k=2: the router asks for k per search"):
        LangChainRetriever(wrapped)
    configurable = CRAGRetriever(base=memory_store, search_kwargs={"k": 3}).configurable_fields(
        k=ConfigurableField(id="k")
    )
    assert len(configurable.invoke(question)) == 3
    assert len(configurable.with_config(configurable={"k": 5}).invoke(question)) == 5


def test_per_call_keywords_are_merged_over_search_kwargs(faiss_store: Any) -> None:
    question = "How were Roman roads built?"
    retriever = CRAGRetriever(
        base=faiss_store, k=4, search_kwargs={"filter": {"source": "rome-1"}}, cache=False
    )
    assert {d.metadata["source"] for d in retriever.invoke(question)} == {"rome-1"}
    # a call's filter narrows the retriever's own (both hold), never replaces it
    by_call = retriever.invoke(question, filter={"source": "rome-2"})
    assert [d for d in by_call if d.metadata.get("source") == "rome-2"] == []
    either = retriever.invoke(question, filter={"source": {"$in": ["rome-1", "rome-2"]}})
    assert {d.metadata["source"] for d in either} == {"rome-1"}
    assert {d.metadata["source"] for d in retriever.invoke(question)} == {"rome-1"}  # unchanged
    with pytest.raises(InputError, match="k is not a search keyword here"):
        cast(LangChainRetriever, retriever.retriever).with_search_kwargs({"k": 3})


# -- LangChain parts where a lexical retriever, a web searcher or a docstore goes ----------


@tool
def web_tool(query: str) -> list[dict[str, str]]:
    """A web search tool (TavilySearchResults' answer shape)."""
    return [
        {"url": "https://example.org/roads", "title": "Roads", "content": "Roman roads in layers"},
        {"url": "ftp://example.org/x", "content": "not http"},
    ]


@tool
def text_tool(query: str) -> str:
    """A tool that answers text."""
    return "some text"


def test_langchain_parts_are_adapted_or_refused_naming_the_adapter(
    memory_store: InMemoryVectorStore, faiss_store: Any, corpus: list[Chunk]
) -> None:
    question = "Which chess openings are best for beginners?"  # IRRELEVANT: the web route
    web_docs = FixedRetriever(
        documents=[Document(page_content="Openings for beginners",
                            metadata={"source": "https://chess.example.org/o"})]
    )  # fmt: skip
    for web, source in ((web_tool, "https://example.org/roads"),
                        (web_docs, "https://chess.example.org/o")):  # fmt: skip
        retriever = CRAGRetriever(base=memory_store, web=web, k=4, cache=False)
        assert isinstance(retriever.router.web, LangChainWebSearcher)
        found = retriever.invoke(question)
        assert (
            found[0].metadata["crag"]["origin"] == "web" and found[0].metadata["source"] == source
        )
    with pytest.raises(WebSearchResponseError, match="answered a str, not a list of results"):
        LangChainWebSearcher(text_tool).search("chess", 3)
    # a LangChain store or retriever as the lexical one: adapted, its ranking fused
    lexical = CRAGRetriever(base=memory_store, lexical=faiss_store, expander=False, cache=False)
    assert isinstance(lexical.router.lexical, LangChainRetriever)
    # the core router names the adapter that takes each
    plain = LangChainRetriever(memory_store)
    for kwargs, adapter in (
        ({"lexical": faiss_store}, r"lexical=LangChainRetriever\(\.\.\.\)"),
        ({"lexical": FixedRetriever(documents=[])}, r"lexical=LangChainRetriever\(\.\.\.\)"),
        ({"web": web_tool}, r"web=LangChainWebSearcher\(\.\.\.\)"),
        ({"web": web_docs}, r"web=LangChainWebSearcher\(\.\.\.\)"),
        ({"lexical": web_tool}, r"a web search tool goes in web=LangChainWebSearcher"),
        ({"lexical": Document(page_content="x")}, r"BM25Retriever\(documents\)"),
    ):
        with pytest.raises(InputError, match=adapter):
            CRAG(plain, **kwargs)
    with pytest.raises(InputError, match=r"retriever=LangChainRetriever\(\.\.\.\)"):
        CRAG(faiss_store)  # a store's own search(query, search_type) is not a retriever's


def test_langchain_documents_as_a_docstore(corpus: list[Chunk], lsa: LsaEmbedder) -> None:
    documents = lc_documents(corpus)
    index = faiss.IndexFlatIP(lsa.dimension)
    index.add(lsa.embed_many([c.text for c in corpus]))
    faiss_retriever = FaissRetriever(index, documents, lsa, normalized=True)
    top = faiss_retriever.search("How were Roman roads built?", 3)
    assert top[0].id == "rome-4" and top[0].source == "rome-4"
    bm25 = BM25Retriever(documents)
    assert bm25.search("Roman roads", 1)[0].id.startswith("rome-")
    unnamed = BM25Retriever(lc_documents(corpus, ids=False))
    assert unnamed.documents[0].id == "0"  # no id: its position, as any docstore entry
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        store = langchain_faiss().from_documents(documents[:4], LsaEmbeddings(lsa))
    with pytest.raises(InputError, match=r"use LangChainFaissRetriever\(store\)"):
        FaissRetriever(store.index, store.docstore, lsa)
    with pytest.raises(InputError, match=r"use LangChainFaissRetriever\(store\)"):
        FaissRetriever(store, documents, lsa)


# -- statistics shared by copies; one document under two ids -------------------------------


def test_configurable_copies_do_not_read_the_docstore_again(
    memory_store: InMemoryVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    read = lc_adapter._store_documents

    def counting(store: Any, retriever: str) -> Any:
        reads.append(retriever)
        return read(store, retriever)

    monkeypatch.setattr(lc_adapter, "_store_documents", counting)
    retriever = CRAGRetriever(base=memory_store, k=5)
    configurable = retriever.configurable_fields(k=ConfigurableField(id="k"))
    for k in (2, 3, 4):
        assert len(configurable.with_config(configurable={"k": k}).invoke("Roman roads")) == k
    assert reads == ["langchain"]  # once, at construction
    assert retriever.model_copy(update={"k": 2}).corpus_stats is retriever.corpus_stats
    assert reads == ["langchain"]


def test_uuid_ids_in_the_store_and_corpus_ids_in_bm25_fuse_once(
    faiss_store: Any, corpus: list[Chunk]
) -> None:
    retriever = CRAGRetriever(
        base=faiss_store,
        k=6,
        lexical=BM25Retriever(corpus),  # keyed by the corpus's ids
        expander=StaticExpander(["roman roads"]),
        config={"fetch_k": 12},
        cache=False,
    )
    twice = 0
    reconciled = 0
    for question in fifty(corpus):
        result = retriever.router.retrieve(question, 6)
        texts = [c.text for c in result.chunks]
        twice += len(texts) - len(set(texts))
        reconciled += result.counts.get("reconciled", 0)
    assert twice == 0
    assert reconciled > 0  # the case arose: BM25 found documents the store holds


def test_an_adapter_error_names_a_score_that_is_no_number() -> None:
    documents = [Document(page_content="x", metadata={"relevance": "high"})]
    adapter = LangChainRetriever(
        FixedRetriever(documents=documents), score_key="relevance", score_kind="probability"
    )
    with pytest.raises(RetrieverError, match="'high' is not a number"):
        adapter.search("q", 1)
