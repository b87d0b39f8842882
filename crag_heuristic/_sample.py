"""The bundled sample: a small corpus, its queries, and an embedded default retriever.

The sample corpus (64 short documents on 8 topics, written for this project)
and 24 queries ship inside the package, so the command line and the tests
run end to end with no model, no data download and no network.

Its dense retriever embeds texts with latent semantic analysis (Deerwester
et al., 1990): TF-IDF over the analyzer's stemmed terms, reduced by a
truncated SVD to ``n_components`` dimensions and scaled to unit length. The
vectors go into a ``faiss.IndexFlatIP``, so scores are cosines. It is a
stand-in for a real embedding model, good enough to show every route of the
router on the sample; point the router at your own FAISS index for real work.

:class:`LsaEmbedder` fits the projection with scikit-learn. For the bundled
sample it is fitted once, by ``tools/build_sample_vectors.py``, and shipped
as ``data/sample_lsa.npz`` (vocabulary, IDF, SVD components and the 64
documents' vectors); :class:`LsaProjection` applies it with numpy alone, so
:func:`sample_retriever` (and the command line) neither imports scikit-learn
nor refits the SVD on every call. A test refits and compares.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from ._exceptions import ConfigError, InputError
from ._optional import requires
from ._text.analyzer import Analyzer
from ._types import Chunk

SAMPLE_LSA = "sample_lsa.npz"
_LSA_FORMAT = 1


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

    bounded = True
    """Its calls end by themselves (in-process work): the router calls it directly,
    never on a worker thread (see ``crag_heuristic._deadline``)."""

    def __init__(
        self,
        texts: Sequence[str],
        *,
        n_components: int = 64,
        analyzer: Analyzer | None = None,
        seed: int = 0,
    ) -> None:
        with requires("calibrate", "LsaEmbedder (fitting LSA vectors)"):
            from sklearn.decomposition import TruncatedSVD
            from sklearn.feature_extraction.text import TfidfVectorizer

        if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
            raise InputError("texts must be a sequence of strings")
        if not all(isinstance(text, str) for text in texts):
            raise InputError("texts must be a sequence of strings")
        if isinstance(n_components, bool) or not isinstance(n_components, int) or n_components < 1:
            raise ConfigError("n_components", n_components, "must be an integer >= 1")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise ConfigError("seed", seed, "must be an integer in [0, 2**32)")
        if analyzer is not None and not isinstance(analyzer, Analyzer):
            raise ConfigError("analyzer", analyzer, "must be an Analyzer or None")
        self.analyzer = analyzer or Analyzer()
        self._tfidf = TfidfVectorizer(analyzer=self.analyzer.terms, sublinear_tf=True)
        try:
            matrix = self._tfidf.fit_transform(list(texts))
            components = max(1, min(n_components, matrix.shape[0] - 1, matrix.shape[1] - 1))
            self._svd = TruncatedSVD(n_components=components, random_state=seed)
            self._svd.fit(matrix)
        except ValueError as exc:  # no texts, no term in any, a single term
            raise InputError(f"LSA cannot be fitted on these texts: {exc}") from None
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


class LsaProjection:
    """A fitted TF-IDF + SVD projection applied with numpy alone (no scikit-learn).

    The arithmetic of scikit-learn's ``TfidfVectorizer(sublinear_tf=True)``
    followed by ``TruncatedSVD.transform``: term counts of the vocabulary's
    terms ``tf``, weights ``(1 + ln tf) * idf``, the row scaled to unit
    length, projected on the components (``x @ components.T``), and the
    result scaled to unit length (zero rows stay zero).

    Args:
        vocabulary: the terms, in column order.
        idf: one IDF per term.
        components: the SVD components, ``(dimension, len(vocabulary))``.
        analyzer: the term analyzer the projection was fitted with.
    """

    bounded = True
    """Its calls end by themselves (in-process work): see ``LsaEmbedder.bounded``."""

    def __init__(
        self,
        vocabulary: Sequence[str],
        idf: npt.NDArray[np.float64],
        components: npt.NDArray[np.float64],
        *,
        analyzer: Analyzer | None = None,
    ) -> None:
        self.analyzer = analyzer or Analyzer()
        self.columns = {term: i for i, term in enumerate(vocabulary)}
        self.idf = np.asarray(idf, dtype=np.float64)
        self.components = np.asarray(components, dtype=np.float64)
        terms = len(self.columns)
        if (
            terms != len(vocabulary)
            or self.idf.shape != (terms,)
            or self.components.ndim != 2
            or self.components.shape[0] < 1
            or self.components.shape[1] != terms
            or not (np.all(np.isfinite(self.idf)) and np.all(np.isfinite(self.components)))
        ):
            raise ValueError(
                "an LSA projection needs unique terms, one finite IDF a term and finite "
                f"components of one column a term: {terms} terms of {len(vocabulary)}, IDF "
                f"{self.idf.shape}, components {self.components.shape}"
            )
        self.dimension = int(self.components.shape[0])

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The projection as numpy arrays (what :meth:`from_arrays` reads back): the
        format, the analyzer's fingerprint, the vocabulary in column order, the IDF
        and the components (float32: half the bytes, ~1e-7 apart)."""
        return {
            "format": np.asarray(_LSA_FORMAT),
            "analyzer": np.asarray(self.analyzer.fingerprint),
            "vocabulary": np.asarray(sorted(self.columns, key=self.columns.__getitem__)),
            "idf": self.idf,
            "components": self.components.astype(np.float32),
        }

    @classmethod
    def from_arrays(
        cls, data: Mapping[str, npt.NDArray[Any]], analyzer: Analyzer | None = None
    ) -> LsaProjection:
        """The projection :meth:`arrays` wrote (a mapping such as an opened ``.npz``).

        Raises:
            ValueError: another format, or fitted with another analyzer than ``analyzer``.
            KeyError: an array is missing.
        """
        analyzer = analyzer or Analyzer()
        if int(data["format"]) != _LSA_FORMAT or str(data["analyzer"]) != analyzer.fingerprint:
            raise ValueError(
                f"an LSA projection of format {int(data['format'])} fitted with analyzer "
                f"{str(data['analyzer'])!r}; this library reads format {_LSA_FORMAT} and the "
                f"analyzer is {analyzer.fingerprint!r}"
            )
        vocabulary = np.asarray(data["vocabulary"])
        if vocabulary.ndim != 1 or vocabulary.dtype.kind != "U":
            raise ValueError(f"an LSA vocabulary of {vocabulary.dtype} {vocabulary.shape}")
        return cls(vocabulary.tolist(), data["idf"], data["components"], analyzer=analyzer)

    @classmethod
    def from_embedder(cls, embedder: LsaEmbedder) -> LsaProjection:
        """The projection an :class:`LsaEmbedder` fitted."""
        vocabulary = embedder._tfidf.get_feature_names_out().tolist()
        return cls(
            vocabulary,
            embedder._tfidf.idf_,
            embedder._svd.components_,
            analyzer=embedder.analyzer,
        )

    def embed_many(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-length vectors, one row per text (zero rows stay zero)."""
        out = np.zeros((len(texts), self.dimension), dtype=np.float64)
        for row, text in enumerate(texts):
            counts = Counter(
                self.columns[t] for t in self.analyzer.terms(text) if t in self.columns
            )
            if not counts:
                continue
            columns = np.fromiter(counts.keys(), dtype=np.intp, count=len(counts))
            tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            weights = (1.0 + np.log(tf)) * self.idf[columns]
            weights /= np.linalg.norm(weights)
            out[row] = self.components[:, columns] @ weights
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        unit: npt.NDArray[np.float32] = np.ascontiguousarray(out / norms, dtype=np.float32)
        return unit

    def __call__(self, text: str) -> npt.NDArray[np.float32]:
        """One unit-length vector."""
        vector: npt.NDArray[np.float32] = self.embed_many([text])[0]
        return vector


def save_sample_lsa(
    projection: LsaProjection, vectors: npt.NDArray[np.float32], ids: Sequence[str]
) -> bytes:
    """The ``sample_lsa.npz`` bytes (see ``tools/build_sample_vectors.py``)."""
    arrays: dict[str, Any] = {
        **projection.arrays(),
        "vectors": np.asarray(vectors, dtype=np.float32),
        "ids": np.asarray(list(ids)),
    }
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def load_sample_lsa(
    analyzer: Analyzer | None = None,
) -> tuple[LsaProjection, npt.NDArray[np.float32], list[str]]:
    """The shipped projection, the sample documents' vectors and their ids."""
    analyzer = analyzer or Analyzer()
    raw = (resources.files("crag_heuristic") / "data" / SAMPLE_LSA).read_bytes()
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        try:
            projection = LsaProjection.from_arrays(data, analyzer)
        except ValueError:
            stale = "stale data/sample_lsa.npz: run tools/build_sample_vectors.py"
            raise ValueError(stale) from None
        return projection, np.asarray(data["vectors"], np.float32), data["ids"].tolist()


def sample_retriever(*, analyzer: Analyzer | None = None, n_components: int = 64) -> Any:
    """A :class:`FaissRetriever` over the sample corpus with LSA embeddings.

    Scores are cosines (``IndexFlatIP`` over unit vectors). With the default
    analyzer and ``n_components``, the projection and the documents' vectors
    are the shipped ones (no scikit-learn, no fitting); otherwise they are
    fitted now with :class:`LsaEmbedder`.
    """
    import faiss

    from ._retrievers.faiss import FaissRetriever

    corpus = load_sample_corpus()
    embedder: LsaProjection | LsaEmbedder
    if n_components == 64 and (analyzer is None or analyzer == Analyzer()):
        embedder, vectors, ids = load_sample_lsa(analyzer)
        if ids != [c.id for c in corpus]:
            raise ValueError("stale data/sample_lsa.npz: run tools/build_sample_vectors.py")
    else:
        embedder = LsaEmbedder(
            [c.text for c in corpus], n_components=n_components, analyzer=analyzer
        )
        vectors = embedder.embed_many([c.text for c in corpus])
    index = faiss.IndexFlatIP(embedder.dimension)
    index.add(vectors)
    return FaissRetriever(index, corpus, embedder, normalized=True, analyzer=analyzer)
