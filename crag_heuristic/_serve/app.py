"""The gate as an HTTP service: a router and its evaluator behind five routes (Starlette).

=====================  ==============================================================
route                  what
=====================  ==============================================================
``POST /v1/retrieve``  ``{"query", "k"?, "options"?}`` -> the router's result as JSON
                       (``CRAGResult.to_dict()``: verdict, strategy, chunks, the
                       evaluation with each chunk's grade, failures, timings ...);
                       ``options``: router settings for this request
                       (``ServeSettings`` lists them: ``max_retries``, ``refine`` ...)
``POST /v1/evaluate``  ``{"query", "chunks", "options"?}`` -> the evaluation of the
                       caller's own chunks (``Evaluation.to_dict()``), with the
                       router's corpus statistics; ``options``: ``refine``,
                       ``token_budget`` (adds ``refinement``)
``POST /v1/stream``    as ``/v1/retrieve``; the stages as Server-Sent Events as they
                       end (``event: <stage>``, ``data:`` ``StageEvent.to_dict()``),
                       ``done`` last with the whole result; a failure after the stream
                       began is an ``event: error`` with the error's JSON
``GET /healthz``       ``{"status": "ok"}`` for anyone; with a valid key (or, without
                       keys, from loopback) also ``version``, ``in_flight``,
                       ``queued`` (and the index's size, date and gate under
                       ``crag-heuristic serve``)
``GET /metrics``       Prometheus text (the ``metrics`` extra): the router's metrics and
                       the service's (:mod:`crag_heuristic._serve.metrics`)
``GET /v1/learning``   with a learning cascade (``serve --grader ... --learn``), where it
                       stands (``LearningStatus.to_dict()``: labels, refits, the band
                       in force and its guarantee); 404 without one
=====================  ==============================================================

Every request gets an id (``X-Request-ID``: the client's own when it sends one
of 1 to 64 letters, digits, ``-`` or ``_``, else a new one), echoed on the
answer. Then, in order: the API key (header ``ServeSettings.api_key_header``,
compared with each configured key by ``hmac.compare_digest``, in constant
time; with no key configured, only loopback clients are answered: the
service binds to 127.0.0.1), the body (at most ``max_body_bytes``, one JSON
object, checked), a slot (``max_concurrency`` requests worked on at once,
``max_queue`` more waiting, the rest refused at once), and the work, all within
``request_timeout`` of the request's arrival, the body's reading included
(past it the work is abandoned: a retriever's thread runs on, its answer
dropped; an error answered before the body was read whole closes the
connection). ``/healthz`` takes no key; ``/metrics`` does.

An error is answered as JSON naming its type, never as a bare status::

    {"error": "InvalidQueryError", "message": "...", "status": 400,
     "request_id": "...", "attributes": {"field": ...}}

400 an :class:`~crag_heuristic.InputError` (a bad body, query, ``k``, option,
chunk) or a :class:`ConfigError` (an option's bad value), 401 / 403
:class:`UnauthorizedError`, 404 / 405 :class:`ServiceError` (no such route or
method), 413 :class:`RequestTooLargeError`, 501
:class:`MissingDependencyError` (``/metrics`` without the extra), 502
:class:`RetrieverError` (the first retrieval failed), 503
:class:`OverloadedError` (with ``Retry-After``), 504 :class:`RequestTimeoutError`;
any other library error 500 with its type, and a bug 500 ``InternalError``
(the traceback goes to the log, not to the client). What failed without
failing a query (the web search, the cache, a grader) is on the result, as in
the library: ``failures``, ``cache_error``, ``web_error``.

Each answered request logs one ``crag.http`` event (INFO, the library's logger):
``request_id``, ``method``, ``route``, ``status``, ``error`` (a type name),
``ms``, ``k``, ``chunks``, ``bytes_in``, ``bytes_out``; never the query text,
the body or a key. The router's own events carry a hash of the query. A
stream the client left before its end is logged ``error="StreamAborted"``; a
request whose client left before its answer, status 499
``error="ClientDisconnect"``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hmac
import ipaddress
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import (
    ConfigError,
    CragError,
    InputError,
    MissingDependencyError,
    OverloadedError,
    RequestTimeoutError,
    RetrieverError,
    ServiceError,
    UnauthorizedError,
    _short,
)
from .._logging import get_logger
from .._optional import requires
from .._redact import redact
from .._version import __version__
from .answers import VIEWS, answer_of, encode, evaluation_answer, refinement_answer
from .metrics import HttpMetrics, metrics_for
from .requests import EvaluateRequest, RetrieveRequest, parse_object, read_body
from .settings import ServeSettings

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from .._evaluator.refine import Refinement
    from .._router.result import CRAGResult
    from .._router.router import CRAG
    from .._types import Evaluation

_REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CLIENT_GONE = 499  # logged for a request whose client left before its answer (nginx's code)
# the error attributes a JSON error shows (never a value, a query or a path)
_SHOWN = ("field", "chunk_id", "index", "retry_after", "timeout", "limit", "kind", "retriever")
_STATUS = (
    (InputError, 400),
    (ConfigError, 400),
    (MissingDependencyError, 501),
    (RetrieverError, 502),
)


def error_status(error: BaseException) -> int:
    """The HTTP status a request failed with ``error`` is answered with."""
    if isinstance(error, ServiceError):
        return error.status
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500


def error_body(error: BaseException, request_id: str) -> dict[str, Any]:
    """The JSON of an error answer (see the module doc)."""
    if isinstance(error, CragError):
        name, message = type(error).__name__, _unicode(redact(str(error)))
    else:  # a bug: named, its details kept for the log
        name, message = "InternalError", f"an internal error; see the log (request {request_id})"
    values = vars(error) if isinstance(error, CragError) else {}
    attributes = {
        key: _unicode(values[key]) if isinstance(values[key], str) else values[key]
        for key in _SHOWN
        if isinstance(values.get(key), str | int | float) and not isinstance(values[key], bool)
    }
    return {
        "error": name,
        "message": message,
        "status": error_status(error),
        "request_id": request_id,
        "attributes": attributes,
    }


def _unicode(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (which UTF-8 cannot hold) escaped."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def sse(event: str, data: Any) -> str:
    """One Server-Sent Event (its JSON is one line: newlines in strings are escaped)."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is this machine (an IPv4 address
    mapped into IPv6, ``::ffff:127.0.0.1``, as its IPv4 address)."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 (a dual-stack socket's IPv4 client)
    return address.is_loopback


