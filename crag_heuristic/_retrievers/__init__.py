"""Retrievers: adapters in front of what users already run."""

from .bm25 import BM25Retriever
from .faiss import FaissRetriever, FaissScores, detect_unit_vectors
from .langchain import LangChainFaissRetriever

__all__ = [
    "BM25Retriever",
    "FaissRetriever",
    "FaissScores",
    "LangChainFaissRetriever",
    "detect_unit_vectors",
]
