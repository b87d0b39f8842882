"""Fixtures: the bundled sample corpus, its LSA embedder and a LangChain in-memory store."""

from __future__ import annotations

import pytest
from frameworks_support import LsaEmbeddings, lc_documents
from langchain_core.vectorstores import InMemoryVectorStore

from crag_heuristic import Chunk
from crag_heuristic.sample import LsaEmbedder, load_sample_corpus


@pytest.fixture(scope="session")
def corpus() -> list[Chunk]:
    return load_sample_corpus()


@pytest.fixture(scope="session")
def lsa(corpus: list[Chunk]) -> LsaEmbedder:
    return LsaEmbedder([c.text for c in corpus])


@pytest.fixture(scope="session")
def lc_embeddings(lsa: LsaEmbedder) -> LsaEmbeddings:
    return LsaEmbeddings(lsa)


@pytest.fixture(scope="session")
def memory_store(corpus: list[Chunk], lc_embeddings: LsaEmbeddings) -> InMemoryVectorStore:
    """The sample in a LangChain ``InMemoryVectorStore`` (shared: do not add to it)."""
    store = InMemoryVectorStore(lc_embeddings)
    store.add_documents(lc_documents(corpus))
    return store
