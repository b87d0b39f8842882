"""CRAGRetriever behaves like LangChain's own retrievers: its keywords are checked, every
router option is one, k works per call and as a configurable field, copies work, the
statistics are ready at construction, and callbacks see its inner steps."""

from __future__ import annotations

import copy
from typing import Any
from uuid import UUID

import pytest
from frameworks_support import ANSWERED, UNANSWERED, LsaEmbeddings, langchain_faiss, lc_documents
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import ConfigurableField
from langchain_core.vectorstores import InMemoryVectorStore

from crag_heuristic import (
    CRAG,
    BM25Retriever,
    Chunk,
    EvaluatorConfig,
    InputError,
    MemoryCache,
    RouterConfig,
    Strategy,
    Verdict,
)
from crag_heuristic.grading import CallableGrader, Escalation
from crag_heuristic.integrations.langchain import CRAGRetriever
from crag_heuristic.sample import load_sample_queries, sample_retriever
from crag_heuristic.testing import RecordingWebSearcher, StaticExpander, capture_events


def always(verdict: str) -> EvaluatorConfig:
    """A linear gate whose set bands force one verdict."""
    bands = {"relevant": (0.0, 0.0), "partial": (1.0, 0.0), "irrelevant": (1.0, 1.0)}[verdict]
    return EvaluatorConfig.from_profile("synapse").replace(
        thresholds={"relevant": bands[0], "partial": bands[1]}
    )


def fixed_grade(query: str, texts: list[str]) -> list[float]:
    return [0.9] * len(texts)


def test_unknown_keywords_are_refused_with_the_closest_option(
    memory_store: InMemoryVectorStore,
) -> None:
    with pytest.raises(InputError, match=r"unknown keyword 'kk' \(did you mean 'k'\?\)"):
        CRAGRetriever(base=memory_store, kk=5)  # type: ignore[call-arg]
    with pytest.raises(InputError, match=r"unknown keyword 'grade' \(did you mean 'grader'\?\)"):
        CRAGRetriever(base=memory_store, grade=object())  # type: ignore[call-arg]
    with pytest.raises(InputError, match=r"base= is required. Its options: .*escalation"):
        CRAGRetriever()  # type: ignore[call-arg]
    retriever = CRAGRetriever(base=memory_store, tags=["mine"], metadata={"team": "a"}, name="r")
    assert retriever.tags == ["mine"] and retriever.get_name() == "r"


def test_every_router_option_is_a_keyword(
    memory_store: InMemoryVectorStore, corpus: list[Chunk]
) -> None:
    grader = CallableGrader(fixed_grade, name="fixed:v1")
    web = RecordingWebSearcher([("Bees", "https://example.org/b", "Bees dance.")])
    parents = {"p": "a parent"}
    lexical = BM25Retriever(corpus)
    expander = StaticExpander(["roman road layers"])
    retriever = CRAGRetriever(
        base=memory_store, k=4, evaluator="synapse", expander=expander, web=web,
        cache=False, config={"max_retries": 1}, lexical=lexical, parents=parents,
        grader=grader, escalation={"band": (0.0, 1.0), "budget": 1.0},
    )  # fmt: skip
    router = retriever.router
    assert router.grader is grader and router.web is web and router.parents is parents
    assert router.lexical is lexical and router.expander is expander and router.cache is None
    assert router.config.max_retries == 1 and router.evaluator.config.name == "synapse"
    assert router.escalation == Escalation(band=(0.0, 1.0), budget=1.0)
    # the fields now hold what the router uses
    assert retriever.evaluator is router.evaluator and retriever.config is router.config
    assert retriever.escalation is router.escalation and retriever.cache is False
    result = router.retrieve(ANSWERED, 4)
    assert result.cascade is not None and len(result.cascade.escalated) == 4
    assert set(result.cascade.grades.values()) == {0.9}


async def test_k_per_call(memory_store: InMemoryVectorStore) -> None:
    retriever = CRAGRetriever(base=memory_store)
    assert len(retriever.invoke(ANSWERED)) == 10
    assert len(retriever.invoke(ANSWERED, k=3)) == 3
    assert len(await retriever.ainvoke(ANSWERED, k=2)) == 2
    with pytest.raises(InputError, match="k must be a positive integer"):
        retriever.invoke(ANSWERED, k=0)
    # any other keyword is the store's, as LangChain's VectorStoreRetriever passes it on;
    # a crag-heuristic retriever takes its options at construction
    own = CRAGRetriever(base=sample_retriever(), config={"max_retries": 0})
    with pytest.raises(InputError, match=r"unknown keyword\(s\) \['kk'\]: per-call search"):
        own.invoke(ANSWERED, kk=3)


