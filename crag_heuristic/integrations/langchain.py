"""LangChain and LangGraph: the CRAG router as a retriever, the gate as a graph node.

Needs the ``langchain`` extra (``pip install 'crag-heuristic[langchain]'``).

:class:`CRAGRetriever` is a ``langchain_core.retrievers.BaseRetriever``: put it
anywhere a retriever goes (``retriever.invoke(q)``, ``await
retriever.ainvoke(q)``, ``retriever | format_docs`` in an LCEL chain). It wraps
any LangChain vector store or retriever (see :class:`LangChainRetriever` for
how scores are read and converted), runs the :class:`~crag_heuristic.CRAG`
router on it and returns ``Document`` objects, web results included, each
with the decision in ``metadata["crag"]`` (and, for callbacks, child runs and
custom events: see :class:`CRAGRetriever`):

=====================  ==============================================================
key                    value
=====================  ==============================================================
``chunk_id``           the id the gate used (the document's, else a stable digest)
``origin``             ``"retrieval"`` or ``"web"``
``verdict``            the final verdict of the set (``relevant`` / ``partial`` /
                       ``irrelevant``); ``initial_verdict`` the first retrieval's
``set_score``          the set's score in [0, 1]
``grade``              this chunk's own grade: ``{"score", "verdict", "similarity"}``
                       (``None`` for a chunk outside ``gate_k``)
``strategy``           the route: ``none``, ``query_expansion``, ``web_search``, ``combined``
``score``,             the chunk's retrieval score and its :class:`ScoreKind`, the
``score_kind``,        store's raw score and the conversion's name (``cosine``,
``raw_score``,         ``l2``, ``unknown`` ...)
``metric``
``web_search_used``,   the flags of the result: whether web results are in the list,
``web_error``,         why the web search failed, why the cache failed (``None``
``cache_error``,       when they did not), and the router's remarks
``notes``
=====================  ==============================================================

:class:`CRAGGradeNode` replaces the LLM "grade documents" step of the usual
CRAG graph in LangGraph (retrieve -> grade_documents -> decide (generate |
transform_query -> web_search) -> generate). It reads ``question`` and
``documents`` from the state and writes the documents it keeps and the
``web_search`` flag (``"Yes"`` / ``"No"``, as the usual ``decide_to_generate``
edge reads it); the evaluation too, under a key you name and the state
declares (checked: LangGraph drops undeclared keys silently);
``examples/langgraph_crag.py`` builds the whole graph. The node needs the
documents' scores: :class:`ScoredRetriever` is the retriever that keeps them
(``vectorstore.as_retriever()`` drops them; the node then warns).
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._optional import requires

with requires("langchain", "crag_heuristic.integrations.langchain"):
    from langchain_core.callbacks import (
        AsyncCallbackManagerForChainRun,
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForChainRun,
        CallbackManagerForRetrieverRun,
        adispatch_custom_event,
        dispatch_custom_event,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import Runnable, RunnableConfig

    # LangChain imports its tracing machinery on a retriever's first invoke (tenacity,
    # langsmith: 18 ms measured); imported with this module, the first query is spared it.
    from langchain_core.tracers import context as _tracing_context  # noqa: F401
    from langchain_core.vectorstores import VectorStore
    from pydantic import ConfigDict, PrivateAttr, SkipValidation, ValidationError
    from typing_extensions import Self

from .._checks import check_k, real_number
from .._config import EvaluatorConfig, RouterConfig
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError, RetrieverError, ScopeError
from .._grading.escalation import Escalation
from .._grading.lists import SetEscalation
from .._protocols import (
    AsyncCache,
    AsyncGrader,
    AsyncParentLookup,
    AsyncRetriever,
    AsyncWebSearcher,
    Cache,
    EventLogger,
    Grader,
    MetricsSink,
    ParentLookup,
    QueryExpander,
    Retriever,
    StatsProvider,
    WebSearcher,
)
from .._retrievers.langchain import (
    LangChainRetriever,
    LangChainWebSearcher,
    document_to_chunk,
    langchain_kind,
    split_search_kwargs,
)
from .._retrievers.scope import SCOPE_KEYS, and_filters, check_filter, check_scopes, describe
from .._retrievers.stores import warn_unknown_scores
from .._router.events import Done, Evaluated, Retrieved, StageEvent
from .._router.flow import GradeCall, Request, Search, WebCall
from .._router.result import CRAGResult
from .._router.router import CRAG, Parts
from .._text.corpus import CorpusStats
from .._types import Chunk, ChunkEvaluation, Evaluation, ScoreKind, Verdict

__all__ = [
    "CRAGGradeNode",
    "CRAGRetriever",
    "LangChainRetriever",
    "LangChainWebSearcher",
    "ScoredRetriever",
    "result_documents",
]

_ADAPTER_KEYS = ("raw_score", "metric")


def _grade_dict(grade: ChunkEvaluation | None) -> dict[str, Any] | None:
    if grade is None:
        return None
    return {"score": grade.score, "verdict": grade.verdict.value, "similarity": grade.similarity}


def _grade(evaluation: Evaluation, chunk_id: str) -> ChunkEvaluation | None:
    try:
        return evaluation.chunk(chunk_id)
    except KeyError:
        return None


def result_documents(result: CRAGResult) -> list[Document]:
    """The final chunks of a router result as LangChain documents, each with
    ``metadata["crag"]`` (see the module doc). The adapter's ``raw_score`` and
    ``metric`` move from the top level of the metadata into ``crag``."""
    retrieved = {chunk.id for chunk in result.retrieved}
    documents = []
    for chunk in result.chunks:
        metadata, adapter = _split_metadata(chunk)
        web = result.web_search_used and chunk.id not in retrieved
        metadata["crag"] = {
            "chunk_id": chunk.id,
            "origin": "web" if web else "retrieval",
            "verdict": result.verdict.value,
            "initial_verdict": result.initial_evaluation.verdict.value,
            "set_score": result.evaluation.score,
            "grade": _grade_dict(_grade(result.evaluation, chunk.id)),
            "strategy": result.strategy.value,
            "score": chunk.score,
            "score_kind": chunk.score_kind.value,
            **adapter,
            "web_search_used": result.web_search_used,
            "web_error": result.web_error,
            "cache_error": result.cache_error,
            "notes": list(result.notes),
        }
        documents.append(Document(id=chunk.id, page_content=chunk.text, metadata=metadata))
    return documents


def _split_metadata(chunk: Chunk) -> tuple[dict[str, Any], dict[str, Any]]:
    """A chunk's metadata as a document's (NumPy numbers as Python's: a LangGraph
    checkpointer stores them; the source kept) and the adapter's ``raw_score`` and
    ``metric``, taken out of it (they go into ``metadata["crag"]``)."""
    metadata = plain(dict(chunk.metadata))
    adapter = {key: metadata.pop(key, None) for key in _ADAPTER_KEYS}
    if chunk.source is not None:
        metadata.setdefault("source", chunk.source)
    return metadata, adapter


def plain(value: Any) -> Any:
    """``value`` with NumPy numbers (``float32`` scores ...) made Python's, in mappings,
    lists and tuples too: what a LangGraph checkpointer's serializer (msgpack)
    stores; anything else as it is."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(item) for item in value)
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy" and getattr(value, "ndim", 1) == 0:
        return item()
    return value


