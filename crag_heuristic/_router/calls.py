"""How the drivers run the flow's requests: every call bounded, every outcome typed.

The flow (:mod:`.flow`) yields requests; the sync and the async driver run
them through :class:`Calls`, which knows the parts, their timeouts
(:class:`~crag_heuristic.RouterConfig`) and the router's worker threads
(:class:`~crag_heuristic._deadline.Workers`):

=============  ==========================  ===================  ============================
request        part                        timeout              past it / no thread free
=============  ==========================  ===================  ============================
``Search``     retriever, lexical          ``retriever_timeout`` ``RetrieverError(timeout=)``
                                           (a retriever's first:
                                           ``first_search_timeout``)
``WebCall``    web searcher                ``web_timeout``      ``WebSearchTimeout``
``CacheGet``,  cache                       ``cache_timeout``    ``CacheError(kind="timeout")``
``CacheSet``
``ParentGet``  parents lookup              ``retriever_timeout`` ``ParentLookupError``
``Expand``     query expander              ``expander_timeout`` a failure of the expansion
``GradeCall``  a cascade's grader          ``escalation.timeout`` ``GraderTimeout``
=============  ==========================  ===================  ============================

A native async method (``asearch``, ``aget`` ...) is awaited within its
timeout and cancelled past it. A sync method runs on one of the worker threads
(in the sync driver too: it is what bounds it), abandoned past its timeout; a
part that bounds its own calls (:func:`~crag_heuristic._deadline.is_bounded`)
is called directly by the sync driver, at no cost. The expander runs on a
worker thread in the async driver whatever it is: its work is CPU and must not
hold the event loop. A part's own exception comes back as its stage's typed
error, its cause kept.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .._config import RouterConfig
from .._deadline import Abandoned, Exhausted, Workers, is_bounded
from .._exceptions import (
    CacheError,
    CragError,
    InputError,
    ParentLookupError,
    RetrieverError,
    WebSearchError,
    WebSearchTimeout,
)
from .._redact import describe
from .._types import Chunk
from .flow import (
    CacheGet,
    CacheSet,
    Expand,
    Search,
    WebCall,
    retrieved_chunks,
    retriever_error,
    web_chunks,
)
from .parents import ParentGet

_LATE = (Abandoned, Exhausted)


def _waited(outcome: Any, timeout: float | None, workers: Workers, what: str) -> str:
    """Why a call has no answer: not within its timeout, or no thread came free."""
    if isinstance(outcome, Exhausted):
        return (
            f"{what}: no worker thread came free within {timeout} s (the router's "
            f"{workers.size} threads, {workers.cap} per kind of call, are held by calls "
            "that have not returned)"
        )
    return f"{what} gave no answer within {timeout} s"


def _identity(retriever: Any) -> Any:
    """What a retriever searches: a LangChain adapter's store (its per-call views share
    it), else the retriever itself."""
    return getattr(retriever, "base", retriever)


class Calls:
    """Runs requests for a driver (see the module docstring).

    Args:
        config: the timeouts.
        workers: the threads that wait on sync parts.
        get_parts: the parts, read at each call (a router's attributes may be
            replaced): a callable returning a mapping of ``web``, ``cache``,
            ``expander`` and ``corpus_stats`` (a parents lookup comes with its
            request: each query has its own, see ``Context.parents``).
    """

    def __init__(
        self,
        config: RouterConfig,
        workers: Workers,
        get_parts: Callable[[], dict[str, Any]],
    ) -> None:
        self.config = config
        self.workers = workers
        self._parts = get_parts
        self._warm: set[int] = set()  # the retrievers (ids) that have answered a search

    def _search_timeout(self, retriever: Any) -> float | None:
        """``retriever_timeout``; for a retriever's first search (its warm-up: a model
        that loads, a connection that opens) ``first_search_timeout``, never shorter."""
        timeout = self.config.retriever_timeout
        if timeout is None or id(_identity(retriever)) in self._warm:
            return timeout
        first = self.config.first_search_timeout
        return None if first is None else max(first, timeout)

    # -- the bounds -----------------------------------------------------------------------

    def _sync(self, part: Any, fn: Callable[[], Any], timeout: float | None, kind: str) -> Any:
        """``fn()`` here (no timeout, or a part that bounds itself) or on a worker
        thread: its value, its exception (returned), or why it has none."""
        if timeout is None or is_bounded(part):
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - typed by the caller
                return exc
        return self.workers.call(fn, timeout, kind)

    async def _async(
        self,
        part: Any,
        native: Callable[[], Awaitable[Any]] | None,
        fn: Callable[[], Any],
        timeout: float | None,
        kind: str,
        *,
        off_loop: bool = False,
    ) -> Any:
        """``await native()`` within ``timeout`` (cancelled past it), else ``fn()`` on
        a worker thread: as :meth:`_sync`."""
        try:
            if native is not None and not off_loop:
                if timeout is None or is_bounded(part):
                    return await native()
                try:
                    return await asyncio.wait_for(native(), timeout)
                except asyncio.TimeoutError:  # TimeoutError on 3.11+, distinct on 3.10
                    return Abandoned()
            return await self.workers.acall(fn, timeout, kind)
        except Exception as exc:  # noqa: BLE001 - typed by the caller
            return exc

    # -- searches ---------------------------------------------------------------------------

    def search(self, request: Search) -> Any:
        """One sync search: its checked chunks, or the :class:`RetrieverError` it came to."""
        retriever = request.retriever
        if getattr(retriever, "search", None) is None:
            return RetrieverError(f"{type(retriever).__name__} is async-only: use aretrieve()")
        timeout = self._search_timeout(retriever)
        outcome = self._sync(retriever, _sync_search(request), timeout, "retriever")
        return self._searched(outcome, retriever, timeout)

    async def asearch(self, request: Search) -> Any:
        """One async search: ``asearch`` (or ``search`` on a worker thread)."""
        retriever = request.retriever
        timeout = self._search_timeout(retriever)
        native = None
        if getattr(retriever, "asearch", None) is not None:

            def native() -> Awaitable[list[Chunk]]:
                return _native_chunks(retriever, retrieved_chunks, request.query, request.k)

        outcome = await self._async(retriever, native, _sync_search(request), timeout, "retriever")
        return self._searched(outcome, retriever, timeout)

    def _searched(self, outcome: Any, retriever: Any, timeout: float | None) -> Any:
        if isinstance(outcome, _LATE):
            name = type(retriever).__name__
            return RetrieverError(
                _waited(outcome, timeout, self.workers, f"{name}.search")
                + " (router retriever_timeout)",
                timeout=timeout,
                retriever=name,
            )
        if isinstance(outcome, BaseException):
            return retriever_error(outcome, retriever)
        self._warm.add(id(_identity(retriever)))
        return outcome

    # -- the web ----------------------------------------------------------------------------

    def web(self, request: WebCall) -> Any:
        """One sync web search: its checked chunks, or the typed error it came to."""
        web = self._parts()["web"]
        search = getattr(web, "search", None)
        if search is None:
            return WebSearchError(f"{type(web).__name__} is async-only: use aretrieve()")

        def call() -> list[Chunk]:
            return web_chunks(search(request.query, request.max_results), web)

        outcome = self._sync(web, call, self.config.web_timeout, "web")
        return self._web_outcome(outcome, request)

    async def aweb(self, request: WebCall) -> Any:
        """One async web search: ``asearch`` (or ``search`` on a worker thread)."""
        web = self._parts()["web"]

        def call() -> list[Chunk]:
            return web_chunks(web.search(request.query, request.max_results), web)

        native = None
        if getattr(web, "asearch", None) is not None:

            def native() -> Awaitable[list[Chunk]]:
                return _native_chunks(web, web_chunks, request.query, request.max_results)

        elif getattr(web, "search", None) is None:
            return WebSearchError(f"{type(web).__name__} has no search nor asearch")
        outcome = await self._async(web, native, call, self.config.web_timeout, "web")
        return self._web_outcome(outcome, request)

    def _web_outcome(self, outcome: Any, request: WebCall) -> Any:
        if isinstance(outcome, _LATE):
            timeout = self.config.web_timeout
            return WebSearchTimeout(
                _waited(outcome, timeout, self.workers, "the web searcher")
                + " (router web_timeout)",
                query=request.query,
            )
        if isinstance(outcome, BaseException):
            return _web_error(outcome)
        return outcome

    # -- the cache ------------------------------------------------------------------------

    def cache(self, request: CacheGet | CacheSet, async_entry: str = "aretrieve()") -> Any:
        """Run a cache request: its value, or the :class:`CacheError` it came to
        (``async_entry`` names the async call an async-only cache needs)."""
        cache = self._parts()["cache"]
        method = getattr(cache, "get" if isinstance(request, CacheGet) else "set", None)
        if method is None:
            return CacheError(
                f"this cache is async-only: use {async_entry}", backend="cache", operation="get"
            )
        outcome = self._sync(cache, _cache_fn(method, request), self.config.cache_timeout, "cache")
        return self._cache_outcome(outcome, request)

    async def acache(self, request: CacheGet | CacheSet) -> Any:
        """The async :meth:`cache`: ``aget``/``aset``, else the sync method on a thread."""
        cache = self._parts()["cache"]
        get = isinstance(request, CacheGet)
        sync = getattr(cache, "get" if get else "set", None)
        native_method = getattr(cache, "aget" if get else "aset", None)
        native = None if native_method is None else _cache_fn(native_method, request)
        if native is None and sync is None:
            return CacheError("this cache has no get/aget", backend="cache", operation="get")
        call = _cache_fn(sync, request) if sync is not None else _missing
        outcome = await self._async(cache, native, call, self.config.cache_timeout, "cache")
        return self._cache_outcome(outcome, request)

    def _cache_outcome(self, outcome: Any, request: CacheGet | CacheSet) -> Any:
        operation = "get" if isinstance(request, CacheGet) else "set"
        if isinstance(outcome, _LATE):
            timeout = self.config.cache_timeout
            return CacheError(
                _waited(outcome, timeout, self.workers, f"the cache's {operation}")
                + " (router cache_timeout)",
                backend="cache",
                operation=operation,
                kind="timeout",
            )
        if isinstance(outcome, BaseException):
            return cache_error(outcome, request)
        return outcome

    # -- parents and the expander -----------------------------------------------------------

    def parent(self, request: ParentGet) -> Any:
        """Look a parent up: its answer, or the exception it came to (typed)."""
        parents = request.lookup
        get = getattr(parents, "get", None)
        if get is None:
            return InputError(f"{type(parents).__name__} is async-only: use aretrieve()")
        outcome = self._sync(
            parents, lambda: get(request.parent_id), self.config.retriever_timeout, "parents"
        )
        return self._parent_outcome(outcome, request)

    async def aparent(self, request: ParentGet) -> Any:
        """The async :meth:`parent`: ``aget``, else ``get`` on a worker thread."""
        parents = request.lookup
        aget = getattr(parents, "aget", None)
        native = None if aget is None else (lambda: aget(request.parent_id))
        get = getattr(parents, "get", None)
        call = _missing if get is None else (lambda: get(request.parent_id))
        outcome = await self._async(parents, native, call, self.config.retriever_timeout, "parents")
        return self._parent_outcome(outcome, request)

    def _parent_outcome(self, outcome: Any, request: ParentGet) -> Any:
        if isinstance(outcome, _LATE):
            return ParentLookupError(
                _waited(outcome, self.config.retriever_timeout, self.workers, "the parents lookup")
                + " (router retriever_timeout)",
                parent_id=request.parent_id,
            )
        return outcome

    def expand(self, request: Expand) -> Any:
        """Expand a query: the expander's answer, or the exception it came to."""
        parts = self._parts()
        expander = parts["expander"]
        call = _expand_fn(expander, request, parts["corpus_stats"])
        outcome = self._sync(expander, call, self.config.expander_timeout, "expander")
        return self._expand_outcome(outcome)

    async def aexpand(self, request: Expand) -> Any:
        """The async :meth:`expand`: on a worker thread, off the event loop."""
        parts = self._parts()
        expander = parts["expander"]
        call = _expand_fn(expander, request, parts["corpus_stats"])
        outcome = await self._async(
            expander, None, call, self.config.expander_timeout, "expander", off_loop=True
        )
        return self._expand_outcome(outcome)

    def _expand_outcome(self, outcome: Any) -> Any:
        if isinstance(outcome, _LATE):
            return CragError(
                _waited(outcome, self.config.expander_timeout, self.workers, "the query expander")
                + " (router expander_timeout)"
            )
        return outcome