def test_k_as_a_configurable_field_shares_the_parts(memory_store: InMemoryVectorStore) -> None:
    retriever = CRAGRetriever(base=memory_store, k=5)
    configurable = retriever.configurable_fields(k=ConfigurableField(id="k"))
    assert len(configurable.invoke(ANSWERED)) == 5
    assert len(configurable.with_config(configurable={"k": 2}).invoke(ANSWERED)) == 2
    rebuilt, _ = configurable._prepare({"configurable": {"k": 3}})  # type: ignore[attr-defined]
    assert isinstance(rebuilt, CRAGRetriever) and rebuilt.k == 3
    assert rebuilt.router is not retriever.router  # LangChain rebuilt it from its fields ...
    assert rebuilt.cache is retriever.cache  # ... sharing the cache
    assert rebuilt.router.corpus_stats() is retriever.router.corpus_stats() is not None


def test_copies(memory_store: InMemoryVectorStore) -> None:
    retriever = CRAGRetriever(base=memory_store, k=4, metadata={"team": "a"})
    clone = copy.deepcopy(retriever)
    assert clone is not retriever and clone.router is not retriever.router
    assert clone.metadata == {"team": "a"} and clone.metadata is not retriever.metadata
    assert clone.base is memory_store and clone.cache is retriever.cache  # shared services
    assert [d.id for d in clone.invoke(ANSWERED)] == [d.id for d in retriever.invoke(ANSWERED)]
    assert copy.copy(retriever).router is retriever.router
    smaller = retriever.model_copy(update={"k": 2})
    assert len(smaller.invoke(ANSWERED)) == 2 and retriever.k == 4
    with_web = retriever.model_copy(update={"web": RecordingWebSearcher()})
    assert with_web.router.web is not None and retriever.router.web is None  # rebuilt
    assert retriever.model_copy(deep=True).metadata is not retriever.metadata
    with pytest.raises(InputError, match="unknown keyword 'kk'"):
        retriever.model_copy(update={"kk": 1})


def test_statistics_are_built_at_construction_and_verdicts_equal_the_router(
    corpus: list[Chunk], lc_embeddings: LsaEmbeddings
) -> None:
    store = langchain_faiss().from_documents(lc_documents(corpus), lc_embeddings, normalize_L2=True)
    with capture_events() as events:
        retriever = CRAGRetriever(base=store, k=5, cache=False)
    built = [e for e in events if e["event"] == "crag.corpus_stats"]
    assert [e["source"] for e in built] == ["built"] and built[0]["n_docs"] == len(corpus)
    core = CRAG(sample_retriever(), cache=False)  # FAISS over the same vectors, its statistics
    same_lists = 0
    with capture_events() as events:
        for query in [q["text"] for q in load_sample_queries()]:
            ours, theirs = retriever.router.retrieve(query, 5), core.retrieve(query, 5)
            assert ours.initial_evaluation.verdict is theirs.initial_evaluation.verdict, query
            assert ours.initial_evaluation.details["idf_weighted"] is True
            # a query the LSA space does not know is the zero vector: its squared L2
            # distance is 1 to every unit vector, so the store ranks otherwise
            if [c.id for c in ours.retrieved] == [c.id for c in theirs.retrieved]:
                same_lists += 1
                assert ours.initial_evaluation.score == pytest.approx(
                    theirs.initial_evaluation.score, abs=1e-5
                )
    assert same_lists >= 20
    assert not [e for e in events if e["event"] == "crag.corpus_stats"]  # none on a query


