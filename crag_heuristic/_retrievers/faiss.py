"""A retriever over a user's existing ``faiss.Index`` and docstore.

Score semantics are explicit. The retriever reads ``index.metric_type`` and
whether the stored vectors are unit-normalised (declared, or detected by
reading back a sample of vectors where the index type allows it), and
converts every raw FAISS score with the right formula:

=====================  =============  =====================================================
metric                 unit vectors?  chunk score and kind
=====================  =============  =====================================================
``METRIC_INNER_PRODUCT``  yes         the inner product *is* the cosine: ``COSINE``
``METRIC_INNER_PRODUCT``  no / unknown  raw inner product: ``INNER_PRODUCT``
``METRIC_L2``          yes            FAISS returns the SQUARED distance ``d``; for unit
                                      vectors ``d = 2 - 2 cos``, so ``cos = 1 - d / 2``:
                                      ``COSINE``
``METRIC_L2``          no / unknown   Euclidean distance ``sqrt(d)``: ``DISTANCE``
any other metric       -              the raw distance: ``DISTANCE``
=====================  =============  =====================================================

The raw score and the metric stay in each chunk's metadata (``raw_score``,
``metric``, ``faiss_id``), and :attr:`FaissRetriever.score_semantics` says in
words which conversion applies. FAISS answers ``-1`` ids when fewer than
``k`` vectors qualify (IVF lists, selectors): those are dropped, so a search
may return fewer than ``k`` chunks.

Search parameters: ``search_params`` (at construction, or per call) is a
``faiss.SearchParameters`` passed to ``index.search``; its type must fit the
index (checked: FAISS would ignore an IVF ``nprobe`` on an HNSW or flat
index without a word; a mismatch is an :class:`InputError`):

=====================  ==============================================  ========================
index                  parameters                                      trade-off
=====================  ==============================================  ========================
``IndexIVF*``          ``faiss.SearchParametersIVF(nprobe=16)``        lists visited: recall
                                                                       against time (default 1)
``IndexHNSW*``         ``faiss.SearchParametersHNSW(efSearch=64)``     candidate list: recall
                                                                       against time (default 16)
any                    ``faiss.SearchParameters(sel=...)``             an ID selector (filter)
=====================  ==============================================  ========================

Corpus statistics (document frequencies for the evaluator's IDF) are ready
when the retriever is: given, loaded from a file (:meth:`CorpusStats.load`,
refused if built with another analyzer) or built from the docstore's texts
at construction, never on the first query; built here, they keep each
document's analysis (``CorpusStats.analyses``), which the evaluator looks the
retriever's chunks up in (by id and text digest) instead of tokenising them.
Building and loading log a ``crag.corpus_stats`` event (``source="built"`` or
``"loaded"``, ``n_docs``, ``seconds``).
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._documents import to_chunk
from .._exceptions import InputError, RetrieverError
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats, resolve_corpus_stats
from .._text.sentences import SentenceVectors
from .._types import Chunk, ScoreKind
from .base import Embedder, ScoreConversion, VectorRetriever, embedder, unit_norm

_SAMPLE = 64
_INLINE_FLOATS = 4_000_000  # asearch runs in the calling coroutine up to this index size
Rows = tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]


def _metric_name(metric: int) -> str:
    import faiss

    names = {
        faiss.METRIC_INNER_PRODUCT: "inner_product",
        faiss.METRIC_L2: "l2",
        faiss.METRIC_L1: "l1",
        faiss.METRIC_Linf: "linf",
    }
    return names.get(metric, f"metric_{metric}")


def _sample_vectors(index: Any, n: int) -> npt.NDArray[np.float32] | None:
    """Read back up to ``n`` stored vectors, or ``None`` where the type cannot.

    Only index types known to support it are asked (some FAISS types abort
    the process on ``reconstruct_n``): flat indexes, HNSW over flat storage,
    and ID maps around those. For the others (IVF, PQ ...) declare
    ``normalized`` yourself.
    """
    import faiss

    idx = faiss.downcast_index(index)
    if isinstance(idx, faiss.IndexIDMap | faiss.IndexIDMap2):
        idx = faiss.downcast_index(idx.index)
    if isinstance(idx, faiss.IndexHNSW):
        idx = faiss.downcast_index(idx.storage)
    m = min(n, int(idx.ntotal))
    if m == 0:
        return None
    if not isinstance(idx, faiss.IndexFlat):
        return None
    try:
        return np.asarray(idx.reconstruct_n(0, m), dtype=np.float32)
    except RuntimeError:
        return None


def _core_index(index: Any) -> Any:
    """The index under ID maps and pre-transforms (what search parameters reach)."""
    import faiss

    idx = faiss.downcast_index(index)
    while isinstance(idx, faiss.IndexIDMap | faiss.IndexIDMap2 | faiss.IndexPreTransform):
        idx = faiss.downcast_index(idx.index)
    return idx


def check_search_params(index: Any, params: Any) -> None:
    """Refuse search parameters the index would ignore or reject.

    FAISS silently ignores ``SearchParametersIVF`` on an HNSW or flat index
    (``nprobe`` then does nothing) and aborts the search on the converse, so
    the type is checked against the index under any ID map or transform.

    Raises:
        InputError: not a ``faiss.SearchParameters``, or one of the IVF / HNSW
            kind for an index of another kind.
    """
    import faiss as faiss_module

    faiss: Any = faiss_module  # its stubs lack some of the SWIG classes
    if params is None:
        return
    if not isinstance(params, faiss.SearchParameters):
        raise InputError(
            f"search_params must be a faiss.SearchParameters, got {type(params).__name__}"
        )
    core = _core_index(index)
    for kind, wants in (
        (faiss.SearchParametersIVF, faiss.IndexIVF),
        (faiss.SearchParametersHNSW, faiss.IndexHNSW),
    ):
        if isinstance(params, kind) and not isinstance(core, wants):
            raise InputError(
                f"{type(params).__name__} only applies to {wants.__name__} indexes; "
                f"this index is {type(core).__name__}"
            )


def detect_unit_vectors(index: Any) -> bool | None:
    """True if a sample of the stored vectors has unit norm, False if not,
    ``None`` when the index type cannot give vectors back."""
    sample = _sample_vectors(index, _SAMPLE)
    if sample is None:
        return None
    return unit_norm(sample)


class FaissScores(ScoreConversion):
    """The conversion of raw FAISS scores for one metric (see the module doc).

    Args:
        metric: ``index.metric_type``.
        normalized: whether the stored vectors are unit-normalised
            (``None``: unknown, treated as not).

    Attributes:
        kind: the :class:`ScoreKind` of converted scores.
        semantics: the conversion in words, for logs and results.
        metric_name: ``"inner_product"``, ``"l2"``, ...
    """

    backend = "FAISS"

    def __init__(self, metric: int, normalized: bool | None) -> None:
        import faiss

        self.metric = int(metric)
        self.normalized = normalized
        self.metric_name = _metric_name(self.metric)
        self._ip = self.metric == faiss.METRIC_INNER_PRODUCT
        self._l2 = self.metric == faiss.METRIC_L2
        why = "not unit vectors" if normalized is False else "unit norm not known"
        if self._ip and normalized:
            self.kind, self.semantics = ScoreKind.COSINE, "cosine: inner product of unit vectors"
        elif self._ip:
            self.kind = ScoreKind.INNER_PRODUCT
            self.semantics = f"raw inner product ({why}; not a cosine)"
        elif self._l2 and normalized:
            self.kind = ScoreKind.COSINE
            self.semantics = "cosine = 1 - d/2 from squared L2 of unit vectors"
        elif self._l2:
            self.kind, self.semantics = ScoreKind.DISTANCE, f"Euclidean distance sqrt(d) ({why})"
        else:
            self.kind, self.semantics = ScoreKind.DISTANCE, f"raw {self.metric_name} distance"

    @property
    def raw_kind(self) -> ScoreKind:
        """The raw FAISS score's kind: an inner product (a cosine for unit vectors),
        a squared L2 distance (of unit vectors: ``SQUARED_L2``), else a distance."""
        if self._ip:
            return self.kind
        if self._l2 and self.normalized:
            return ScoreKind.SQUARED_L2
        return ScoreKind.DISTANCE

    def _convert(self, raw: float) -> float:
        if self._ip:
            return raw
        if self._l2:
            squared = max(raw, 0.0)
            return 1.0 - squared / 2.0 if self.normalized else math.sqrt(squared)
        return max(raw, 0.0)


class FaissRetriever(VectorRetriever[npt.NDArray[np.float32], Rows]):
    """Search a ``faiss.Index``; return chunks from a docstore, scores converted.

    Args:
        index: any ``faiss.Index`` (flat, IVF, HNSW, ID map ...), already filled.
        docstore: FAISS id -> entry, as a sequence (position = id) or a
            mapping (int keys, or str keys of the ids). Entries are chunks,
            mappings, strings or LangChain ``Document`` objects (see
            ``crag_heuristic._documents``). A LangChain FAISS store (or its
            docstore) is refused, naming :class:`LangChainFaissRetriever`.
        embed: the query embedder: a callable ``str -> vector``, or an object
            with ``embed_query`` (LangChain ``Embeddings``).
        normalized: whether the stored vectors are unit-normalised. ``None``
            detects it from a sample where possible (see module doc).
        normalize_query: scale the query vector to unit norm before the
            search; defaults to ``normalized``.
        corpus_stats: document frequencies for the evaluator: a
            :class:`CorpusStats`, the path of one saved with
            :meth:`CorpusStats.save` (loaded now, refused if built with
            another analyzer), or ``None``: built now from the docstore's
            texts (``stats_from_docstore=False`` turns that off).
        chunk_analyses: when the statistics are built from the docstore, keep
            each document's analysis with them (``CorpusStats.analyses``), so
            that the evaluator looks its chunks up instead of tokenising them.
            For a large corpus, build them apart (on Dask if need be: see
            :meth:`CorpusStats.build`) and pass the file.
        warm_up: run one search of a zero vector now, so that FAISS's
            one-time set-up (its OpenMP threads, 10 to 20 ms measured on two
            busy cores) is not paid by the first query.
        search_params: a ``faiss.SearchParameters`` passed to every search
            (``SearchParametersIVF(nprobe=...)`` for IVF,
            ``SearchParametersHNSW(efSearch=...)`` for HNSW, or an ID
            selector; see the module doc); one of the wrong kind for the
            index is refused.
        analyzer: the analyzer for corpus statistics (must match the evaluator's).
        sentences: sentence vectors of the docstore's documents, made with the
            same embedder (:class:`~crag_heuristic.text.SentenceVectors`, or the
            path of one saved with :meth:`SentenceVectors.save`): each chunk
            found then carries ``sentence_score``, its best sentence's cosine to
            the query (opt-in evidence; see ``crag_heuristic._text.sentences``).

    Raises:
        InputError: when an argument is unusable (wrong types, empty docstore
            for a non-empty index, a docstore that is too short).
    """

    def __init__(
        self,
        index: Any,
        docstore: Sequence[Any] | Mapping[Any, Any],
        embed: Embedder | Any,
        *,
        normalized: bool | None = None,
        normalize_query: bool | None = None,
        corpus_stats: CorpusStats | str | os.PathLike[str] | None = None,
        stats_from_docstore: bool = True,
        chunk_analyses: bool = True,
        warm_up: bool = True,
        search_params: Any = None,
        analyzer: Analyzer | None = None,
        name: str = "faiss",
        sentences: SentenceVectors | str | os.PathLike[str] | None = None,
    ) -> None:
        if hasattr(index, "similarity_search_with_score") or hasattr(docstore, "_dict"):
            raise InputError(  # its docstore is keyed by uuids, through index_to_docstore_id
                "this is a LangChain FAISS store (or its docstore): use "
                "LangChainFaissRetriever(store), which reads its index, ids and documents"
            )
        if not hasattr(index, "search") or not hasattr(index, "metric_type"):
            raise InputError(f"index must be a faiss.Index, got {type(index).__name__}")
        if isinstance(docstore, str | bytes) or not isinstance(docstore, Sequence | Mapping):
            raise InputError(
                "docstore must be a sequence or a mapping of FAISS id -> document (a Chunk, "
                "a mapping, a string or a LangChain Document)"
            )
        if isinstance(docstore, Sequence) and len(docstore) < index.ntotal:
            raise InputError(
                f"docstore holds {len(docstore)} entries but the index has {index.ntotal} vectors"
            )
        self._embed = embedder(embed)
        self.index = index
        self.docstore = docstore
        self.normalized = detect_unit_vectors(index) if normalized is None else bool(normalized)
        self.scores = FaissScores(index.metric_type, self.normalized)
        self.normalize_query = (
            bool(self.normalized) if normalize_query is None else bool(normalize_query)
        )
        check_search_params(index, search_params)
        self.search_params = search_params
        self.name = name
        if sentences is not None and not isinstance(sentences, SentenceVectors):
            sentences = SentenceVectors.load(sentences)
        if sentences is not None and sentences.dimensions != index.d:
            raise InputError(
                f"the sentence vectors have {sentences.dimensions} dimensions; the index has "
                f"{index.d}: make them with the index's embedder"
            )
        self.sentences = sentences
        self._analyzer = analyzer
        has_texts = stats_from_docstore and len(docstore) > 0
        self._stats = resolve_corpus_stats(
            corpus_stats,
            analyzer=analyzer,
            documents=self._documents if has_texts else None,
            analyses=chunk_analyses,
        )
        if warm_up and index.ntotal > 0:
            self._warm_up()

    def _warm_up(self) -> None:
        vector = np.zeros((1, self.index.d), dtype=np.float32)
        try:
            if self.search_params is not None:
                self.index.search(vector, 1, params=self.search_params)
            else:
                self.index.search(vector, 1)
        except (RuntimeError, TypeError, ValueError) as exc:
            raise RetrieverError(
                f"FAISS search failed at construction: {exc}", retriever=self.name
            ) from exc

    @property
    def scope(self) -> str | None:
        """The filter every search is within: ``"faiss id selector"`` when the
        retriever's ``search_params`` hold an ID selector, else ``None`` (see
        :mod:`crag_heuristic._retrievers.scope`)."""
        return "faiss id selector" if getattr(self.search_params, "sel", None) else None

    def __repr__(self) -> str:
        return (
            f"FaissRetriever(index={type(self.index).__name__}, ntotal={self.index.ntotal}, "
            f"scores={self.score_semantics!r})"
        )

    # -- search ---------------------------------------------------------------------------

    backend = "FAISS"
    search_errors = (RuntimeError, TypeError, ValueError)
    query_dtype = np.float32

    def _dimension(self) -> int:
        return int(self.index.d)

    def _unit_query(self) -> bool:
        return self.normalize_query

    def _query_vector(self, vector: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
        """The query as a float32 array of shape (1, d), what ``index.search`` takes."""
        return np.ascontiguousarray(vector.reshape(1, -1), dtype=np.float32)

    def _failed(self, exc: Exception) -> str:
        return f"FAISS search failed: {exc}"

    @property
    def bounded(self) -> bool:
        """Whether its searches end by themselves: FAISS works in process, and so does
        its embedder when the embedder says so (a true ``bounded``, as the sample's
        LSA embedder has; a model behind a network call has none). Then the
        router calls it directly, never on a worker thread."""
        embed = getattr(self._embed, "__self__", self._embed)  # a bound embed_query
        return getattr(embed, "bounded", False) is True

    def __len__(self) -> int:
        """The vectors in the index (the router asks for no more than this)."""
        return int(self.index.ntotal)

    def _size(self) -> int:
        return len(self)  # FAISS allocates k slots, filled or not

    def _check_options(self, options: Mapping[str, Any]) -> None:
        if options.get("search_params") is not None:
            check_search_params(self.index, options["search_params"])

    def _raw_search(
        self, vector: npt.NDArray[np.float32], k: int, options: Mapping[str, Any]
    ) -> Rows:
        params = options.get("search_params")
        params = params if params is not None else self.search_params
        if params is not None:
            return self.index.search(vector, k, params=params)  # type: ignore[no-any-return]
        return self.index.search(vector, k)  # type: ignore[no-any-return]

    def _chunks(self, raw: Rows, vector: npt.NDArray[np.float32]) -> list[Chunk]:
        distances, ids = raw
        chunks = self.to_chunks(distances[0], ids[0])
        if self.sentences is None:
            return chunks
        scores = self.sentences.scores(vector[0], chunks)
        return [
            c if s is None else c.replace(sentence_score=s)
            for c, s in zip(chunks, scores, strict=True)
        ]

    def search(self, query: str, k: int, *, search_params: Any = None) -> list[Chunk]:
        """The ``k`` nearest chunks, best first (fewer when FAISS has fewer).

        The query vector (:meth:`embed_query`) is a float32 array of shape (1, d).

        Raises:
            InvalidQueryError: blank query.
            InputError: ``k`` is not a positive integer.
            RetrieverError: the embedder, FAISS or the docstore failed.
        """
        return self._search(query, k, {"search_params": search_params})

    async def asearch(self, query: str, k: int, *, search_params: Any = None) -> list[Chunk]:
        """:meth:`search` in a worker thread (FAISS releases the GIL), or in the calling
        coroutine when the search is short in-process work: an embedder that says it is
        bounded (:attr:`bounded`: in-process, as the sample's and an index directory's
        LSA projection) over an index of at most 4 million stored floats (a scan of a
        millisecond or so), where the hop to a thread and back cost more than the search
        (3 to 5 ms a request measured on two busy cores)."""
        if self.bounded and self.index.ntotal * self.index.d <= _INLINE_FLOATS:
            return self.search(query, k, search_params=search_params)
        return await asyncio.to_thread(self.search, query, k, search_params=search_params)

    def to_chunks(self, distances: Sequence[float], ids: Sequence[int]) -> list[Chunk]:
        """Convert one row of FAISS output to chunks (``-1`` ids dropped)."""
        chunks = []
        seen: set[str] = set()
        for raw, faiss_id in zip(distances, ids, strict=True):
            faiss_id = int(faiss_id)
            if faiss_id < 0:
                continue
            raw = float(raw)
            score = self._score(raw)
            chunk = to_chunk(
                self._entry(faiss_id),
                default_id=str(faiss_id),
                score=score,
                score_kind=self.scores.kind,
                extra_metadata={
                    "faiss_id": faiss_id,
                    "raw_score": raw,
                    "metric": self.scores.metric_name,
                },
                retriever=self.name,
            )
            if chunk.id in seen:  # two vectors for one document: keep the best
                continue
            seen.add(chunk.id)
            chunks.append(chunk)
        return chunks

    def _entry(self, faiss_id: int) -> Any:
        store = self.docstore
        try:
            if isinstance(store, Mapping):
                if faiss_id in store:
                    return store[faiss_id]
                return store[str(faiss_id)]
            return store[faiss_id]
        except (KeyError, IndexError):
            raise RetrieverError(
                f"FAISS id {faiss_id} has no entry in the docstore", retriever=self.name
            ) from None

    # -- corpus statistics --------------------------------------------------------------

    def _documents(self) -> Iterator[tuple[str, str]]:
        """The docstore's ``(chunk id, text)`` pairs, in order: the ids :meth:`to_chunks`
        gives (the entry's own id, else its FAISS id)."""
        store = self.docstore
        items = store.items() if isinstance(store, Mapping) else enumerate(store)
        for faiss_id, entry in items:
            if isinstance(entry, str):
                yield str(faiss_id), entry
            else:
                chunk = to_chunk(
                    entry,
                    default_id=str(faiss_id),
                    score=None,
                    score_kind=ScoreKind.UNKNOWN,
                    retriever=self.name,
                )
                yield chunk.id, chunk.text
