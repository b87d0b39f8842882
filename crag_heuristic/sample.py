"""The bundled sample: 64 short documents written for this project, with queries.

:func:`sample_retriever` is a real FAISS index over them with LSA vectors
(:class:`LsaEmbedder`, fitted on the sample: deterministic, no download);
``crag-heuristic retrieve`` runs on it when given no index.
"""

from ._sample import LsaEmbedder, load_sample_corpus, load_sample_queries, sample_retriever

__all__ = [
    "LsaEmbedder",
    "load_sample_corpus",
    "load_sample_queries",
    "sample_retriever",
]
