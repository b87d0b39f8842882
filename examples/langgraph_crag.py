"""Corrective RAG in LangGraph, with the document grader replaced by crag-heuristic.

The graph is the one the LangGraph CRAG walk-throughs build::

    retrieve -> grade_documents -> decide -> generate
                                         \\-> transform_query -> web_search -> generate

where every step but retrieval is usually an LLM call. Here:

* ``retrieve``: a LangChain ``InMemoryVectorStore`` over the bundled sample
  corpus (64 short documents) with a local, deterministic embedding (LSA,
  fitted on the corpus: no model download); the cosine similarities go into
  each document's ``metadata["score"]``;
* ``grade_documents``: :class:`~crag_heuristic.integrations.langchain.CRAGGradeNode`
  (no LLM, about a millisecond): keeps the documents graded at least PARTIAL
  and sets ``web_search`` to ``"Yes"`` when the set is not RELEVANT;
* ``transform_query``: :func:`crag_heuristic.web.keyword_query`, the router's
  keyword rewrite for web search;
* ``web_search``: a :class:`~crag_heuristic.SearxngClient` when ``--searxng URL``
  is given (its results join the documents), otherwise a note that the web is off;
* ``generate``: a stub that echoes the context (plug your LLM in here).

Run it offline (needs the ``langchain`` extra: ``pip install 'crag-heuristic[langchain]'``)::

    python examples/langgraph_crag.py
    python examples/langgraph_crag.py --query "How were Roman roads built?" --searxng http://127.0.0.1:8888
"""

from __future__ import annotations

import argparse
import operator
import sys
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import END, START, StateGraph

from crag_heuristic import SearxngClient, WebSearchError
from crag_heuristic.integrations.langchain import CRAGGradeNode
from crag_heuristic.sample import LsaEmbedder, load_sample_corpus
from crag_heuristic.web import keyword_query

DEFAULT_QUERIES = (
    "How were Roman roads built?",  # the sample answers it
    "Which chess openings are best for beginners?",  # the sample does not
)


class GraphState(TypedDict, total=False):
    """The graph's state: what each node reads and writes."""

    question: str
    documents: list[Document]
    web_search: str  # "Yes" / "No", written by the grading node
    crag: dict[str, Any]  # the grading node's evaluation
    web_query: str
    web_note: str
    generation: str
    steps: Annotated[list[str], operator.add]  # the path taken, node by node


class LsaEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over :class:`~crag_heuristic.sample.LsaEmbedder` (local)."""

    def __init__(self, embedder: LsaEmbedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed_many(texts)]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.embedder(text)]


def sample_store() -> InMemoryVectorStore:
    """The bundled sample corpus in a LangChain in-memory vector store."""
    corpus = load_sample_corpus()
    store = InMemoryVectorStore(LsaEmbeddings(LsaEmbedder([c.text for c in corpus])))
    store.add_documents(
        [Document(id=c.id, page_content=c.text, metadata={"source": c.source}) for c in corpus]
    )
    return store


def build_graph(store: InMemoryVectorStore, *, web: Any = None, k: int = 4) -> Any:
    """The compiled CRAG graph over ``store``; ``web`` is a web searcher or ``None``."""

    def retrieve(state: GraphState) -> dict[str, Any]:
        pairs = store.similarity_search_with_score(state["question"], k=k)
        documents = [
            Document(
                id=doc.id, page_content=doc.page_content, metadata={**doc.metadata, "score": s}
            )
            for doc, s in pairs
        ]
        return {"documents": documents, "steps": ["retrieve"]}

    # InMemoryVectorStore scores are cosine similarities: declare them, so the
    # gate has similarity evidence (undeclared scores would count as UNKNOWN).
    grader = CRAGGradeNode(score_kind="cosine", evaluation_key="crag", state_schema=GraphState)

    def grade_documents(state: GraphState) -> dict[str, Any]:
        return {**grader(state), "steps": ["grade_documents"]}

    def decide_to_generate(state: GraphState) -> str:
        return "transform_query" if state.get("web_search") == "Yes" else "generate"

    def transform_query(state: GraphState) -> dict[str, Any]:
        return {"web_query": keyword_query(state["question"]), "steps": ["transform_query"]}

    def web_search(state: GraphState) -> dict[str, Any]:
        documents = list(state.get("documents") or [])
        if web is None:
            note = "web search is off (no --searxng URL): generating from the documents kept"
            return {"web_note": note, "steps": ["web_search"]}
        try:
            results = web.search(state["web_query"], 3)
        except WebSearchError as exc:
            return {"web_note": f"web search failed: {exc}", "steps": ["web_search"]}
        documents += [
            Document(id=r.id, page_content=r.text, metadata={"source": r.source, "origin": "web"})
            for r in results
        ]
        note = f"web search: {len(results)} results"
        return {"documents": documents, "web_note": note, "steps": ["web_search"]}

    def generate(state: GraphState) -> dict[str, Any]:
        # A stub generator: it echoes the context it was given. Put your LLM here.
        lines = [f"Question: {state['question']}"]
        documents = state.get("documents") or []
        if not documents:
            lines.append("Context: (none: nothing relevant was found)")
        for doc in documents:
            first = doc.page_content.splitlines()[0] if doc.page_content else ""
            lines.append(f"Context [{doc.metadata.get('source')}]: {first}")
        return {"generation": "\n".join(lines), "steps": ["generate"]}

    graph = StateGraph(GraphState)
    graph.add_node("retrieve", retrieve)
    graph.add_node("grade_documents", grade_documents)
    graph.add_node("transform_query", transform_query)
    graph.add_node("web_search", web_search)
    graph.add_node("generate", generate)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    graph.add_conditional_edges(
        "grade_documents",
        decide_to_generate,
        {"transform_query": "transform_query", "generate": "generate"},
    )
    graph.add_edge("transform_query", "web_search")
    graph.add_edge("web_search", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", action="append", help="a question (repeatable)")
    parser.add_argument("--searxng", metavar="URL", help="a SearXNG instance for web search")
    parser.add_argument("--k", type=int, default=4, help="documents retrieved")
    args = parser.parse_args(argv)
    web = SearxngClient(args.searxng) if args.searxng else None
    app = build_graph(sample_store(), web=web, k=args.k)
    for question in args.query or DEFAULT_QUERIES:
        state = app.invoke({"question": question})
        crag = state["crag"]
        print(f"== {question}")
        print(f"path: {' -> '.join(state['steps'])}")
        print(
            f"verdict: {crag['verdict']} (score {crag['score']:.2f}); "
            f"kept {crag['kept']}, dropped {crag['dropped']}; web_search={state['web_search']}"
        )
        if state.get("web_note"):
            print(f"web: {state['web_note']}")
        print(state["generation"])
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
