"""The router on a real FAISS index: the bundled sample corpus with LSA vectors."""

from __future__ import annotations

import pytest

from crag_heuristic import Evaluator, EvaluatorConfig
from crag_heuristic._retrievers.bm25 import BM25Retriever
from crag_heuristic._retrievers.faiss import FaissRetriever
from crag_heuristic._sample import load_sample_corpus, sample_retriever


@pytest.fixture(scope="session")
def retriever() -> FaissRetriever:
    sample: FaissRetriever = sample_retriever()
    return sample


@pytest.fixture(scope="session")
def bm25() -> BM25Retriever:
    return BM25Retriever(load_sample_corpus())


def forced(relevant: float, partial: float) -> Evaluator:
    """An evaluator whose bands force one verdict (scores are in (0, 1))."""
    return Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": relevant, "partial": partial}
        )
    )


@pytest.fixture
def always_relevant() -> Evaluator:
    return forced(0.0, 0.0)


@pytest.fixture
def always_partial() -> Evaluator:
    return forced(1.0, 0.0)


@pytest.fixture
def always_irrelevant() -> Evaluator:
    return forced(1.0, 1.0)
