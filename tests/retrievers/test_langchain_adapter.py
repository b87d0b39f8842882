"""The LangChain FAISS adapter, on a real langchain_community FAISS store."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import numpy as np
import pytest

from crag_heuristic import Chunk, InputError, RetrieverError, ScoreKind
from crag_heuristic._retrievers.langchain import LangChainFaissRetriever

lc_faiss = pytest.importorskip(
    "langchain_community.vectorstores", reason="langchain-community not installed"
)
embeddings_mod = pytest.importorskip("langchain_core.embeddings")
DistanceStrategy = pytest.importorskip("langchain_community.vectorstores.utils").DistanceStrategy

TEXTS = [
    "Honeybees dance to tell the hive where flowers are.",
    "Roman roads were built with layers of stone and gravel.",
    "Espresso forces hot water through finely ground coffee.",
    "Solar panels turn sunlight into electricity.",
]


class HashEmbeddings(embeddings_mod.Embeddings):  # type: ignore[misc,name-defined]
    """Deterministic 32-d bag-of-words embeddings (a real Embeddings subclass)."""

    scale = 3.0  # not unit length unless LangChain normalises

    def _vector(self, text: str) -> list[float]:
        v = np.zeros(32)
        for word in text.lower().split():
            h = int(hashlib.sha256(word.strip(".,?").encode()).hexdigest(), 16)
            v[h % 32] += 1.0
        return list(v * self.scale)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def score(chunk: Chunk) -> float:
    assert chunk.score is not None
    return chunk.score


def store(**kwargs: Any) -> Any:
    metadatas = [{"source": f"doc{i}.md"} for i in range(len(TEXTS))]
    return lc_faiss.FAISS.from_texts(TEXTS, HashEmbeddings(), metadatas=metadatas, **kwargs)


def test_normalised_euclidean_store_gives_cosines_langchain_gets_wrong() -> None:
    vs = store(normalize_L2=True)
    retriever = LangChainFaissRetriever(vs)
    assert retriever.scores.kind is ScoreKind.COSINE
    query = "where are the flowers the honeybees dance"
    chunks = retriever.search(query, 4)
    assert chunks[0].source == "doc0.md"
    raw = [d for _, d in vs.similarity_search_with_score(query, k=4)]
    # FAISS's squared L2 of unit vectors: cos = 1 - d/2 ...
    assert [c.score for c in chunks] == pytest.approx([1 - d / 2 for d in raw], abs=1e-6)
    assert all(-1.0 <= score(c) <= 1.0 for c in chunks)
    # ... where LangChain's own relevance function (1 - d/sqrt(2)) goes below 0 and even -1
    # (LangChain itself warns that its scores fall outside [0, 1])
    with pytest.warns(UserWarning, match="Relevance scores must be between 0 and 1"):
        pairs = vs.similarity_search_with_relevance_scores("espresso", k=4)
    langchain_scores = [s for _, s in pairs]
    assert min(langchain_scores) < -0.3
    ours = retriever.search("espresso", 4)
    assert min(score(c) for c in ours) >= -1.0


def test_unnormalised_euclidean_store_is_a_distance() -> None:
    retriever = LangChainFaissRetriever(store())
    assert retriever.scores.kind is ScoreKind.DISTANCE  # scale 3: not unit vectors
    assert retriever.search("solar sunlight", 1)[0].source == "doc3.md"


def test_inner_product_store_declared_unit_vectors() -> None:
    # LangChain warns that normalising "is not applicable" to inner product, and then
    # normalises the vectors all the same: an inner-product index of unit vectors
    with pytest.warns(UserWarning, match="Normalizing L2 is not applicable"):
        vs = store(distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT, normalize_L2=True)
    retriever = LangChainFaissRetriever(vs)
    assert retriever.scores.kind is ScoreKind.COSINE
    top = retriever.search("roman roads stone", 1)[0]
    assert top.source == "doc1.md" and 0 < score(top) <= 1.0 + 1e-6


def test_ids_metadata_async_and_corpus_stats() -> None:
    vs = store(normalize_L2=True)
    retriever = LangChainFaissRetriever(vs)
    chunks = retriever.search("coffee espresso", 2)
    assert all(c.id in vs.index_to_docstore_id.values() for c in chunks)
    assert chunks[0].metadata["metric"] == "l2" and "raw_score" in chunks[0].metadata
    assert asyncio.run(retriever.asearch("coffee espresso", 2)) == chunks
    stats = retriever.corpus_stats()
    assert stats is not None and stats.n_docs == 4 and stats.df("solar") == 1


def test_duck_typed_errors() -> None:
    class Broken:
        index = store(normalize_L2=True).index

        def similarity_search_with_score(self, query: str, k: int) -> object:
            raise ConnectionError("store down")

    class Garbage(Broken):
        def similarity_search_with_score(self, query: str, k: int) -> object:
            return [("not a pair of doc and score",)]

    with pytest.raises(RetrieverError, match="store down"):
        LangChainFaissRetriever(Broken(), normalized=True).search("q", 2)
    with pytest.raises(RetrieverError, match="not a \\(Document, score\\) pair"):
        LangChainFaissRetriever(Garbage(), normalized=True).search("q", 2)
    with pytest.raises(InputError):
        LangChainFaissRetriever(object())
