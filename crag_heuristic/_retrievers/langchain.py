"""Adapters for LangChain vector stores and retrievers, without depending on LangChain.

They are duck-typed: a *store* is anything with
``similarity_search_with_score(query, k, **kwargs)`` returning ``(document,
raw_score)`` pairs (every ``langchain_core.vectorstores.VectorStore``), a
*retriever* anything with ``invoke(query)`` returning documents (every
``BaseRetriever``). A document is anything with ``page_content`` and
``metadata`` (``langchain_core.documents.Document``). The LangChain-facing
classes (``CRAGRetriever``, the LangGraph grading node) live in
:mod:`crag_heuristic.integrations.langchain`; this module holds the score and
id conventions they share with :class:`LangChainFaissRetriever`.

Score semantics are explicit. What a store's raw score means depends on the
store, so it is looked up, never guessed:

==========================================  =====================================================
store                                       chunk score and kind
==========================================  =====================================================
``score_kind=`` declared by the caller      the raw score, as that kind (e.g. ``COSINE`` for a
                                            store known to return cosine similarities)
LangChain ``FAISS`` (``index.metric_type``)  converted by :class:`FaissScores`: inner product of
                                            unit vectors -> ``COSINE``; squared L2 of unit
                                            vectors -> ``COSINE = 1 - d/2``; otherwise
                                            ``INNER_PRODUCT`` / ``DISTANCE``
``InMemoryVectorStore`` (langchain-core)    its cosine similarity -> ``COSINE``
any other store                             the raw score as ``UNKNOWN``: the gate gets no
                                            similarity evidence and its reasoning says so
a store without scores, a plain retriever   no score (``UNKNOWN``), or ``metadata[score_key]``
                                            when a key is named
==========================================  =====================================================

Why not LangChain's ``similarity_search_with_relevance_scores``: for FAISS it
maps Euclidean scores with ``1 - d / sqrt(2)``, which treats FAISS's SQUARED
L2 distance as a plain one: for unit vectors ``d`` runs from 0 to 4, so the
"relevance" runs from 1 down to ``1 - 4/sqrt(2) = -1.83``.

Ids: a document's ``id`` (or ``metadata["id"]``) when it has one; otherwise
``"lc:"`` + the first 16 hex digits of the SHA-256 of its ``source`` metadata
and its text (:func:`stable_document_id`). The id is stable across queries and
processes, so one document keeps one id in every ranking the router fuses and
in the evaluation cache. Two documents with the same id in one result are one
document: the first (best-ranked) is kept.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import os
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from .._checks import check_k, check_query, real_number
from .._exceptions import (
    ConfigError,
    InputError,
    InvalidChunkError,
    RetrieverError,
    WebSearchError,
    WebSearchResponseError,
    _short,
)
from .._redact import describe
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats, resolve_corpus_stats
from .._types import Chunk, ScoreKind
from .base import DeclaredScores, ScoreConversion, ScoredAdapter
from .faiss import FaissScores, detect_unit_vectors
from .scope import check_search_filters, search_scope
from .stores import read_store_scores, warn_unknown_scores


def _score_kind(value: ScoreKind | str) -> ScoreKind:
    try:
        return ScoreKind(value)
    except ValueError:
        allowed = ", ".join(kind.value for kind in ScoreKind)
        raise InputError(f"score_kind must be one of: {allowed}; got {_short(value)}") from None


def _is_faiss_store(store: Any) -> bool:
    index = getattr(store, "index", None)
    return hasattr(store, "similarity_search_with_score") and hasattr(index, "metric_type")


def _is_in_memory_store(store: Any) -> bool:
    # The exact class only: a subclass may score another way.
    cls = type(store)
    return cls.__name__ == "InMemoryVectorStore" and cls.__module__.startswith(
        "langchain_core.vectorstores"
    )


def store_scores(
    store: Any,
    *,
    score_kind: ScoreKind | str | None = None,
    normalized: bool | None = None,
) -> ScoreConversion:
    """The score conversion for a LangChain vector store (see the module doc).

    Args:
        store: the vector store.
        score_kind: declare what the store's raw scores are; overrides the lookup.
        normalized: for FAISS, whether the stored vectors are unit-normalised
            (by default ``store._normalize_L2`` if set, else detected).

    Raises:
        InputError: an unknown ``score_kind``.
    """
    if score_kind is not None:
        kind = _score_kind(score_kind)
        if _is_faiss_store(store):
            _check_declared_faiss(kind, store.index.metric_type)
        return DeclaredScores(kind, f"declared by the caller: {kind.value}", kind.value)
    if _is_faiss_store(store):
        if normalized is None:
            normalized = True if getattr(store, "_normalize_L2", False) else None
            if normalized is None:
                normalized = detect_unit_vectors(store.index)
        return FaissScores(store.index.metric_type, normalized)
    if _is_in_memory_store(store):
        return DeclaredScores(
            ScoreKind.COSINE, "cosine similarity (InMemoryVectorStore computes it)", "cosine"
        )
    read = read_store_scores(store, normalized=normalized)
    if read is not None:
        return read
    return DeclaredScores(
        ScoreKind.UNKNOWN,
        f"unknown: {type(store).__name__} does not say what its scores mean; they are kept "
        "as UNKNOWN and the gate has no similarity evidence (declare score_kind=...)",
        "unknown",
    )


_KINDS_HINT = (
    "cosine, cosine_distance (1 - cos, as Chroma's cosine space), squared_l2, l2, "
    "inner_product or distance"
)


def unknown_store_message(store: Any) -> str:
    """The warning for a store whose scores are neither declared nor read: what and the fix."""
    return (
        f"{type(store).__name__} does not say what its scores are (crag-heuristic reads them "
        "from FAISS, InMemoryVectorStore, Chroma and Qdrant stores): they are kept as UNKNOWN "
        "and the gate grades without similarity evidence. Declare them: "
        f"score_kind='cosine' (or what the store returns: {_KINDS_HINT})"
    )


def scoreless_retriever_message(base: Any) -> str:
    """The warning for a retriever that returns documents without scores, and the fix."""
    name = type(base).__name__
    search_type = getattr(base, "search_type", None)
    if getattr(base, "vectorstore", None) is not None and search_type is not None:
        return (
            f"{name} with search_type={search_type!r} returns documents without scores: the "
            "gate grades without similarity evidence. Use search_type='similarity' (its "
            "store's scores are then read), or pass the store itself (base=vectorstore)"
        )
    return (
        f"{name} is a retriever, which returns documents without scores: the gate grades "
        "without similarity evidence. Pass the vector store itself (base=vectorstore, or "
        "vectorstore.as_retriever() in similarity mode), or name the metadata field that "
        "holds each document's score and its kind (score_key='score', score_kind='cosine')"
    )


def _check_declared_faiss(kind: ScoreKind, metric: int) -> None:
    """Refuse a declared kind that the FAISS index's metric contradicts.

    ``METRIC_L2`` indexes return squared L2 distances (``squared_l2``, or any
    ``distance``); ``METRIC_INNER_PRODUCT`` ones inner products (``cosine`` for
    unit vectors, ``inner_product``); other metrics, distances.

    Raises:
        ConfigError: ``score_kind`` names the metric it is and the kind to declare.
    """
    import faiss

    unknown = {ScoreKind.UNKNOWN}
    if metric == faiss.METRIC_L2:
        allowed, what = {ScoreKind.SQUARED_L2, ScoreKind.DISTANCE} | unknown, "squared L2 distances"
        fix = "squared_l2"
    elif metric == faiss.METRIC_INNER_PRODUCT:
        allowed = {ScoreKind.COSINE, ScoreKind.INNER_PRODUCT} | unknown
        what, fix = "inner products", "cosine' (unit vectors) or 'inner_product"
    else:
        allowed, what, fix = {ScoreKind.DISTANCE} | unknown, "distances", "distance"
    if kind not in allowed:
        raise ConfigError(
            "score_kind",
            kind.value,
            f"the store's FAISS index (metric {_metric_label(metric)}) returns {what}: "
            f"declare '{fix}', or leave score_kind out to read it from the index",
        )


def _metric_label(metric: int) -> str:
    import faiss

    names = {faiss.METRIC_L2: "L2", faiss.METRIC_INNER_PRODUCT: "INNER_PRODUCT"}
    return names.get(metric, str(metric))


def stable_document_id(text: str, source: Any = None) -> str:
    """``"lc:"`` + 16 hex digits of SHA-256 over the source and the text.

    The same document gets the same id in every query and process (never
    Python's salted ``hash()``), so rankings fuse and caches hit.
    """
    digest = hashlib.sha256()
    digest.update(("" if source is None else str(source)).encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return "lc:" + digest.hexdigest()[:16]


def document_to_chunk(
    document: Any,
    *,
    score: float | None,
    score_kind: ScoreKind,
    retriever: str,
    position: int = 0,
    extra_metadata: Mapping[str, Any] | None = None,
) -> Chunk:
    """A LangChain document as a chunk (id, text, source, parent id, metadata).

    ``source`` and ``parent_id`` come from the document's metadata; the id is
    the document's, else :func:`stable_document_id`.

    Raises:
        RetrieverError: not a document (no string ``page_content``), or a
            score the chunk rejects (negative distance, NaN ...).
    """
    text = getattr(document, "page_content", None)
    if not isinstance(text, str):
        raise RetrieverError(
            f"result #{position} is a {type(document).__name__}, not a Document "
            "(no string page_content)",
            retriever=retriever,
        )
    raw_metadata = getattr(document, "metadata", None) or {}
    if not isinstance(raw_metadata, Mapping):
        raise RetrieverError(
            f"result #{position} has metadata of type {type(raw_metadata).__name__}",
            retriever=retriever,
        )
    metadata = dict(raw_metadata)
    source = metadata.get("source")
    doc_id = getattr(document, "id", None) or metadata.get("id")
    chunk_id = str(doc_id) if doc_id not in (None, "") else stable_document_id(text, source)
    parent = metadata.get("parent_id")
    try:
        return Chunk(
            id=chunk_id,
            text=text,
            score=score,
            score_kind=score_kind,
            source=None if source is None else str(source),
            metadata={**metadata, **(extra_metadata or {})},
            parent_id=None if parent is None else str(parent),
        )
    except InvalidChunkError as exc:
        raise RetrieverError(f"result #{position}: {exc}", retriever=retriever) from None


def _store_documents(store: Any, retriever: str) -> list[tuple[str, str]] | None:
    """The ``(chunk id, text)`` pairs of a store's in-process docstore (FAISS,
    ``InMemoryVectorStore``), if any: the ids its search results get."""
    documents = getattr(getattr(store, "docstore", None), "_dict", None)
    found: list[Any]
    if isinstance(documents, Mapping) and documents:
        found = list(documents.values())
    else:
        records = getattr(store, "store", None)
        if not (_is_in_memory_store(store) and isinstance(records, Mapping) and records):
            return None
        found = [
            SimpleNamespace(
                page_content=str(r.get("text", "")), metadata=r.get("metadata"), id=r.get("id")
            )
            for r in records.values()
            if isinstance(r, Mapping)
        ]
    pairs = []
    for position, document in enumerate(found):
        try:
            chunk = document_to_chunk(
                document, score=None, score_kind=ScoreKind.UNKNOWN, retriever=retriever
            )
            pairs.append((chunk.id, chunk.text))
        except RetrieverError:  # one its searches would refuse too: counted by its text
            pairs.append((f"#{position}", str(getattr(document, "page_content", ""))))
    return pairs


def _unwrap(base: Any) -> tuple[Any, dict[str, Any]]:
    """A ``VectorStoreRetriever`` in similarity mode searches its store: use the store
    (and its ``search_kwargs``) directly, so the scores are not thrown away."""
    store = getattr(base, "vectorstore", None)
    if (
        store is not None
        and getattr(base, "search_type", None) == "similarity"
        and hasattr(store, "similarity_search_with_score")
    ):
        return store, dict(getattr(base, "search_kwargs", None) or {})
    return base, {}


def split_search_kwargs(
    base: Any, search_kwargs: Mapping[str, Any] | None
) -> tuple[Any, dict[str, Any], int | None]:
    """``(what to search, its search keywords, the k they ask for)``: a
    ``VectorStoreRetriever`` in similarity mode unwrapped to its store (see
    :func:`_unwrap`), its ``search_kwargs`` merged under ``search_kwargs`` as
    LangChain merges them (the later wins), and ``k`` taken out of them (the
    router asks for its own ``k`` per search), checked.

    Raises:
        InputError: ``search_kwargs`` is not a mapping; a ``k`` that is not a
            positive integer.
    """
    if search_kwargs is not None and not isinstance(search_kwargs, Mapping):
        raise InputError(f"search_kwargs must be a mapping, got {type(search_kwargs).__name__}")
    base, inherited = _unwrap(base)
    kwargs = {**inherited, **dict(search_kwargs or {})}
    check_search_filters(kwargs)
    k = kwargs.pop("k", None)
    return base, kwargs, None if k is None else check_k(k)


def langchain_kind(part: object) -> str | None:
    """What LangChain object ``part`` is, by its methods (duck-typed, LangChain is not
    imported): ``"vector store"``, ``"retriever"``, ``"tool"``, ``"document"``, or
    ``None`` for anything else (a crag-heuristic part, say)."""
    if hasattr(part, "similarity_search_with_score"):
        return "vector store"
    if isinstance(getattr(part, "page_content", None), str):
        return "document"
    if hasattr(part, "invoke") and hasattr(part, "_get_relevant_documents"):
        return "retriever"
    if hasattr(part, "invoke") and hasattr(part, "args_schema") and hasattr(part, "_run"):
        return "tool"
    return None


def adapter_hint(part: object, role: str) -> str | None:
    """Why a LangChain object cannot be the router's ``role`` part as it is (``role``:
    ``"retriever"``, ``"lexical"`` or ``"web"``), naming the adapter that takes it;
    ``None`` when ``part`` is no LangChain object."""
    kind = langchain_kind(part)
    if kind is None:
        return None
    what = f"{role} is a LangChain {kind} ({type(part).__name__})"
    if role == "web":
        if kind in ("retriever", "tool"):
            return (
                f"{what}: wrap it, web=LangChainWebSearcher(...) "
                "(crag_heuristic.integrations.langchain; CRAGRetriever wraps it itself)"
            )
        return f"{what}, not a web searcher (search(query, max_results) returning chunks)"
    if kind in ("vector store", "retriever"):
        return (
            f"{what}: wrap it, {role}=LangChainRetriever(...) (crag_heuristic.integrations"
            ".langchain: its scores read and converted), or use CRAGRetriever, which wraps it"
        )
    if kind == "tool":
        return f"{what}, not a retriever: a web search tool goes in web=LangChainWebSearcher(...)"
    return f"{what}, not a retriever: index documents in a retriever (BM25Retriever(documents))"


class LangChainRetriever(ScoredAdapter):
    """Any LangChain vector store or retriever as a crag-heuristic retriever.

    Over a vector store it calls ``similarity_search_with_score`` and converts
    the raw scores by the store's convention (see the module doc; the
    conversion is :attr:`score_semantics`). Over a plain retriever it calls
    ``invoke(query)`` and keeps the first ``k`` documents; they carry no
    score unless ``score_key`` names a metadata field that holds one. A
    ``VectorStoreRetriever`` (``store.as_retriever()``) in similarity mode is
    unwrapped to its store, so its scores are kept.

    Args:
        base: a LangChain ``VectorStore`` or ``BaseRetriever`` (duck-typed).
        score_kind: declare what the raw scores (or ``metadata[score_key]``)
            are; overrides the lookup.
        score_key: for a plain retriever, the metadata field with each
            document's score.
        normalized: for FAISS stores, whether the stored vectors are unit-normalised.
        search_kwargs: passed to every search (``filter``, ``fetch_k`` ...),
            merged over a wrapped ``VectorStoreRetriever``'s own as LangChain
            merges them. ``k`` is not one (the router asks for its ``k`` per
            search: ``CRAG(..., config={"k": 3})``; ``CRAGRetriever`` takes it
            as its ``k``). A filter (:data:`~crag_heuristic._retrievers.scope.SCOPE_KEYS`)
            is the retriever's :attr:`scope`.
        require_scores: raise instead of degrading when there are no scores.
        corpus_stats: document frequencies for the evaluator: a
            :class:`CorpusStats`, the path of a saved one (loaded now), or
            ``None``: built now from the store's in-process docstore (FAISS,
            ``InMemoryVectorStore``; ``stats_from_docstore=False`` turns that
            off), never on the first query. Other stores and plain retrievers
            have none unless given.
        analyzer: for corpus statistics (use the evaluator's).
        name: the retriever's name in errors.
        warn_unknown: issue :class:`~crag_heuristic.retrievers.UnknownScoresWarning`
            (once) when the scores are neither declared nor read from the store;
            ``False`` for a retriever whose scores the gate does not read (a lexical
            retriever's rankings are fused by rank).

    Raises:
        InputError: ``base`` is neither a store nor a retriever; an unknown
            ``score_kind``; ``require_scores`` over a retriever without
            ``score_key``; a ``k`` in the search keywords; unusable
            ``corpus_stats`` (see :meth:`CorpusStats.load`).

    Degraded results (documented, never silent): a store whose scores mean
    nothing known, a store that returns no scores and a plain retriever give
    chunks of kind ``UNKNOWN`` (or without a score); the evaluator then has no
    similarity evidence and says so in its reasoning.
    """

    def __init__(
        self,
        base: Any,
        *,
        score_kind: ScoreKind | str | None = None,
        score_key: str | None = None,
        normalized: bool | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        require_scores: bool = False,
        corpus_stats: CorpusStats | str | os.PathLike[str] | None = None,
        stats_from_docstore: bool = True,
        analyzer: Analyzer | None = None,
        name: str = "langchain",
        warn_unknown: bool = True,
    ) -> None:
        base, kwargs, k = split_search_kwargs(base, search_kwargs)
        if k is not None:
            raise InputError(
                f"search_kwargs k={k}: the router asks for k per search (CRAG(..., "
                f"config={{'k': {k}}}) or retrieve(query, k={k})); CRAGRetriever takes it as its k"
            )
        if hasattr(base, "similarity_search_with_score"):
            self.mode = "store"
        elif hasattr(base, "invoke") or hasattr(base, "ainvoke"):
            self.mode = "retriever"
        else:
            raise InputError(
                f"base must be a LangChain VectorStore (similarity_search_with_score) or "
                f"BaseRetriever (invoke), got {type(base).__name__}"
            )
        if score_key is not None and not isinstance(score_key, str):
            raise InputError(f"score_key must be a string, got {type(score_key).__name__}")
        self.base = base
        self.name = name
        self.score_key = score_key
        self.require_scores = bool(require_scores)
        self.search_kwargs: dict[str, Any] = kwargs
        self._declared = score_kind is not None
        if self.mode == "store":
            self.scores: ScoreConversion = store_scores(
                base, score_kind=score_kind, normalized=normalized
            )
        else:
            if require_scores and score_key is None:
                raise InputError(
                    f"{type(base).__name__} is a retriever without scores: name the metadata "
                    "field that holds them (score_key=...) or drop require_scores"
                )
            kind = ScoreKind.UNKNOWN if score_kind is None else _score_kind(score_kind)
            if score_key is None:
                what = "no scores (a plain retriever): the gate has no similarity evidence"
            elif score_kind is None:
                what = (
                    f"metadata[{score_key!r}] of unknown kind: kept as UNKNOWN, the gate has "
                    "no similarity evidence (declare score_kind=...)"
                )
            else:
                what = f"metadata[{score_key!r}] declared by the caller: {kind.value}"
            self.scores = DeclaredScores(kind, what, kind.value)
        self._scoreless = False  # a store found to return no scores
        self._warn_unknown = bool(warn_unknown)  # at most once per retriever: cleared once warned
        if warn_unknown and self.scores.kind is ScoreKind.UNKNOWN and score_kind is None:
            self._warn_unknown = False
            if self.mode == "store":
                warn_unknown_scores(unknown_store_message(base))
            elif score_key is None:
                warn_unknown_scores(scoreless_retriever_message(base))
            else:
                warn_unknown_scores(
                    f"metadata[{score_key!r}] of {type(base).__name__}'s documents is read as "
                    f"UNKNOWN: the gate grades without similarity evidence. Declare its kind: "
                    f"score_kind='cosine' (or {_KINDS_HINT})"
                )
        documents = None  # the docstore is read only to build statistics (not when given)
        if corpus_stats is None and stats_from_docstore:
            documents = _store_documents(base, self.name)
        # with each document's analysis: the evaluator looks the store's chunks up
        self._stats = resolve_corpus_stats(
            corpus_stats,
            analyzer=analyzer,
            documents=None if not documents else lambda: documents,
        )

    def __repr__(self) -> str:
        base = type(self.base).__name__
        return f"{type(self).__name__}(base={base}, scores={self.score_semantics!r})"

    @property
    def score_semantics(self) -> str:
        """How raw scores are converted, in words."""
        if self._scoreless:
            return (
                f"no scores: {type(self.base).__name__}.similarity_search_with_score is not "
                "implemented; the gate has no similarity evidence"
            )
        return super().score_semantics

    @property
    def scope(self) -> str | None:
        """The filter in the search keywords every search is within, or ``None``
        (see :mod:`crag_heuristic._retrievers.scope`)."""
        return search_scope(self.search_kwargs)

    def with_search_kwargs(self, search_kwargs: Mapping[str, Any]) -> LangChainRetriever:
        """This retriever with ``search_kwargs`` merged over its own, as LangChain's
        ``VectorStoreRetriever`` merges a call's keywords (the later wins): a view
        sharing the store, the conversion and the statistics (a per-call ``filter``).

        Raises:
            InputError: not a mapping, or a ``k`` in it (the router asks for ``k``).
        """
        if not isinstance(search_kwargs, Mapping):
            raise InputError(f"search_kwargs must be a mapping, got {type(search_kwargs).__name__}")
        if "k" in search_kwargs:
            raise InputError("k is not a search keyword here: the router asks for k per search")
        check_search_filters(search_kwargs)
        view = copy.copy(self)
        view.search_kwargs = {**self.search_kwargs, **search_kwargs}
        return view

    # -- search ---------------------------------------------------------------------------

    def _kwargs(self, k: int) -> dict[str, Any]:
        return {**self.search_kwargs, "k": k}

    def _no_scores(self, exc: NotImplementedError) -> RetrieverError | None:
        """The error to raise for a store without scores, or ``None`` to degrade."""
        if self.require_scores or self._declared:
            return RetrieverError(
                f"{type(self.base).__name__} returns no scores "
                "(similarity_search_with_score is not implemented) but scores are required",
                retriever=self.name,
            )
        self._scoreless = True
        if self._warn_unknown:
            self._warn_unknown = False
            warn_unknown_scores(
                f"{type(self.base).__name__} returns no scores (similarity_search_with_score "
                "is not implemented): the gate grades without similarity evidence. Give the "
                "router a store that returns them, or require_scores=True to make it an error"
            )
        return None

    def search(self, query: str, k: int) -> list[Chunk]:
        """The ``k`` best documents as chunks, scores converted.

        Raises:
            InvalidQueryError: blank query.
            InputError: ``k`` is not a positive integer.
            RetrieverError: the store or retriever failed or returned something
                unusable; a store without scores when scores are required.
        """
        check_query(query)
        check_k(k)
        try:
            if self.mode == "retriever":
                return self._from_documents(self._invoke(query), k)
            if not self._scoreless:
                try:
                    pairs = self.base.similarity_search_with_score(query, **self._kwargs(k))
                    return self._from_pairs(pairs)
                except NotImplementedError as exc:
                    error = self._no_scores(exc)
                    if error is not None:
                        raise error from None
            return self._from_documents(self.base.similarity_search(query, **self._kwargs(k)), k)
        except RetrieverError:
            raise
        except Exception as exc:
            raise RetrieverError(f"the vector store failed: {exc!r}", retriever=self.name) from exc

    async def asearch(self, query: str, k: int) -> list[Chunk]:
        """The async search: the base's own async methods (LangChain runs sync-only
        implementations in a worker thread)."""
        check_query(query)
        check_k(k)
        base = self.base
        try:
            if self.mode == "retriever":
                if hasattr(base, "ainvoke"):
                    documents = await base.ainvoke(query, **self.search_kwargs)
                else:
                    documents = await asyncio.to_thread(self._invoke, query)
                return self._from_documents(documents, k)
            if not self._scoreless:
                try:
                    native = getattr(base, "asimilarity_search_with_score", None)
                    if native is not None:
                        pairs = await native(query, **self._kwargs(k))
                    else:
                        pairs = await asyncio.to_thread(
                            base.similarity_search_with_score, query, **self._kwargs(k)
                        )
                    return self._from_pairs(pairs)
                except NotImplementedError as exc:
                    error = self._no_scores(exc)
                    if error is not None:
                        raise error from None
            native_plain = getattr(base, "asimilarity_search", None)
            if native_plain is not None:
                documents = await native_plain(query, **self._kwargs(k))
            else:
                documents = await asyncio.to_thread(
                    base.similarity_search, query, **self._kwargs(k)
                )
            return self._from_documents(documents, k)
        except RetrieverError:
            raise
        except Exception as exc:
            raise RetrieverError(f"the vector store failed: {exc!r}", retriever=self.name) from exc

    def _invoke(self, query: str) -> Any:
        return self.base.invoke(query, **self.search_kwargs)

    def _from_pairs(self, pairs: Any) -> list[Chunk]:
        try:
            items = list(pairs)
        except TypeError:
            raise RetrieverError(
                "the vector store returned a non-iterable", retriever=self.name
            ) from None
        chunks: list[Chunk] = []
        seen: set[str] = set()
        for position, pair in enumerate(items):
            try:
                document, raw = pair
                raw = float(raw)
            except (TypeError, ValueError):
                raise RetrieverError(
                    f"result #{position} is not a (Document, score) pair", retriever=self.name
                ) from None
            chunk = document_to_chunk(
                document,
                score=self._score(raw),
                score_kind=self.scores.kind,
                retriever=self.name,
                position=position,
                extra_metadata={"raw_score": raw, "metric": self.scores.metric_name},
            )
            if chunk.id not in seen:  # one document twice: keep the best-ranked
                seen.add(chunk.id)
                chunks.append(chunk)
        return chunks

    def _from_documents(self, documents: Any, k: int) -> list[Chunk]:
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            try:
                documents = list(documents)
            except TypeError:
                raise RetrieverError(
                    f"the retriever returned a {type(documents).__name__}, not a list of Documents",
                    retriever=self.name,
                ) from None
        chunks: list[Chunk] = []
        seen: set[str] = set()
        for position, document in enumerate(documents):
            if len(chunks) == k:
                break
            score = self._metadata_score(document, position)
            kind = self.scores.kind if score is not None else ScoreKind.UNKNOWN
            chunk = document_to_chunk(
                document, score=score, score_kind=kind, retriever=self.name, position=position
            )
            if chunk.id not in seen:
                seen.add(chunk.id)
                chunks.append(chunk)
        return chunks

    def _metadata_score(self, document: Any, position: int) -> float | None:
        if self.score_key is None or self.mode == "store":
            return None
        metadata = getattr(document, "metadata", None)
        value = metadata.get(self.score_key) if isinstance(metadata, Mapping) else None
        if value is None:
            if self.require_scores or self._declared:
                raise RetrieverError(
                    f"result #{position} has no metadata[{self.score_key!r}] score",
                    retriever=self.name,
                )
            return None
        real = real_number(value)
        if real is None:
            raise RetrieverError(
                f"result #{position}: metadata[{self.score_key!r}] = {value!r} is not a number",
                retriever=self.name,
            )
        try:
            return self.scores(real)
        except ValueError as exc:
            raise RetrieverError(f"result #{position}: {exc}", retriever=self.name) from None


class LangChainFaissRetriever(LangChainRetriever):
    """Wrap a LangChain FAISS vector store as a crag-heuristic retriever.

    A :class:`LangChainRetriever` that insists on a FAISS-shaped store:
    ``similarity_search_with_score(query, k)`` and an ``index`` attribute
    holding the ``faiss.Index`` (``langchain_community.vectorstores.FAISS``).
    Raw scores are converted with :class:`FaissScores`.

    Args:
        store: the vector store (``langchain_community.vectorstores.FAISS``
            or anything with the same two attributes).
        normalized: whether the stored vectors are unit-normalised; by default
            ``store._normalize_L2`` if set, else detected from the index.
        filter: a LangChain metadata filter passed to every search.
        fetch_k: how many candidates LangChain fetches before filtering.
        corpus_stats: as for :class:`LangChainRetriever` (by default built now
            from the store's docstore).
        analyzer: for corpus statistics (use the evaluator's).

    Raises:
        InputError: ``store`` lacks ``similarity_search_with_score`` or ``index``.
    """

    def __init__(
        self,
        store: Any,
        *,
        normalized: bool | None = None,
        filter: Mapping[str, Any] | Any = None,
        fetch_k: int | None = None,
        corpus_stats: CorpusStats | str | os.PathLike[str] | None = None,
        analyzer: Analyzer | None = None,
        name: str = "langchain-faiss",
    ) -> None:
        if not hasattr(store, "similarity_search_with_score") or not hasattr(store, "index"):
            raise InputError(
                "store must look like a LangChain FAISS vector store "
                "(similarity_search_with_score and index)"
            )
        kwargs: dict[str, Any] = {}
        if filter is not None:
            kwargs["filter"] = filter
        if fetch_k is not None:
            kwargs["fetch_k"] = fetch_k
        super().__init__(
            store,
            normalized=normalized,
            search_kwargs=kwargs,
            corpus_stats=corpus_stats,
            analyzer=analyzer,
            name=name,
        )
        self.store = store
        self.filter = filter
        self.fetch_k = fetch_k

    def __repr__(self) -> str:
        return f"LangChainFaissRetriever(scores={self.scores.semantics!r})"


_URL_KEYS = ("url", "link", "href", "source")
_TEXT_KEYS = ("content", "snippet", "body", "text", "page_content")


class LangChainWebSearcher:
    """A LangChain retriever or tool as the router's web searcher (``web=``).

    Over a retriever (``invoke(query)`` returning documents: Tavily's, Wikipedia's
    ...) each document is one result, its URL read from its metadata
    (``url``, ``link``, ``href`` or ``source``). Over a tool (``invoke(query)``
    returning a list: ``TavilySearchResults``,
    ``DuckDuckGoSearchResults(output_format="list")`` ...) each item is one: a
    mapping with a URL (the same keys), a text (``content``, ``snippet``,
    ``body``) and a ``title``, or a document. The first ``max_results`` are
    kept; the router drops those without an http(s) URL (counted in
    ``web_dropped``). Results carry no score (kind ``WEB``), as a web search's.

    Args:
        base: the LangChain retriever or tool (duck-typed: ``invoke``, and
            ``ainvoke`` for :meth:`asearch`).
        name: the searcher's name in errors.

    Raises:
        InputError: ``base`` has no ``invoke``.
    """

    def __init__(self, base: Any, *, name: str = "langchain-web") -> None:
        if not hasattr(base, "invoke"):
            raise InputError(
                f"base must be a LangChain retriever or tool (invoke), got {type(base).__name__}"
            )
        self.base = base
        self.name = name

    def __repr__(self) -> str:
        return f"LangChainWebSearcher(base={type(self.base).__name__})"

    @property
    def fingerprint(self) -> str:
        """What identifies the searcher in web cache keys: the class and the name of
        what it wraps."""
        cls = type(self.base)
        return f"langchain-web:{cls.__module__}.{cls.__qualname__}:{getattr(self.base, 'name', '')}"

    def search(self, query: str, max_results: int = 5) -> list[Chunk]:
        """The web results for ``query``, at most ``max_results``.

        Raises:
            WebSearchError: the retriever or tool failed.
            WebSearchResponseError: it answered something else than a list of results.
        """
        check_query(query)
        check_k(max_results)
        try:
            answer = self.base.invoke(query)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._results(answer, max_results)

    async def asearch(self, query: str, max_results: int = 5) -> list[Chunk]:
        """The async :meth:`search` (the base's ``ainvoke``, else ``invoke`` in a thread)."""
        check_query(query)
        check_k(max_results)
        try:
            if hasattr(self.base, "ainvoke"):
                answer = await self.base.ainvoke(query)
            else:
                answer = await asyncio.to_thread(self.base.invoke, query)
        except Exception as exc:
            raise self._failed(exc) from exc
        return self._results(answer, max_results)

    def _failed(self, exc: Exception) -> WebSearchError:
        return WebSearchError(f"{type(self.base).__name__} failed: {describe(exc)}")

    def _results(self, answer: Any, max_results: int) -> list[Chunk]:
        if isinstance(answer, str | bytes) or not isinstance(answer, Sequence):
            raise WebSearchResponseError(
                f"{type(self.base).__name__} answered a {type(answer).__name__}, not a list of "
                "results (a tool that answers text: ask it for a list, e.g. "
                "DuckDuckGoSearchResults(output_format='list'))"
            )
        chunks: list[Chunk] = []
        seen: set[str] = set()
        for position, item in enumerate(answer, 1):
            if len(chunks) == max_results:
                break
            chunk = self._chunk(item, position)
            if chunk is not None and chunk.id not in seen:
                seen.add(chunk.id)
                chunks.append(chunk)
        return chunks

    def _chunk(self, item: Any, position: int) -> Chunk | None:
        """One result as a chunk; ``None`` for one without text."""
        if isinstance(getattr(item, "page_content", None), str):
            metadata = getattr(item, "metadata", None)
            fields = dict(metadata) if isinstance(metadata, Mapping) else {}
            text: Any = item.page_content
        elif isinstance(item, Mapping):
            fields = dict(item)
            text = next(
                (fields[key] for key in _TEXT_KEYS if isinstance(fields.get(key), str)), None
            )
        else:
            raise WebSearchResponseError(
                f"{type(self.base).__name__} result #{position} is a {type(item).__name__}, "
                "not a document or a mapping"
            )
        if not isinstance(text, str) or not text.strip():
            return None
        url = next((str(fields[key]) for key in _URL_KEYS if fields.get(key)), None)
        title = fields.get("title")
        if isinstance(title, str) and title.strip() and not text.startswith(title.strip()):
            text = f"{title.strip()}\n{text}"
        return Chunk(
            id=f"web:{url}" if url else f"web:#{position}",
            text=text,
            score=None,
            score_kind=ScoreKind.WEB,
            source=url,
            metadata={"title": title if isinstance(title, str) else None, "position": position},
        )
