"""A declared score kind that the store's own index contradicts is refused (issue 26).

A LangChain FAISS store over an ``IndexFlatL2`` returns squared L2 distances;
``score_kind="cosine"`` on it graded every retrieval by its worst chunk. The
adapter reads the index's metric and refuses the contradiction, naming the
kind to declare; a consistent declaration, or none, is taken.
"""

from __future__ import annotations

from typing import Any

import faiss
import pytest
from frameworks_support import ANSWERED, LsaEmbeddings, langchain_faiss, lc_documents

from crag_heuristic import Chunk, ConfigError, ScoreKind
from crag_heuristic.retrievers import LangChainRetriever


@pytest.fixture(scope="module")
def stores(corpus: list[Chunk], lc_embeddings: LsaEmbeddings) -> dict[str, Any]:
    documents = lc_documents(corpus)
    make = langchain_faiss().from_documents
    return {
        "l2": make(documents, lc_embeddings),
        "inner_product": make(
            documents,
            lc_embeddings,
            distance_strategy="MAX_INNER_PRODUCT",  # DistanceStrategy is a str enum
        ),
    }


@pytest.mark.parametrize(
    ("store", "kind", "fix"),
    [
        ("l2", "cosine", "squared_l2"),
        ("l2", "inner_product", "squared_l2"),
        ("l2", "l2", "squared_l2"),
        ("l2", "cosine_distance", "squared_l2"),
        ("inner_product", "squared_l2", "cosine"),
        ("inner_product", "distance", "cosine"),
    ],
)
def test_a_kind_the_index_contradicts_is_refused(
    stores: dict[str, Any], store: str, kind: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as info:
        LangChainRetriever(stores[store], score_kind=kind)
    assert info.value.field == "score_kind" and info.value.value == kind
    assert f"declare '{fix}" in str(info.value)


@pytest.mark.parametrize(
    ("store", "kind"),
    [("l2", "squared_l2"), ("l2", "distance"), ("inner_product", "cosine"), ("l2", None)],
)
def test_a_consistent_kind_is_taken(stores: dict[str, Any], store: str, kind: str | None) -> None:
    retriever = LangChainRetriever(stores[store], score_kind=kind)
    chunks = retriever.search(ANSWERED, 4)
    assert chunks and retriever.score_kind is not ScoreKind.UNKNOWN
    assert stores["l2"].index.metric_type == faiss.METRIC_L2
