"""The LangGraph grading node, alone and inside a real StateGraph; the example graph."""

from __future__ import annotations

import importlib.util
import operator
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, TypedDict

import numpy as np
import pytest
from frameworks_support import ANSWERED, UNANSWERED, langchain_faiss, lc_documents
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel

from crag_heuristic import Chunk, Evaluator, InputError, ScoreKind, Verdict
from crag_heuristic.integrations.langchain import CRAGGradeNode, CRAGRetriever, ScoredRetriever
from crag_heuristic.retrievers import UnknownScoresWarning
from crag_heuristic.sample import LsaEmbedder, load_sample_queries
from crag_heuristic.testing import RecordingWebSearcher

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_crag.py"


class State(TypedDict, total=False):
    question: str
    documents: list[Document]
    web_search: str
    crag: dict[str, Any]
    steps: Annotated[list[str], operator.add]


def node(**kwargs: Any) -> CRAGGradeNode:
    """A grading node that also writes its evaluation to ``state["crag"]``."""
    return CRAGGradeNode(evaluation_key="crag", state_schema=State, **kwargs)


def scored(store: InMemoryVectorStore, query: str, k: int = 4) -> list[Document]:
    return [
        Document(id=d.id, page_content=d.page_content, metadata={**d.metadata, "score": s})
        for d, s in store.similarity_search_with_score(query, k=k)
    ]


def test_node_grades_like_the_evaluator(memory_store: InMemoryVectorStore) -> None:
    documents = scored(memory_store, ANSWERED)
    update = node(score_kind="cosine")({"question": ANSWERED, "documents": documents})
    chunks = [
        Chunk(
            id=str(d.id),
            text=d.page_content,
            score=d.metadata["score"],
            score_kind=ScoreKind.COSINE,
            source=d.metadata["source"],
            metadata=d.metadata,
        )
        for d in documents
    ]
    expected = Evaluator().evaluate(ANSWERED, chunks)
    assert update["crag"]["evaluation"] == expected.to_dict()
    assert update["crag"]["verdict"] == expected.verdict.value == "relevant"
    assert update["web_search"] == "No" and update["crag"]["needs_correction"] is False
    kept_ids = expected.kept_ids(Verdict.PARTIAL)
    assert [d.id for d in update["documents"]] == kept_ids
    assert update["crag"]["kept"] == len(kept_ids)
    assert update["crag"]["dropped"] == len(documents) - len(kept_ids)
    for doc in update["documents"]:
        grade = expected.chunk(str(doc.id))
        assert doc.metadata["crag"]["grade"] == {
            "score": grade.score,
            "verdict": grade.verdict.value,
            "similarity": grade.similarity,
        }
        assert doc.metadata["score"] == next(
            d.metadata["score"] for d in documents if d.id == doc.id
        )


def test_node_flags_a_retrieval_that_needs_correcting(memory_store: InMemoryVectorStore) -> None:
    documents = scored(memory_store, UNANSWERED)
    update = node(score_kind="cosine")({"question": UNANSWERED, "documents": documents})
    assert update["crag"]["verdict"] == "irrelevant"
    assert update["web_search"] == "Yes" and update["crag"]["needs_correction"] is True
    strict = CRAGGradeNode(score_kind="cosine", min_chunk_verdict="relevant")
    assert strict({"question": UNANSWERED, "documents": documents})["documents"] == []
    keep_all = CRAGGradeNode(
        score_kind="cosine", min_chunk_verdict="relevant", keep_all_if_none=True
    )
    assert len(keep_all({"question": UNANSWERED, "documents": documents})["documents"]) == 4


def test_node_reads_scores_from_crag_retriever_documents(
    memory_store: InMemoryVectorStore,
) -> None:
    documents = CRAGRetriever(base=memory_store, k=4, config={"max_retries": 0}).invoke(ANSWERED)
    update = node()({"question": ANSWERED, "documents": documents})
    details = update["crag"]["evaluation"]["details"]
    assert details["score_kinds"] == ["cosine"]  # not UNKNOWN: read from metadata["crag"]
    assert update["crag"]["verdict"] == "relevant"


def test_node_without_declared_scores_says_the_gate_had_no_similarity(
    memory_store: InMemoryVectorStore,
) -> None:
    documents = scored(memory_store, ANSWERED)
    grader = node()
    with pytest.warns(UnknownScoresWarning, match=r"declare what it is, CRAGGradeNode\(score_"):
        update = grader({"question": ANSWERED, "documents": documents})
    assert update["crag"]["evaluation"]["details"]["score_kinds"] == ["unknown"]
    assert "scores of kind unknown carry no absolute similarity" in update["crag"]["reasoning"]


