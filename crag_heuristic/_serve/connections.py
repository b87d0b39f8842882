"""The service's connections, bounded: a deadline for each request's headers, a cap on
open connections that sheds the slowest first, JSON for broken framing, bounded logs.

uvicorn reads the requests (its h11 protocol); left to itself it bounds none of
this: a connection that sends its headers a byte at a time is never timed out
(its keep-alive timer runs only between requests, and every byte received
cancels it), each connection holds a file descriptor until the process has none
left, a malformed request is answered in plain text, and asyncio logs a
traceback for each failed ``accept()`` (on Python 3.11, as many as the listen
backlog per turn of the loop). The protocol here is uvicorn's h11 protocol with:

* **a header deadline** (``ServeSettings.header_timeout``): armed when a
  connection opens, or when a kept-alive connection sends the first byte of
  its next request (or more body after its answer); disarmed when the
  request's headers are complete. Past it the connection is closed. The body
  is the app's to bound: it is read within the request's deadline
  (``request_timeout``, a 504 that closes the connection).
* **a connection cap** (:func:`connection_limits`: ``max_connections``, lowered
  to what the file descriptor limit leaves room for). A connection opened at
  the cap closes another, in this order: the one that has waited longest for
  its request's headers (an idle keep-alive connection, a slow sender), then
  the one that has waited longest for its request's body; never one whose
  request is at work or whose answer is being written. With none to close,
  the new one gets a 503 (JSON, ``OverloadedError``) and is closed. So a
  client that sends a whole request is served however many slow ones hold
  connections.
* **JSON for broken framing**: a request h11 cannot read (a bad request line,
  header, ``Content-Length`` or chunk; unfinished headers past
  :data:`MAX_HEADER_BYTES`)
  gets the service's JSON error (``ServiceError``, 400) and the connection
  closes, where uvicorn wrote ``Invalid HTTP request received.`` in plain text.
* **bounded logs**: uvicorn's own messages from these connections, and
  asyncio's errors (installed by :func:`install_loop_handler`), are logged at
  most once per message per :data:`LOG_WINDOW` seconds, without a traceback,
  with the count of the ones left out; header timeouts and shed connections
  are counted and said in one ``crag.connections`` event per window.

asyncio accepts up to ``backlog`` connections (create_server's) in one turn
of its loop, before any of them can be shed, and on Python 3.11 logs one
traceback per failed ``accept()`` of that turn: ``backlog`` is fitted to the
same budget (the cap leaves room for two turns' worth), and once the server
listens, the kernel's queue is set back to :data:`MAX_BACKLOG` (``listen``
again), so that a burst of connections waits there, holding no descriptor of
the process, instead of being dropped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._exceptions import OverloadedError, ServiceError
from .._logging import get_logger
from .app import error_body
from .settings import ServeSettings

if TYPE_CHECKING:
    from .._logging import EventLog

MAX_HEADER_BYTES = 16 * 1024
"""Bytes of a request line and headers still unfinished, at most (h11's
incomplete-event limit: past it, a 400; headers that arrive whole in one read
are read)."""
KEEP_ALIVE_TIMEOUT = 5
"""Seconds an idle connection is kept between requests (uvicorn's own timer)."""
LOG_WINDOW = 10.0
"""Seconds within which one message is logged once (the others counted)."""
MAX_BACKLOG = 2048
_RESERVED_FDS = 16  # files, a metrics scrape, the odd socket, beyond the ones counted


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What the server allows its connections (see the module doc).

    Attributes:
        max_connections: open connections at most (the cap).
        backlog: the most connections asyncio accepts in one turn of its loop
            (uvicorn's ``backlog``; the kernel's queue is :data:`MAX_BACKLOG`).
        header_timeout: seconds a connection has to send a request's headers.
        fd_limit: the process's file descriptor limit (soft ``RLIMIT_NOFILE``)
            the cap was fitted to, or ``None`` where unknown.
    """

    max_connections: int
    backlog: int
    header_timeout: float
    fd_limit: int | None = None


def connection_limits(
    settings: ServeSettings, *, fd_limit: int | None = None, open_fds: int | None = None
) -> ConnectionLimits:
    """The limits for ``settings`` in this process: ``max_connections`` lowered so
    that the connections, two turns of accepts and what the service may open
    while it serves (a Redis and a web connection per request at work, and
    :data:`_RESERVED_FDS` more) fit in the file descriptor limit.

    ``fd_limit`` and ``open_fds`` default to the process's (``RLIMIT_NOFILE``
    and the descriptors open now, where the system tells).
    """
    limit = _fd_limit() if fd_limit is None else fd_limit
    cap, backlog = settings.max_connections, MAX_BACKLOG
    if limit is not None:
        in_use = _open_fds() if open_fds is None else open_fds
        spare = limit - (64 if in_use is None else in_use)
        spare -= _RESERVED_FDS + 2 * settings.max_concurrency
        backlog = max(8, min(MAX_BACKLOG, spare // 8))
        cap = max(1, min(cap, spare - 2 * backlog))
    return ConnectionLimits(
        max_connections=cap,
        backlog=backlog,
        header_timeout=float(settings.header_timeout),
        fd_limit=limit,
    )


def _fd_limit() -> int | None:
    try:
        import resource
    except ImportError:  # not on this system (Windows)
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _open_fds() -> int | None:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return None


@dataclass
class _Window:
    """Counts of what happened, said once per :data:`LOG_WINDOW` (the first at once)."""

    log: EventLog
    counts: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    said: float = float("-inf")

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1
        self.totals[what] = self.totals.get(what, 0) + 1
        now = time.monotonic()
        if now - self.said >= LOG_WINDOW:
            self.log.warning("crag.connections", **self.counts, window_s=LOG_WINDOW)
            self.counts, self.said = {}, now


class BoundedLog:
    """A stdlib logger's ``debug`` ... ``error`` and ``log``, each message at most once
    per :data:`LOG_WINDOW` seconds, without its traceback; the next one said says
    how many were left out (``(12 more like it)``)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._last: dict[str, float] = {}
        self._left: dict[str, int] = {}

    @property
    def level(self) -> int:  # uvicorn compares it with its TRACE level
        return self._logger.level

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if not self._logger.isEnabledFor(level):
            return
        key = str(msg)
        now = time.monotonic()
        if now - self._last.get(key, float("-inf")) < LOG_WINDOW:
            self._left[key] = self._left.get(key, 0) + 1
            return
        self._last[key] = now
        left = self._left.pop(key, 0)
        text = str(msg).rstrip() % args if args else str(msg).rstrip()
        error = kwargs.get("exc_info")
        if isinstance(error, BaseException):  # its type and text, not its traceback
            text = f"{text}: {type(error).__name__}: {error}"
        if left:
            text = f"{text} ({left} more like it in {LOG_WINDOW:g} s)"
        self._logger.log(level, text)

    def debug(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.DEBUG, msg, *args, **kwargs)

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.INFO, msg, *args, **kwargs)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.WARNING, msg, *args, **kwargs)

    def error(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.ERROR, msg, *args, **kwargs)

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.log(logging.ERROR, msg, *args, **kwargs)