class Recorder(BaseCallbackHandler):
    """What a callback handler sees, in order: (kind, name, parent run id)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, UUID | None]] = []
        self.custom: dict[str, Any] = {}

    def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
        self.seen.append(("retriever", kwargs["name"], kwargs.get("parent_run_id")))

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.seen.append(("chain", kwargs["name"], kwargs.get("parent_run_id")))

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.seen.append(("custom", name, kwargs.get("run_id")))
        self.custom[name] = data


def test_callbacks_get_child_runs_and_the_verdict(
    memory_store: InMemoryVectorStore, corpus: list[Chunk]
) -> None:
    recorder = Recorder()
    retriever = CRAGRetriever(
        base=memory_store, k=4, evaluator=always("partial"), lexical=BM25Retriever(corpus),
        grader=CallableGrader(fixed_grade, name="fixed:v1"), escalation={"budget": 1.0},
        config={"web_on_partial": True}, web=RecordingWebSearcher(), cache=False,
    )  # fmt: skip
    documents = retriever.invoke(ANSWERED, config={"callbacks": [recorder]})
    names = [(kind, name) for kind, name, _ in recorder.seen]
    assert names[:3] == [
        ("retriever", "CRAGRetriever"),
        ("retriever", "InMemoryVectorStore"),  # the store search
        ("chain", "crag_gate"),  # the gate's grading ...
    ]
    assert ("chain", "CallableGrader") in names  # ... with the cascade's grader inside it
    assert names.index(("chain", "CallableGrader")) < names.index(("custom", "crag_evaluation"))
    assert ("retriever", "BM25Retriever") in names  # the lexical re-retrieval
    assert ("retriever", "RecordingWebSearcher") in names  # the web search
    assert names[-1] == ("custom", "crag_result")
    top = recorder.seen[0]
    parents = {name: parent for _, name, parent in recorder.seen[1:]}
    assert parents["InMemoryVectorStore"] == parents["BM25Retriever"] == parents["crag_gate"]
    assert parents["crag_gate"] is not None and top[2] is None
    assert parents["CallableGrader"] not in (None, parents["crag_gate"])  # under the gate run
    evaluation = recorder.custom["crag_evaluation"]
    assert evaluation["verdict"] == "partial" and len(evaluation["grades"]) == 4
    result = recorder.custom["crag_result"]
    assert result["chunk_ids"] == [d.id for d in documents]
    assert result["strategy"] == documents[0].metadata["crag"]["strategy"]


async def test_astream_events_show_the_inner_runs_and_the_verdict(
    memory_store: InMemoryVectorStore,
) -> None:
    web = RecordingWebSearcher([("Chess", "https://chess.example.org", "Openings for all.")])
    retriever = CRAGRetriever(base=memory_store, k=4, web=web, cache=False)
    events = [event async for event in retriever.astream_events(UNANSWERED, version="v2")]
    seen = [(e["event"], e["name"]) for e in events]
    assert seen[0] == ("on_retriever_start", "CRAGRetriever")
    assert seen[-1] == ("on_retriever_end", "CRAGRetriever")
    for expected in [
        ("on_retriever_start", "InMemoryVectorStore"),
        ("on_retriever_end", "InMemoryVectorStore"),
        ("on_chain_start", "crag_gate"),
        ("on_chain_end", "crag_gate"),
        ("on_custom_event", "crag_evaluation"),
        ("on_retriever_start", "RecordingWebSearcher"),
        ("on_custom_event", "crag_result"),
    ]:
        assert expected in seen, expected
    assert seen.index(("on_custom_event", "crag_evaluation")) < seen.index(
        ("on_retriever_start", "RecordingWebSearcher")
    )  # the verdict is out before the correction starts
    custom: dict[str, Any] = {
        e["name"]: e["data"] for e in events if e["event"] == "on_custom_event"
    }
    assert custom["crag_evaluation"]["verdict"] == Verdict.IRRELEVANT.value
    assert custom["crag_result"]["strategy"] == Strategy.WEB_SEARCH.value
    gate_end = next(e for e in events if e["event"] == "on_chain_end" and e["name"] == "crag_gate")
    assert gate_end["data"]["output"]["verdict"] == "irrelevant"
    assert "crag:gate" in gate_end["tags"]


def test_without_callbacks_the_plain_router_runs(memory_store: InMemoryVectorStore) -> None:
    retriever = CRAGRetriever(base=memory_store, k=3, cache=MemoryCache())
    assert retriever.invoke(ANSWERED)[0].metadata["crag"]["verdict"] == "relevant"
    assert isinstance(retriever.router.config, RouterConfig)