def test_node_state_errors_and_documents_without_ids(corpus: list[Chunk]) -> None:
    grader = node()
    with pytest.raises(InputError, match="has no 'question'"):
        grader({"documents": []})
    with pytest.raises(InputError, match="not a Document or a string"):
        grader({"question": ANSWERED, "documents": [42]})
    with pytest.raises(InputError, match="must be a list of documents"):
        grader({"question": ANSWERED, "documents": "text"})
    with pytest.raises(InputError, match="is not a number"):
        grader(
            {
                "question": ANSWERED,
                "documents": [Document(page_content="x", metadata={"score": "0.9"})],
            }
        )
    negative = Document(page_content="x", metadata={"score": -1.0})
    with pytest.raises(InputError, match="a l2 score cannot be negative"):
        CRAGGradeNode(score_kind="l2")({"question": ANSWERED, "documents": [negative]})
    foreign = Document(page_content="x", metadata={"crag": {"score": 1.0, "score_kind": "sim"}})
    with pytest.raises(InputError, match="unknown metadata\\['crag'\\]\\['score_kind'\\]"):
        grader({"question": ANSWERED, "documents": [foreign]})
    no_ids = [*lc_documents(corpus[:3], ids=False), "a plain string document about roads"]
    with pytest.warns(UnknownScoresWarning, match="carry no retrieval score"):
        update = grader({"question": ANSWERED, "documents": no_ids + no_ids[:1]})  # a repeat
    ids = [d.metadata["crag"]["chunk_id"] for d in update["documents"]]
    assert all(i.startswith("lc:") for i in ids)
    assert update["crag"]["kept"] + update["crag"]["dropped"] == 4  # the repeat counted once
    assert grader({"question": ANSWERED})["crag"]["verdict"] == "irrelevant"  # no documents


def tutorial_graph(retriever: Any, grader: CRAGGradeNode, checkpointer: Any = None) -> Any:
    """The LangGraph CRAG tutorial's graph, its LLM steps stubbed: ``retrieve`` calls
    ``retriever.invoke(question)`` as the tutorial does; ``grade_documents`` is the node."""
    graph = StateGraph(State)
    graph.add_node("retrieve", lambda s: {"documents": retriever.invoke(s["question"])})
    graph.add_node("grade_documents", lambda s: {**grader(s), "steps": ["grade"]})
    graph.add_node("generate", lambda s: {"steps": ["generate"]})
    graph.add_node("web_search", lambda s: {"steps": ["web"]})
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    graph.add_conditional_edges(
        "grade_documents",
        lambda s: "web_search" if s["web_search"] == "Yes" else "generate",
        ["web_search", "generate"],
    )
    graph.add_edge("web_search", "generate")
    graph.add_edge("generate", END)
    return graph.compile(checkpointer=checkpointer)


def test_node_inside_a_real_state_graph(memory_store: InMemoryVectorStore) -> None:
    app = tutorial_graph(
        RunnableLambda(lambda q: scored(memory_store, q)), node(score_kind="cosine")
    )
    answered = app.invoke({"question": ANSWERED})
    assert answered["steps"] == ["grade", "generate"]
    assert answered["documents"][0].id == "rome-4"
    unanswered = app.invoke({"question": UNANSWERED})
    assert unanswered["steps"] == ["grade", "web", "generate"]
    assert unanswered["crag"]["verdict"] == "irrelevant"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("langgraph_crag_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # LangGraph resolves the state's type hints through it
    spec.loader.exec_module(module)
    return module


def test_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()
    assert example.main([]) == 0
    out = capsys.readouterr().out
    answered, unanswered = out.split("== ")[1:]
    assert answered.startswith(ANSWERED)
    assert "path: retrieve -> grade_documents -> generate\n" in answered
    assert "verdict: relevant" in answered and "web_search=No" in answered
    assert "Context [rome-4]: How Roman roads were built" in answered
    assert unanswered.startswith(UNANSWERED)
    path = "path: retrieve -> grade_documents -> transform_query -> web_search -> generate\n"
    assert path in unanswered
    assert "verdict: irrelevant" in unanswered and "web_search=Yes" in unanswered
    assert "web: web search is off (no --searxng URL)" in unanswered


def test_example_graph_with_a_web_searcher() -> None:
    example = load_example()
    web = RecordingWebSearcher(
        results=[("Openings", "https://chess.example.org/o", "The Italian Game suits beginners.")]
    )
    app = example.build_graph(example.sample_store(), web=web, k=4)
    state = app.invoke({"question": UNANSWERED})
    assert web.calls == [("chess openings best beginners", 3)]  # the keyword rewrite
    assert state["web_query"] == "chess openings best beginners"
    assert state["documents"][-1].metadata == {
        "source": "https://chess.example.org/o",
        "origin": "web",
    }
    assert "Context [https://chess.example.org/o]: Openings" in state["generation"]


class TutorialState(TypedDict):
    """The state of the usual CRAG tutorial graph: no key for an evaluation."""

    question: str
    generation: str
    web_search: str
    documents: list[str]


def test_the_tutorial_state_works_and_the_evaluation_key_is_explicit_and_checked(
    memory_store: InMemoryVectorStore,
) -> None:
    """The evaluation used to go to state["crag"] by default, which the tutorial's
    state does not declare: LangGraph dropped it without a word."""
    grader = CRAGGradeNode(score_kind="cosine", state_schema=TutorialState)
    graph = StateGraph(TutorialState)
    graph.add_node("retrieve", lambda s: {"documents": scored(memory_store, s["question"])})
    graph.add_node("grade_documents", lambda s: grader(s))
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "grade_documents")
    graph.add_edge("grade_documents", END)
    start = TutorialState(question=UNANSWERED, generation="", web_search="", documents=[])
    state = graph.compile().invoke(start)
    assert state["web_search"] == "Yes" and "crag" not in state
    assert set(grader({"question": ANSWERED, "documents": []})) == {"documents", "web_search"}

    with pytest.raises(InputError, match="evaluation_key='crag' needs state_schema="):
        CRAGGradeNode(evaluation_key="crag")
    with pytest.raises(InputError, match="the graph state TutorialState has no 'crag' key"):
        CRAGGradeNode(evaluation_key="crag", state_schema=TutorialState)
    with pytest.raises(InputError, match="has no 'query' key"):
        CRAGGradeNode(question_key="query", state_schema=TutorialState)
    with pytest.raises(InputError, match="has no 'crag' key"):  # the graph itself will do
        CRAGGradeNode(evaluation_key="crag", state_schema=graph)
    with pytest.raises(InputError, match="state_schema must be the graph's state class"):
        CRAGGradeNode(state_schema=42)

    class Checked(BaseModel):  # a pydantic state
        question: str
        documents: list[Any] = []
        web_search: str = ""
        verdict: dict[str, Any] = {}

    checked = CRAGGradeNode(evaluation_key="verdict", state_schema=Checked, score_kind="cosine")
    update = checked({"question": ANSWERED, "documents": scored(memory_store, ANSWERED)})
    assert update["verdict"]["kept"] == len(update["documents"])


