"""How a remote cache fails: error kinds, and the window in which it is not retried.

:func:`classify` names a redis-py failure with a stable ``kind`` (the
:attr:`~crag_heuristic.CacheError.kind` users see and stats count) and says
whether it means the server cannot be reached. :class:`DownWindow` is the
small state machine behind "Redis down must not slow every query"::

    up --(connection-level failure)--> down for retry_interval
    down --(a call inside the window)--> refused at once ("skipped")
    down --(first call after the window)--> that call alone goes through (a probe);
            the window is extended meanwhile, so concurrent calls still fail fast
    probe succeeds, or the server answers an error --> up
    probe fails at the connection level --> down for another retry_interval

It is a circuit breaker with a threshold of one failure: a cache is optional,
so one refused connection or one timeout is reason enough to stop waiting on
it for a moment.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from .._optional import requires


def classify(exc: BaseException) -> tuple[str, bool]:
    """``(kind, unreachable)`` for an exception raised by a redis-py call.

    ``unreachable`` is true for failures that say nothing reached the server
    or came back (refused, reset, timed out, authentication, still loading,
    cluster down); errors the server answered (``OOM``, ``READONLY``,
    ``WRONGTYPE``, ``NOPERM``) leave it false.
    """
    from redis import exceptions as rex

    if isinstance(exc, rex.AuthenticationError | rex.AuthorizationError):
        return "auth", True
    if isinstance(exc, rex.BusyLoadingError):
        return "loading", True
    if isinstance(exc, rex.TimeoutError | TimeoutError | asyncio.TimeoutError):
        return "timeout", True
    if isinstance(exc, rex.ConnectionError | OSError):
        return "connection", True
    if isinstance(exc, rex.ClusterDownError | rex.RedisClusterException):
        return "cluster", True
    if isinstance(exc, rex.NoPermissionError):
        return "auth", False
    if isinstance(exc, rex.OutOfMemoryError):
        return "oom", False
    if isinstance(exc, rex.ReadOnlyError):
        return "readonly", False
    if isinstance(exc, rex.ResponseError):
        message = str(exc)
        if message.startswith("WRONGTYPE"):
            return "payload", False
        if message.startswith("OOM"):
            return "oom", False
        return "response", False
    if isinstance(exc, RuntimeError):  # e.g. an async client used from another event loop
        return "client", False
    return "error", False


def redis_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a redis-py call may raise that a cache turns into ``CacheError``."""
    with requires("redis", "RedisCache"):
        from redis import exceptions as rex

    return (rex.RedisError, rex.RedisClusterException, OSError, asyncio.TimeoutError, RuntimeError)


class DownWindow:
    """Thread-safe "marked down until" state (see the module docstring).

    Args:
        retry_interval: seconds to refuse calls after a connection-level failure.
        clock: a monotonic clock in seconds.
    """

    def __init__(self, retry_interval: float, clock: Callable[[], float]) -> None:
        self.retry_interval = retry_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._until: float | None = None

    @property
    def up(self) -> bool:
        """True unless the last contact with the backend failed at the connection level."""
        return self._until is None

    def admit(self) -> float | None:
        """``None`` when a call may go ahead, else the seconds left in the window."""
        with self._lock:
            until = self._until
            if until is None:
                return None
            now = self._clock()
            if now >= until:
                self._until = now + self.retry_interval  # this call probes alone
                return None
            return until - now

    def mark_down(self) -> None:
        """Start (or restart) the window now."""
        with self._lock:
            self._until = self._clock() + self.retry_interval

    def mark_up(self) -> bool:
        """End the window; ``True`` if it was open."""
        with self._lock:
            was_down, self._until = self._until is not None, None
        return was_down
