"""The bundled sample: a small corpus, its queries, and an embedded default retriever.

The sample corpus (64 short documents on 8 topics, written for this project)
and 24 queries ship inside the package, so the command line and the tests
run end to end with no model, no data download and no network.

Its dense retriever embeds texts with latent semantic analysis (Deerwester
et al., 1990): TF-IDF over the analyzer's stemmed terms, reduced by a
truncated SVD to ``n_components`` dimensions and scaled to unit length
(scikit-learn does the work). The vectors go into a ``faiss.IndexFlatIP``, so
scores are cosines. It is a stand-in for a real embedding model, good enough
to show every route of the router on the sample; point the router at your
own FAISS index for real work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from ._text import Analyzer
from ._types import Chunk

__all__ = ["LsaEmbedder", "load_sample_corpus", "load_sample_queries", "sample_retriever"]


def _read_jsonl(name: str) -> list[dict[str, Any]]:
    text = (resources.files("crag_heuristic") / "data" / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def load_sample_corpus() -> list[Chunk]:
    """The 64 sample documents as chunks (``source`` = the document id)."""
    return [
        Chunk(
            id=row["_id"],
            text=f"{row['title']}\n{row['text']}",
            source=row["_id"],
            metadata={"title": row["title"], **row.get("metadata", {})},
        )
        for row in _read_jsonl("sample_documents.jsonl")
    ]


def load_sample_queries() -> list[dict[str, Any]]:
    """The 24 sample queries: ``_id``, ``text`` and ``metadata`` with ``expect``
    (answered / partial / unanswered) and the ``relevant`` document ids."""
    return _read_jsonl("sample_queries.jsonl")


class LsaEmbedder:
    """TF-IDF + truncated SVD embeddings fitted on a corpus (no model files).

    Args:
        texts: the corpus to fit on.
        n_components: dimensions (at most ``len(texts) - 1``).
        analyzer: the term analyzer (stems, stop words).
        seed: the SVD's random state, for reproducible vectors.
    """

    def __init__(
        self,
        texts: Sequence[str],
        *,
        n_components: int = 64,
        analyzer: Analyzer | None = None,
        seed: int = 0,
    ) -> None:
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.analyzer = analyzer or Analyzer()
        self._tfidf = TfidfVectorizer(analyzer=self.analyzer.terms, sublinear_tf=True)
        matrix = self._tfidf.fit_transform(list(texts))
        components = max(1, min(n_components, matrix.shape[0] - 1, matrix.shape[1] - 1))
        self._svd = TruncatedSVD(n_components=components, random_state=seed)
        self._svd.fit(matrix)
        self.dimension = components

    def embed_many(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-length vectors, one row per text (zero rows stay zero)."""
        vectors = self._svd.transform(self._tfidf.transform(list(texts)))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        unit: npt.NDArray[np.float32] = np.ascontiguousarray(vectors / norms, dtype=np.float32)
        return unit

    def __call__(self, text: str) -> npt.NDArray[np.float32]:
        """One unit-length vector."""
        vector: npt.NDArray[np.float32] = self.embed_many([text])[0]
        return vector


def sample_retriever(*, analyzer: Analyzer | None = None, n_components: int = 64) -> Any:
    """A :class:`FaissRetriever` over the sample corpus with LSA embeddings.

    Scores are cosines (``IndexFlatIP`` over unit vectors).
    """
    import faiss

    from ._retrievers import FaissRetriever

    corpus = load_sample_corpus()
    embedder = LsaEmbedder([c.text for c in corpus], n_components=n_components, analyzer=analyzer)
    index = faiss.IndexFlatIP(embedder.dimension)
    index.add(embedder.embed_many([c.text for c in corpus]))
    return FaissRetriever(index, corpus, embedder, normalized=True, analyzer=analyzer)
