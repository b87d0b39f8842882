"""Retrievers: adapters in front of what users already run."""

from .bm25 import BM25Retriever
from .faiss import FaissRetriever, FaissScores, detect_unit_vectors
from .langchain import LangChainFaissRetriever, LangChainRetriever

__all__ = [
    "BM25Retriever",
    "FaissRetriever",
    "FaissScores",
    "LangChainFaissRetriever",
    "LangChainRetriever",
    "detect_unit_vectors",
]