class _Admission:
    """At most ``slots`` requests at work; ``queue`` more may wait for one."""

    def __init__(self, slots: int, queue: int, metrics: HttpMetrics | None) -> None:
        self.slots = slots
        self.queue = queue
        self.active = 0
        self.waiting = 0
        self._free = asyncio.Semaphore(slots)
        self._metrics = metrics

    def check(self) -> None:
        """Refuse at once when every slot is busy and every queue place taken."""
        if self.active >= self.slots and self.waiting >= self.queue:
            raise OverloadedError(
                f"{self.active} requests at work and {self.waiting} waiting: try again",
                retry_after=1.0,
            )

    @contextlib.asynccontextmanager
    async def slot(self, deadline: float, timeout: float) -> AsyncIterator[None]:
        """A slot, waited for until ``deadline`` (loop time)."""
        self.check()
        if self._free.locked():  # wait for a slot, within the deadline
            self.waiting += 1
            self._gauge()
            try:
                await within(deadline, self._free.acquire(), "no slot free", timeout)
            finally:
                self.waiting -= 1
        else:  # a free slot: taken at once (no task, no timer)
            await self._free.acquire()
        self.active += 1
        self._gauge()
        try:
            yield
        finally:
            self.active -= 1
            self._free.release()
            self._gauge()

    def _gauge(self) -> None:
        if self._metrics is not None:
            self._metrics.in_flight.set(self.active)
            self._metrics.queued.set(self.waiting)


def _now() -> float:
    return asyncio.get_running_loop().time()


async def within(deadline: float, work: Awaitable[_T], what: str, timeout: float) -> _T:
    """``await work``, cancelled at ``deadline`` (loop time) with a
    :class:`RequestTimeoutError` saying ``what`` happened (``asyncio.timeout`` where
    Python has it: no task of its own, unlike ``wait_for``)."""
    try:
        if _TIMEOUT is not None:
            async with _TIMEOUT(max(0.0, deadline - _now())):
                return await work
        return await asyncio.wait_for(work, max(0.0, deadline - _now()))
    except asyncio.TimeoutError:  # TimeoutError on 3.11+, distinct on 3.10
        raise RequestTimeoutError(
            f"{what} within the request timeout ({timeout:g} s)", timeout=timeout
        ) from None


