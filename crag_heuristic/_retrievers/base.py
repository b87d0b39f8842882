"""The base the vector-store adapters share: a score conversion and a search template.

Every adapter in front of a vector store (FAISS, Qdrant, a LangChain store)
does the same few things and differs in a few lines:

- :class:`ScoreConversion`: one backend's raw scores become chunk scores of
  one :class:`~crag_heuristic.ScoreKind`; a non-finite raw score is refused
  (``ValueError`` naming the backend) before the subclass's ``_convert``.
  :class:`DeclaredScores` keeps them as they are, of a declared kind.
- :class:`ScoredAdapter`: ``scores`` (a conversion), ``score_kind`` and
  ``score_semantics`` read from it, :meth:`~ScoredAdapter.corpus_stats` (the
  statistics made at construction) and ``_score``, one raw score converted or
  a :class:`~crag_heuristic.RetrieverError`.
- :class:`VectorRetriever`: a scored adapter that embeds the query itself. Its
  :meth:`~VectorRetriever.embed_query` is checked once here (the embedder's
  failure, a non-vector, the wrong dimension, NaN or inf: a
  ``RetrieverError``; scaled to unit norm where the conversion needs it);
  ``_search`` / ``_asearch`` are the search template (check the query and
  ``k``, cap ``k`` to the size, check the per-call options, embed, search,
  convert to chunks, a backend failure as a ``RetrieverError``). An adapter
  fills the hooks: ``_dimension``, ``_unit_query``, ``_query_vector``,
  ``_raw_search`` (and ``_araw_search``), ``_chunks``; optionally ``_size``
  and ``_check_options``.
"""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from .._checks import check_k, check_query
from .._exceptions import InputError, RetrieverError
from .._text.corpus import CorpusStats
from .._types import Chunk, ScoreKind

Embedder = Callable[[str], Any]
V = TypeVar("V")  # the query vector the backend takes
R = TypeVar("R")  # the backend's raw answer to one search

_NORM_TOLERANCE = 1e-3


def embedder(embed: object) -> Embedder:
    """The query embedder: ``embed`` itself, or its ``embed_query`` (LangChain ``Embeddings``).

    Raises:
        InputError: neither callable nor with ``embed_query``.
    """
    if hasattr(embed, "embed_query"):
        embed = embed.embed_query
    if not callable(embed):
        raise InputError("embed must be a callable str -> vector or have embed_query()")
    return embed


def unit_norm(vectors: npt.NDArray[np.floating[Any]]) -> bool:
    """Whether every row of ``vectors`` has unit norm (to within 1e-3)."""
    norms = np.linalg.norm(vectors, axis=1)
    return bool(np.all(np.abs(norms - 1.0) <= _NORM_TOLERANCE))


class ScoreConversion:
    """How the raw scores of one backend become chunk scores of one kind.

    A subclass sets the attributes and implements ``_convert``; calling the
    conversion refuses a non-finite raw score first.

    Attributes:
        kind: the :class:`ScoreKind` of converted scores.
        semantics: the conversion in words, for logs and results.
        metric_name: a short name for chunk metadata (``"l2"``, ``"cosine"`` ...).
        raw_kind: the kind of the raw scores themselves (``UNKNOWN`` when no kind
            describes them): what to declare where they are graded unconverted
            (a LlamaIndex node's score). By default :attr:`kind`.
    """

    backend: ClassVar[str] = "the store"  # who returned the raw score, for the error
    kind: ScoreKind
    semantics: str
    metric_name: str

    @property
    def raw_kind(self) -> ScoreKind:
        """The kind of the raw scores (here: :attr:`kind`, no formula applies)."""
        return self.kind

    def __call__(self, raw: float) -> float:
        """One raw score converted to :attr:`kind`.

        Raises:
            ValueError: a non-finite raw score.
        """
        if not math.isfinite(raw):
            raise ValueError(f"{self.backend} returned a non-finite score {raw}")
        return self._convert(raw)

    def _convert(self, raw: float) -> float:
        """A finite raw score converted (here: kept as it is)."""
        return raw


class DeclaredScores(ScoreConversion):
    """Raw scores taken as they are, with a declared kind (no formula applies).

    Attributes:
        kind: the :class:`ScoreKind` the raw scores are declared to be.
        semantics: the declaration in words.
        metric_name: a short name for chunk metadata (``"cosine"``, ``"unknown"`` ...).
    """

    def __init__(self, kind: ScoreKind, semantics: str, metric_name: str) -> None:
        self.kind = kind
        self.semantics = semantics
        self.metric_name = metric_name

    def __repr__(self) -> str:
        return f"DeclaredScores({self.kind.value}: {self.semantics!r})"


class ScoredAdapter:
    """An adapter whose chunk scores come from a :class:`ScoreConversion`.

    Attributes:
        name: the retriever's name in errors and chunks.
        scores: the conversion of its raw scores.
    """

    name: str
    scores: ScoreConversion
    _stats: CorpusStats | None

    @property
    def score_kind(self) -> ScoreKind:
        """The kind of the scores this retriever returns."""
        return self.scores.kind

    @property
    def score_semantics(self) -> str:
        """How raw scores are converted, in words."""
        return self.scores.semantics

    def corpus_stats(self) -> CorpusStats | None:
        """Document frequencies for the evaluator: given, loaded or built at
        construction (never on the first query); ``None`` when there are none."""
        return self._stats

    def _score(self, raw: float) -> float:
        """``raw`` converted by :attr:`scores`.

        Raises:
            RetrieverError: a non-finite raw score.
        """
        try:
            return self.scores(raw)
        except ValueError as exc:
            raise RetrieverError(str(exc), retriever=self.name) from None


