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

Corpus statistics are built at construction (one scroll of the text payloads),
or loaded from a saved file, so the gate grades with them from the first query.
A filter may be given per call (``search(query, k, query_filter=...)``, added to
the retriever's own), or fixed for a router (``with_filter``). An
``AsyncQdrantClient`` serves ``asearch``: beside a sync client (``aclient=``), or
alone through ``await QdrantRetriever.acreate(aclient, ...)``, which reads the
collection through it.

Bad input gets a typed error: a declared ``distance`` (or ``normalized=True``)
the collection contradicts, a named-vector collection without
``vector_name``, a multivector or sparse-only collection, a query vector of
the wrong size (:class:`~crag_heuristic.InputError` at construction,
:class:`~crag_heuristic.RetrieverError` at search).
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import numpy as np
import numpy.typing as npt

from .._optional import requires

with requires("qdrant", "QdrantRetriever"):
    from qdrant_client import AsyncQdrantClient, QdrantClient
    from qdrant_client.http import models

from .._exceptions import InputError, InvalidChunkError, RetrieverError, _short
from .._scores import to_cosine
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats, resolve_corpus_stats
from .._types import Chunk, ScoreKind
from .base import Embedder, ScoreConversion, VectorRetriever, embedder, unit_norm
from .scope import describe

if TYPE_CHECKING:  # types only (typing.Unpack is 3.11+)
    from typing_extensions import Unpack

_SAMPLE = 64


def _client_error(client: object) -> str:
    if isinstance(client, AsyncQdrantClient):
        return (
            "client is an AsyncQdrantClient: use `await QdrantRetriever.acreate(aclient, ...)` "
            "(setting up reads the collection), or pass it as aclient= beside a QdrantClient"
        )
    return f"client must be a qdrant_client.QdrantClient, got {type(client).__name__}"


def _check_filter(value: object) -> None:
    if value is not None and not isinstance(value, models.Filter):
        raise InputError(f"query_filter must be a models.Filter, got {type(value).__name__}")


def _both(first: models.Filter | None, second: models.Filter | None) -> models.Filter | None:
    """Both filters (a point must pass each), or the one given."""
    if first is None or second is None:
        return first or second
    return models.Filter(must=[first, second])


def _unit_vectors(records: Iterable[Any], vector_name: str | None) -> bool | None:
    """True if the sampled stored vectors have unit norm, False if not, None if none."""
    vectors = []
    for record in records:
        vector: Any = record.vector
        if isinstance(vector, Mapping):
            vector = vector.get(vector_name or "")
        if vector is not None:
            vectors.append(np.asarray(vector, dtype=np.float64))
    if not vectors:
        return None
    return unit_norm(np.vstack(vectors))


def _distance(value: models.Distance | str) -> models.Distance:
    if isinstance(value, models.Distance):
        return value
    for member in models.Distance:
        if str(value).lower() in (member.value.lower(), member.name.lower()):
            return member
    allowed = ", ".join(member.value for member in models.Distance)
    raise InputError(f"distance must be one of: {allowed}; got {_short(value)}")


class QdrantScores(ScoreConversion):
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

    backend = "Qdrant"

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

    @property
    def raw_kind(self) -> ScoreKind:
        """The raw Qdrant score's kind: the Euclidean distance of unit vectors is
        ``L2``; the others are their converted kind (no formula applies)."""
        if self.kind is ScoreKind.COSINE and self.distance is models.Distance.EUCLID:
            return ScoreKind.L2
        return self.kind

    def _convert(self, raw: float) -> float:
        if self.kind is ScoreKind.COSINE and self.distance is models.Distance.EUCLID:
            return to_cosine(max(raw, 0.0), ScoreKind.L2)
        if self.kind is ScoreKind.DISTANCE:
            return max(raw, 0.0)
        return raw

    def __repr__(self) -> str:
        return f"QdrantScores({self.semantics!r})"


def sampled_scores(
    client: QdrantClient,
    collection: str,
    distance: models.Distance,
    vector_name: str | None,
    normalized: bool | None,
) -> QdrantScores:
    """The conversion of a collection's scores, whether its stored vectors have
    unit norm read from a sample when not given (Cosine: Qdrant normalises them);
    a sample that cannot be read leaves it unknown. For a store that searches the
    collection itself (LangChain's, LlamaIndex's)."""
    if distance is models.Distance.COSINE:
        return QdrantScores(distance, True)
    if normalized is None:
        with_vectors: bool | list[str] = True if vector_name is None else [vector_name]
        try:
            records, _ = client.scroll(
                collection_name=collection,
                limit=_SAMPLE,
                with_payload=False,
                with_vectors=with_vectors,
            )
        except Exception:  # noqa: BLE001 - no sample: the norm stays unknown
            records = []
        normalized = _unit_vectors(records, vector_name)
    return QdrantScores(distance, normalized)


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


@dataclass(frozen=True, slots=True)
class _Read:
    """One read of the collection the set-up needs: ``client.<method>(**kwargs)``;
    ``what`` names it in the error when it fails."""

    method: str
    kwargs: dict[str, Any]
    what: str


Setup = Generator[_Read, Any, None]


class QdrantOptions(TypedDict, total=False):
    """The options :class:`QdrantRetriever` and :meth:`QdrantRetriever.acreate`
    share, by keyword (each described in the class doc; defaults in
    :data:`_DEFAULTS`): one definition for both doors."""

    vector_name: str | None
    distance: models.Distance | str | None
    normalized: bool | None
    text_key: str
    source_key: str | None
    query_filter: models.Filter | None
    search_params: models.SearchParams | None
    corpus_stats: CorpusStats | str | os.PathLike[str] | None
    stats_from_collection: bool
    warm_up: bool
    analyzer: Analyzer | None
    name: str


_DEFAULTS: QdrantOptions = {
    "vector_name": None,
    "distance": None,
    "normalized": None,
    "text_key": "text",
    "source_key": "source",
    "query_filter": None,
    "search_params": None,
    "corpus_stats": None,
    "stats_from_collection": True,
    "warm_up": True,
    "analyzer": None,
    "name": "qdrant",
}


T = TypeVar("T")


class QdrantRetriever(VectorRetriever[list[float], models.QueryResponse]):
    """Search a Qdrant collection; return chunks with converted scores.

    Args:
        client: a ``qdrant_client.QdrantClient`` (a server, or the local
            in-process mode ``QdrantClient(":memory:")`` / ``path=...``). For
            an ``AsyncQdrantClient`` alone use :meth:`acreate`.
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
        query_filter: a ``models.Filter`` applied to every search (a per-call
            filter is added to it: both apply).
        search_params: a ``models.SearchParams`` (``hnsw_ef``, ``exact`` ...).
        aclient: an ``AsyncQdrantClient`` on the same collection, used by
            :meth:`asearch` (otherwise the sync client runs in a worker thread).
        corpus_stats: document frequencies for the evaluator: a
            :class:`CorpusStats` or the path of a saved one (loaded now), or
            ``None``: built now by scrolling the collection's text payloads
            once (``stats_from_collection=False`` turns that off; then
            :meth:`build_corpus_stats` is the warm-up), so that the gate has
            them from the first query.
        warm_up: run one search now (limit 1), so that the client's one-time
            set-up (a connection; local mode's first numpy search, 25 ms
            measured) is not paid by the first query.
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
        aclient: AsyncQdrantClient | None = None,
        **options: Unpack[QdrantOptions],
    ) -> None:
        if not isinstance(client, QdrantClient):
            raise InputError(_client_error(client))
        if aclient is not None and not isinstance(aclient, AsyncQdrantClient):
            raise InputError(f"aclient must be an AsyncQdrantClient, got {type(aclient).__name__}")
        self._run(self._configure(client, aclient, collection_name, embed, options))
        self._async_checked = aclient is None

    @classmethod
    async def acreate(
        cls,
        aclient: AsyncQdrantClient,
        collection_name: str,
        embed: Embedder | Any,
        **options: Unpack[QdrantOptions],
    ) -> QdrantRetriever:
        """A retriever over an ``AsyncQdrantClient`` alone, set up through it (the
        same options, checks and statistics as the constructor). It serves
        :meth:`asearch` (``CRAG.aretrieve``); :meth:`search` says it is async-only.

        Raises:
            InputError, RetrieverError: as the constructor.
        """
        if not isinstance(aclient, AsyncQdrantClient):
            raise InputError(f"aclient must be an AsyncQdrantClient, got {type(aclient).__name__}")
        self = cls.__new__(cls)
        await self._arun(self._configure(None, aclient, collection_name, embed, options))
        self._async_checked = True
        return self

    def _configure(
        self,
        client: QdrantClient | None,
        aclient: AsyncQdrantClient | None,
        collection_name: str,
        embed: Embedder | Any,
        options: QdrantOptions,
    ) -> Setup:
        """The arguments checked and kept (no I/O), then the set-up's reads
        (:meth:`_setup`), for the sync constructor or :meth:`acreate` to run."""
        unknown = sorted(set(options) - set(_DEFAULTS))
        if unknown:  # what Python says of an unknown keyword argument
            raise TypeError(f"QdrantRetriever got an unexpected keyword argument {unknown[0]!r}")
        options = {**_DEFAULTS, **options}
        text_key, query_filter = options["text_key"], options["query_filter"]
        if not isinstance(collection_name, str) or not collection_name:
            raise InputError("collection_name must be a non-empty string")
        if not isinstance(text_key, str) or not text_key:
            raise InputError("text_key must be a non-empty string")
        embed = embedder(embed)
        _check_filter(query_filter)
        self.client = client
        self.aclient = aclient
        self.collection_name = collection_name
        self.name = options["name"]
        self._embed: Embedder = embed
        self.text_key = text_key
        self.source_key = options["source_key"]
        self.query_filter = query_filter
        self.search_params = options["search_params"]
        self._analyzer = options["analyzer"]
        self._stats: CorpusStats | None = None
        return self._setup(options)

    def _setup(self, options: QdrantOptions) -> Setup:
        """Read the collection (its vector parameters, a sample of vectors, its texts)
        and set up the conversion and the statistics, then search once (``warm_up``);
        each read is yielded, for the sync constructor or :meth:`acreate` to run."""
        collection = self.collection_name
        distance, normalized = options["distance"], options["normalized"]
        corpus_stats = options["corpus_stats"]
        info = yield _Read(
            "get_collection", {"collection_name": collection}, "cannot read Qdrant collection"
        )
        self.vector_name, params = _vector_params(info, collection, options["vector_name"])
        self.dimension = int(params.size)
        self.distance = params.distance
        if distance is not None and _distance(distance) is not self.distance:
            raise InputError(
                f"collection {collection!r} uses {self.distance.value} distance, "
                f"not the declared {_distance(distance).value}: its scores would be misread"
            )
        if self.distance is models.Distance.COSINE:
            self.normalized: bool | None = True  # Qdrant normalises vectors on upsert
        else:
            records, _ = yield _Read(
                "scroll",
                {"collection_name": collection, "limit": _SAMPLE, "with_payload": False,
                 "with_vectors": self._with_vectors()},
                "cannot read vectors of",
            )  # fmt: skip
            detected = _unit_vectors(records, self.vector_name)
            if normalized is True and detected is False:
                raise InputError(
                    f"normalized=True, but stored vectors of {collection!r} are not unit length"
                )
            self.normalized = detected if normalized is None else bool(normalized)
        self.scores = QdrantScores(self.distance, self.normalized)
        documents: list[tuple[str, str]] = []
        if corpus_stats is None and options["stats_from_collection"]:
            documents = yield from self._documents(256)
        self._stats = resolve_corpus_stats(
            corpus_stats,
            analyzer=self._analyzer,
            documents=(lambda: documents) if documents else None,
        )
        if options["warm_up"]:
            unit = [1.0] + [0.0] * (self.dimension - 1)
            yield _Read(
                "query_points",
                {"collection_name": collection, "query": unit, "using": self.vector_name,
                 "limit": 1, "with_payload": False, "with_vectors": False},
                "cannot search",
            )  # fmt: skip

    def _documents(self, batch_size: int) -> Generator[_Read, Any, list[tuple[str, str]]]:
        """Every (point id, text payload) of the collection, scrolled in batches: the
        id is the one search results give the chunk."""
        documents: list[tuple[str, str]] = []
        offset: Any = None
        while True:
            records, offset = yield _Read(
                "scroll",
                {"collection_name": self.collection_name, "limit": batch_size,
                 "offset": offset, "with_payload": [self.text_key], "with_vectors": False},
                "cannot read the texts of",
            )  # fmt: skip
            documents.extend(
                (str(record.id), text)
                for record in records
                if isinstance(text := (record.payload or {}).get(self.text_key), str)
            )
            if offset is None:
                return documents

    def _built(self, documents: list[tuple[str, str]]) -> CorpusStats | None:
        """Statistics (with each point's analysis) of ``documents``; ``None`` for none."""
        if not documents:
            return None
        return CorpusStats.build(
            [text for _, text in documents],
            ids=[doc_id for doc_id, _ in documents],
            analyzer=self._analyzer,
            analyses=True,
        )

    def _run(self, reads: Generator[_Read, Any, T]) -> T:
        """Run ``reads`` (a set-up's) on the sync client; their result."""
        assert self.client is not None
        try:
            read = next(reads)
            while True:
                try:
                    outcome = getattr(self.client, read.method)(**read.kwargs)
                except Exception as exc:
                    raise self._read_error(read, exc) from exc
                read = reads.send(outcome)
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def _arun(self, reads: Generator[_Read, Any, T]) -> T:
        """Run ``reads`` on the async client; their result."""
        assert self.aclient is not None
        try:
            read = next(reads)
            while True:
                try:
                    outcome = await getattr(self.aclient, read.method)(**read.kwargs)
                except Exception as exc:
                    raise self._read_error(read, exc) from exc
                read = reads.send(outcome)
        except StopIteration as stop:
            result: T = stop.value
            return result

    def _read_error(self, read: _Read, exc: Exception) -> RetrieverError:
        return RetrieverError(f"{read.what} {self.collection_name!r}: {exc}", retriever=self.name)

    def __repr__(self) -> str:
        return (
            f"QdrantRetriever(collection={self.collection_name!r}, "
            f"distance={self.distance.value}, scores={self.score_semantics!r})"
        )

    # -- the collection -------------------------------------------------------------------

    def _with_vectors(self) -> bool | list[str]:
        return True if self.vector_name is None else [self.vector_name]

    def build_corpus_stats(self, *, batch_size: int = 256) -> CorpusStats | None:
        """Scroll the whole collection once and build document frequencies from
        the text payloads, with each point's analysis (the evaluator looks the
        collection's chunks up by point id and text digest instead of tokenising
        them), kept for :meth:`corpus_stats` (``None`` when empty): the warm-up
        after ``stats_from_collection=False``, or a refresh after writes."""
        self._stats = self._built(self._run(self._documents(batch_size)))
        return self._stats

    async def abuild_corpus_stats(self, *, batch_size: int = 256) -> CorpusStats | None:
        """The async :meth:`build_corpus_stats` (through ``aclient``, else a thread)."""
        if self.aclient is None:
            return await asyncio.to_thread(self.build_corpus_stats, batch_size=batch_size)
        self._stats = self._built(await self._arun(self._documents(batch_size)))
        return self._stats

    @property
    def scope(self) -> str | None:
        """The filter every search is within (``"qdrant filter #<digest>"``), or
        ``None`` (see :mod:`crag_heuristic._retrievers.scope`)."""
        if self.query_filter is None:
            return None
        return f"qdrant filter {describe(self.query_filter.model_dump(mode='json'))}"

    def with_filter(self, query_filter: models.Filter) -> QdrantRetriever:
        """This retriever with ``query_filter`` added to its own (both apply): the
        same clients, conversion and statistics, for a router per filter
        (``CRAG(retriever.with_filter(f), cache=shared_cache)``)."""
        _check_filter(query_filter)
        view = copy.copy(self)
        view.query_filter = _both(self.query_filter, query_filter)
        return view

    # -- search ---------------------------------------------------------------------------

    holder = "the collection"
    backend = "Qdrant"
    scores: QdrantScores

    def _dimension(self) -> int:
        return self.dimension

    def _unit_query(self) -> bool:
        return self.scores.normalize_query

    def _query_vector(self, vector: npt.NDArray[np.floating[Any]]) -> list[float]:
        return [float(x) for x in vector]

    def _check_options(self, options: Mapping[str, Any]) -> None:
        _check_filter(options["query_filter"])
        search_params = options["search_params"]
        if search_params is not None and not isinstance(search_params, models.SearchParams):
            raise InputError(
                f"search_params must be a models.SearchParams, got {type(search_params).__name__}"
            )

    def _query_kwargs(
        self, vector: list[float], k: int, options: Mapping[str, Any]
    ) -> dict[str, Any]:
        return {
            "collection_name": self.collection_name,
            "query": vector,
            "using": self.vector_name or None,
            "limit": k,
            "query_filter": _both(self.query_filter, options["query_filter"]),
            "search_params": options["search_params"] or self.search_params,
            "with_payload": True,
            "with_vectors": False,
        }

    def _raw_search(
        self, vector: list[float], k: int, options: Mapping[str, Any]
    ) -> models.QueryResponse:
        if self.client is None:
            raise RetrieverError(
                "this QdrantRetriever has an AsyncQdrantClient only: use asearch() "
                "(CRAG.aretrieve)",
                retriever=self.name,
            )
        return self.client.query_points(**self._query_kwargs(vector, k, options))

    async def _araw_search(
        self, vector: list[float], k: int, options: Mapping[str, Any]
    ) -> models.QueryResponse:
        assert self.aclient is not None
        if not self._async_checked:
            await self._check_async_collection()
        return await self.aclient.query_points(**self._query_kwargs(vector, k, options))

    def _chunks(self, raw: models.QueryResponse, vector: list[float]) -> list[Chunk]:
        return self.to_chunks(raw.points)

    def search(
        self,
        query: str,
        k: int,
        *,
        query_filter: models.Filter | None = None,
        search_params: models.SearchParams | None = None,
    ) -> list[Chunk]:
        """The ``k`` nearest points as chunks, best first.

        Args:
            query_filter: a filter for this call, added to the retriever's own.
            search_params: search parameters for this call (instead of the
                retriever's).

        Raises:
            InvalidQueryError: blank query.
            InputError: ``k`` is not a positive integer; a filter or search
                parameters of the wrong type.
            RetrieverError: the embedder or Qdrant failed, or a point has no
                text; a retriever with an async client only (use :meth:`asearch`).
        """
        return self._search(
            query, k, {"query_filter": query_filter, "search_params": search_params}
        )

    async def asearch(
        self,
        query: str,
        k: int,
        *,
        query_filter: models.Filter | None = None,
        search_params: models.SearchParams | None = None,
    ) -> list[Chunk]:
        """The async search: ``aclient.query_points`` if an async client was given
        (its collection checked once against the sync one), else a worker thread."""
        if self.aclient is None:
            return await asyncio.to_thread(
                self.search, query, k, query_filter=query_filter, search_params=search_params
            )
        options = {"query_filter": query_filter, "search_params": search_params}
        return await self._asearch(query, k, options)

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
            score = self._score(raw)
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
