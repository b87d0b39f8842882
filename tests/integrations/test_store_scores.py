"""Scores that stores say what they are: read from the store, or warned with the fix.

Real stores: LangChain's ``QdrantVectorStore`` (local mode) and FAISS, LlamaIndex's
``SimpleVectorStore``, ``FaissVectorStore`` and ``QdrantVectorStore``; Chroma
(``langchain-chroma``) when installed (it is not in the test extra: 33 more
distributions and about 300 MB), its collection reading and formulas always.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import faiss
import numpy as np
import pytest
from frameworks_support import ANSWERED, LsaEmbedding, LsaEmbeddings, langchain_faiss, lc_documents
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document as LlamaDocument
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.vector_stores.faiss import FaissVectorStore
from llama_index.vector_stores.qdrant import QdrantVectorStore as LlamaQdrantStore
from qdrant_client import QdrantClient
from qdrant_client.http import models

from crag_heuristic import CRAG, Chunk, ScoreKind
from crag_heuristic._retrievers.stores import ChromaScores, _chroma_space
from crag_heuristic.integrations.langchain import LangChainRetriever
from crag_heuristic.integrations.llamaindex import CRAGPostprocessor, vector_store_score_kind
from crag_heuristic.retrievers import UnknownScoresWarning
from crag_heuristic.sample import LsaEmbedder, load_sample_queries

QUERIES = [q["text"] for q in load_sample_queries()]


@pytest.fixture(scope="module")
def queries(lsa: LsaEmbedder) -> list[str]:
    """The sample queries inside the LSA space (a zero vector: the stores divide by 0)."""
    return [text for text in QUERIES if np.any(lsa(text))]


def lc_qdrant(corpus: list[Chunk], embeddings: LsaEmbeddings, distance: models.Distance) -> Any:
    from langchain_qdrant import QdrantVectorStore

    return QdrantVectorStore.from_documents(
        lc_documents(corpus, ids=False),  # Qdrant's ids are integers or UUIDs
        embeddings,
        location=":memory:",
        collection_name=f"docs-{distance.value}",
        distance=distance,
    )


@pytest.mark.parametrize(
    "distance", [models.Distance.COSINE, models.Distance.DOT, models.Distance.EUCLID]
)
def test_langchain_qdrant_scores_are_read_as_cosines(
    distance: models.Distance,
    corpus: list[Chunk],
    lc_embeddings: LsaEmbeddings,
    lsa: LsaEmbedder,
    memory_store: InMemoryVectorStore,
    queries: list[str],
) -> None:
    """QdrantVectorStore.distance is read (no warning: the suite makes one an error):
    every distance of unit vectors gives the cosine, and the router routes each sample
    query as over the in-memory store's cosines."""
    retriever = LangChainRetriever(lc_qdrant(corpus, lc_embeddings, distance))
    assert retriever.score_kind is ScoreKind.COSINE, retriever.score_semantics
    query = np.asarray(lsa(ANSWERED))
    for chunk in retriever.search(ANSWERED, 5):
        expected = float(query @ np.asarray(lsa(chunk.text)))
        assert chunk.score == pytest.approx(expected, abs=1e-5)
    memory = LangChainRetriever(memory_store)
    stats = memory.corpus_stats()  # the store's own (Qdrant keeps no docstore to build them)
    qdrant = CRAG(
        LangChainRetriever(lc_qdrant(corpus, lc_embeddings, distance), corpus_stats=stats)
    )
    for text in queries:
        assert qdrant.retrieve(text, k=4).verdict is CRAG(memory).retrieve(text, k=4).verdict


@pytest.mark.parametrize(
    ("distance", "kind"),
    [(models.Distance.DOT, ScoreKind.INNER_PRODUCT), (models.Distance.EUCLID, ScoreKind.DISTANCE)],
)
def test_langchain_qdrant_vectors_of_other_lengths_are_no_cosines(
    distance: models.Distance, kind: ScoreKind, corpus: list[Chunk], lsa: LsaEmbedder
) -> None:
    retriever = LangChainRetriever(lc_qdrant(corpus, LsaEmbeddings(lsa, scale=3.0), distance))
    assert retriever.score_kind is kind
    assert "not unit vectors" in retriever.score_semantics