def install_loop_handler(loop: asyncio.AbstractEventLoop) -> None:
    """Make ``loop`` log its unhandled errors (a failed ``accept()``, a protocol
    callback that raised) through a :class:`BoundedLog` of the ``asyncio`` logger:
    each message once per window, its exception's type and text, no traceback."""
    bounded = BoundedLog(logging.getLogger("asyncio"))

    def handle(_: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", "unhandled error"))
        bounded.error(message, exc_info=context.get("exception"))

    loop.set_exception_handler(handle)


def _raw_answer(status: int, reason: bytes, body: dict[str, Any]) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, to be tried again in a
    second (for a connection h11 has no request on)."""
    data = json.dumps(body, separators=(",", ":")).encode("utf-8")
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\nretry-after: 1\r\nx-request-id: %s\r\n\r\n"
    ) % (status, reason, len(data), body["request_id"].encode("ascii"))
    return head + data


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with ``limits`` (see the module doc): a class for
    ``uvicorn.Config(http=...)``, one per server (its counts are its own).

    Raises:
        MissingDependencyError: uvicorn is not installed (the ``serve`` extra).
    """
    from .._optional import requires

    with requires("serve", "the gate service"):
        import h11
        from uvicorn.protocols.http.h11_impl import H11Protocol

    window = _Window(get_logger())
    log = get_logger()
    quiet = BoundedLog(logging.getLogger("uvicorn.error"))  # one for every connection

    class GuardedH11Protocol(H11Protocol):
        """:class:`H11Protocol` with a header deadline, the cap, JSON framing errors
        and bounded logs (see :mod:`crag_heuristic._serve.connections`)."""

        guard_limits = limits
        guard_counts = window.totals

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.logger: Any = quiet
            self._header_timer: asyncio.TimerHandle | None = None
            self._waiting_since: float | None = None  # for a request's headers, since
            self._request_since = 0.0

        # -- the header deadline ----------------------------------------------------------

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._waiting_since = self.loop.time()
            self._arm()
            self._shed()

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
                self._arm()  # the first byte of the next request (or more of an answered body)
            before = self.cycle
            super().data_received(data)
            self._began(before)

        def on_response_complete(self) -> None:
            before = self.cycle
            super().on_response_complete()  # may start a pipelined request
            if not self._began(before):
                self._waiting_since = self.loop.time()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _began(self, before: Any) -> bool:
            """Whether a request began (its headers complete) since ``before``."""
            if self.cycle is before:
                return False
            self._disarm()
            self._waiting_since, self._request_since = None, self.loop.time()
            return True

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(limits.header_timeout, self._expired)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _expired(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                window.count("header_timeouts")
                self.transport.abort()

        # -- the cap --------------------------------------------------------------------

        def _rank(self) -> tuple[int, float] | None:
            """How readily this connection is shed (lowest first), or ``None``: never."""
            if self.transport is None or self.transport.is_closing():
                return None
            cycle = self.cycle
            if cycle is None or cycle.response_complete:  # waiting for headers (or idle)
                return (0, self._waiting_since or 0.0)
            if cycle.more_body and not cycle.response_started:  # waiting for its body
                return (1, self._request_since)
            return None  # at work, or its answer being written

        def _shed(self) -> None:
            if len(self.connections) <= limits.max_connections:  # the cheap test first
                return
            open_now = [c for c in self.connections if not c.transport.is_closing()]
            if len(open_now) <= limits.max_connections:
                return
            ranked = [
                (rank, c)
                for c in open_now
                if c is not self and isinstance(c, GuardedH11Protocol)
                for rank in [c._rank()]
                if rank is not None
            ]
            if ranked:
                rank, victim = min(ranked, key=lambda item: item[0])
                window.count("shed_waiting_headers" if rank[0] == 0 else "shed_waiting_body")
                victim._disarm()
                victim.transport.abort()
                return
            window.count("refused")
            error = OverloadedError(
                f"{len(open_now) - 1} connections open, every one at work: try again",
                retry_after=1.0,
            )
            self._disarm()
            self.transport.write(
                _raw_answer(503, b"Service Unavailable", error_body(error, uuid.uuid4().hex))
            )
            self.transport.close()

        # -- framing -------------------------------------------------------------------

        def send_400_response(self, msg: str) -> None:
            request_id = uuid.uuid4().hex
            error = ServiceError(
                "the request is not HTTP/1.1 this service can read (its request line, a "
                f"header, its framing, or unfinished headers past {MAX_HEADER_BYTES:,} bytes)",
                status=400,
            )
            body = json.dumps(error_body(error, request_id), separators=(",", ":")).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"connection", b"close"),
                (b"x-request-id", request_id.encode("ascii")),
            ]
            try:
                output = self.conn.send(h11.Response(status_code=400, headers=headers))
                output = (output or b"") + (self.conn.send(h11.Data(data=body)) or b"")
                output += self.conn.send(h11.EndOfMessage()) or b""
                self.transport.write(output)
            except h11.LocalProtocolError:  # an answer already begun: nothing more to say
                pass
            log.info("crag.http", request_id=request_id, route="(unreadable)", status=400,
                     error="ServiceError")  # fmt: skip
            self._disarm()
            self.transport.close()

    return GuardedH11Protocol
