"""Bad input from LangChain stores and retrievers: a typed error or a documented
degraded result, never a silently wrong similarity."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from typing import Any

import pytest
from frameworks_support import ANSWERED, FixedRetriever, lc_documents
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from crag_heuristic import Chunk, Evaluator, RetrieverError, ScoreKind
from crag_heuristic.integrations.langchain import CRAGRetriever, LangChainRetriever
from crag_heuristic.retrievers import UnknownScoresWarning


class ListStore(VectorStore):
    """A real VectorStore subclass that only does ``similarity_search`` (no scores),
    unless ``scores`` is given: then ``similarity_search_with_score`` returns them."""

    def __init__(self, documents: list[Document], scores: list[float] | None = None) -> None:
        self.documents = documents
        self.scores = scores

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return self.documents[:k]

    def similarity_search_with_score(
        self, *args: Any, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        if self.scores is None:
            return super().similarity_search_with_score(*args, **kwargs)  # NotImplementedError
        k: int = kwargs.get("k", 4)
        return list(zip(self.documents, self.scores, strict=True))[:k]

    @classmethod
    def from_texts(  # type: ignore[override]
        cls, texts: list[str], embedding: Embeddings, **kwargs: Any
    ) -> ListStore:
        return cls([Document(page_content=t) for t in texts])


@pytest.fixture
def rome(corpus: list[Chunk]) -> list[Document]:
    return lc_documents([c for c in corpus if c.id.startswith("rome")][:4])


async def test_a_store_without_scores_degrades_to_no_scores(rome: list[Document]) -> None:
    with pytest.warns(UnknownScoresWarning, match="Declare them: score_kind='cosine'"):
        retriever = LangChainRetriever(ListStore(rome))
    chunks = retriever.search(ANSWERED, 3)  # no second warning: once per retriever
    assert [c.id for c in chunks] == [d.id for d in rome[:3]]
    assert all(c.score is None and c.score_kind is ScoreKind.UNKNOWN for c in chunks)
    assert retriever.score_semantics.startswith("no scores: ListStore.similarity_search_with_")
    assert await retriever.asearch(ANSWERED, 3) == chunks
    evaluation = Evaluator().evaluate(ANSWERED, chunks)
    assert "semantic coherence unavailable: no chunk has a score" in evaluation.reasoning


def test_a_store_without_scores_is_an_error_when_scores_are_required(
    rome: list[Document],
) -> None:
    with pytest.warns(UnknownScoresWarning):  # their kind is not known either
        required = LangChainRetriever(ListStore(rome), require_scores=True)
    with pytest.raises(RetrieverError, match=r"returns no scores .* but scores are required"):
        required.search(ANSWERED, 3)
    with pytest.raises(RetrieverError, match="returns no scores"):  # declared, then missing
        CRAGRetriever(base=ListStore(rome), score_kind="cosine").invoke(ANSWERED)


def test_scores_of_an_unknown_kind_are_kept_raw_as_unknown(rome: list[Document]) -> None:
    store = ListStore(rome, scores=[12.5, 7.0, 3.25, 1.0])  # what scale? nobody says
    with pytest.warns(UnknownScoresWarning, match="ListStore does not say what its scores are"):
        retriever = LangChainRetriever(store)
    assert retriever.score_kind is ScoreKind.UNKNOWN
    assert "ListStore does not say what its scores mean" in retriever.score_semantics
    chunks = retriever.search(ANSWERED, 4)
    assert [c.score for c in chunks] == [12.5, 7.0, 3.25, 1.0]
    assert {c.score_kind for c in chunks} == {ScoreKind.UNKNOWN}
    assert chunks[0].metadata["raw_score"] == 12.5 and chunks[0].metadata["metric"] == "unknown"
    evaluation = Evaluator().evaluate(ANSWERED, chunks)
    assert evaluation.signals.semantic_coherence is None
    assert "scores of kind unknown carry no absolute similarity" in evaluation.reasoning
    # the documents the retriever returns say it too
    with pytest.warns(UnknownScoresWarning, match="score_kind='cosine'"):
        documents = CRAGRetriever(base=store, k=2).invoke(ANSWERED)
    assert documents[0].metadata["crag"]["score_kind"] == "unknown"
    assert documents[0].metadata["crag"]["grade"]["similarity"] is None


def test_declared_scores_are_checked(rome: list[Document]) -> None:
    nan = LangChainRetriever(ListStore(rome, scores=[float("nan")] * 4), score_kind="cosine")
    with pytest.raises(RetrieverError, match="non-finite score nan"):
        nan.search(ANSWERED, 2)
    negative = ListStore(rome, scores=[-0.5, 0.1, 0.2, 0.3])
    with pytest.raises(RetrieverError, match="a l2 score cannot be negative"):
        LangChainRetriever(negative, score_kind="l2").search(ANSWERED, 2)
    as_cosine = LangChainRetriever(negative, score_kind="cosine").search(ANSWERED, 2)
    assert [c.score for c in as_cosine] == [-0.5, 0.1]  # a negative cosine is a cosine


def test_results_that_are_not_documents_are_an_error(rome: list[Document]) -> None:
    class Garbage(ListStore):
        def similarity_search_with_score(
            self, *args: Any, **kwargs: Any
        ) -> list[tuple[Document, float]]:
            return [("just text", 0.5)]  # type: ignore[list-item]

    with pytest.raises(RetrieverError, match=r"result #0 is a str, not a Document"):
        LangChainRetriever(Garbage(rome), score_kind="cosine").search(ANSWERED, 2)


def test_metadata_scores_must_be_numbers(rome: list[Document]) -> None:
    bad = [Document(page_content="x", metadata={"sim": "high"})]
    adapter = LangChainRetriever(
        FixedRetriever(documents=bad), score_key="sim", score_kind="cosine"
    )
    with pytest.raises(RetrieverError, match=r"metadata\['sim'\] = 'high' is not a number"):
        adapter.search(ANSWERED, 1)
    missing = [Document(page_content="x", metadata={})]
    declared = LangChainRetriever(
        FixedRetriever(documents=missing), score_key="sim", score_kind="cosine"
    )
    with pytest.raises(RetrieverError, match=r"has no metadata\['sim'\] score"):
        declared.search(ANSWERED, 1)


def _expected_id(text: str, source: str) -> str:
    digest = hashlib.sha256(source.encode() + b"\x00" + text.encode()).hexdigest()
    return "lc:" + digest[:16]


def test_documents_without_ids_get_stable_ids(corpus: list[Chunk]) -> None:
    documents = lc_documents(corpus, ids=False)
    no_ids = ListStore(documents, scores=[0.9 - i / 100 for i in range(len(documents))])
    chunks = LangChainRetriever(no_ids, score_kind="cosine").search(ANSWERED, 3)
    by_text = {c.text: c for c in corpus}
    for chunk in chunks:
        assert chunk.id == _expected_id(chunk.text, by_text[chunk.text].id)
    # the same id in another query (so fused rankings and caches line up) ...
    again = LangChainRetriever(no_ids, score_kind="cosine").search("something else entirely", 3)
    assert [c.id for c in again] == [c.id for c in chunks]
    # ... and in another process (no salted hash())
    code = (
        "from crag_heuristic._retrievers.langchain import stable_document_id;"
        f"print(stable_document_id({chunks[0].text!r}, {chunks[0].source!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == chunks[0].id


def test_one_document_twice_is_kept_once(rome: list[Document]) -> None:
    twice = [
        rome[0],
        rome[1],
        Document(page_content=rome[0].page_content, metadata=rome[0].metadata),
    ]
    for doc in twice:
        doc.id = None
    store = ListStore(twice, scores=[0.9, 0.8, 0.7])
    chunks = LangChainRetriever(store, score_kind="cosine").search(ANSWERED, 3)
    assert len(chunks) == 2 and chunks[0].score == 0.9  # the best-ranked copy
    same_text_other_source = Document(page_content=rome[0].page_content, metadata={"source": "x"})
    store = ListStore([rome[0], same_text_other_source], scores=[0.9, 0.8])
    assert (
        len(LangChainRetriever(store, score_kind="cosine").search(ANSWERED, 2)) == 2
    )  # two documents