class _CheckedRetriever(BaseRetriever):
    """A LangChain retriever whose options are pydantic fields: a refused field is an
    :class:`InputError` naming the closest option; :meth:`_build` runs on the checked
    fields."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    if not TYPE_CHECKING:  # type checkers see the signature pydantic makes of the fields

        def __init__(self, **fields: Any) -> None:
            try:
                super().__init__(**fields)
            except ValidationError as exc:
                raise InputError(_validation_message(type(self), exc)) from None
            self._build()

    def _build(self) -> Any:
        """Make what the retriever uses from its fields."""
        raise NotImplementedError


class ScoredRetriever(_CheckedRetriever):
    """A vector store as a LangChain retriever whose documents keep their scores.

    ``vectorstore.as_retriever()`` returns documents without scores (the LangGraph
    CRAG tutorial's retriever): graded without them the gate has no similarity
    evidence, and sends to the web retrievals that the scores would have kept.
    This retriever searches with the scores
    (``similarity_search_with_score``), reads what they are from the store as
    :class:`LangChainRetriever` does (FAISS, ``InMemoryVectorStore``, Chroma,
    Qdrant; else ``score_kind=``) and returns each document with
    ``metadata["crag"] = {"score", "score_kind", "raw_score", "metric"}``, which
    :class:`CRAGGradeNode` reads. Scores are Python floats, so a LangGraph
    checkpointer stores them. In the tutorial, replace
    ``retriever = vectorstore.as_retriever()`` with
    ``retriever = ScoredRetriever(base=vectorstore)``.

    Args:
        base: a LangChain vector store (or its ``as_retriever()`` in similarity mode).
        k: documents per query (per call: ``invoke(q, k=3)``; LangChain's default, 4).
        score_kind, normalized, search_kwargs: as for :class:`LangChainRetriever`.

    Raises:
        InputError: ``base`` is not a vector store; an unknown keyword or ``score_kind``.

    Warns:
        UnknownScoresWarning: the store's scores are neither declared nor read.
    """

    base: SkipValidation[VectorStore | BaseRetriever]
    k: SkipValidation[int] = 4
    score_kind: SkipValidation[ScoreKind | str | None] = None
    normalized: SkipValidation[bool | None] = None
    search_kwargs: SkipValidation[Mapping[str, Any] | None] = None
    _adapter: LangChainRetriever | None = PrivateAttr(default=None)

    def _build(self) -> None:
        """The adapter that searches the store, made from the fields."""
        check_k(self.k)
        store, kwargs, k = split_search_kwargs(self.base, self.search_kwargs)
        if not hasattr(store, "similarity_search_with_score"):
            raise InputError(
                f"base must be a LangChain vector store (or its as_retriever() in "
                f"similarity mode), got {type(self.base).__name__}"
            )
        if k is not None and "k" not in self.model_fields_set:
            self.k = k
        self._adapter = LangChainRetriever(
            store,
            score_kind=self.score_kind,
            normalized=self.normalized,
            search_kwargs=kwargs,
            stats_from_docstore=False,
        )

    @property
    def adapter(self) -> LangChainRetriever:
        """The crag-heuristic view of the store (its ``score_semantics`` says how
        the scores are read)."""
        assert self._adapter is not None
        return self._adapter

    def _search(self, kwargs: Mapping[str, Any]) -> LangChainRetriever:
        return self.adapter.with_search_kwargs(kwargs) if kwargs else self.adapter

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        k, store_kwargs = _call_k(self.k if k is None else k, kwargs)
        return _scored_documents(self._search(store_kwargs).search(query, k))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        k, store_kwargs = _call_k(self.k if k is None else k, kwargs)
        return _scored_documents(await self._search(store_kwargs).asearch(query, k))


def _scored_documents(chunks: list[Chunk]) -> list[Document]:
    """A search's chunks as documents with ``metadata["crag"]``: score, kind, raw score,
    metric (see :class:`ScoredRetriever`)."""
    documents = []
    for chunk in chunks:
        metadata, adapter = _split_metadata(chunk)
        metadata["crag"] = {
            "score": chunk.score,
            "score_kind": chunk.score_kind.value,
            **adapter,
        }
        documents.append(Document(id=chunk.id, page_content=chunk.text, metadata=metadata))
    return documents


class CRAGRetriever(_CheckedRetriever):
    """The CRAG router as a LangChain retriever, over any vector store or retriever.

    A pydantic model like every LangChain retriever: its fields are the
    router's options, an unknown keyword is an :class:`InputError` (naming the
    closest field), and LangChain can rebuild it from its fields
    (``configurable_fields(k=ConfigurableField(id="k"))`` then
    ``with_config(configurable={"k": 3})``).

    Args:
        base: a LangChain ``VectorStore`` (scores read with
            ``similarity_search_with_score`` and converted by the store's
            convention), a ``BaseRetriever`` (no scores unless ``score_key``),
            or a crag-heuristic retriever (``search``/``asearch`` returning chunks,
            e.g. :class:`~crag_heuristic.integrations.qdrant.QdrantRetriever`).
        k: documents returned per query (per call: ``invoke(query, k=3)``); when
            not given, a ``k`` in ``search_kwargs`` (or in a wrapped
            ``as_retriever(search_kwargs=...)``'s), else 10.
        evaluator, expander, web, cache, config, lexical, parents, grader,
            escalation, metrics, logger: the :class:`~crag_heuristic.CRAG`
            router's options, as there (the cascade: ``grader`` and
            ``escalation``; parent expansion: ``parents``). A LangChain store or
            retriever as ``lexical`` is wrapped in :class:`LangChainRetriever`; a
            LangChain retriever or tool as ``web`` in :class:`LangChainWebSearcher`.
        corpus_stats: document frequencies for the evaluator: a
            :class:`~crag_heuristic.text.CorpusStats` or the path of a saved
            one; by default built at construction from the store's in-process
            docstore (FAISS, ``InMemoryVectorStore``), or asked of a
            crag-heuristic ``base`` (``corpus_stats()``), never on the first query.
        score_kind, score_key, normalized, search_kwargs, require_scores: how
            the base's scores are read and what every search is given (see
            :class:`LangChainRetriever`). A call's other keywords
            (``invoke(q, filter={...})``) are merged over ``search_kwargs`` as
            LangChain's ``VectorStoreRetriever`` merges them, except a filter
            beside the retriever's own: it narrows it (an ``$and``), never
            replaces it; a filter among them restricts the lexical retriever
            and the parents too (``with_filter``), or the call is refused
            (:class:`~crag_heuristic.retrievers.ScopeError`).
        name, tags, metadata: ``BaseRetriever``'s own fields.

    After construction the fields hold what the router uses (the
    :class:`Evaluator`, the cache, the :class:`RouterConfig`, the statistics),
    so a copy or a rebuild with another ``k`` shares them instead of building
    them again. ``copy.deepcopy`` (and ``model_copy``) rebuild the retriever
    from its fields: its own settings are copied, the store and the services
    (cache, web client, grader, statistics) are shared, not duplicated.

    Callbacks: the store search, the lexical re-retrieval and any other search,
    the web search, the gate's grading (``crag_gate``) and a cascade's grader
    are child runs of the retriever's run, and two custom events carry the
    decision: ``crag_evaluation`` as soon as the gate has graded the retrieval
    (verdict, score, each chunk's grade) and ``crag_result`` at the end (see
    :func:`evaluation_event` and :func:`result_event`); ``astream_events``
    shows them all.

    Attributes:
        router: the :class:`~crag_heuristic.CRAG` router (``router.retrieve(q)``
            gives the whole :class:`~crag_heuristic.CRAGResult`,
            ``router.stream(q)`` its stages).
        retriever: the crag-heuristic view of ``base``.

    Raises:
        InputError: ``base`` is not a store or a retriever; an unknown keyword; a
            bad ``k`` or option; ``k=`` and a ``search_kwargs`` ``k`` that
            disagree; a filter (in ``search_kwargs``, or a call's) beside a
            lexical retriever that cannot apply it (see
            :mod:`crag_heuristic._retrievers.scope`).
        RetrieverError: (on invoke) the first retrieval failed.
    """

    base: SkipValidation[VectorStore | BaseRetriever | Retriever | AsyncRetriever]
    k: SkipValidation[int] = 10
    evaluator: SkipValidation[Evaluator | EvaluatorConfig | str | None] = None
    expander: SkipValidation[QueryExpander | Literal[False] | None] = None
    web: SkipValidation[WebSearcher | AsyncWebSearcher | Runnable[Any, Any] | None] = None
    cache: SkipValidation[Cache | AsyncCache | Literal[False] | None] = None
    config: SkipValidation[RouterConfig | Mapping[str, Any] | None] = None
    lexical: SkipValidation[Retriever | AsyncRetriever | VectorStore | BaseRetriever | None] = None
    parents: SkipValidation[ParentLookup | AsyncParentLookup | None] = None
    grader: SkipValidation[Grader | AsyncGrader | None] = None
    escalation: SkipValidation[Escalation | SetEscalation | Mapping[str, Any] | None] = None
    metrics: SkipValidation[MetricsSink | None] = None
    logger: SkipValidation[EventLogger | None] = None
    corpus_stats: SkipValidation[CorpusStats | str | os.PathLike[str] | None] = None
    score_kind: SkipValidation[ScoreKind | str | None] = None
    score_key: SkipValidation[str | None] = None
    normalized: SkipValidation[bool | None] = None
    search_kwargs: SkipValidation[Mapping[str, Any] | None] = None
    require_scores: SkipValidation[bool] = False
    _retriever: Retriever | AsyncRetriever | None = PrivateAttr(default=None)
    _router: CRAG | None = PrivateAttr(default=None)
    _lexical_views: OrderedDict[str, Any] = PrivateAttr(default_factory=OrderedDict)
    _views_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _build(self) -> CRAG:
        """Make the router from the fields, then keep in the fields what it uses."""
        check_k(self.k)
        given = self.evaluator
        evaluator = given if isinstance(given, Evaluator) else Evaluator(given)
        retriever: Retriever | AsyncRetriever
        base = self.base
        if isinstance(base, VectorStore | BaseRetriever):
            store, kwargs = self._search_kwargs(base)
            retriever = LangChainRetriever(
                store,
                score_kind=self.score_kind,
                score_key=self.score_key,
                normalized=self.normalized,
                search_kwargs=kwargs,
                require_scores=self.require_scores,
                corpus_stats=self.corpus_stats,
                analyzer=evaluator.analyzer,
            )
        elif isinstance(base, Retriever | AsyncRetriever):
            _no_store_options(self, base)
            retriever = base
        else:
            raise InputError(
                "base must be a LangChain VectorStore or BaseRetriever, or a crag-heuristic "
                f"retriever (search/asearch), got {type(base).__name__}"
            )
        lexical: Any = self.lexical  # a LangChain one is adapted, as base is
        web: Any = self.web
        if isinstance(lexical, VectorStore | BaseRetriever):
            has_stats = isinstance(retriever, StatsProvider) and retriever.corpus_stats()
            lexical = LangChainRetriever(  # its scores are fused by rank (RRF): no warning
                lexical,
                analyzer=evaluator.analyzer,
                stats_from_docstore=not has_stats,
                name="langchain-lexical",
                warn_unknown=False,
            )
        if langchain_kind(web) in ("retriever", "tool"):
            web = LangChainWebSearcher(web)
        router = CRAG(
            retriever,
            evaluator,
            self.expander,
            web,
            self.cache,
            self.config,
            lexical=lexical,
            parents=self.parents,
            metrics=self.metrics,
            logger=self.logger,
            grader=self.grader,
            escalation=self.escalation,
        )
        self._retriever, self._router = retriever, router
        self.evaluator, self.config = router.evaluator, router.config
        self.cache = False if router.cache is None else router.cache
        self.escalation = router.escalation
        self.corpus_stats = router.corpus_stats()  # built or loaded now, not on a query
        return router

    def _search_kwargs(self, base: Any) -> tuple[Any, dict[str, Any]]:
        """What the adapter searches and its search keywords (``base``'s, as a wrapped
        ``VectorStoreRetriever``'s, merged under ``search_kwargs``); a ``k`` among
        them becomes this retriever's ``k`` unless ``k=`` was given (a ``k`` in
        ``search_kwargs`` that contradicts a given ``k=`` is refused), and leaves
        ``search_kwargs`` (so copies see the ``k`` field only).

        Raises:
            InputError: ``search_kwargs`` is not a mapping, a bad ``k``, or two
                ``k`` that disagree.
        """
        own = self.search_kwargs
        if own is not None and not isinstance(own, Mapping):
            raise InputError(f"search_kwargs must be a mapping, got {type(own).__name__}")
        store, kwargs, search_k = split_search_kwargs(base, own)
        own_k = None if own is None else own.get("k")
        if search_k is not None and "k" not in self.model_fields_set:
            self.k = search_k  # documents per query, as LangChain's search_kwargs mean it
        elif own_k is not None and own_k != self.k:
            raise InputError(
                f"k={self.k} and search_kwargs={{'k': {own_k}}} disagree: give one of them"
            )
        if own is not None and own_k is not None:
            self.search_kwargs = {key: value for key, value in own.items() if key != "k"}
        return store, kwargs

    def _parts(self, call_kwargs: Mapping[str, Any]) -> Parts | None:
        """This call's (retriever, lexical retriever, parents) when it gives store
        keywords (``invoke(q, filter=...)``): the store's search keywords with the
        call's merged over them, as LangChain's ``VectorStoreRetriever`` merges them,
        except a scope: a call's filter where the store's keywords have one narrows
        it (``{"$and": [own, call's]}``), never replaces it; the lexical retriever
        and the parents filtered by the call's filter too (see :meth:`_lexical_for`).
        ``None`` without keywords.

        Raises:
            InputError: keywords for a base that takes none per call.
            ScopeError: a per-call filter that cannot be proven safe, cannot be
                combined with the store's own, or cannot be applied to the lexical
                retriever or the parents.
        """
        if not call_kwargs:
            return None
        retriever = self.retriever
        if not isinstance(retriever, LangChainRetriever):
            raise InputError(
                f"CRAGRetriever.invoke: unknown keyword(s) {sorted(call_kwargs)}: per-call "
                f"search keywords go to a LangChain store or retriever; {type(retriever).__name__} "
                "takes its options at construction (QdrantRetriever.with_filter ...)"
            )
        scoping = [key for key in SCOPE_KEYS if call_kwargs.get(key) is not None]
        narrowed = _narrowed(retriever.search_kwargs, call_kwargs, scoping)
        view = retriever.with_search_kwargs(narrowed)
        lexical, parents = self.router.lexical, self.router.parents
        if lexical is not None and scoping:
            lexical = self._lexical_for(call_kwargs, scoping, lexical)
        if parents is not None and scoping:
            parents = _filtered(call_kwargs, scoping, parents, "parents lookup")
        check_scopes(view, lexical, parents)
        return view, lexical, parents

    def _lexical_for(self, kwargs: Mapping[str, Any], scoping: list[str], lexical: Any) -> Any:
        """The lexical retriever restricted to a call's filter (``scoping``: the call's
        keywords that restrict a search): ``lexical.with_filter`` of a LangChain
        metadata filter (``filter={...}``; the views of the last 32 filters kept).

        Raises:
            ScopeError: another scoping keyword, a filter that is not a mapping, or a
                lexical retriever without ``with_filter``.
        """
        where = _call_filter(kwargs, scoping, lexical, "lexical retriever")
        try:  # the filter itself is the key (a digest could collide): JSON values only
            key = f"{id(lexical)}:{json.dumps(where, sort_keys=True)}"
        except (TypeError, ValueError):
            return lexical.with_filter(where)  # not kept
        with self._views_lock:
            view = self._lexical_views.get(key)
            if view is not None:
                self._lexical_views.move_to_end(key)
                return view
        view = lexical.with_filter(where)
        with self._views_lock:
            self._lexical_views[key] = view
            while len(self._lexical_views) > _LEXICAL_VIEWS:
                self._lexical_views.popitem(last=False)
        return view

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        """A new retriever built from this one's fields: plain settings (``k``,
        ``tags``, ``metadata``, ``search_kwargs`` ...) deep-copied, the store and
        the services shared (see the class doc)."""
        shared = _SHARED_FIELDS
        fields = {
            name: getattr(self, name)
            if name in shared
            else copy.deepcopy(getattr(self, name), memo)
            for name in type(self).model_fields
        }
        return type(self)(**fields)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy built from the fields, with ``update`` applied (the router is
        rebuilt, so an updated option takes effect); ``deep`` as :meth:`__deepcopy__`."""
        source = copy.deepcopy(self) if deep else self
        fields = {name: getattr(source, name) for name in type(self).model_fields}
        return type(self)(**{**fields, **(update or {})})

    @property
    def router(self) -> CRAG:
        """The CRAG router behind this retriever."""
        return self._router if self._router is not None else self._build()

    @property
    def retriever(self) -> Retriever | AsyncRetriever:
        """The crag-heuristic retriever the router searches."""
        router = self.router
        return router.retriever

    @property
    def score_semantics(self) -> str:
        """How the base's scores are converted, in words."""
        return str(getattr(self.retriever, "score_semantics", "declared by the retriever"))

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        k, store_kwargs = _call_k(self.k if k is None else k, kwargs)
        parts = self._parts(store_kwargs)
        if not _traced(run_manager):
            return result_documents(self.router._retrieve(query, k, parts))
        tracer = _Tracer(run_manager, self.router)
        events = self.router._stream(query, k, tracer.observe, parts)
        return result_documents(tracer.follow(events))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        k, store_kwargs = _call_k(self.k if k is None else k, kwargs)
        parts = self._parts(store_kwargs)
        if not _traced(run_manager):
            return result_documents(await self.router._aretrieve(query, k, parts))
        tracer = _AsyncTracer(run_manager, self.router)
        events = self.router._astream(query, k, tracer.observe, parts)
        return result_documents(await tracer.follow(events))


_SHARED_FIELDS = frozenset(
    {"base", "evaluator", "expander", "web", "cache", "lexical", "parents", "grader",
     "metrics", "logger", "corpus_stats"}
)  # fmt: skip
_STORE_OPTIONS = ("score_kind", "score_key", "normalized", "search_kwargs", "require_scores")


def _validation_message(cls: type[BaseRetriever], error: ValidationError) -> str:
    """What pydantic refused, in the words of the class's own options."""
    options = list(cls.model_fields)
    problems = []
    for item in error.errors():
        name = ".".join(str(part) for part in item["loc"])
        if item["type"] == "extra_forbidden":
            close = difflib.get_close_matches(name, options, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"unknown keyword {name!r}{hint}")
        elif item["type"] == "missing":
            problems.append(f"{name}= is required")
        else:
            problems.append(f"{name}: {item['msg']}")
    return f"{cls.__name__}: {'; '.join(problems)}. Its options: {', '.join(options)}"


def _no_store_options(retriever: CRAGRetriever, base: object) -> None:
    """A crag-heuristic retriever declares its own scores and statistics."""
    given = [name for name in _STORE_OPTIONS if getattr(retriever, name) not in (None, False)]
    own = base.corpus_stats() if isinstance(base, StatsProvider) else None
    if retriever.corpus_stats is not None and retriever.corpus_stats is not own:
        given.append("corpus_stats")
    if given:
        raise InputError(
            f"{', '.join(given)}: options for LangChain stores and retrievers; a "
            f"crag-heuristic retriever ({type(base).__name__}) declares its own scores "
            "and statistics"
        )


def _narrowed(
    own: Mapping[str, Any], call_kwargs: Mapping[str, Any], scoping: Sequence[str]
) -> dict[str, Any]:
    """A call's search keywords with each scope the store's own keywords set narrowed,
    not replaced: a metadata filter ANDed with the store's.

    Raises:
        ScopeError: a filter that cannot be proven safe, or a scoping keyword the
            store's keywords set too that cannot be combined (not two mappings
            under ``filter``).
    """
    merged = dict(call_kwargs)
    for key in scoping:
        theirs = call_kwargs[key]
        if isinstance(theirs, Mapping):
            check_filter(theirs)
        mine = own.get(key)
        if mine is None:
            continue
        if key == "filter" and isinstance(mine, Mapping) and isinstance(theirs, Mapping):
            merged[key] = and_filters(mine, theirs)
            continue
        raise ScopeError(
            f"the call's {key} would replace this retriever's own ({describe(mine)}): a call "
            f"narrows a scope, never replaces it, and these two cannot be combined (only two "
            "metadata filters under filter= can, as an $and); give the combined filter in "
            "the call on a retriever built without one"
        )
    return merged


def _call_filter(kwargs: Mapping[str, Any], scoping: list[str], part: Any, role: str) -> Any:
    """The call's metadata filter, for a ``part`` (the lexical retriever, the parents)
    that applies it with ``with_filter``.

    Raises:
        ScopeError: another scoping keyword, a filter that is not a mapping, or a
            part without ``with_filter``.
    """
    where = kwargs.get("filter")
    if scoping != ["filter"] or not isinstance(where, Mapping):
        raise ScopeError(
            f"the call's {', '.join(scoping)} cannot be applied to the {role} "
            f"{type(part).__name__}: only a metadata filter (filter={{...}}) can; "
            "without it, it would bring in documents outside the filter"
        )
    if not hasattr(part, "with_filter"):
        raise ScopeError(
            f"the call's filter cannot be applied to the {role} {type(part).__name__} "
            "(it has no with_filter, as BM25Retriever and ScopedParents do): it would "
            "bring in documents outside the filter"
        )
    return where


def _filtered(kwargs: Mapping[str, Any], scoping: list[str], part: Any, role: str) -> Any:
    """``part.with_filter`` of the call's filter (see :func:`_call_filter`)."""
    where = _call_filter(kwargs, scoping, part, role)  # checked before with_filter is read
    return part.with_filter(where)


def _call_k(k: object, kwargs: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
    """The per-call ``k``, checked, and the call's store keywords (the others but
    LangChain's ``verbose``)."""
    return check_k(k), {key: value for key, value in kwargs.items() if key != "verbose"}


_LEXICAL_VIEWS = 32  # the lexical retriever's views kept for per-call filters


# -- callbacks --------------------------------------------------------------------------------

GATE_RUN = "crag_gate"
EVALUATION_EVENT = "crag_evaluation"
RESULT_EVENT = "crag_result"


def _traced(
    run_manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun,
) -> bool:
    """Whether anyone listens (no handler: no child runs, the plain router)."""
    return bool(run_manager.handlers or run_manager.inheritable_handlers)


def _part_name(part: object) -> str:
    inner = part.base if isinstance(part, LangChainRetriever) else part
    return type(inner).__name__


def _child_run(request: Request, router: CRAG) -> tuple[str, str, str] | None:
    """(kind, name, tag) of the child run a request gets: ``retriever`` for a search or a
    web call, ``chain`` for a grader call; ``None`` for the others (cache, parents)."""
    if isinstance(request, Search):
        tag = "crag:lexical" if request.lexical else "crag:search"
        return "retriever", _part_name(request.retriever), tag
    if isinstance(request, WebCall):
        return "retriever", _part_name(router.web), "crag:web"
    if isinstance(request, GradeCall):
        return "chain", _part_name(router.grader), "crag:grader"
    return None


def _documents(chunks: Any) -> list[Document]:
    """A search's chunks as documents for a child run's end."""
    return [
        Document(
            id=chunk.id,
            page_content=chunk.text,
            metadata={"source": chunk.source, "score": chunk.score,
                      "score_kind": chunk.score_kind.value},
        )
        for chunk in chunks
        if isinstance(chunk, Chunk)
    ]  # fmt: skip


def _gate_inputs(event: Retrieved) -> dict[str, Any]:
    return {"chunk_ids": [chunk.id for chunk in event.chunks]}


def evaluation_event(event: Evaluated) -> dict[str, Any]:
    """The data of the ``crag_evaluation`` custom event (and the gate run's outputs):
    ``verdict``, ``score``, ``cache_hit`` and ``grades`` (each chunk's ``chunk_id``,
    ``score``, ``verdict``, ``similarity``), as soon as the gate has graded the retrieval."""
    evaluation = event.evaluation
    return {
        "verdict": evaluation.verdict.value,
        "score": evaluation.score,
        "cache_hit": event.cache_hit,
        "grades": _grades(evaluation),
    }


def _grades(evaluation: Evaluation) -> list[dict[str, Any]]:
    """Each chunk's ``chunk_id``, ``score``, ``verdict`` and ``similarity``."""
    return [{"chunk_id": g.chunk_id, **(_grade_dict(g) or {})} for g in evaluation.chunks]


def result_event(result: CRAGResult) -> dict[str, Any]:
    """The data of the ``crag_result`` custom event: the final ``verdict``,
    ``initial_verdict``, ``set_score``, ``strategy``, the final ``chunk_ids``, and the
    flags (``web_search_used``, ``web_error``, ``cache_error``, ``grader_error``,
    ``parent_error``)."""
    return {
        "verdict": result.verdict.value,
        "initial_verdict": result.initial_evaluation.verdict.value,
        "set_score": result.evaluation.score,
        "strategy": result.strategy.value,
        "chunk_ids": [chunk.id for chunk in result.chunks],
        "web_search_used": result.web_search_used,
        "web_error": result.web_error,
        "cache_error": result.cache_error,
        "grader_error": result.grader_error,
        "parent_error": result.parent_error,
    }


class _Tracer:
    """LangChain child runs and custom events for one sync query (see
    :class:`CRAGRetriever`): ``observe`` wraps the router's requests, ``follow``
    reads its stage events."""

    def __init__(self, run: CallbackManagerForRetrieverRun, router: CRAG) -> None:
        self.run = run
        self.router = router
        self.gate: CallbackManagerForChainRun | None = None  # open from retrieved to evaluated

    def observe(self, request: Request, call: Callable[[Request], Any]) -> Any:
        spec = _child_run(request, self.router)
        if spec is None:
            return call(request)
        kind, name, tag = spec
        parent = (self.gate or self.run).get_child(tag)
        if kind == "retriever":
            assert isinstance(request, Search | WebCall)
            retrieval = parent.on_retriever_start(None, str(request.query), name=name)
            outcome = call(request)
            if isinstance(outcome, BaseException):
                retrieval.on_retriever_error(outcome)
            else:
                retrieval.on_retriever_end(_documents(outcome))
            return outcome
        assert isinstance(request, GradeCall)
        grading = parent.on_chain_start(None, _grader_inputs(request), name=name)
        outcome = call(request)
        if isinstance(outcome, BaseException):
            grading.on_chain_error(outcome)
        else:
            grading.on_chain_end({"grades": outcome})
        return outcome

    def follow(self, events: Iterator[StageEvent]) -> CRAGResult:
        try:
            for event in events:
                if isinstance(event, Retrieved):
                    start = self.run.get_child("crag:gate").on_chain_start
                    self.gate = start(None, _gate_inputs(event), name=GATE_RUN)
                elif isinstance(event, Evaluated):
                    data = evaluation_event(event)
                    if self.gate is not None:
                        self.gate.on_chain_end(data)
                        self.gate = None
                    config: RunnableConfig = {"callbacks": self.run.get_child()}
                    dispatch_custom_event(EVALUATION_EVENT, data, config=config)
                elif isinstance(event, Done):
                    config = {"callbacks": self.run.get_child()}
                    dispatch_custom_event(RESULT_EVENT, result_event(event.result), config=config)
                    return event.result
        except BaseException as exc:
            if self.gate is not None:
                self.gate.on_chain_error(exc)
            raise
        raise AssertionError("the router's events end with done")  # pragma: no cover


class _AsyncTracer:
    """The async :class:`_Tracer`."""

    def __init__(self, run: AsyncCallbackManagerForRetrieverRun, router: CRAG) -> None:
        self.run = run
        self.router = router
        self.gate: AsyncCallbackManagerForChainRun | None = None

    async def observe(self, request: Request, call: Callable[[Request], Awaitable[Any]]) -> Any:
        spec = _child_run(request, self.router)
        if spec is None:
            return await call(request)
        kind, name, tag = spec
        parent = (self.gate or self.run).get_child(tag)
        if kind == "retriever":
            assert isinstance(request, Search | WebCall)
            retrieval = await parent.on_retriever_start(None, str(request.query), name=name)
            outcome = await call(request)
            if isinstance(outcome, BaseException):
                await retrieval.on_retriever_error(outcome)
            else:
                await retrieval.on_retriever_end(_documents(outcome))
            return outcome
        assert isinstance(request, GradeCall)
        grading = await parent.on_chain_start(None, _grader_inputs(request), name=name)
        outcome = await call(request)
        if isinstance(outcome, BaseException):
            await grading.on_chain_error(outcome)
        else:
            await grading.on_chain_end({"grades": outcome})
        return outcome

    async def follow(self, events: AsyncIterator[StageEvent]) -> CRAGResult:
        try:
            async for event in events:
                if isinstance(event, Retrieved):
                    start = self.run.get_child("crag:gate").on_chain_start
                    self.gate = await start(None, _gate_inputs(event), name=GATE_RUN)
                elif isinstance(event, Evaluated):
                    data = evaluation_event(event)
                    if self.gate is not None:
                        await self.gate.on_chain_end(data)
                        self.gate = None
                    config: RunnableConfig = {"callbacks": self.run.get_child()}
                    await adispatch_custom_event(EVALUATION_EVENT, data, config=config)
                elif isinstance(event, Done):
                    config = {"callbacks": self.run.get_child()}
                    data = result_event(event.result)
                    await adispatch_custom_event(RESULT_EVENT, data, config=config)
                    return event.result
        except BaseException as exc:
            if self.gate is not None:
                await self.gate.on_chain_error(exc)
            raise
        raise AssertionError("the router's events end with done")  # pragma: no cover


def _grader_inputs(request: GradeCall) -> dict[str, Any]:
    return {"chunk_ids": [chunk.id for chunk in request.chunks]}


class CRAGGradeNode:
    """A LangGraph node (state in, state update out) that grades documents without an LLM.

    It replaces the ``grade_documents`` step of the CRAG graph. It reads
    ``state[question_key]`` (a string) and ``state[documents_key]`` (LangChain
    documents, or strings), grades them with the :class:`Evaluator`, and
    returns the update (the keys of the usual CRAG tutorial state: ``question``,
    ``generation``, ``web_search``, ``documents``):

    ``documents_key``
        the documents whose own grade is at least ``min_chunk_verdict``
        (PARTIAL by default), in order, each with ``metadata["crag"]``
        (``chunk_id``, ``grade``, ``verdict``, ``set_score``);
    ``flag_key`` (``"web_search"``)
        ``"Yes"`` when the set is not RELEVANT (the retrieval needs
        correcting: rewrite the query and search the web), else ``"No"``;
    ``evaluation_key`` (only when you name one, e.g. ``"crag"``)
        ``{"verdict", "score", "needs_correction", "reasoning", "kept",
        "dropped", "evaluation"}``, ``evaluation`` being the JSON-ready
        :meth:`Evaluation.to_dict` (state stays serialisable for checkpointers).

    LangGraph drops, without a word, an update key its state does not declare.
    So the evaluation is written only under a key you name, and naming one
    needs ``state_schema`` (the graph's state class, or the ``StateGraph``):
    the node checks there that every key it reads and writes is declared, and
    refuses a schema that lacks one, naming it. The usual tutorial state works
    as it is (no ``evaluation_key``); to keep the evaluation, add e.g.
    ``crag: dict`` to the state and pass ``evaluation_key="crag",
    state_schema=GraphState``.

    State: a mapping (a ``TypedDict`` state), or a Pydantic model or dataclass
    instance (read by attribute); the update is a mapping either way. Inside a
    graph, the decision (verdict, score, needs_correction, kept, dropped, each
    document's grade) also goes to ``stream_mode="custom"`` as
    ``{"crag_evaluation": {...}}``.

    Scores: a document from :class:`CRAGRetriever` carries its score and kind in
    ``metadata["crag"]``; otherwise ``metadata[score_key]`` is read as
    ``score_kind`` (``UNKNOWN`` unless declared: the gate then has no
    similarity evidence, and the reasoning says so). A score is any real
    number, NumPy's too (LangChain's FAISS store returns ``float32``). Documents without an id
    get :func:`~crag_heuristic._retrievers.langchain.stable_document_id`;
    repeats of one id keep the first.

    Args:
        evaluator: an :class:`Evaluator`, or a config / profile name for one.
        question_key, documents_key, flag_key: the state keys read and written.
        evaluation_key: where to write the evaluation (``None``: nowhere).
        state_schema: the graph's state (a ``TypedDict``, dataclass or pydantic
            class, or the ``StateGraph``), checked for the node's keys;
            required with ``evaluation_key``.
        score_key: the metadata field with a document's retrieval score.
        score_kind: what that score is (e.g. ``"cosine"``).
        min_chunk_verdict: the lowest chunk grade kept.
        keep_all_if_none: when no document reaches ``min_chunk_verdict``,
            keep them all instead of none (the flag still says to correct).
        corpus_stats: document frequencies for IDF weights.

    Raises:
        InputError: ``evaluation_key`` without ``state_schema``; a schema without
            one of the node's keys; (on call) the state has no question or its
            documents are not documents.
    """

    def __init__(
        self,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        *,
        question_key: str = "question",
        documents_key: str = "documents",
        flag_key: str = "web_search",
        evaluation_key: str | None = None,
        state_schema: object = None,
        score_key: str = "score",
        score_kind: ScoreKind | str | None = None,
        min_chunk_verdict: Verdict | str = Verdict.PARTIAL,
        keep_all_if_none: bool = False,
        corpus_stats: CorpusStats | None = None,
    ) -> None:
        self.evaluator = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        if evaluation_key is not None and state_schema is None:
            raise InputError(
                f"evaluation_key={evaluation_key!r} needs state_schema= (your graph's state "
                "class or the StateGraph): LangGraph drops a key its state does not declare "
                "without a word, so the node checks the state has it"
            )
        if state_schema is not None:
            keys = [question_key, documents_key, flag_key]
            _check_state_keys(state_schema, keys + ([evaluation_key] if evaluation_key else []))
        self.question_key = question_key
        self.documents_key = documents_key
        self.flag_key = flag_key
        self.evaluation_key = evaluation_key
        self.score_key = score_key
        try:
            self.score_kind = ScoreKind.UNKNOWN if score_kind is None else ScoreKind(score_kind)
            self.min_chunk_verdict = Verdict(min_chunk_verdict)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        self.keep_all_if_none = bool(keep_all_if_none)
        if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
            raise InputError("corpus_stats must be a CorpusStats or None")
        self.corpus_stats = corpus_stats
        self._declared = score_kind is not None
        self._warned = False  # UnknownScoresWarning: once per node

    def _warn_unscored(self, chunks: Sequence[Chunk], read_ours: bool) -> None:
        """Warn once when the documents' scores go unread: none has a score (a
        retriever's ``invoke`` dropped them), or ``metadata[score_key]`` of no
        declared kind."""
        if self._warned or not chunks:
            return
        if all(chunk.score is None for chunk in chunks):
            self._warned = True
            warn_unknown_scores(
                f"the documents in state[{self.documents_key!r}] carry no retrieval score (a "
                "retriever's invoke drops them, as the LangGraph CRAG tutorial's "
                "vectorstore.as_retriever() does): the gate grades without similarity "
                "evidence. Retrieve with ScoredRetriever(base=vectorstore) "
                "(crag_heuristic.integrations.langchain), whose documents keep their scores, "
                f"or put each score in metadata[{self.score_key!r}] and declare "
                "CRAGGradeNode(score_kind=...)"
            )
        elif not self._declared and not read_ours:
            self._warned = True
            warn_unknown_scores(
                f"metadata[{self.score_key!r}] of the documents is graded as UNKNOWN: declare "
                "what it is, CRAGGradeNode(score_kind='cosine') (or cosine_distance, "
                "squared_l2, l2, inner_product, distance), or retrieve with "
                "ScoredRetriever(base=vectorstore), whose documents say it"
            )

    def __repr__(self) -> str:
        return f"CRAGGradeNode(evaluator={self.evaluator!r}, score_kind={self.score_kind.value})"

    def _chunk(self, document: Any, position: int) -> tuple[Chunk, Document]:
        if isinstance(document, str):
            document = Document(page_content=document)
        if not isinstance(document, Document):
            raise InputError(
                f"state[{self.documents_key!r}][{position}] is a {type(document).__name__}, "
                "not a Document or a string"
            )
        metadata = document.metadata or {}
        ours = metadata.get("crag")
        score: Any
        if isinstance(ours, Mapping) and ours.get("score_kind") is not None:
            score, key = ours.get("score"), "crag.score"
            try:
                kind = ScoreKind(ours["score_kind"])
            except ValueError:
                raise InputError(
                    f"document #{position}: unknown metadata['crag']['score_kind'] "
                    f"{ours['score_kind']!r}"
                ) from None
        else:
            score, kind, key = metadata.get(self.score_key), self.score_kind, self.score_key
        if score is not None:  # NumPy's numbers too: LangChain's FAISS scores are float32
            real = real_number(score)
            if real is None:
                raise InputError(
                    f"document #{position}: metadata {key} = {score!r} is not a number"
                )
            score = real
        try:
            chunk = document_to_chunk(
                document,
                score=score,
                score_kind=kind if score is not None else ScoreKind.UNKNOWN,
                retriever="langgraph-state",
                position=position,
            )
        except RetrieverError as exc:  # a score the chunk rejects: the state's fault
            raise InputError(f"state[{self.documents_key!r}]: {exc}") from None
        return chunk, document

    def __call__(self, state: Any) -> dict[str, Any]:
        """Grade ``state``'s documents; return the state update (see the class doc).

        ``state`` is what LangGraph hands a node: a mapping (a ``TypedDict`` state),
        or an instance of a pydantic model or dataclass state (read by attribute).
        Inside a graph, the decision also goes to ``stream_mode="custom"``.
        """
        question = _state_value(state, self.question_key)
        if question is None:
            raise InputError(f"the graph state has no {self.question_key!r}")
        documents = _state_value(state, self.documents_key) or []
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            raise InputError(f"state[{self.documents_key!r}] must be a list of documents")
        pairs: list[tuple[Chunk, Document]] = []
        seen: set[str] = set()
        for position, document in enumerate(documents):
            chunk, doc = self._chunk(document, position)
            if chunk.id not in seen:
                seen.add(chunk.id)
                pairs.append((chunk, doc))
        scored = [chunk for chunk, _ in pairs if chunk.score is not None]
        read_ours = all(chunk.score_kind is not ScoreKind.UNKNOWN for chunk in scored)
        self._warn_unscored([chunk for chunk, _ in pairs], read_ours and bool(scored))
        evaluation = self.evaluator.evaluate(
            question, [chunk for chunk, _ in pairs], self.corpus_stats
        )
        annotated = []
        for (chunk, doc), grade in zip(pairs, evaluation.chunks, strict=True):
            keep = grade.verdict.rank >= self.min_chunk_verdict.rank
            crag = {
                **dict((doc.metadata or {}).get("crag") or {}),
                "chunk_id": chunk.id,
                "grade": _grade_dict(grade),
                "verdict": evaluation.verdict.value,
                "set_score": evaluation.score,
            }
            new = Document(  # NumPy scores as Python's: a checkpointer stores the state
                id=doc.id or chunk.id,
                page_content=doc.page_content,
                metadata=plain({**(doc.metadata or {}), "crag": crag}),
            )
            annotated.append((keep, new))
        kept = [doc for keep, doc in annotated if keep]
        if not kept and self.keep_all_if_none:
            kept = [doc for _, doc in annotated]
        needs_correction = evaluation.verdict is not Verdict.RELEVANT
        update: dict[str, Any] = {
            self.documents_key: kept,
            self.flag_key: "Yes" if needs_correction else "No",
        }
        decision = {
            "verdict": evaluation.verdict.value,
            "score": evaluation.score,
            "needs_correction": needs_correction,
            "reasoning": evaluation.reasoning,
            "kept": len(kept),
            "dropped": len(annotated) - len(kept),
        }
        if self.evaluation_key is not None:
            update[self.evaluation_key] = {**decision, "evaluation": evaluation.to_dict()}
        _write_stream({EVALUATION_EVENT: {**decision, "grades": _grades(evaluation)}})
        return update


_ABSENT = object()


def _state_value(state: Any, key: str) -> Any:
    """``state[key]`` of a mapping state, ``state.<key>`` of a pydantic or dataclass
    state; ``None`` when it has none."""
    if isinstance(state, Mapping):
        return state.get(key)
    if isinstance(state, str | bytes) or not hasattr(type(state), "__dict__"):
        return None
    value = getattr(state, key, _ABSENT)
    return None if value is _ABSENT or callable(value) else value


def _write_stream(data: dict[str, Any]) -> None:
    """Hand ``data`` to LangGraph's stream writer (``stream_mode="custom"``) when the
    node runs inside a graph; outside one (or without LangGraph) nothing happens."""
    try:
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
    except (ImportError, RuntimeError, KeyError):  # not inside a graph run
        return
    writer(data)


def _state_keys(schema: object) -> set[str]:
    """The keys a LangGraph state declares: a ``StateGraph``'s channels, a pydantic
    model's fields, or the annotations of a ``TypedDict`` or dataclass (and its bases)."""
    channels = getattr(schema, "channels", None)
    if isinstance(channels, Mapping):
        return {str(key) for key in channels}
    fields = getattr(schema, "model_fields", None)
    if isinstance(fields, Mapping):
        return {str(key) for key in fields}
    if isinstance(schema, type):
        return {str(key) for cls in schema.__mro__ for key in getattr(cls, "__annotations__", {})}
    raise InputError(
        "state_schema must be the graph's state class (a TypedDict, a dataclass or a pydantic "
        f"model) or the StateGraph, got {type(schema).__name__}"
    )


def _check_state_keys(schema: object, keys: Sequence[str]) -> None:
    declared = _state_keys(schema)
    missing = [key for key in keys if key not in declared]
    if missing:
        name = getattr(schema, "__name__", type(schema).__name__)
        raise InputError(
            f"the graph state {name} has no {', '.join(map(repr, missing))} key: LangGraph "
            f"would drop what the node writes there (or it has nothing to read); declare "
            f"{'it' if len(missing) == 1 else 'them'} in the state, or pass the node the keys "
            f"your state uses (question_key, documents_key, flag_key, evaluation_key=None)"
        )