class VectorRetriever(ScoredAdapter, ABC, Generic[V, R]):
    """A scored adapter that embeds the query and searches a vector backend.

    The public ``search`` / ``asearch`` of a subclass keep their own keyword
    options and call :meth:`_search` / :meth:`_asearch` with them.
    """

    holder: ClassVar[str] = "the index"  # what has the vectors, for the dimension error
    backend: ClassVar[str] = "the backend"  # for "<backend> search failed"
    search_errors: ClassVar[tuple[type[Exception], ...]] = (Exception,)
    query_dtype: ClassVar[type[np.floating[Any]]] = np.float64
    _embed: Embedder

    # -- hooks ----------------------------------------------------------------------------

    @abstractmethod
    def _dimension(self) -> int:
        """The dimension of the stored vectors."""

    @abstractmethod
    def _unit_query(self) -> bool:
        """Whether the query vector is scaled to unit norm."""

    @abstractmethod
    def _query_vector(self, vector: npt.NDArray[np.floating[Any]]) -> V:
        """The checked flat query vector in the form the backend takes."""

    @abstractmethod
    def _raw_search(self, vector: V, k: int, options: Mapping[str, Any]) -> R:
        """One search of the backend (its errors are wrapped by the template)."""

    async def _araw_search(self, vector: V, k: int, options: Mapping[str, Any]) -> R:
        """The async search of the backend (here: :meth:`_raw_search` in a thread)."""
        return await asyncio.to_thread(self._raw_search, vector, k, options)

    @abstractmethod
    def _chunks(self, raw: R, vector: V) -> list[Chunk]:
        """The backend's answer as chunks, best first."""

    def _size(self) -> int | None:
        """How many vectors the backend holds (``k`` is capped to it), ``None``: unknown."""
        return None

    def _check_options(self, options: Mapping[str, Any]) -> None:
        """Refuse per-call options of the wrong kind (``InputError``)."""

    def _failed(self, exc: Exception) -> str:
        """The message of the error a failed backend search becomes."""
        return f"{self.backend} search failed: {exc!r}"

    # -- the template ---------------------------------------------------------------------

    def embed_query(self, query: str) -> V:
        """The query vector (normalised where the conversion needs it).

        Raises:
            RetrieverError: the embedder failed or returned a bad vector.
        """
        try:
            raw = self._embed(query)
        except Exception as exc:
            raise RetrieverError(f"the embedder failed: {exc!r}", retriever=self.name) from exc
        try:
            vector = np.asarray(raw, dtype=self.query_dtype).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise RetrieverError(
                f"the embedder returned {type(raw).__name__}, not a vector", retriever=self.name
            ) from exc
        dimension = self._dimension()
        if vector.shape[0] != dimension:
            raise RetrieverError(
                f"the embedder returned {vector.shape[0]} dimensions; "
                f"{self.holder} has {dimension}",
                retriever=self.name,
            )
        if not np.all(np.isfinite(vector)):
            raise RetrieverError("the query vector has NaN or inf values", retriever=self.name)
        if self._unit_query():
            norm = float(np.linalg.norm(vector))
            if norm > 0:
                vector = vector / norm
        return self._query_vector(vector)

    def _prepare(self, query: str, k: int, options: Mapping[str, Any]) -> tuple[V, int] | None:
        """The checked query embedded and ``k`` capped; ``None`` for an empty backend."""
        check_query(query)
        check_k(k)
        size = self._size()
        if size == 0:
            return None
        if size is not None:
            k = min(k, size)
        self._check_options(options)
        return self.embed_query(query), k

    def _search(self, query: str, k: int, options: Mapping[str, Any]) -> list[Chunk]:
        """The search template: the ``k`` nearest chunks, best first.

        Raises:
            InvalidQueryError: blank query.
            InputError: ``k`` is not a positive integer; an option of the wrong kind.
            RetrieverError: the embedder or the backend failed.
        """
        prepared = self._prepare(query, k, options)
        if prepared is None:
            return []
        vector, k = prepared
        try:
            raw = self._raw_search(vector, k, options)
        except RetrieverError:
            raise
        except self.search_errors as exc:
            raise RetrieverError(self._failed(exc), retriever=self.name) from exc
        return self._chunks(raw, vector)

    async def _asearch(self, query: str, k: int, options: Mapping[str, Any]) -> list[Chunk]:
        """The async search template (:meth:`_araw_search` for the backend's search)."""
        prepared = self._prepare(query, k, options)
        if prepared is None:
            return []
        vector, k = prepared
        try:
            raw = await self._araw_search(vector, k, options)
        except RetrieverError:
            raise
        except self.search_errors as exc:
            raise RetrieverError(self._failed(exc), retriever=self.name) from exc
        return self._chunks(raw, vector)
