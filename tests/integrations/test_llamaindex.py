"""CRAGPostprocessor inside a real LlamaIndex VectorStoreIndex query engine.

Local embedding (LSA over the sample), LlamaIndex's own SimpleVectorStore and
its MockLLM, which answers with the prompt it was given: the response shows
exactly which context reached the LLM.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from frameworks_support import ANSWERED, UNANSWERED, LsaEmbedding
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from crag_heuristic import Chunk, Evaluator, InputError, ScoreKind
from crag_heuristic.integrations.llamaindex import CRAGPostprocessor
from crag_heuristic.retrievers import UnknownScoresWarning
from crag_heuristic.sample import LsaEmbedder, load_sample_queries
from crag_heuristic.testing import capture_events
from crag_heuristic.text import CorpusStats

CRAG_KEYS = {
    "crag_verdict",
    "crag_set_score",
    "crag_grade",
    "crag_chunk_verdict",
    "crag_score_kind",
}


@pytest.fixture(scope="module")
def index(corpus: list[Chunk], lsa: LsaEmbedder) -> VectorStoreIndex:
    documents = [Document(text=c.text, doc_id=c.id, metadata={"source": c.source}) for c in corpus]
    return VectorStoreIndex.from_documents(documents, embed_model=LsaEmbedding(lsa))


def engine(index: VectorStoreIndex, postprocessor: CRAGPostprocessor, k: int = 4) -> Any:
    return index.as_query_engine(
        similarity_top_k=k, node_postprocessors=[postprocessor], llm=MockLLM()
    )


def test_usable_with_no_arguments_in_a_query_engine(index: VectorStoreIndex) -> None:
    with pytest.warns(UnknownScoresWarning, match=r"CRAGPostprocessor.for_index\(index\)"):
        postprocessor = CRAGPostprocessor()
    assert isinstance(postprocessor, BaseNodePostprocessor)
    assert postprocessor.score_kind is ScoreKind.UNKNOWN  # undeclared: not guessed
    response = engine(index, postprocessor).query(ANSWERED)
    assert response.source_nodes
    for node in response.source_nodes:
        assert set(node.node.metadata) >= CRAG_KEYS
        assert node.node.metadata["crag_score_kind"] == "unknown"
    # the MockLLM echoes its prompt: our annotations are not in what the LLM saw
    assert "crag_" not in str(response)
    assert "How Roman roads were built" in str(response)


def test_for_index_reads_cosines_and_drops_irrelevant_nodes(
    index: VectorStoreIndex, lsa: LsaEmbedder
) -> None:
    postprocessor = CRAGPostprocessor.for_index(index)
    assert postprocessor.score_kind is ScoreKind.COSINE
    assert postprocessor.score_semantics.startswith("cosine similarity (SimpleVectorStore")
    retrieved = index.as_retriever(similarity_top_k=4).retrieve(ANSWERED)
    # SimpleVectorStore's score is the cosine of the two vectors (the node's text was
    # embedded with its metadata, as LlamaIndex does)
    query = lsa(ANSWERED)
    for node in retrieved:
        vector = lsa(node.node.get_content(metadata_mode=MetadataMode.EMBED))
        assert node.score == pytest.approx(float(np.dot(query, vector)), abs=1e-6)
    response = engine(index, postprocessor).query(ANSWERED)
    kept = response.source_nodes
    chunks = [
        Chunk(id=n.node.node_id, text=n.node.get_content(), score=n.score, score_kind="cosine",
              source=n.node.ref_doc_id)
        for n in retrieved
    ]  # fmt: skip
    expected = Evaluator().evaluate(ANSWERED, chunks, postprocessor.corpus_stats)
    assert [n.node.node_id for n in kept] == expected.kept_ids()
    assert len(kept) < len(retrieved)  # irrelevant nodes were dropped ...
    dropped = [n for n in retrieved if n.node.node_id not in expected.kept_ids()]
    for node in dropped:  # ... and never reached the LLM
        assert node.node.get_content().splitlines()[1][:60] not in str(response)
    first = kept[0].node.metadata
    assert first["crag_verdict"] == expected.verdict.value == "relevant"
    assert first["crag_grade"] == pytest.approx(expected.chunks[0].score)
    assert first["crag_chunk_verdict"] == "relevant"
    assert kept[0].score == retrieved[0].score  # the retrieval score is untouched
    assert retrieved[0].node.metadata.keys() == {"source"}  # the stored node is untouched


async def test_async_query(index: VectorStoreIndex) -> None:
    response = await engine(index, CRAGPostprocessor.for_index(index)).aquery(UNANSWERED)
    verdicts = {n.node.metadata["crag_verdict"] for n in response.source_nodes}
    assert verdicts == {"irrelevant"}


def test_all_irrelevant_keeps_all_and_the_verdict_says_so() -> None:
    nodes = [
        NodeWithScore(node=TextNode(text=text, id_=f"n{i}"), score=0.05)
        for i, text in enumerate(["Basalt columns form from lava.", "Knitting needs wool."])
    ]
    postprocessor = CRAGPostprocessor(score_kind="cosine")
    out = postprocessor.postprocess_nodes(nodes, query_str="How do honeybees find flowers?")
    assert [n.node.node_id for n in out] == ["n0", "n1"]
    assert {n.node.metadata["crag_chunk_verdict"] for n in out} == {"irrelevant"}
    assert {n.node.metadata["crag_verdict"] for n in out} == {"irrelevant"}
    keep_all = CRAGPostprocessor(score_kind="cosine", drop_irrelevant=False)
    assert len(keep_all.postprocess_nodes(nodes, query_str="honeybees")) == 2


def test_bad_input() -> None:
    gate = CRAGPostprocessor(score_kind="cosine")
    with pytest.raises(InputError, match="needs the query"):
        gate.postprocess_nodes([NodeWithScore(node=TextNode(text="x"))])
    with pytest.raises(InputError):
        CRAGPostprocessor(score_kind="similarity")
    with pytest.raises(InputError, match="has no vector_store"):
        CRAGPostprocessor.for_index(object())
    assert gate.postprocess_nodes([], query_str="anything") == []
    same = TextNode(text="Roman roads had layers of gravel.", id_="r")
    twice = [NodeWithScore(node=same, score=None), NodeWithScore(node=same, score=None)]
    out = gate.postprocess_nodes(twice, query_str=ANSWERED)
    assert len(out) == 1  # one node twice is graded once


def test_for_index_builds_the_statistics_at_construction(
    index: VectorStoreIndex, corpus: list[Chunk], lsa: LsaEmbedder
) -> None:
    """Without statistics the gate graded 29 of 30 queries as the router with them does;
    for_index builds them from the index's nodes, before the first query."""
    with capture_events() as events:
        postprocessor = CRAGPostprocessor.for_index(index, drop_irrelevant=False)
    built = [e for e in events if e["event"] == "crag.corpus_stats"]
    assert [e["source"] for e in built] == ["built"] and built[0]["n_docs"] == len(corpus)
    stats = postprocessor.corpus_stats
    assert stats is not None
    assert stats.fingerprint() == CorpusStats.build([c.text for c in corpus]).fingerprint()
    retriever = index.as_retriever(similarity_top_k=5)
    with capture_events() as events:
        for query in [q["text"] for q in load_sample_queries()]:
            if not np.any(lsa(query)):  # outside the LSA space: LlamaIndex divides by 0
                continue
            nodes = retriever.retrieve(query)
            out = postprocessor.postprocess_nodes(nodes, query_str=query)
            chunks = [
                Chunk(id=n.node.node_id, text=n.node.get_content(), score=n.score,
                      score_kind="cosine", source=n.node.ref_doc_id)
                for n in nodes
            ]  # fmt: skip
            expected = Evaluator().evaluate(query, chunks, stats)
            assert out[0].node.metadata["crag_verdict"] == expected.verdict.value, query
            assert out[0].node.metadata["crag_set_score"] == pytest.approx(expected.score)
    assert not [e for e in events if e["event"] == "crag.corpus_stats"]  # none on a query
    given = CRAGPostprocessor.for_index(index, corpus_stats=stats)
    assert given.corpus_stats is stats
    with pytest.raises(InputError, match="corpus_stats must be a CorpusStats"):
        CRAGPostprocessor(corpus_stats=42)  # type: ignore[arg-type]