def test_chroma_collections_say_their_space() -> None:
    """How a Chroma collection is read (Chroma >= 1.0's configuration, the older
    metadata, Chroma's default) and each space's formula, by hand."""

    class Collection:  # the two attributes Chroma's Collection has
        def __init__(self, configuration: Any = None, metadata: Any = None) -> None:
            self.configuration, self.metadata = configuration, metadata

    assert _chroma_space(Collection({"hnsw": {"space": "cosine"}})) == (
        "cosine",
        "configuration['hnsw']",
    )
    assert _chroma_space(Collection({"hnsw": None, "spann": {"space": "ip"}}))[0] == "ip"
    assert _chroma_space(Collection(None, {"hnsw:space": "cosine"}))[0] == "cosine"
    assert _chroma_space(Collection()) == ("l2", "Chroma's default")
    cos = 0.6  # unit vectors at cosine 0.6: Chroma returns 1 - cos, 1 - ip, |a-b|^2 = 2 - 2 cos
    assert ChromaScores("cosine", None)(1 - cos) == pytest.approx(cos)
    assert ChromaScores("ip", True)(1 - cos) == pytest.approx(cos)
    assert ChromaScores("l2", True)(2 - 2 * cos) == pytest.approx(cos)
    assert ChromaScores("l2", True).raw_kind is ScoreKind.SQUARED_L2
    assert ChromaScores("cosine", None).raw_kind is ScoreKind.COSINE_DISTANCE
    not_unit = ChromaScores("l2", False)
    assert not_unit.kind is ScoreKind.DISTANCE and not_unit(9.0) == 3.0
    assert ChromaScores("ip", None).kind is ScoreKind.INNER_PRODUCT
    llama = ChromaScores("cosine", None, exponential=True)  # LlamaIndex reports exp(-d)
    assert llama(math.exp(-(1 - cos))) == pytest.approx(cos)
    assert llama.raw_kind is ScoreKind.UNKNOWN


@pytest.mark.parametrize("space", ["cosine", "l2", "ip"])
def test_a_real_chroma_store_is_read(
    space: str,
    corpus: list[Chunk],
    lc_embeddings: LsaEmbeddings,
    lsa: LsaEmbedder,
    memory_store: InMemoryVectorStore,
    queries: list[str],
) -> None:
    chroma = pytest.importorskip("langchain_chroma", reason="langchain-chroma is not installed")
    store = chroma.Chroma.from_documents(
        lc_documents(corpus),
        lc_embeddings,
        collection_name=f"docs-{space}",
        collection_metadata={"hnsw:space": space},
    )
    memory = LangChainRetriever(memory_store)
    retriever = LangChainRetriever(store, corpus_stats=memory.corpus_stats())
    assert retriever.score_kind is ScoreKind.COSINE, retriever.score_semantics
    query = np.asarray(lsa(ANSWERED))
    for chunk in retriever.search(ANSWERED, 5):
        expected = float(query @ np.asarray(lsa(chunk.text)))
        assert chunk.score == pytest.approx(expected, abs=1e-4)
    chroma_router, memory_router = CRAG(retriever), CRAG(memory)
    for text in queries:
        assert (
            chroma_router.retrieve(text, k=4).verdict is memory_router.retrieve(text, k=4).verdict
        )


def llama_index(corpus: list[Chunk], lsa: LsaEmbedder, store: Any = None) -> VectorStoreIndex:
    documents = [
        LlamaDocument(text=c.text, doc_id=c.id, metadata={"source": c.source}) for c in corpus
    ]
    context = None if store is None else StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(
        documents, embed_model=LsaEmbedding(lsa), storage_context=context
    )


def verdicts(
    index: VectorStoreIndex, postprocessor: CRAGPostprocessor, lsa: LsaEmbedder
) -> list[str]:
    retriever = index.as_retriever(similarity_top_k=4)
    out = []
    for text in QUERIES:
        if not np.any(lsa(text)):  # outside the LSA space: the stores divide by 0
            continue
        nodes = postprocessor.postprocess_nodes(retriever.retrieve(text), query_str=text)
        out.append(nodes[0].node.metadata["crag_verdict"] if nodes else "none")
    return out


