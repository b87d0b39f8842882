"""Qdrant: a crag-heuristic retriever over a Qdrant collection.

Needs the ``qdrant`` extra (``pip install 'crag-heuristic[qdrant]'``).

Score semantics are explicit. The retriever reads the collection's configured
distance (``get_collection(...).config.params.vectors``; a collection with
named vectors needs ``vector_name``) and whether the stored vectors are
unit-normalised (declared, or detected from a sample of up to 64 stored
vectors), and converts every Qdrant score:

=============  =============  ===================================================
distance       unit vectors?  chunk score and kind
=============  =============  ===================================================
``Cosine``     (Qdrant        the cosine Qdrant returns: ``COSINE`` (Qdrant
               normalises)    normalises stored and query vectors itself)
``Dot``        yes            the query is normalised too, so the dot product
                              *is* the cosine: ``COSINE``
``Dot``        no / unknown   the raw dot product: ``INNER_PRODUCT``
``Euclid``     yes            Qdrant returns the plain distance ``d``; for unit
                              vectors ``d^2 = 2 - 2 cos``, so ``cos = 1 - d^2/2``:
                              ``COSINE`` (the query is normalised)
``Euclid``     no / unknown   the distance ``d``: ``DISTANCE``
``Manhattan``  -              the L1 distance: ``DISTANCE``
=============  =============  ===================================================

Each chunk keeps ``raw_score``, ``distance`` and ``qdrant_id`` in its
metadata, and :attr:`QdrantRetriever.score_semantics` says which conversion
applies. Text comes from the payload field ``text_key`` (``"text"``); a point
without it is an error, not an empty chunk. Ids become strings (integers and
UUIDs alike).

Bad input gets a typed error: a declared ``distance`` (or ``normalized=True``)
the collection contradicts, a named-vector collection without
``vector_name``, a multivector or sparse-only collection, a query vector of
the wrong size (:class:`~crag_heuristic.InputError` at construction,
:class:`~crag_heuristic.RetrieverError` at search).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

try:
    from qdrant_client import AsyncQdrantClient, QdrantClient
    from qdrant_client.http import models
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "crag_heuristic.integrations.qdrant needs qdrant-client: "
        "pip install 'crag-heuristic[qdrant]'"
    ) from exc

from .._checks import check_k, check_query
from .._corpus import CorpusStats
from .._exceptions import InputError, InvalidChunkError, RetrieverError
from .._scores import to_cosine
from .._text import Analyzer
from .._types import Chunk, ScoreKind

__all__ = ["QdrantRetriever", "QdrantScores"]

Embedder = Callable[[str], Any]
_NORM_TOLERANCE = 1e-3
_SAMPLE = 64


def _distance(value: models.Distance | str) -> models.Distance:
    if isinstance(value, models.Distance):
        return value
    for member in models.Distance:
        if str(value).lower() in (member.value.lower(), member.name.lower()):
            return member
    allowed = ", ".join(member.value for member in models.Distance)
    raise InputError(f"distance must be one of: {allowed}; got {value!r}")


class QdrantScores:
    """The conversion of Qdrant scores for one distance (see the module doc).

    Args:
        distance: the collection's distance.
        normalized: whether the stored vectors are unit-normalised (``None``:
            unknown, treated as not).

    Attributes:
        kind: the :class:`ScoreKind` of converted scores.
        semantics: the conversion in words.
        metric_name: ``"cosine"``, ``"dot"``, ``"euclid"`` or ``"manhattan"``.
        normalize_query: whether the query vector must be scaled to unit norm
            for the conversion to hold.
    """

    def __init__(self, distance: models.Distance, normalized: bool | None) -> None:
        self.distance = distance
        self.normalized = normalized
        self.metric_name = distance.value.lower()
        why = "not unit vectors" if normalized is False else "unit norm not known"
        self.normalize_query = False
        if distance is models.Distance.COSINE:
            self.kind, self.semantics = ScoreKind.COSINE, "cosine (Qdrant Cosine distance)"
        elif distance is models.Distance.DOT and normalized:
            self.kind = ScoreKind.COSINE
            self.semantics = "cosine: dot product of unit vectors (Qdrant Dot)"
            self.normalize_query = True
        elif distance is models.Distance.DOT:
            self.kind = ScoreKind.INNER_PRODUCT
            self.semantics = f"raw dot product (Qdrant Dot; {why}; not a cosine)"
        elif distance is models.Distance.EUCLID and normalized:
            self.kind = ScoreKind.COSINE
            self.semantics = "cosine = 1 - d^2/2 from the Euclidean distance of unit vectors"
            self.normalize_query = True
        elif distance is models.Distance.EUCLID:
            self.kind = ScoreKind.DISTANCE
            self.semantics = f"Euclidean distance (Qdrant Euclid; {why})"
        else:
            self.kind, self.semantics = ScoreKind.DISTANCE, "Manhattan (L1) distance"

    def __call__(self, raw: float) -> float:
        """One Qdrant score converted to :attr:`kind`.

        Raises:
            ValueError: a non-finite score.
        """
        if not math.isfinite(raw):
            raise ValueError(f"Qdrant returned a non-finite score {raw}")
        if self.kind is ScoreKind.COSINE and self.distance is models.Distance.EUCLID:
            return to_cosine(max(raw, 0.0), ScoreKind.L2)
        if self.kind is ScoreKind.DISTANCE:
            return max(raw, 0.0)
        return raw

    def __repr__(self) -> str:
        return f"QdrantScores({self.semantics!r})"


def _vector_params(
    info: models.CollectionInfo, collection: str, vector_name: str | None
) -> tuple[str | None, models.VectorParams]:
    """The vector to search (``None``: the single unnamed one) and its parameters."""
    vectors = info.config.params.vectors
    if vectors is None or (isinstance(vectors, Mapping) and not vectors):
        raise InputError(f"collection {collection!r} has no dense vectors (sparse only?)")
    if isinstance(vectors, Mapping):
        names = sorted(vectors)
        if vector_name is None:
            if names == [""]:
                vector_name = ""
            else:
                raise InputError(
                    f"collection {collection!r} has named vectors {names}: "
                    "pass vector_name=... to choose one"
                )
        if vector_name not in vectors:
            raise InputError(
                f"collection {collection!r} has no vector named {vector_name!r}; it has {names}"
            )
        params = vectors[vector_name]
    else:
        if vector_name:
            raise InputError(
                f"collection {collection!r} has one unnamed vector; "
                f"vector_name={vector_name!r} does not exist"
            )
        params = vectors
        vector_name = None
    if params.multivector_config is not None:
        raise InputError(
            f"collection {collection!r} stores multivectors (late interaction): their "
            "scores are sums of maxima, not similarities; use a single-vector collection"
        )
    return vector_name, params


class QdrantRetriever:
    """Search a Qdrant collection; return chunks with converted scores.

    Args:
        client: a ``qdrant_client.QdrantClient`` (a server, or the local
            in-process mode ``QdrantClient(":memory:")`` / ``path=...``).
        collection_name: the collection.
        embed: the query embedder: a callable ``str -> vector``, or an object
            with ``embed_query`` (LangChain ``Embeddings``).
        vector_name: which named vector to search (required when the
            collection has named vectors).
        distance: the distance you expect; an error if the collection has
            another one (catches a pipeline pointed at the wrong collection).
        normalized: whether the stored vectors are unit-normalised (matters for
            Dot and Euclid; Qdrant normalises Cosine collections itself). ``None``
            detects it from a sample; ``True`` is checked against that sample.
        text_key: the payload field holding the text.
        source_key: the payload field holding the source (for source diversity).
        query_filter: a ``models.Filter`` applied to every search.
        search_params: a ``models.SearchParams`` (``hnsw_ef``, ``exact`` ...).
        aclient: an ``AsyncQdrantClient`` on the same collection, used by
            :meth:`asearch` (otherwise the sync client runs in a worker thread).
        corpus_stats: document frequencies for the evaluator (see
            :meth:`build_corpus_stats`).
        analyzer: the analyzer for corpus statistics (use the evaluator's).

    Raises:
        InputError: an unusable argument or a collection that contradicts it.
        RetrieverError: the collection could not be read.
    """

    def __init__(
        self,
        client: QdrantClient,
        collection_name: str,
        embed: Embedder | Any,
        *,
        vector_name: str | None = None,
        distance: models.Distance | str | None = None,
        normalized: bool | None = None,
        text_key: str = "text",
        source_key: str | None = "source",
        query_filter: models.Filter | None = None,
        search_params: models.SearchParams | None = None,
        aclient: AsyncQdrantClient | None = None,
        corpus_stats: CorpusStats | None = None,
        analyzer: Analyzer | None = None,
        name: str = "qdrant",
    ) -> None:
        if not isinstance(client, QdrantClient):
            raise InputError(
                f"client must be a qdrant_client.QdrantClient, got {type(client).__name__}"
            )
        if aclient is not None and not isinstance(aclient, AsyncQdrantClient):
            raise InputError(f"aclient must be an AsyncQdrantClient, got {type(aclient).__name__}")
        if not isinstance(collection_name, str) or not collection_name:
            raise InputError("collection_name must be a non-empty string")
        if not isinstance(text_key, str) or not text_key:
            raise InputError("text_key must be a non-empty string")
        if hasattr(embed, "embed_query"):
            embed = embed.embed_query
        if not callable(embed):
            raise InputError("embed must be a callable str -> vector or have embed_query()")
        if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
            raise InputError("corpus_stats must be a CorpusStats or None")
        self.client = client
        self.aclient = aclient
        self.collection_name = collection_name
        self.name = name
        self._embed: Embedder = embed
        try:
            info = client.get_collection(collection_name)
        except Exception as exc:
            raise RetrieverError(
                f"cannot read Qdrant collection {collection_name!r}: {exc}", retriever=name
            ) from exc
        self.vector_name, params = _vector_params(info, collection_name, vector_name)
        self.dimension = int(params.size)
        self.distance = params.distance
        if distance is not None and _distance(distance) is not self.distance:
            raise InputError(
                f"collection {collection_name!r} uses {self.distance.value} distance, "
                f"not the declared {_distance(distance).value}: its scores would be misread"
            )
        if self.distance is models.Distance.COSINE:
            self.normalized: bool | None = True  # Qdrant normalises vectors on upsert
        else:
            detected = self._detect_unit_vectors()
            if normalized is True and detected is False:
                raise InputError(
                    f"normalized=True, but stored vectors of {collection_name!r} "
                    "are not unit length"
                )
            self.normalized = detected if normalized is None else bool(normalized)
        self.scores = QdrantScores(self.distance, self.normalized)
        self.text_key = text_key
        self.source_key = source_key
        self.query_filter = query_filter
        self.search_params = search_params
        self._analyzer = analyzer
        self._stats = corpus_stats
        self._async_checked = aclient is None

    @property
    def score_kind(self) -> ScoreKind:
        """The kind of the scores this retriever returns."""
        return self.scores.kind

    @property
    def score_semantics(self) -> str:
        """How Qdrant scores are converted, in words."""
        return self.scores.semantics

    def __repr__(self) -> str:
        return (
            f"QdrantRetriever(collection={self.collection_name!r}, "
            f"distance={self.distance.value}, scores={self.score_semantics!r})"
        )

    # -- the collection -------------------------------------------------------------------

    def _with_vectors(self) -> bool | list[str]:
        return True if self.vector_name is None else [self.vector_name]

    def _detect_unit_vectors(self) -> bool | None:
        """True if a sample of stored vectors has unit norm, False if not, None if empty."""
        try:
            records, _ = self.client.scroll(
                self.collection_name,
                limit=_SAMPLE,
                with_payload=False,
                with_vectors=self._with_vectors(),
            )
        except Exception as exc:
            raise RetrieverError(
                f"cannot read vectors of {self.collection_name!r}: {exc}", retriever=self.name
            ) from exc
        vectors = []
        for record in records:
            vector: Any = record.vector
            if isinstance(vector, Mapping):
                vector = vector.get(self.vector_name or "")
            if vector is not None:
                vectors.append(np.asarray(vector, dtype=np.float64))
        if not vectors:
            return None
        norms = np.linalg.norm(np.vstack(vectors), axis=1)
        return bool(np.all(np.abs(norms - 1.0) <= _NORM_TOLERANCE))

    def build_corpus_stats(self, *, batch_size: int = 256) -> CorpusStats | None:
        """Scroll the whole collection once and build document frequencies from
        the text payloads, with each point's analysis (the evaluator looks the
        collection's chunks up by point id and text digest instead of tokenising
        them), kept for :meth:`corpus_stats`. ``None`` when empty."""
        texts: list[str] = []
        ids: list[str] = []
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection_name,
                limit=batch_size,
                offset=offset,
                with_payload=[self.text_key],
                with_vectors=False,
            )
            for record in records:
                text = (record.payload or {}).get(self.text_key)
                if isinstance(text, str):
                    texts.append(text)
                    ids.append(str(record.id))  # the id search results give the chunk
            if offset is None:
                break
        self._stats = (
            CorpusStats.build(texts, ids=ids, analyzer=self._analyzer, analyses=True)
            if texts
            else None
        )
        return self._stats

    def corpus_stats(self) -> CorpusStats | None:
        """The document frequencies given or built with :meth:`build_corpus_stats`."""
        return self._stats

    # -- search ---------------------------------------------------------------------------

    def embed_query(self, query: str) -> list[float]:
        """The query vector (normalised where the conversion needs it).

        Raises:
            RetrieverError: the embedder failed or returned a bad vector.
        """
        try:
            raw = self._embed(query)
        except Exception as exc:
            raise RetrieverError(f"the embedder failed: {exc!r}", retriever=self.name) from exc
        try:
            vector: npt.NDArray[np.float64] = np.asarray(raw, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise RetrieverError(
                f"the embedder returned {type(raw).__name__}, not a vector", retriever=self.name
            ) from exc
        if vector.shape[0] != self.dimension:
            raise RetrieverError(
                f"the embedder returned {vector.shape[0]} dimensions; "
                f"the collection has {self.dimension}",
                retriever=self.name,
            )
        if not np.all(np.isfinite(vector)):
            raise RetrieverError("the query vector has NaN or inf values", retriever=self.name)
        if self.scores.normalize_query:
            norm = float(np.linalg.norm(vector))
            if norm > 0:
                vector = vector / norm
        return [float(x) for x in vector]

    def _query_kwargs(self, query: str, k: int) -> dict[str, Any]:
        return {
            "collection_name": self.collection_name,
            "query": self.embed_query(query),
            "using": self.vector_name or None,
            "limit": k,
            "query_filter": self.query_filter,
            "search_params": self.search_params,
            "with_payload": True,
            "with_vectors": False,
        }

    def search(self, query: str, k: int) -> list[Chunk]:
        """The ``k`` nearest points as chunks, best first.

        Raises:
            InvalidQueryError: blank query.
            InputError: ``k`` is not a positive integer.
            RetrieverError: the embedder or Qdrant failed, or a point has no text.
        """
        check_query(query)
        check_k(k)
        kwargs = self._query_kwargs(query, k)
        try:
            response = self.client.query_points(**kwargs)
        except Exception as exc:
            raise RetrieverError(f"Qdrant search failed: {exc!r}", retriever=self.name) from exc
        return self.to_chunks(response.points)

    async def asearch(self, query: str, k: int) -> list[Chunk]:
        """The async search: ``aclient.query_points`` if an async client was given
        (its collection checked once against the sync one), else a worker thread."""
        check_query(query)
        check_k(k)
        if self.aclient is None:
            return await asyncio.to_thread(self.search, query, k)
        if not self._async_checked:
            await self._check_async_collection()
        kwargs = self._query_kwargs(query, k)
        try:
            response = await self.aclient.query_points(**kwargs)
        except Exception as exc:
            raise RetrieverError(f"Qdrant search failed: {exc!r}", retriever=self.name) from exc
        return self.to_chunks(response.points)

    async def _check_async_collection(self) -> None:
        assert self.aclient is not None
        try:
            info = await self.aclient.get_collection(self.collection_name)
        except Exception as exc:
            raise RetrieverError(
                f"the async client cannot read {self.collection_name!r}: {exc}",
                retriever=self.name,
            ) from exc
        try:
            _, params = _vector_params(info, self.collection_name, self.vector_name)
        except InputError as exc:
            raise RetrieverError(
                f"the async client's collection: {exc}", retriever=self.name
            ) from None
        if params.distance is not self.distance or int(params.size) != self.dimension:
            raise RetrieverError(
                f"the async client's {self.collection_name!r} has {params.distance.value} "
                f"distance and {params.size} dimensions; the sync client's has "
                f"{self.distance.value} and {self.dimension}",
                retriever=self.name,
            )
        self._async_checked = True

    def to_chunks(self, points: Iterable[models.ScoredPoint]) -> list[Chunk]:
        """Scored points as chunks (payload text, converted score, metadata)."""
        chunks = []
        seen: set[str] = set()
        for point in points:
            point_id = str(point.id)
            payload = dict(point.payload or {})
            text = payload.pop(self.text_key, None)
            if not isinstance(text, str):
                what = "has no" if text is None else f"has a {type(text).__name__} as its"
                raise RetrieverError(
                    f"point {point_id} {what} text payload {self.text_key!r} "
                    f"(payload keys: {sorted(payload)}); set text_key=...",
                    retriever=self.name,
                )
            raw = float(point.score)
            try:
                score = self.scores(raw)
            except ValueError as exc:
                raise RetrieverError(str(exc), retriever=self.name) from None
            source = payload.get(self.source_key) if self.source_key else None
            parent = payload.get("parent_id")
            try:
                chunk = Chunk(
                    id=point_id,
                    text=text,
                    score=score,
                    score_kind=self.scores.kind,
                    source=None if source is None else str(source),
                    metadata={
                        **payload,
                        "qdrant_id": point_id,
                        "raw_score": raw,
                        "distance": self.scores.metric_name,
                    },
                    parent_id=None if parent is None else str(parent),
                )
            except InvalidChunkError as exc:
                raise RetrieverError(f"point {point_id}: {exc}", retriever=self.name) from None
            if chunk.id not in seen:
                seen.add(chunk.id)
                chunks.append(chunk)
        return chunks