_TIMEOUT: Any = getattr(asyncio, "timeout", None)  # Python 3.11+
# Chunks of at most this many characters in all are graded on the event loop, the rest on a
# thread: a hop costs more than grading a few chunks, and on two busy cores far more.
_INLINE_CHARS = 65_536


def _view(data: dict[str, Any], version: int) -> str:
    """The ``view`` a v2 body asks for (:data:`~.answers.VIEWS`; taken out of it), and
    ``chunks`` for v1, which has no such key.

    Raises:
        InputError: an unknown view.
    """
    if version == 1:
        return "chunks"
    view = data.pop("view", "chunks")
    if not isinstance(view, str) or view not in VIEWS:
        raise InputError(f"view must be one of {', '.join(VIEWS)}, got {_short(view)}")
    return view


_T = TypeVar("_T")


@dataclass
class _Call:
    """One request's record, for its access event."""

    request_id: str
    method: str
    route: str
    started: float = field(default_factory=time.perf_counter)
    status: int = 200
    error: str = ""
    k: int | None = None
    chunks: int | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float | None = None  # the time to the answer, when it was stopped before sending
    has_body: bool = False  # the request says a body follows
    body_read: bool = False  # ... and it was read whole


class GateService:
    """The routes' work over one router (see the module doc); :func:`create_app` makes
    the Starlette app of it."""

    def __init__(
        self,
        crag: CRAG,
        settings: ServeSettings,
        *,
        metrics: HttpMetrics | None,
        info: Mapping[str, Any],
    ) -> None:
        self.crag = crag
        self.settings = settings
        self.metrics = metrics
        self.info = dict(info)
        self.log = get_logger()
        self._keys = [key.encode("utf-8") for key in settings.api_keys]
        self._admission: _Admission | None = None

    @property
    def admission(self) -> _Admission:
        """The slots, made in the serving event loop (at start-up, or the first request)."""
        if self._admission is None:
            self._admission = _Admission(
                self.settings.max_concurrency, self.settings.max_queue, self.metrics
            )
        return self._admission

    # -- the steps every request takes ---------------------------------------------------

    def _authorize(self, request: Request) -> None:
        if self._authenticated(request):
            return
        if not self._keys:
            raise UnauthorizedError(
                "this service has no API key configured, so it answers loopback clients "
                "only", status=403,
            )  # fmt: skip
        raise UnauthorizedError(f"no valid API key in {self.settings.api_key_header}")

    def _authenticated(self, request: Request) -> bool:
        """A valid key in the header (with keys configured), else a loopback client."""
        if not self._keys:
            return is_loopback(request.client.host if request.client else None)
        given = request.headers.get(self.settings.api_key_header, "").encode("utf-8")
        matched = False
        for key in self._keys:  # every key compared, in constant time each
            matched |= hmac.compare_digest(given, key)
        return matched

    async def _body(self, request: Request, call: _Call, deadline: float) -> dict[str, Any]:
        """The body, read within the request's deadline (a body trickling in is a 504)."""
        reading = read_body(
            request.stream(), request.headers.get("content-length"), self.settings.max_body_bytes
        )
        body = await within(
            deadline, reading, "the body did not arrive whole", self.settings.request_timeout
        )
        call.bytes_in, call.body_read = len(body), True
        return parse_object(body)

    def _router(self, options: Mapping[str, Any]) -> CRAG:
        """The router, or a copy with this request's router settings."""
        if not options:
            return self.crag
        router = copy.copy(self.crag)
        router.config = self.crag.config.replace(**options)
        return router

    def _answer(self, call: _Call, data: Any, status: int = 200) -> Response:
        from starlette.responses import Response

        body = encode(data)  # orjson where installed
        call.status, call.bytes_out = status, len(body)
        return Response(
            body,
            status_code=status,
            media_type="application/json",
            headers={"X-Request-ID": call.request_id},
        )

    def _failed(self, call: _Call, error: BaseException) -> Response:
        from starlette.requests import ClientDisconnect

        if isinstance(error, ClientDisconnect):  # gone before its answer: nobody to tell
            call.status, call.error = _CLIENT_GONE, "ClientDisconnect"
            return self._answer(call, {}, _CLIENT_GONE)
        if not isinstance(error, CragError):
            self.log.error(
                "crag.http_error", request_id=call.request_id, route=call.route, error=repr(error)
            )
        call.error = "InternalError" if not isinstance(error, CragError) else type(error).__name__
        response = self._answer(call, error_body(error, call.request_id), error_status(error))
        if isinstance(error, OverloadedError) and error.retry_after is not None:
            response.headers["Retry-After"] = str(max(1, round(error.retry_after)))
        if call.has_body and not call.body_read:  # the rest of it would be read as a request
            response.headers["Connection"] = "close"
        return response

    def _later(self, call: _Call, response: Response) -> Response:
        """``response``, its request counted in the metrics now and its access event
        logged once it is sent (off the request's path: formatting and writing the
        event cost a third of a millisecond a request)."""
        from starlette.background import BackgroundTask

        call.seconds = time.perf_counter() - call.started
        self._observe(call)
        logged = BackgroundTask(self._log_later, call)  # async: on the loop, no thread
        if response.background is not None:  # never one of ours: both run, ours last
            first = response.background

            async def both() -> None:
                await first()
                await logged()

            response.background = BackgroundTask(both)
        else:
            response.background = logged
        return response

    def _observe(self, call: _Call) -> None:
        if call.seconds is None:
            call.seconds = time.perf_counter() - call.started
        if self.metrics is not None:
            self.metrics.observe(call.route, call.status, call.error, call.seconds)

    def _done(self, call: _Call) -> None:
        """The request's metrics and access event, now (a stream's, as it ends)."""
        self._observe(call)
        self._log_access(call)

    async def _log_later(self, call: _Call) -> None:
        self._log_access(call)

    def _log_access(self, call: _Call) -> None:
        self.log.info(
            "crag.http",
            request_id=call.request_id,
            method=call.method,
            route=call.route,
            status=call.status,
            error=call.error or None,
            ms=round((call.seconds or 0.0) * 1000.0, 3),
            k=call.k,
            chunks=call.chunks,
            bytes_in=call.bytes_in,
            bytes_out=call.bytes_out,
        )

    def _call(self, request: Request, route: str) -> _Call:
        headers = request.headers
        given = headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        call = _Call(request_id, request.method, route)
        call.has_body = "transfer-encoding" in headers or headers.get("content-length", "0") != "0"
        return call

    async def _handle(
        self, request: Request, route: str, work: Callable[[_Call, float], Awaitable[Response]]
    ) -> Response:
        """Every step of a request around its ``work`` (see the module doc)."""
        call = self._call(request, route)
        deadline = _now() + self.settings.request_timeout
        try:
            self._authorize(request)
            response = await work(call, deadline)
        except Exception as error:  # noqa: BLE001 - every failure is answered as JSON
            response = self._failed(call, error)
        return self._later(call, response)

    async def _within(self, deadline: float, work: Awaitable[_T]) -> _T:
        return await within(deadline, work, "no answer", self.settings.request_timeout)

    # -- the routes ----------------------------------------------------------------------

    async def retrieve(self, request: Request) -> Response:
        return await self._retrieve(request, 1)

    async def retrieve_v2(self, request: Request) -> Response:
        return await self._retrieve(request, 2)

    async def _retrieve(self, request: Request, version: int) -> Response:
        async def work(call: _Call, deadline: float) -> Response:
            data = await self._body(request, call, deadline)
            view = _view(data, version)
            asked = RetrieveRequest.parse(data, self.settings)
            call.k = asked.k
            router = self._router(asked.options)
            async with self.admission.slot(deadline, self.settings.request_timeout):
                result = await self._within(deadline, router.aretrieve(asked.query, asked.k))
            call.chunks = len(result.chunks)
            return self._answer(call, answer_of(version, view)(result))

        return await self._handle(request, f"/v{version}/retrieve", work)

    async def evaluate(self, request: Request) -> Response:
        return await self._evaluate_route(request, 1)

    async def evaluate_v2(self, request: Request) -> Response:
        return await self._evaluate_route(request, 2)

    async def _evaluate_route(self, request: Request, version: int) -> Response:
        async def work(call: _Call, deadline: float) -> Response:
            data = await self._body(request, call, deadline)
            view = _view(data, version)
            asked = EvaluateRequest.parse(data, self.settings)
            call.chunks = len(asked.chunks)
            async with self.admission.slot(deadline, self.settings.request_timeout):
                if sum(len(chunk.text) for chunk in asked.chunks) <= _INLINE_CHARS:
                    evaluated = self._evaluate(asked)  # no thread: a few hundred microseconds
                else:
                    evaluated = await self._within(
                        deadline, asyncio.to_thread(self._evaluate, asked)
                    )
            evaluation, refinement = evaluated
            if version == 1:
                payload = evaluation.to_dict()
                if refinement is not None:
                    payload["refinement"] = refinement.to_dict()
            else:
                payload = evaluation_answer(evaluation, view)
                if refinement is not None:
                    payload["refinement"] = refinement_answer(refinement, view)
            return self._answer(call, payload)

        return await self._handle(request, f"/v{version}/evaluate", work)

    def _evaluate(self, asked: EvaluateRequest) -> tuple[Evaluation, Refinement | None]:
        evaluator, stats = self.crag.evaluator, self.crag.corpus_stats()
        evaluation = evaluator.evaluate(asked.query, asked.chunks, stats)
        refinement = None
        if asked.refine:
            refinement = evaluator.refine(
                asked.query, asked.chunks, stats, token_budget=asked.token_budget
            )
        return evaluation, refinement

    async def stream(self, request: Request) -> Response:
        return await self._stream(request, 1)

    async def stream_v2(self, request: Request) -> Response:
        return await self._stream(request, 2)

    async def _stream(self, request: Request, version: int) -> Response:
        from starlette.responses import StreamingResponse

        async def work(call: _Call, deadline: float) -> Response:
            data = await self._body(request, call, deadline)
            view = _view(data, version)
            asked = RetrieveRequest.parse(data, self.settings)
            call.k = asked.k
            events = self._router(asked.options).astream(asked.query, asked.k)
            self.admission.check()  # refused at once (503) rather than in the stream
            call.status = 200
            answer = answer_of(version, view)
            return StreamingResponse(
                self._events(call, deadline, events, answer),
                media_type="text/event-stream",
                headers={
                    "Cache-Control": "no-cache",
                    "X-Accel-Buffering": "no",
                    "X-Request-ID": call.request_id,
                },
            )

        return await self._handle_stream(request, work, f"/v{version}/stream")

    async def _handle_stream(
        self,
        request: Request,
        work: Callable[[_Call, float], Awaitable[Response]],
        route: str,
    ) -> Response:
        """:meth:`_handle` for a stream: its access event is logged when it ends."""
        call = self._call(request, route)
        deadline = _now() + self.settings.request_timeout
        try:
            self._authorize(request)
            return await work(call, deadline)
        except Exception as error:  # noqa: BLE001 - answered as JSON before the stream
            return self._later(call, self._failed(call, error))

    async def _events(
        self,
        call: _Call,
        deadline: float,
        events: AsyncIterator[Any],
        answer: Callable[[CRAGResult], Mapping[str, Any]],
    ) -> AsyncIterator[str]:
        """The stage events as SSE, within the deadline; an error as ``event: error``;
        the ``done`` event's result as ``answer`` writes it (v1 or v2); a stream that
        did not reach its end (the client went away: the task was cancelled, or the
        generator closed) is logged with ``error="StreamAborted"``."""
        stages = events.__aiter__()
        ended = False
        try:
            async with self.admission.slot(deadline, self.settings.request_timeout):
                while True:
                    try:
                        event = await self._within(deadline, stages.__anext__())
                    except StopAsyncIteration:
                        break
                    data = (
                        event.to_dict()
                        if event.stage.value != "done"
                        else {
                            "stage": "done",
                            "elapsed_ms": event.elapsed_ms,
                            "result": answer(event.result),
                        }
                    )
                    text = sse(event.stage.value, data)
                    call.bytes_out += len(text.encode("utf-8"))
                    if event.stage.value == "done":
                        call.chunks = len(event.result.chunks)
                    yield text
            ended = True
        except Exception as error:  # noqa: BLE001 - the stream began: an error event
            if not isinstance(error, CragError):
                self.log.error("crag.http_error", request_id=call.request_id, error=repr(error))
            call.error = type(error).__name__ if isinstance(error, CragError) else "InternalError"
            yield sse("error", error_body(error, call.request_id))
            ended = True
        finally:
            if not ended:
                call.error = "StreamAborted"
            with contextlib.suppress(Exception):
                await stages.aclose()  # type: ignore[attr-defined]
            self._done(call)

    async def healthz(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if not self._authenticated(request):  # for load balancers: alive, nothing more
            return JSONResponse({"status": "ok"})
        admission = self.admission
        body = {
            "status": "ok",
            "version": __version__,
            "in_flight": admission.active,
            "queued": admission.waiting,
            **self.info,
        }
        return JSONResponse(body)

    async def metrics_text(self, request: Request) -> Response:
        from starlette.responses import Response

        async def work(call: _Call, deadline: float) -> Response:
            if self.metrics is None:
                with requires("metrics", "the gate service's /metrics"):
                    import prometheus_client  # noqa: F401 - raises naming the extra
                raise MissingDependencyError("prometheus_client", "metrics", "/metrics")
            body, content_type = self.metrics.exposition()
            call.bytes_out = len(body)
            return Response(body, media_type=content_type)

        return await self._handle(request, "/metrics", work)

    async def learning(self, request: Request) -> Response:
        async def work(call: _Call, deadline: float) -> Response:
            learner = self.crag.learning
            if learner is None:
                raise ServiceError(
                    "no learning cascade here (serve --grader ... --learn)", status=404
                )
            return self._answer(call, learner.status().to_dict())  # type: ignore[attr-defined]

        return await self._handle(request, "/v1/learning", work)

    async def internal(self, request: Request, exc: Exception) -> Response:
        """What escaped a route (a bug): answered as a JSON ``InternalError`` too."""
        call = self._call(request, request.url.path)
        return self._later(call, self._failed(call, exc))

    async def not_found(self, request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        call = self._call(request, "(none)")
        what = "no such route" if status == 404 else "this route takes another method"
        response = self._failed(
            call, ServiceError(f"{what}: {request.method} {request.url.path}", status=status)
        )
        return self._later(call, response)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Start-up (the slots made in the serving loop) and shutdown, said as events."""
        self._admission = None
        self.admission  # noqa: B018 - made now, in this loop
        self.log.info("crag.serve", state="started", **self.info)
        try:
            yield
        finally:
            self.log.info("crag.serve", state="stopped")


def create_app(
    crag: CRAG,
    settings: ServeSettings | None = None,
    *,
    registry: Any = None,
    info: Mapping[str, Any] | None = None,
) -> Starlette:
    """The gate service as a Starlette app (see :mod:`crag_heuristic._serve.app`).

    Args:
        crag: the router it serves (its evaluator grades ``/v1/evaluate``).
        settings: limits and keys (default :class:`ServeSettings`: no key, so
            loopback clients only).
        registry: a Prometheus ``CollectorRegistry`` for ``/metrics``; default:
            the router's :class:`PrometheusMetrics` registry when it has one,
            else a new one (``/metrics`` is a 501 without the ``metrics`` extra).
        info: fields shown by ``/healthz`` (the index's size, say).

    Raises:
        MissingDependencyError: Starlette is not installed (the ``serve`` extra).
    """
    with requires("serve", "the gate service"):
        from starlette.applications import Starlette
        from starlette.routing import Route
    settings = settings or ServeSettings()
    if not isinstance(settings, ServeSettings):
        raise InputError(f"settings must be a ServeSettings, got {type(settings).__name__}")
    if registry is None:
        registry = getattr(crag.metrics, "registry", None)
    try:
        metrics: HttpMetrics | None = metrics_for(registry)
    except MissingDependencyError:
        metrics = None
    service = GateService(crag, settings, metrics=metrics, info=info or {})
    app = Starlette(
        routes=[
            Route("/v1/retrieve", service.retrieve, methods=["POST"]),
            Route("/v1/evaluate", service.evaluate, methods=["POST"]),
            Route("/v1/stream", service.stream, methods=["POST"]),
            Route("/v2/retrieve", service.retrieve_v2, methods=["POST"]),
            Route("/v2/evaluate", service.evaluate_v2, methods=["POST"]),
            Route("/v2/stream", service.stream_v2, methods=["POST"]),
            Route("/healthz", service.healthz, methods=["GET"]),
            Route("/metrics", service.metrics_text, methods=["GET"]),
            Route("/v1/learning", service.learning, methods=["GET"]),
        ],
        exception_handlers={
            404: service.not_found,
            405: service.not_found,
            Exception: service.internal,
        },
        lifespan=service.lifespan,
    )
    app.state.service = service
    return app
