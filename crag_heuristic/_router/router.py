"""The CRAG router: the only module that knows the whole flow.

It owns the parts (retriever, evaluator, expander, web searcher, cache,
metrics) and drives :func:`crag_heuristic._router.flow.correct`, running its
I/O requests either one after the other (:meth:`CRAG.retrieve`,
:meth:`CRAG.stream`) or concurrently (:meth:`CRAG.aretrieve`,
:meth:`CRAG.astream`). One driver per mode: ``retrieve`` is ``stream`` without
the stage events, keeping only the last (``done``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Literal

from .._cache.keys import ChunkDigests, searcher_fingerprint
from .._cache.memory import MemoryCache
from .._cache.signing import signer_of
from .._checks import CheckedQuery, check_k, check_query
from .._config import EvaluatorConfig, RouterConfig
from .._deadline import Workers
from .._evaluator.evaluator import Evaluator
from .._exceptions import CacheError, InputError
from .._failures import FailureStage, last_failure
from .._grading.escalation import Escalation
from .._grading.graders import acall_grader, call_grader, grader_fingerprint
from .._grading.lists import SetEscalation, escalation_policy
from .._logging import get_logger
from .._protocols import (
    AsyncCache,
    AsyncGrader,
    AsyncParentLookup,
    AsyncRetriever,
    AsyncWebSearcher,
    Cache,
    EventLogger,
    Grader,
    Learner,
    MetricsSink,
    ParentLookup,
    QueryExpander,
    ResultObserver,
    Retriever,
    StatsProvider,
    WebSearcher,
)
from .._retrievers.langchain import adapter_hint
from .._retrievers.scope import check_scopes
from .._text.corpus import CorpusStats
from .cached import OpenedEvaluations
from .calls import Calls
from .context import Context
from .events import Done, StageEvent
from .flow import (
    CacheGet,
    CacheSet,
    Emit,
    Expand,
    GradeCall,
    Request,
    Search,
    WebCall,
    correct,
)
from .parents import ParentGet
from .result import CRAGResult, Strategy

Call = Callable[[Request], Any]
Observer = Callable[[Request, Call], Any]
"""Runs one request through ``call`` and returns its outcome, doing what it likes
around it (an integration's tracing: ``crag_heuristic.integrations.langchain``)."""
Parts = tuple[
    Retriever | AsyncRetriever,
    Retriever | AsyncRetriever | None,
    ParentLookup | AsyncParentLookup | None,
]
"""One query's (retriever, lexical retriever), in place of the router's."""
AsyncCall = Callable[[Request], Awaitable[Any]]
AsyncObserver = Callable[[Request, AsyncCall], Awaitable[Any]]


class CRAG:
    """Corrective RAG in front of an existing retriever, without an LLM.

    Args:
        retriever: anything with ``search(query, k)`` and/or
            ``async asearch(query, k)`` returning scored :class:`Chunk` lists.
        evaluator: the gate; an :class:`Evaluator` (or a config / profile name
            for one). Defaults to ``Evaluator()``.
        expander: makes expanded queries on PARTIAL (``expand(query, *,
            chunks, corpus_stats)`` returning an object with ``queries``), e.g.
            a :class:`SynonymExpander`. None by default (``None`` or
            ``False``): the correction is then the fusion of the retrieval
            with the lexical retriever's ranking of the query, which did
            better than synonym expansion on five of seven collections
            (``benchmarks/results/corrections``).
        web: a web searcher (``search(query, max_results)`` /
            ``asearch``) for IRRELEVANT retrievals; none by default.
        cache: where evaluations and web results are cached: a
            :class:`MemoryCache` (the default: ``None`` makes one), a
            :class:`RedisCache`, anything with ``get``/``set`` (and/or
            ``aget``/``aset``) of JSON text, or ``False`` for no cache. Cache
            failures never fail a query: they show as ``cache_error``.
        config: a :class:`RouterConfig` or a dict of its fields.
        lexical: a second retriever (e.g. :class:`BM25Retriever`) whose
            rankings for the original and expanded queries join the fusion.
            Beside a retriever that searches within a filter (its ``scope``: a
            Qdrant filter, a FAISS ID selector, a LangChain store's
            ``search_kwargs`` filter), it must be filtered too
            (:meth:`BM25Retriever.with_filter`): a correction never brings in
            documents outside the filter.
        parents: where chunks' parents are found (:attr:`Chunk.parent_id`):
            anything with ``get(parent_id)`` and/or ``async aget(parent_id)``
            returning a chunk, a text or a mapping, or ``None`` (a ``dict``
            works). With it, a final chunk graded PARTIAL is re-graded as its
            parent, which replaces it when it grades better (parent
            expansion; ``RouterConfig.expand_parents`` and
            ``parent_token_budget``). Lookups are not cached. Beside a
            filtered retriever it must be filtered too (its ``scope``:
            :class:`~crag_heuristic.retrievers.ScopedParents`, a filtered
            :class:`BM25Retriever`): a chunk's ``parent_id`` may name another
            tenant's parent.
        metrics: a metrics sink (e.g. :class:`PrometheusMetrics`).
        logger: a structlog logger for the router's events (default: the
            stdlib-backed ``"crag_heuristic"`` logger, silent unless enabled).
        grader: an expensive grader for a cascade (a
            :class:`~crag_heuristic.grading.Grader`: ``grade(query, chunks)``
            and/or ``agrade``): after the first evaluation, the chunks the
            gate is unsure of go to it and its answers replace the gate's
            (answers cached in ``cache``). Its failures never fail a query:
            they show as ``grader_error`` and the gate's verdict stands.
        escalation: which chunks, how many, how long
            (:class:`~crag_heuristic.grading.Escalation` or a dict of its
            fields; default ``Escalation()``), or a
            :class:`~crag_heuristic.grading.SetEscalation`: the whole list goes
            to the grader when the set probability is uncertain, and the set
            verdict is recomputed from its answers.
        monitor: a :class:`~crag_heuristic.grading.GuaranteeMonitor` (anything
            with ``observe(result)``), given every result: it logs the grader's
            answers and checks a set cascade's guarantee on the audit sample.
            It never fails a query (an error is a ``crag.monitor_error`` event).
        learning: a :class:`~crag_heuristic.calibration.LearningCascade`: the
            gate and the escalation band become its own, which it refits and
            certifies again from the grader's answers as they come
            (``grader`` required; ``evaluator`` and ``escalation`` must be
            unset: they are the cascade's). Each result says its part
            (``result.learning``).
        cache_secret: sign every value the router caches with HMAC-SHA256 over
            its key, its expiry (the value's time to live from now) and its
            text (at least 16 bytes: ``secrets.token_hex(32)``); a cached
            value read back unsigned, badly signed (forged by someone who can
            write to the cache) or past its expiry (written back after its
            time to live) is refused, recomputed, overwritten and flagged on
            the result (``cache_error``). For a shared cache of your own; a
            :class:`RedisCache` signs by itself (``RedisCache(secret=...)``:
            the documented setting). Every process sharing the entries needs
            the same secret.

    Each part is typed with its protocol (:mod:`crag_heuristic.protocols`): any
    object with the right methods fits, nothing needs to inherit.

    Raises:
        InputError: a part without the methods it needs.
        ScopeError: a filtered retriever beside a lexical retriever or parents
            lookup that is not (checked again on every call: a part replaced
            later is refused then).
        ConfigError: a bad escalation, grader fingerprint or ``cache_secret``
            (never shown).
    """

    def __init__(
        self,
        retriever: Retriever | AsyncRetriever,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        expander: QueryExpander | Literal[False] | None = None,
        web: WebSearcher | AsyncWebSearcher | None = None,
        cache: Cache | AsyncCache | Literal[False] | None = None,
        config: RouterConfig | Mapping[str, Any] | None = None,
        *,
        lexical: Retriever | AsyncRetriever | None = None,
        parents: ParentLookup | AsyncParentLookup | None = None,
        metrics: MetricsSink | None = None,
        logger: EventLogger | None = None,
        grader: Grader | AsyncGrader | None = None,
        escalation: Escalation | SetEscalation | Mapping[str, Any] | None = None,
        monitor: ResultObserver | None = None,
        cache_secret: str | bytes | None = None,
        learning: Learner | None = None,
    ) -> None:
        if retriever is None:
            raise InputError("retriever is required: anything with search(query, k) or asearch")
        for role, given in (("retriever", retriever), ("lexical", lexical), ("web", web)):
            hint = None if given is None else adapter_hint(given, role)
            if hint is not None:  # a LangChain store has a search() of its own: not ours
                raise InputError(hint)
        for name, part in (("retriever", retriever), ("lexical", lexical)):
            if part is not None and not (hasattr(part, "search") or hasattr(part, "asearch")):
                raise InputError(f"{name} must have search(query, k) or asearch(query, k)")
        if expander is not None and expander is not False and not hasattr(expander, "expand"):
            raise InputError("expander must have expand(query, *, chunks, corpus_stats)")
        if parents is not None and not (hasattr(parents, "get") or hasattr(parents, "aget")):
            raise InputError("parents must have get(parent_id) or aget(parent_id) (a dict works)")
        if web is not None and not (hasattr(web, "search") or hasattr(web, "asearch")):
            raise InputError("web must have search(query, max_results) or asearch(...)")
        if grader is not None and not (hasattr(grader, "grade") or hasattr(grader, "agrade")):
            raise InputError("grader must have grade(query, chunks) or agrade(query, chunks)")
        if escalation is not None and grader is None:
            raise InputError("escalation needs a grader")
        if monitor is not None and not callable(getattr(monitor, "observe", None)):
            raise InputError("monitor must have observe(result) (a GuaranteeMonitor)")
        if learning is not None:
            if not isinstance(learning, Learner):
                raise InputError("learning must be a LearningCascade (bind, snapshot, observe)")
            if grader is None:
                raise InputError("a learning cascade needs a grader: it learns from its answers")
            if escalation is not None or evaluator is not None:
                raise InputError(
                    "with a learning cascade, the gate and the escalation are its own: pass "
                    "them to LearningCascade(gate=..., settings=Learning(escalation=...))"
                )
        check_scopes(retriever, lexical, parents)
        if cache is None:
            cache = MemoryCache()
        elif cache is not False and not (hasattr(cache, "get") or hasattr(cache, "aget")):
            raise InputError("cache must have get/set or aget/aset (or be False for none)")
        self.retriever: Retriever | AsyncRetriever = retriever
        self.evaluator = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        self._expander: QueryExpander | None = expander or None
        self.web: WebSearcher | AsyncWebSearcher | None = web
        self.cache: Cache | AsyncCache | None = None if cache is False else cache
        self._signer = signer_of(cache_secret, "cache_secret")
        self._chunk_digests = ChunkDigests()  # each chunk's part of a key, computed once
        self._opened = OpenedEvaluations()  # cached evaluations opened once per text
        if config is None:
            config = RouterConfig()
        elif isinstance(config, Mapping):
            config = RouterConfig.from_dict(config)
        elif not isinstance(config, RouterConfig):
            raise InputError(
                f"config must be a RouterConfig or a dict, got {type(config).__name__}"
            )
        self.config = config
        self._workers = Workers(config.worker_threads, name="crag-router")
        self._calls = Calls(config, self._workers, self._parts)
        self.lexical: Retriever | AsyncRetriever | None = lexical
        self.parents: ParentLookup | AsyncParentLookup | None = parents
        self.metrics: MetricsSink | None = metrics
        self._log: EventLogger = logger if logger is not None else get_logger()
        if self.cache is not None and callable(getattr(metrics, "observe_cache", None)):
            self._metric("observe_cache", self.cache)  # PrometheusMetrics: cache lookups
        self._stats: CorpusStats | None = None
        self._stats_known = False
        self._stats_lock = threading.Lock()
        self.grader = grader
        self.escalation: Escalation | SetEscalation | None = None
        self._grader_fingerprint = ""
        if grader is not None:
            self.escalation = escalation_policy(escalation)
            self._grader_fingerprint = grader_fingerprint(grader)
        self.monitor = monitor
        self.learning = learning
        if learning is not None:
            learning.bind(self._grader_fingerprint)
            self.escalation = learning.settings.escalation  # type: ignore[attr-defined]
            if callable(getattr(metrics, "observe_learning", None)):
                self._metric("observe_learning", learning)  # PrometheusMetrics: its state

    @classmethod
    def from_index_dir(
        cls,
        path: str | os.PathLike[str],
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        *,
        lexical: bool = True,
        verify: bool = True,
        embedder: str | None = None,
        trust_embedder: bool = False,
        index_secret: str | bytes | None = None,
        **options: Any,
    ) -> CRAG:
        """A router over an index directory (``crag-heuristic index``), ready at once.

        The directory's FAISS index, documents and query embedder are the
        retriever, its statistics (with each document's analysis) the
        evaluator's, and its BM25 side the lexical retriever of the
        corrections; nothing is refitted or recounted
        (:class:`~crag_heuristic.index.IndexDirectory`). The directory is data:
        nothing it names is imported unless you name it too.

        Args:
            path: the directory.
            evaluator: as for the constructor; its analyzer must be the one the
                directory was built with.
            lexical: fuse the directory's BM25 ranking into corrections.
            verify: check each file's SHA-256 against the manifest (else sizes).
            embedder: for a directory built with an embedder of yours, its spec
                (``"package.module:attribute"``): imported only when it is the one
                the directory names (an LSA directory needs none).
            trust_embedder: import the spec the directory names, whatever it is
                (a directory you built yourself).
            index_secret: the secret the directory's manifest was signed with
                (``IndexDirectory.build(..., secret=...)``).
            options: the constructor's other keywords (``web``, ``cache``,
                ``config`` ...).

        Raises:
            IndexDirectoryError: the directory does not match its manifest, a part
                is damaged, its signature does not hold, or it names an embedder
                spec neither named nor trusted.
        """
        from .._index.directory import IndexDirectory

        learning = options.get("learning")
        if learning is not None:  # its gate is the evaluator: the directory read with its analyzer
            if evaluator is not None:
                raise InputError(
                    "with a learning cascade, the gate is its own: pass it to "
                    "LearningCascade(gate=...)"
                )
            index = IndexDirectory.load(path, analyzer=learning.analyzer, verify=verify)
            return cls(index.retriever(), lexical=index.lexical() if lexical else None, **options)
        gate = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        index = IndexDirectory.load(
            path,
            analyzer=gate.analyzer,
            verify=verify,
            secret=index_secret,
            embedder=embedder,
            trust_embedder=trust_embedder,
        )
        return cls(index.retriever(), gate, lexical=index.lexical() if lexical else None, **options)

    def __repr__(self) -> str:
        return (
            f"CRAG(retriever={type(self.retriever).__name__}, evaluator={self.evaluator!r}, "
            f"web={type(self.web).__name__ if self.web else None})"
        )

    @property
    def expander(self) -> QueryExpander | None:
        """The query expander, or ``None`` (the default: no expansion)."""
        return self._expander

    def _parts(self) -> dict[str, Any]:
        """The parts the requests call (read at each call: they may be replaced)."""
        return {
            "web": self.web,
            "cache": self.cache,
            "expander": self.expander,
            "corpus_stats": self.corpus_stats(),
        }

    # -- shared ---------------------------------------------------------------------------

    def corpus_stats(self) -> CorpusStats | None:
        """Document frequencies from the retriever or the lexical retriever (once)."""
        if not self._stats_known:
            with self._stats_lock:
                if not self._stats_known:
                    parts: tuple[object, ...] = (self.retriever, self.lexical)
                    for part in parts:  # object: a retriever may or may not know its stats
                        if isinstance(part, StatsProvider):
                            self._stats = part.corpus_stats()
                            if self._stats is not None:
                                break
                    self._stats_known = True
        return self._stats

    def _bound_log(self, query: str) -> EventLogger:
        """The logger bound to a hash of the query (logs never hold the query text)."""
        query_id = hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return self._log.bind(query_id=query_id)

    def _context(self, query: str, *, stream: bool = False, parts: Parts | None = None) -> Context:
        """One query's context; ``parts``: the (retriever, lexical retriever, parents
        lookup) of this query in place of the router's (an integration's per-call
        view, e.g. a LangChain store searched with a per-call filter). Their scopes
        are checked on every call, not only at construction (a part may have been
        replaced since).

        Raises:
            ScopeError: a filtered retriever beside a part that is not filtered.
        """
        log = self._bound_log(query)
        if parts is None:
            parts = (self.retriever, self.lexical, self.parents)
        retriever, lexical, parents = parts
        check_scopes(retriever, lexical, parents)
        evaluator, escalation, learning = self.evaluator, self.escalation, None
        if self.learning is not None:  # this query's gate and policy: the cascade's now
            learning = self.learning.snapshot()
            evaluator, escalation = learning.evaluator, learning.escalation

        def on_stage(stage: str, ms: float) -> None:
            self._metric("stage", stage, ms / 1000.0)

        def on_cache_error(error: CacheError) -> None:
            self._metric("cache_error", getattr(error, "kind", None) or type(error).__name__)

        return Context(
            retriever=retriever,
            evaluator=evaluator,
            config=self.config,
            corpus_stats=self.corpus_stats(),
            get_expander=lambda: self.expander,
            lexical=lexical,
            has_web=self.web is not None,
            has_cache=self.cache is not None,
            parents=parents,
            retriever_size=_size(retriever),
            web_fingerprint=self._web_fingerprint(),
            log=log.debug,
            on_stage=on_stage,
            on_cache_error=on_cache_error,
            escalation=escalation,
            grader_fingerprint=self._grader_fingerprint,
            stream=stream,
            signer=self._signer,
            chunk_digests=self._chunk_digests,
            opened=self._opened,
            learning=learning,
        )

    def _web_fingerprint(self) -> str:
        """What identifies the web searcher in cache keys (see :func:`searcher_fingerprint`)."""
        return "" if self.web is None else searcher_fingerprint(self.web)

    def _k(self, k: int | None) -> int:
        return self.config.k if k is None else check_k(k)

    def _metric(self, method: str, *args: Any) -> None:
        if self.metrics is None:
            return
        try:
            getattr(self.metrics, method)(*args)
        except Exception as exc:  # noqa: BLE001 - metrics must never fail a query
            self._log.warning("crag.metrics_error", method=method, error=repr(exc))

    def _finish(self, result: CRAGResult, ctx: Context) -> CRAGResult:
        if self.learning is not None and ctx.learning is not None:
            try:
                decision = self.learning.observe(result, ctx.learning)
            except Exception as exc:  # noqa: BLE001 - learning must never fail a query
                self._log.warning("crag.learning_error", error=type(exc).__name__)
            else:
                result = replace(result, learning=decision)
        self._metric("decision", result.initial_evaluation.verdict.value)
        if result.strategy is not Strategy.NONE:
            self._metric("correction", result.strategy.value)
        web, grader = result.web.failure, last_failure(result.failures, FailureStage.GRADER)
        if web is not None:
            self._metric("web_error", web.type_name)
        self._bound_log(result.query).info(
            "crag.result",
            verdict=result.verdict.value,
            initial_verdict=result.initial_evaluation.verdict.value,
            strategy=result.strategy.value,
            chunks=len(result.chunks),
            web_error=result.web_error,
            cache_error=result.cache_error,
            # the type only: a grader's message may echo its prompt (the query text)
            grader_error=None if grader is None else grader.type_name,
            total_ms=round(result.timings_ms.get("total", 0.0), 3),
        )
        if self.monitor is not None:
            try:
                self.monitor.observe(result)
            except Exception as exc:  # noqa: BLE001 - a monitor must never fail a query
                self._log.warning("crag.monitor_error", error=type(exc).__name__)
        return result

    # -- sync -----------------------------------------------------------------------------

    def retrieve(self, query: str, k: int | None = None) -> CRAGResult:
        """Retrieve, grade and correct; see :class:`CRAGResult`.

        Raises:
            InvalidQueryError: blank query.
            InputError: bad ``k``.
            RetrieverError: the first retrieval failed (nothing to correct).
        """
        return self._retrieve(query, k)

    def _retrieve(self, query: str, k: int | None = None, parts: Parts | None = None) -> CRAGResult:
        """:meth:`retrieve` with this query's ``parts`` (see :meth:`_context`)."""
        checked = check_query(query)
        return _result(self._steps(self._context(checked, parts=parts), checked, self._k(k)))

    def stream(self, query: str, k: int | None = None) -> Iterator[StageEvent]:
        """:meth:`retrieve`, one stage event at a time as each stage ends (see
        :mod:`crag_heuristic.events`): ``retrieved`` before the gate grades, ...,
        ``done`` last, whose ``result`` is what :meth:`retrieve` returns.

        Raises:
            InvalidQueryError, InputError: at once, as :meth:`retrieve`.
            RetrieverError: while iterating, when the first retrieval failed.
        """
        return self._stream(query, k)

    def _stream(
        self,
        query: str,
        k: int | None = None,
        observe: Observer | None = None,
        parts: Parts | None = None,
    ) -> Iterator[StageEvent]:
        """:meth:`stream`, each request run through ``observe`` when given, with this
        query's ``parts`` (see :meth:`_context`)."""
        checked = check_query(query)
        context = self._context(checked, stream=True, parts=parts)
        return self._steps(context, checked, self._k(k), observe)

    def _steps(
        self, ctx: Context, query: CheckedQuery, k: int, observe: Observer | None = None
    ) -> Iterator[StageEvent]:
        """The sync driver: the flow's requests one after the other; yields the
        flow's stage events (none unless ``ctx.stream``), then ``done``."""
        flow = correct(ctx, query, k)
        try:
            requests = next(flow)
            while True:
                if isinstance(requests[0], Emit):
                    yield requests[0].event
                    requests = flow.send([None])
                elif observe is None:
                    requests = flow.send([self._call(request) for request in requests])
                else:
                    requests = flow.send([observe(request, self._call) for request in requests])
        except StopIteration as stop:
            result = self._finish(stop.value, ctx)
        yield Done(elapsed_ms=result.timings_ms.get("total", 0.0), result=result)

    def _call(self, request: Request) -> Any:
        """Run one request (see :mod:`.calls`); return its value or the typed error."""
        if isinstance(request, Emit):  # no I/O (the drivers hand its event over)
            return None
        calls = self._calls
        if isinstance(request, Search):
            return calls.search(request)
        if isinstance(request, CacheGet | CacheSet):
            return calls.cache(request)
        if isinstance(request, GradeCall):
            assert self.escalation is not None
            return call_grader(
                self.grader,
                request.query,
                request.chunks,
                self._grader_fingerprint,
                self.escalation.timeout,
                self._workers,
            )
        if isinstance(request, ParentGet):
            return calls.parent(request)
        if isinstance(request, Expand):
            return calls.expand(request)
        return calls.web(request)

    # -- async ----------------------------------------------------------------------------

    async def aretrieve(self, query: str, k: int | None = None) -> CRAGResult:
        """The async :meth:`retrieve`: re-retrievals run concurrently."""
        return await self._aretrieve(query, k)

    async def _aretrieve(
        self, query: str, k: int | None = None, parts: Parts | None = None
    ) -> CRAGResult:
        """:meth:`aretrieve` with this query's ``parts`` (see :meth:`_context`)."""
        checked = check_query(query)
        context = self._context(checked, parts=parts)
        return await _aresult(self._asteps(context, checked, self._k(k)))

    def astream(self, query: str, k: int | None = None) -> AsyncIterator[StageEvent]:
        """The async :meth:`stream` (``async for event in crag.astream(query)``):
        the stages of :meth:`aretrieve` as they end, ``done`` last."""
        return self._astream(query, k)

    def _astream(
        self,
        query: str,
        k: int | None = None,
        observe: AsyncObserver | None = None,
        parts: Parts | None = None,
    ) -> AsyncIterator[StageEvent]:
        """:meth:`astream`, each request run through ``observe`` when given, with this
        query's ``parts`` (see :meth:`_context`)."""
        checked = check_query(query)
        context = self._context(checked, stream=True, parts=parts)
        return self._asteps(context, checked, self._k(k), observe)

    async def _asteps(
        self, ctx: Context, query: CheckedQuery, k: int, observe: AsyncObserver | None = None
    ) -> AsyncIterator[StageEvent]:
        """The async driver: each batch of requests runs concurrently; yields as
        :meth:`_steps` does."""
        flow = correct(ctx, query, k)
        try:
            requests = next(flow)
            while True:
                if isinstance(requests[0], Emit):
                    yield requests[0].event
                    requests = flow.send([None])
                    continue
                if observe is None:
                    outcomes = await asyncio.gather(*(self._acall(r) for r in requests))
                else:
                    outcomes = await asyncio.gather(*(observe(r, self._acall) for r in requests))
                requests = flow.send(list(outcomes))
        except StopIteration as stop:
            result = self._finish(stop.value, ctx)
        yield Done(elapsed_ms=result.timings_ms.get("total", 0.0), result=result)

    async def _acall(self, request: Request) -> Any:
        calls = self._calls
        if isinstance(request, Search):
            return await calls.asearch(request)
        if isinstance(request, CacheGet | CacheSet):
            return await calls.acache(request)
        if isinstance(request, GradeCall):
            assert self.escalation is not None
            return await acall_grader(
                self.grader,
                request.query,
                request.chunks,
                self._grader_fingerprint,
                self.escalation.timeout,
                self._workers,
            )
        if isinstance(request, ParentGet):
            return await calls.aparent(request)
        if isinstance(request, Expand):
            return await calls.aexpand(request)
        assert isinstance(request, WebCall)
        return await calls.aweb(request)

    # -- resources ------------------------------------------------------------------------

    def close(self) -> None:
        """End the router's worker threads: the idle ones now, each one still held by a
        call that never returned when it does. The parts (cache, web searcher ...)
        are the caller's: they stay open. A later query starts threads again."""
        self._workers.close()

    def __enter__(self) -> CRAG:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> CRAG:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


def _result(events: Iterator[StageEvent]) -> CRAGResult:
    """The result of the last event (``done``) of a driver's events."""
    (done,) = deque(events, maxlen=1)
    assert isinstance(done, Done)
    return done.result


async def _aresult(events: AsyncIterator[StageEvent]) -> CRAGResult:
    """The async :func:`_result`."""
    done = None
    async for event in events:
        done = event
    assert isinstance(done, Done)
    return done.result


def _size(retriever: Any) -> int | None:
    """How many chunks ``retriever`` holds, when it says (``len()``), else ``None``."""
    if getattr(type(retriever), "__len__", None) is None:  # cheaper than isinstance(Sized)
        return None
    try:
        size = len(retriever)
    except Exception:  # noqa: BLE001 - a size it cannot tell is no size
        return None
    return size if isinstance(size, int) and size >= 0 else None