@pytest.mark.parametrize(
    ("metric", "kind"),
    [(faiss.METRIC_INNER_PRODUCT, ScoreKind.COSINE), (faiss.METRIC_L2, ScoreKind.SQUARED_L2)],
)
def test_llamaindex_faiss_and_qdrant_stores_are_read(
    metric: int, kind: ScoreKind, corpus: list[Chunk], lsa: LsaEmbedder
) -> None:
    """The nodes' scores are read from the FAISS index's metric and the Qdrant
    collection's distance; graded, they give the verdicts of SimpleVectorStore's cosines."""
    dimension = len(lsa(ANSWERED))
    flat = faiss.IndexFlatIP(dimension) if metric == faiss.METRIC_INNER_PRODUCT else None
    faiss_index = llama_index(
        corpus, lsa, FaissVectorStore(faiss_index=flat or faiss.IndexFlatL2(dimension))
    )
    assert vector_store_score_kind(faiss_index.vector_store)[0] is kind
    client = QdrantClient(":memory:")
    qdrant = llama_index(corpus, lsa, LlamaQdrantStore("docs", client=client, index_doc_id=False))
    assert vector_store_score_kind(qdrant.vector_store)[0] is ScoreKind.COSINE
    simple = llama_index(corpus, lsa)
    expected = verdicts(simple, CRAGPostprocessor.for_index(simple), lsa)
    assert verdicts(faiss_index, CRAGPostprocessor.for_index(faiss_index), lsa) == expected
    assert verdicts(qdrant, CRAGPostprocessor.for_index(qdrant), lsa) == expected


def test_mmr_scores_are_no_similarity(corpus: list[Chunk], lsa: LsaEmbedder) -> None:
    index = llama_index(corpus, lsa)
    with pytest.warns(UnknownScoresWarning, match="MMR scores .* use the default query mode"):
        postprocessor = CRAGPostprocessor.for_index(index, vector_store_query_mode="mmr")
    assert postprocessor.score_kind is ScoreKind.UNKNOWN


def test_no_store_leaves_its_scores_unread_in_silence(
    corpus: list[Chunk], lc_embeddings: LsaEmbeddings, lsa: LsaEmbedder
) -> None:
    """Every store here is read (a known kind), or warns naming the fix: 0 silent."""
    documents = lc_documents(corpus[:8])
    stores: dict[str, Any] = {
        "langchain FAISS": langchain_faiss().from_documents(documents, lc_embeddings),
        "langchain Qdrant": lc_qdrant(corpus[:8], lc_embeddings, models.Distance.COSINE),
        "InMemoryVectorStore": InMemoryVectorStore.from_documents(documents, lc_embeddings),
        "as_retriever() (similarity)": InMemoryVectorStore.from_documents(
            documents, lc_embeddings
        ).as_retriever(),
        "as_retriever(search_type='mmr')": InMemoryVectorStore.from_documents(
            documents, lc_embeddings
        ).as_retriever(search_type="mmr"),
    }
    silent = []
    for name, store in stores.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            retriever = LangChainRetriever(store)
        warned = [w for w in caught if issubclass(w.category, UnknownScoresWarning)]
        if retriever.score_kind is ScoreKind.UNKNOWN and not warned:
            silent.append(name)
        if warned:
            assert "search_type='similarity'" in str(warned[0].message), name
    index = llama_index(corpus[:8], lsa)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CRAGPostprocessor()
        CRAGPostprocessor.for_index(index, vector_store_query_mode="mmr")
    assert len([w for w in caught if issubclass(w.category, UnknownScoresWarning)]) == 2
    assert CRAGPostprocessor.for_index(index).score_kind is ScoreKind.COSINE
    assert silent == []


def test_a_lexical_retriever_without_scores_is_no_warning(
    memory_store: InMemoryVectorStore, corpus: list[Chunk]
) -> None:
    """A LangChain retriever given as lexical= is fused by rank: its missing scores are
    nothing to fix (the suite makes a warning an error)."""
    from frameworks_support import FixedRetriever

    from crag_heuristic.integrations.langchain import CRAGRetriever

    lexical = FixedRetriever(documents=lc_documents(corpus[:5]))
    assert CRAGRetriever(base=memory_store, lexical=lexical, k=3).invoke(ANSWERED)