def _missing() -> Any:
    raise InputError("this part has no sync method to run on a thread")


def _sync_search(request: Search) -> Callable[[], list[Chunk]]:
    """``request.retriever.search`` for ``request``, its answer checked."""
    retriever: Any = request.retriever

    def call() -> list[Chunk]:
        return retrieved_chunks(retriever.search(request.query, request.k), retriever)

    return call


async def _native_chunks(
    part: Any, check: Callable[[Any, Any, str], list[Chunk]], *args: Any
) -> list[Chunk]:
    """``part.asearch(*args)`` awaited, or an async iterator collected; the answer
    checked by ``check``."""
    value = part.asearch(*args)
    if hasattr(value, "__aiter__"):
        value = [item async for item in value]
    elif inspect.isawaitable(value):
        value = await value
    return check(value, part, "asearch")


def _cache_fn(method: Callable[..., Any], request: CacheGet | CacheSet) -> Callable[[], Any]:
    if isinstance(request, CacheGet):
        return lambda: method(request.key)
    return lambda: method(request.key, request.value, request.ttl)


def _expand_fn(expander: Any, request: Expand, corpus_stats: Any) -> Callable[[], Any]:
    def call() -> Any:
        chunks = list(request.chunks)
        return expander.expand(request.query, chunks=chunks, corpus_stats=corpus_stats)

    return call


def cache_error(error: BaseException, request: CacheGet | CacheSet) -> CacheError:
    """A cache's own exception as a :class:`CacheError` (its cause kept)."""
    if isinstance(error, CacheError):
        return error
    operation = "get" if isinstance(request, CacheGet) else "set"
    wrapped = CacheError(
        f"the cache raised {describe(error)}", backend="cache", operation=operation
    )
    wrapped.__cause__ = error
    return wrapped


def _web_error(error: BaseException) -> WebSearchError:
    if isinstance(error, WebSearchError):
        return error
    wrapped = WebSearchError(f"the web searcher raised {describe(error)}")
    wrapped.__cause__ = error
    return wrapped
