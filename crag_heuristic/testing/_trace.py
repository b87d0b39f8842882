"""Trace every cache and web call the router makes, per query.

Wrap the real cache and web searcher before giving them to the router::

    trace = CallTrace()
    crag = CRAG(retriever, cache=TracedCache(RedisCache(url=...), trace),
                web=TracedWebSearcher(SearxngClient(...), trace))
    with trace.tagged("q-17"):
        task = asyncio.create_task(crag.aretrieve(query))   # the task copies the tag

Each call is recorded as a :class:`TracedCall`: the tag of the query that
made it (a :class:`contextvars.ContextVar`, so it follows the query into the
tasks and worker threads the router starts), the operation, the key or query
text, monotonic start and end times, and the exception it raised, if any
(``CancelledError`` included: a call the router gave up on). The wrappers
pass every value and exception through unchanged; they only watch. This is
what a load test compares the flags on each result with.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from .._cache.keys import searcher_fingerprint

_T = TypeVar("_T")

_TAG: contextvars.ContextVar[str | None] = contextvars.ContextVar("crag_trace_tag", default=None)


@dataclass(frozen=True, slots=True)
class TracedCall:
    """One call through a traced part.

    Attributes:
        tag: the tag current when the call was made (``None`` outside
            :meth:`CallTrace.tagged`).
        part: ``"cache"`` or ``"web"``.
        op: ``"get"``, ``"set"`` or ``"search"``.
        arg: the cache key, or the web query text as given.
        started, ended: the clock's readings around the call.
        error_type: the exception's class name, or ``None`` on success.
        error: ``"Type: message"``, or ``None``.
        kind: the exception's ``kind`` attribute when it has one
            (:class:`~crag_heuristic.CacheError`).
    """

    tag: str | None
    part: str
    op: str
    arg: str
    started: float
    ended: float
    error_type: str | None = None
    error: str | None = None
    kind: str | None = None

    @property
    def ok(self) -> bool:
        """True when the call returned."""
        return self.error_type is None


class CallTrace:
    """The thread-safe record the traced wrappers write to.

    Args:
        clock: monotonic seconds (``time.monotonic``), shared with whatever
            the calls are compared with.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._calls: list[TracedCall] = []

    @staticmethod
    @contextlib.contextmanager
    def tagged(tag: str) -> Iterator[None]:
        """Tag the calls made in this block (and in tasks and threads started in it)."""
        token = _TAG.set(tag)
        try:
            yield
        finally:
            _TAG.reset(token)

    @property
    def calls(self) -> list[TracedCall]:
        """Every call so far, in the order they ended."""
        with self._lock:
            return list(self._calls)

    def by_tag(self) -> dict[str | None, list[TracedCall]]:
        """The calls grouped by tag, each group in the order the calls ended."""
        grouped: dict[str | None, list[TracedCall]] = {}
        for call in self.calls:
            grouped.setdefault(call.tag, []).append(call)
        return grouped

    def clear(self) -> None:
        """Forget every call."""
        with self._lock:
            self._calls.clear()

    def _add(
        self, part: str, op: str, arg: str, started: float, error: BaseException | None
    ) -> None:
        call = TracedCall(
            tag=_TAG.get(),
            part=part,
            op=op,
            arg=arg,
            started=started,
            ended=self.clock(),
            error_type=None if error is None else type(error).__name__,
            error=None if error is None else f"{type(error).__name__}: {error}",
            kind=None if error is None else _kind(error),
        )
        with self._lock:
            self._calls.append(call)

    def run(self, part: str, op: str, arg: str, call: Callable[[], _T]) -> _T:
        """Run ``call`` and record it."""
        started = self.clock()
        try:
            value = call()
        except BaseException as exc:
            self._add(part, op, arg, started, exc)
            raise
        self._add(part, op, arg, started, None)
        return value

    async def arun(self, part: str, op: str, arg: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """Await ``call()`` and record it (a cancellation is recorded, then re-raised)."""
        started = self.clock()
        try:
            value = await call()
        except BaseException as exc:
            self._add(part, op, arg, started, exc)
            raise
        self._add(part, op, arg, started, None)
        return value


def _kind(error: BaseException) -> str | None:
    """The error's ``kind`` (a :class:`~crag_heuristic.CacheError`'s: ``"timeout"``,
    ``"connection"`` ...); ``"cancelled"`` for a call its caller abandoned (the router's
    deadline cancels a cache call that has not answered in time)."""
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    kind = getattr(error, "kind", None)
    return kind if isinstance(kind, str) else None


def _async_or_thread(part: Any, async_name: str, sync_name: str, *args: Any) -> Awaitable[Any]:
    native = getattr(part, async_name, None)
    if native is not None:
        result: Awaitable[Any] = native(*args)
        return result
    return asyncio.to_thread(getattr(part, sync_name), *args)


class TracedCache:
    """A cache that records each ``get`` / ``set`` (sync or async) in a :class:`CallTrace`.

    Args:
        inner: the real cache (``get``/``set`` and/or ``aget``/``aset``).
        trace: where the calls are recorded.
    """

    def __init__(self, inner: Any, trace: CallTrace) -> None:
        self.inner = inner
        self.trace = trace

    def __repr__(self) -> str:
        return f"TracedCache({self.inner!r})"

    def get(self, key: str) -> str | None:
        """``inner.get(key)``, recorded."""
        value: str | None = self.trace.run("cache", "get", key, lambda: self.inner.get(key))
        return value

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """``inner.set(key, value, ttl)``, recorded."""
        self.trace.run("cache", "set", key, lambda: self.inner.set(key, value, ttl))

    async def aget(self, key: str) -> str | None:
        """``inner.aget(key)`` (or ``get`` in a worker thread), recorded."""
        value: str | None = await self.trace.arun(
            "cache", "get", key, lambda: _async_or_thread(self.inner, "aget", "get", key)
        )
        return value

    async def aset(self, key: str, value: str, ttl: float | None = None) -> None:
        """``inner.aset(key, value, ttl)`` (or ``set`` in a worker thread), recorded."""
        await self.trace.arun(
            "cache",
            "set",
            key,
            lambda: _async_or_thread(self.inner, "aset", "set", key, value, ttl),
        )


class TracedWebSearcher:
    """A web searcher that records each ``search`` (sync or async) in a :class:`CallTrace`.

    Args:
        inner: the real searcher (``search`` and/or ``asearch``).
        trace: where the calls are recorded.
    """

    def __init__(self, inner: Any, trace: CallTrace) -> None:
        self.inner = inner
        self.trace = trace

    def __repr__(self) -> str:
        return f"TracedWebSearcher({self.inner!r})"

    def fingerprint(self) -> str:
        """The inner searcher's fingerprint (its class's full name when it has none)."""
        return searcher_fingerprint(self.inner)

    def search(self, query: str, max_results: int = 5) -> Any:
        """``inner.search(query, max_results)``, recorded."""
        return self.trace.run("web", "search", query, lambda: self.inner.search(query, max_results))

    async def asearch(self, query: str, max_results: int = 5) -> Any:
        """``inner.asearch(query, max_results)`` (or ``search`` in a thread), recorded."""
        return await self.trace.arun(
            "web",
            "search",
            query,
            lambda: _async_or_thread(self.inner, "asearch", "search", query, max_results),
        )
