"""Qdrant: a crag-heuristic retriever over a Qdrant collection.

Needs the ``qdrant`` extra (``pip install 'crag-heuristic[qdrant]'``). The
adapter lives with the others (``crag_heuristic.retrievers``; the score
conversion per distance is documented in ``crag_heuristic._retrievers.qdrant``);
this import path stays for the code that uses it.
"""

from .._retrievers.qdrant import QdrantRetriever, QdrantScores

__all__ = ["QdrantRetriever", "QdrantScores"]
