"""Helpers shared by the integration tests (imported as a top-level module: the
test directories are not packages). Real framework classes, local data.

The embeddings are LSA vectors fitted on the bundled sample corpus (no model,
no download), wrapped as a LangChain ``Embeddings`` and a LlamaIndex
``BaseEmbedding``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from llama_index.core.embeddings import BaseEmbedding
from pydantic import PrivateAttr

from crag_heuristic import Chunk
from crag_heuristic.sample import LsaEmbedder

ANSWERED = "How were Roman roads built?"
UNANSWERED = "Which chess openings are best for beginners?"


def langchain_faiss() -> Any:
    """``langchain_community.vectorstores.FAISS``. langchain-community warns on import
    that it is being sunset (a DeprecationWarning about the package, not about our
    use of it); that one warning is ignored here, around this import only."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="`langchain-community` is being sunset", category=DeprecationWarning
        )
        from langchain_community.vectorstores import FAISS
    return FAISS


class LsaEmbeddings(Embeddings):
    """A LangChain ``Embeddings`` over an :class:`LsaEmbedder`, with a scale factor
    (``scale != 1`` makes vectors that are not unit length)."""

    def __init__(self, embedder: LsaEmbedder, scale: float = 1.0) -> None:
        self.embedder = embedder
        self.scale = scale

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = (self.embedder.embed_many(texts) * self.scale).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = (np.asarray(self.embedder(text)) * self.scale).tolist()
        return vector


class LsaEmbedding(BaseEmbedding):
    """A LlamaIndex ``BaseEmbedding`` over an :class:`LsaEmbedder` (local, deterministic)."""

    _embedder: LsaEmbedder = PrivateAttr()

    def __init__(self, embedder: LsaEmbedder) -> None:
        super().__init__(model_name="lsa-sample")
        self._embedder = embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        vector: list[float] = self._embedder(query).tolist()
        return vector

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_query_embedding(text)


def lc_documents(corpus: list[Chunk], *, ids: bool = True) -> list[Document]:
    """The corpus as LangChain documents (``source`` in metadata; ids optional)."""
    return [
        Document(id=c.id if ids else None, page_content=c.text, metadata={"source": c.source})
        for c in corpus
    ]


class FixedRetriever(BaseRetriever):
    """A plain LangChain retriever: the same documents for every query, no scores."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return list(self.documents)


def tenant_qdrant(documents: list[Chunk], lsa: LsaEmbedder) -> Any:
    """A ``QdrantRetriever`` over a local-mode collection of ``documents``: each point's
    payload holds its text, its ``tenant`` (from the metadata) and its ``parent_id``."""
    from qdrant_client import QdrantClient, models

    from crag_heuristic.integrations.qdrant import QdrantRetriever

    client = QdrantClient(":memory:")
    client.create_collection(
        "docs",
        vectors_config=models.VectorParams(size=lsa.dimension, distance=models.Distance.COSINE),
    )
    vectors = lsa.embed_many([c.text for c in documents])
    client.upsert(
        "docs",
        points=[
            models.PointStruct(
                id=i,
                vector=v.tolist(),
                payload={"text": c.text, "tenant": c.metadata["tenant"], "parent_id": c.parent_id},
            )
            for i, (c, v) in enumerate(zip(documents, vectors, strict=True))
        ],
    )
    return QdrantRetriever(client, "docs", lsa)