def test_abstain_returns_no_node_or_the_note_for_an_irrelevant_list(
    index: VectorStoreIndex,
) -> None:
    """LlamaIndex's own SimilarityPostprocessor returns nothing for an off-topic question;
    by default the gate keeps the least bad nodes (and the LLM never sees the verdict)."""
    default = engine(index, CRAGPostprocessor.for_index(index)).query(UNANSWERED)
    assert default.source_nodes  # never empty by default
    assert default.source_nodes[0].node.metadata["crag_verdict"] == "irrelevant"
    abstaining = CRAGPostprocessor.for_index(index, abstain=True)
    response = engine(index, abstaining).query(UNANSWERED)
    assert str(response) == "Empty Response" and response.source_nodes == []
    assert engine(index, abstaining).query(ANSWERED).source_nodes  # a relevant list stays
    note = "No retrieved document is relevant to the question: say so."
    noting = CRAGPostprocessor.for_index(index, abstain=True, abstain_note=note)
    response = engine(index, noting).query(UNANSWERED)
    [only] = response.source_nodes
    assert only.node.get_content() == note and only.node.metadata["crag_verdict"] == "irrelevant"
    assert note in str(response)  # the MockLLM echoes its prompt: the LLM read the note
    assert "crag_verdict" not in str(response)
    with pytest.raises(InputError, match="abstain_note"):
        CRAGPostprocessor(score_kind="cosine", abstain=True, abstain_note="")


def test_to_dict_and_from_dict_keep_the_statistics_and_the_gate(
    index: VectorStoreIndex, tmp_path: Any
) -> None:
    made = CRAGPostprocessor.for_index(index, "minilm-scifact", abstain=True)
    assert made.corpus_stats is not None
    again = CRAGPostprocessor.from_dict(made.to_dict())
    assert again.corpus_stats is made.corpus_stats
    assert again.evaluator.config == made.evaluator.config
    assert (again.score_kind, again.abstain) == (ScoreKind.COSINE, True)
    with pytest.raises(InputError, match=r"save them .* corpus_stats=path"):
        made.to_json()
    path = tmp_path / "stats.npz"
    made.corpus_stats.save(path)
    by_path = CRAGPostprocessor.for_index(index, corpus_stats=path)
    loaded = CRAGPostprocessor.from_json(by_path.to_json())
    assert loaded.corpus_stats is not None
    assert loaded.corpus_stats.fingerprint() == made.corpus_stats.fingerprint()
