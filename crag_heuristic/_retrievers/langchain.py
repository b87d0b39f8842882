"""An adapter for a LangChain FAISS vector store, without depending on LangChain.

It is duck-typed: any object with ``similarity_search_with_score(query, k)``
returning ``(document, raw_score)`` pairs and an ``index`` attribute holding
the ``faiss.Index`` fits (``langchain_community.vectorstores.FAISS`` does).

Why not LangChain's own retriever: ``as_retriever()`` drops the scores, and
``similarity_search_with_relevance_scores`` maps Euclidean scores with
``1 - d / sqrt(2)``, which treats FAISS's SQUARED L2 distance as a plain
one: for unit vectors ``d`` runs from 0 to 4, so the "relevance" runs from
1 down to ``1 - 4/sqrt(2) = -1.83``. This adapter takes the raw scores and
converts them with :class:`~crag_heuristic._retrievers.faiss.FaissScores`
(``cos = 1 - d / 2`` for unit vectors).

Vectors are unit-normalised when the store was built with
``normalize_L2=True`` (LangChain then normalises stored and query vectors);
otherwise a sample of the stored vectors is checked, and you can declare it.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Mapping
from typing import Any

from .._checks import check_k, check_query
from .._corpus import CorpusStats
from .._exceptions import InputError, RetrieverError
from .._text import Analyzer
from .._types import Chunk
from .faiss import FaissScores, detect_unit_vectors

__all__ = ["LangChainFaissRetriever"]


class LangChainFaissRetriever:
    """Wrap a LangChain FAISS vector store as a crag-heuristic retriever.

    Args:
        store: the vector store (``langchain_community.vectorstores.FAISS``
            or anything with the same two attributes).
        normalized: whether the stored vectors are unit-normalised; by default
            ``store._normalize_L2`` if set, else detected from the index.
        filter: a LangChain metadata filter passed to every search.
        fetch_k: how many candidates LangChain fetches before filtering.
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
        analyzer: Analyzer | None = None,
        name: str = "langchain-faiss",
    ) -> None:
        if not hasattr(store, "similarity_search_with_score") or not hasattr(store, "index"):
            raise InputError(
                "store must look like a LangChain FAISS vector store "
                "(similarity_search_with_score and index)"
            )
        self.store = store
        if normalized is None:
            normalized = True if getattr(store, "_normalize_L2", False) else None
            if normalized is None:
                normalized = detect_unit_vectors(store.index)
        self.scores = FaissScores(store.index.metric_type, normalized)
        self.filter = filter
        self.fetch_k = fetch_k
        self.name = name
        self._analyzer = analyzer
        self._stats: CorpusStats | None = None
        self._stats_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LangChainFaissRetriever(scores={self.scores.semantics!r})"

    @property
    def score_semantics(self) -> str:
        """How raw scores are converted, in words."""
        return self.scores.semantics

    def _kwargs(self, k: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"k": k}
        if self.filter is not None:
            kwargs["filter"] = self.filter
        if self.fetch_k is not None:
            kwargs["fetch_k"] = self.fetch_k
        return kwargs

    def search(self, query: str, k: int) -> list[Chunk]:
        """The ``k`` nearest documents as chunks, raw scores converted.

        Raises:
            RetrieverError: the store failed or returned something unusable.
        """
        check_query(query)
        check_k(k)
        try:
            pairs = self.store.similarity_search_with_score(query, **self._kwargs(k))
        except Exception as exc:
            raise RetrieverError(f"the vector store failed: {exc!r}", retriever=self.name) from exc
        return self._to_chunks(pairs)

    async def asearch(self, query: str, k: int) -> list[Chunk]:
        """The async search: the store's own if it has one, else a worker thread."""
        check_query(query)
        check_k(k)
        native = getattr(self.store, "asimilarity_search_with_score", None)
        try:
            if native is not None:
                pairs = await native(query, **self._kwargs(k))
            else:
                pairs = await asyncio.to_thread(
                    self.store.similarity_search_with_score, query, **self._kwargs(k)
                )
        except Exception as exc:
            raise RetrieverError(f"the vector store failed: {exc!r}", retriever=self.name) from exc
        return self._to_chunks(pairs)

    def _to_chunks(self, pairs: Any) -> list[Chunk]:
        chunks = []
        seen: set[str] = set()
        try:
            items = list(pairs)
        except TypeError:
            raise RetrieverError(
                "the vector store returned a non-iterable", retriever=self.name
            ) from None
        for position, pair in enumerate(items):
            try:
                document, raw = pair
                raw = float(raw)
                text = document.page_content
            except (TypeError, ValueError, AttributeError):
                raise RetrieverError(
                    f"result #{position} is not a (Document, score) pair", retriever=self.name
                ) from None
            try:
                score = self.scores(raw)
            except ValueError as exc:
                raise RetrieverError(str(exc), retriever=self.name) from None
            metadata = dict(getattr(document, "metadata", None) or {})
            chunk_id = getattr(document, "id", None) or metadata.get("id")
            if not chunk_id:
                chunk_id = (
                    "lc:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
                )
            chunk_id = str(chunk_id)
            if chunk_id in seen:
                continue
            seen.add(chunk_id)
            source = metadata.get("source")
            chunks.append(
                Chunk(
                    id=chunk_id,
                    text=text,
                    score=score,
                    score_kind=self.scores.kind,
                    source=None if source is None else str(source),
                    metadata={
                        **metadata,
                        "raw_score": raw,
                        "metric": self.scores.metric_name,
                    },
                    parent_id=metadata.get("parent_id"),
                )
            )
        return chunks

    def corpus_stats(self) -> CorpusStats | None:
        """Document frequencies over the store's in-memory docstore, if it has one."""
        if self._stats is None:
            documents = getattr(getattr(self.store, "docstore", None), "_dict", None)
            if not isinstance(documents, Mapping) or not documents:
                return None
            with self._stats_lock:
                if self._stats is None:
                    texts = [getattr(d, "page_content", "") for d in documents.values()]
                    self._stats = CorpusStats.from_texts(texts, self._analyzer)
        return self._stats