def test_the_tutorial_retriever_without_scores_is_explained_and_its_fix_routes_as_scores_do(
    memory_store: InMemoryVectorStore, lsa: LsaEmbedder
) -> None:
    """The tutorial's ``vectorstore.as_retriever()`` drops the scores: the node warns,
    naming ScoredRetriever; with it, every sample query takes the route it takes when
    the retrieve node puts the store's scores in the documents and the node is told
    their kind."""
    queries = [q["text"] for q in load_sample_queries() if np.any(lsa(q["text"]))]
    scored_graph = tutorial_graph(
        RunnableLambda(lambda q: scored(memory_store, q)), node(score_kind="cosine")
    )
    tutorial = tutorial_graph(memory_store.as_retriever(), node())
    with pytest.warns(UnknownScoresWarning, match=r"ScoredRetriever\(base=vectorstore\)"):
        tutorial.invoke({"question": queries[0]})
    fixed = tutorial_graph(ScoredRetriever(base=memory_store), node())
    routes: dict[str, list[list[str]]] = {"scored": [], "tutorial": [], "fixed": []}
    for text in queries:
        for name, app in (("scored", scored_graph), ("tutorial", tutorial), ("fixed", fixed)):
            routes[name].append(app.invoke({"question": text})["steps"])
    assert routes["fixed"] == routes["scored"]
    assert routes["tutorial"] != routes["scored"]  # without scores, other routes


def test_float32_scores_reach_a_checkpointed_graph_as_python_floats(
    corpus: list[Chunk], lc_embeddings: Any
) -> None:
    """LangChain's FAISS store returns NumPy float32 scores, which a checkpointer's
    msgpack serializer refuses; ScoredRetriever and the node write Python floats."""
    store = langchain_faiss().from_documents(lc_documents(corpus), lc_embeddings)
    assert isinstance(store.similarity_search_with_score(ANSWERED, k=1)[0][1], np.float32)
    app = tutorial_graph(ScoredRetriever(base=store), node(), checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    state = app.invoke({"question": ANSWERED}, config)
    assert state["steps"] == ["grade", "generate"]
    saved = app.get_state(config).values  # through the serializer and back
    assert [d.id for d in saved["documents"]] == [d.id for d in state["documents"]]
    assert type(saved["documents"][0].metadata["crag"]["score"]) is float
    # a retrieve node of one's own that puts the float32 scores in: the node's
    # documents (what it writes to the state) hold Python floats
    raw = [
        Document(id=d.id, page_content=d.page_content, metadata={**d.metadata, "score": s})
        for d, s in store.similarity_search_with_score(ANSWERED, k=4)
    ]
    update = node(score_kind="squared_l2")({"question": ANSWERED, "documents": raw})
    JsonPlusSerializer().dumps_typed(update)
    assert {type(d.metadata["score"]) for d in update["documents"]} == {float}
