"""The web-search fallback: a SearXNG client that fails loudly and typed.

:class:`SearxngClient` implements the ``WebSearcher`` and ``AsyncWebSearcher``
protocols against a SearXNG instance's ``GET /search?format=json``. The router
turns every :class:`~crag_heuristic.WebSearchError` into ``web_error`` on its
result, so the client never answers a failure with an empty list: ``[]``
means the instance searched and found nothing.

What the instance may answer, and what the client does:

=============================  ============================================================
answer                         outcome
=============================  ============================================================
200 + results                  chunks (see :mod:`~crag_heuristic._web.response`)
200, no results                ``[]``
200, no results, engines       :class:`~crag_heuristic.WebSearchEnginesFailed` (``engines``)
failed
200, some results, some        the chunks; ``results.info.unresponsive_engines`` names the
engines failed                 failed ones
200 with HTML / non-JSON /     :class:`~crag_heuristic.WebSearchResponseError`
JSON that is no answer
3xx                            :class:`~crag_heuristic.WebSearchHTTPError` (not followed: a
                               redirect to ``/`` is the bot detection refusing the call)
400 ``{"error": ...}``         :class:`~crag_heuristic.WebSearchHTTPError` with the message
403                            :class:`~crag_heuristic.WebSearchFormatDisabled`: enable JSON
                               with ``search: formats: [html, json]`` in ``settings.yml``
429                            retried with backoff, then
                               :class:`~crag_heuristic.WebSearchRateLimited`
5xx                            retried with backoff, then ``WebSearchHTTPError``
dropped connection (reset,     retried with backoff, then
protocol error)                :class:`~crag_heuristic.WebSearchConnectionError`
refused connection, DNS        ``WebSearchConnectionError`` (not retried)
slower than ``timeout``        :class:`~crag_heuristic.WebSearchTimeout` (not retried: the
                               instance was already waiting on its engines)
circuit open                   :class:`~crag_heuristic.CircuitOpenError`, no network call
=============================  ============================================================

Retry delays are in :mod:`~crag_heuristic._web.config`. No ``httpx`` or
``json`` exception escapes.

The optional :class:`~crag_heuristic.CircuitBreaker` sees one outcome per call
(after the retries). Failures are what says the service is unhealthy or
overloaded: timeouts, connection errors, 5xx, 429 after the retries, and every
engine failing. A 403 (JSON disabled), any other 3xx/4xx and a malformed 200
do **not** count, and close a half-open circuit like a success: the instance
answered, and quickly. A misconfiguration is permanent until someone edits the
instance, so opening the circuit would save only a fast round trip, would
delay the recovery after the fix by up to a cool-down, and would replace the
error that says how to fix it with a bare ``CircuitOpenError``.

Logs one structlog event ``crag.web_search`` per call, at INFO (``url``,
``status``, ``results``, ``retries``, ``duration_ms``, ``error``, ``circuit``,
``unresponsive``), and ``crag.web_search.retry`` per retry at DEBUG, through the
stdlib logger ``"crag_heuristic"`` (silent unless the application enables it;
see :mod:`crag_heuristic._logging`). The query text is never logged.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from .._exceptions import (
    ConfigError,
    InputError,
    InvalidQueryError,
    WebSearchConnectionError,
    WebSearchEnginesFailed,
    WebSearchError,
    WebSearchFormatDisabled,
    WebSearchHTTPError,
    WebSearchRateLimited,
    WebSearchResponseError,
    WebSearchTimeout,
)
from .._logging import get_logger
from .circuit import CircuitBreaker
from .config import SearxngConfig
from .response import WebResults, parse_answer

__all__ = ["SearxngClient"]

EVENT = "crag.web_search"
FORMAT_HOWTO = (
    "enable JSON in the instance's settings.yml with `search: formats: [html, json]` and restart it"
)
_MESSAGE_CHARS = 200


@dataclass(frozen=True, slots=True)
class _Step:
    """What one HTTP attempt came to: an answer, or an error (maybe worth a retry)."""

    payload: Any = None
    status_code: int = 0
    error: WebSearchError | None = None
    retryable: bool = False
    retry_after: float | None = None


def _retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (a number or an HTTP date), if any."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    return max(0.0, seconds) if seconds == seconds else None


def _server_message(response: httpx.Response) -> str:
    """The instance's ``{"error": ...}`` text, else the start of the body."""
    try:
        data = json.loads(response.content)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])[:_MESSAGE_CHARS]
    if "html" in response.headers.get("Content-Type", ""):
        return "an HTML page"
    text = response.content[:_MESSAGE_CHARS].decode("utf-8", "replace").strip()
    return " ".join(text.split()) or "an empty body"


def _is_failure(error: BaseException) -> bool:
    """Whether an error counts against the circuit (see the module docstring)."""
    if isinstance(error, WebSearchFormatDisabled):
        return False
    if isinstance(error, WebSearchHTTPError):
        return error.status_code == 429 or error.status_code >= 500
    return isinstance(error, WebSearchTimeout | WebSearchConnectionError | WebSearchEnginesFailed)


class SearxngClient:
    """Web search through a SearXNG instance; results are :class:`Chunk`\\ s.

    Args:
        base_url: the instance's root (``http://127.0.0.1:8888``); a URL that
            already ends in ``/search`` is used as is.
        config: the options (:class:`SearxngConfig`); the keyword arguments
            below that are not ``None`` override its fields.
        client: an ``httpx.Client`` to use (connection pooling, proxies,
            transports). Not closed by :meth:`close`. Without it the client
            makes one on first use and closes it in :meth:`close`.
        async_client: an ``httpx.AsyncClient`` for :meth:`asearch`. Without it
            each ``asearch`` call opens and closes its own, which works under
            any event loop.
        breaker: a :class:`CircuitBreaker`, possibly shared by several clients.
        rng: the random source of the retry jitter (seed it in tests).
        sleep, async_sleep: how to wait between retries (replace in tests).
        logger: a structlog logger for the events (default: the stdlib-backed
            ``"crag_heuristic"`` logger).

    Each request's timeout is ``config.timeout`` (it overrides the timeout of
    an injected client). A call takes at most about ``(max_retries + 1)``
    attempts of up to ``timeout`` per phase, plus the retry delays. Behind the
    async router, keep ``timeout`` below the router's ``web_timeout``: a call
    the router cancels is neither a success nor a failure for the breaker,
    while the client's own :class:`~crag_heuristic.WebSearchTimeout` counts.

    Thread-safe: one client serves many threads, and (without an injected
    ``async_client``, which belongs to its event loop) any event loop.

    Raises:
        ConfigError: a bad ``base_url`` or option, naming it.
    """

    def __init__(
        self,
        base_url: str,
        *,
        config: SearxngConfig | None = None,
        client: httpx.Client | None = None,
        async_client: httpx.AsyncClient | None = None,
        breaker: CircuitBreaker | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        backoff: float | None = None,
        backoff_max: float | None = None,
        jitter: float | None = None,
        categories: Sequence[str] | None = None,
        engines: Sequence[str] | None = None,
        language: str | None = None,
        safesearch: int | None = None,
        max_content_chars: int | None = None,
        headers: Mapping[str, str] | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        logger: Any = None,
    ) -> None:
        overrides = {
            "timeout": timeout,
            "max_retries": max_retries,
            "backoff": backoff,
            "backoff_max": backoff_max,
            "jitter": jitter,
            "categories": categories,
            "engines": engines,
            "language": language,
            "safesearch": safesearch,
            "max_content_chars": max_content_chars,
            "headers": headers,
        }
        base = config if config is not None else SearxngConfig()
        if not isinstance(base, SearxngConfig):
            raise ConfigError("config", config, "must be a SearxngConfig")
        self.config = base.replace(**{k: v for k, v in overrides.items() if v is not None})
        self.url = _endpoint(base_url)
        self.breaker = breaker
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._headers = self.config.request_headers()
        self._lock = threading.Lock()
        self._log = logger if logger is not None else get_logger()

    def __repr__(self) -> str:
        return f"SearxngClient({self.url!r})"

    # -- public calls -------------------------------------------------------------------

    def search(self, query: str, max_results: int = 5) -> WebResults:
        """Search the web: the chunks, best first, in a :class:`WebResults` list.

        ``max_results`` caps what one page of the instance's answer holds
        (no further pages are fetched). ``results.info`` tells whether the
        answer was partial (some engines failed), how many duplicates were
        dropped and how many retries it took.

        Raises:
            InvalidQueryError: ``query`` is not a non-empty string.
            InputError: ``max_results`` is not an integer >= 1.
            WebSearchError: any failure (see the module docstring for which).
        """
        text = _check_call(query, max_results)
        ticket = self._acquire(text)
        started = time.perf_counter()
        retries, status = 0, None
        try:
            client = self._sync_client()
            while True:
                step = self._attempt(lambda: client.get(**self._request(text)), text)
                status = step.status_code or status
                if step.error is None:
                    results = self._finish(step, text, max_results, retries, started)
                    break
                if not step.retryable or retries >= self.config.max_retries:
                    raise step.error
                self._sleep(self._delay(retries, step))
                retries += 1
        except BaseException as error:
            self._report(ticket, text, error, status, retries, started)
            raise
        self._report(ticket, text, None, status, retries, started, results)
        return results

    async def asearch(self, query: str, max_results: int = 5) -> WebResults:
        """The async twin of :meth:`search` (same results, same errors)."""
        text = _check_call(query, max_results)
        ticket = self._acquire(text)
        started = time.perf_counter()
        retries, status = 0, None
        owned = self._async_client is None
        client = self._async_client or httpx.AsyncClient()
        try:
            while True:
                try:
                    response = await client.get(**self._request(text))
                except Exception as exc:  # noqa: BLE001 - classified, never re-raised raw
                    step = self._transport_step(exc, text)
                else:
                    step = self._response_step(response, text)
                status = step.status_code or status
                if step.error is None:
                    results = self._finish(step, text, max_results, retries, started)
                    break
                if not step.retryable or retries >= self.config.max_retries:
                    raise step.error
                await self._async_sleep(self._delay(retries, step))
                retries += 1
        except BaseException as error:
            self._report(ticket, text, error, status, retries, started)
            raise
        finally:
            if owned:
                await client.aclose()
        self._report(ticket, text, None, status, retries, started, results)
        return results

    def close(self) -> None:
        """Close the ``httpx.Client`` this object made (never an injected one)."""
        with self._lock:
            client, self._client = self._client, None
        if self._owns_client and client is not None:
            client.close()

    def __enter__(self) -> SearxngClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> SearxngClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()

    # -- one attempt --------------------------------------------------------------------

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client()
            return self._client

    def _request(self, query: str) -> dict[str, Any]:
        return {
            "url": self.url,
            "params": self.config.request_params(query),
            "headers": self._headers,
            "timeout": self.config.timeout,
        }

    def _attempt(self, send: Callable[[], httpx.Response], query: str) -> _Step:
        try:
            response = send()
        except Exception as exc:  # noqa: BLE001 - classified, never re-raised raw
            return self._transport_step(exc, query)
        return self._response_step(response, query)

    def _transport_step(self, exc: Exception, query: str) -> _Step:
        """Classify a transport exception; the typed error keeps it as ``__cause__``."""
        step = self._classify_transport(exc, query)
        if step.error is not None:
            step.error.__cause__ = exc
        return step

    def _classify_transport(self, exc: Exception, query: str) -> _Step:
        where = {"query": query, "url": self.url}
        if isinstance(exc, httpx.TimeoutException):
            kind = type(exc).__name__
            return _Step(
                error=WebSearchTimeout(
                    f"{self.url} did not answer within {self.config.timeout:g} s ({kind}); "
                    "the client's timeout must exceed the instance's engine timeout",
                    **where,
                )
            )
        if isinstance(exc, httpx.ConnectError | httpx.ProxyError | httpx.UnsupportedProtocol):
            message = f"cannot connect to {self.url}: {exc or type(exc).__name__}"
            return _Step(error=WebSearchConnectionError(message, **where))
        if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
            message = f"connection to {self.url} dropped: {exc or type(exc).__name__}"
            return _Step(error=WebSearchConnectionError(message, **where), retryable=True)
        if isinstance(exc, httpx.DecodingError | httpx.TooManyRedirects):
            message = f"{self.url} sent an unreadable answer: {exc}"
            return _Step(error=WebSearchResponseError(message, **where))
        if isinstance(exc, httpx.HTTPError | httpx.InvalidURL | httpx.StreamError | OSError):
            message = f"request to {self.url} failed: {type(exc).__name__}: {exc}"
            return _Step(error=WebSearchConnectionError(message, **where))
        raise exc

    def _response_step(self, response: httpx.Response, query: str) -> _Step:
        status = response.status_code
        where = {"query": query, "url": self.url}
        if 200 <= status < 300:
            return self._decode(response, query)
        message = _server_message(response)
        if status == 403:
            error: WebSearchError = WebSearchFormatDisabled(
                f"{self.url} answered 403 to format=json: the instance does not serve "
                f"JSON; {FORMAT_HOWTO}",
                status_code=status,
                **where,
            )
            return _Step(status_code=status, error=error)
        if status == 429:
            error = WebSearchRateLimited(
                f"{self.url} answered 429 (rate limited) after "
                f"{self.config.max_retries} retries; its limiter may be blocking this "
                "client: allow it in limiter.toml or turn server.limiter off",
                status_code=status,
                **where,
            )
            retry_after = _retry_after(response)
            return _Step(status_code=status, error=error, retryable=True, retry_after=retry_after)
        if 300 <= status < 400:
            target = response.headers.get("Location", "?")
            text = (
                f"{self.url} redirected ({status}) to {target}; redirects are not followed: "
                "use the final address as base_url (a redirect to '/' is the bot detection)"
            )
        elif status == 404:
            text = f"{self.url} answered 404: is base_url the instance's root?"
        else:
            text = f"{self.url} answered HTTP {status}: {message}"
        error = WebSearchHTTPError(text, status_code=status, **where)
        return _Step(status_code=status, error=error, retryable=status >= 500)

    def _decode(self, response: httpx.Response, query: str) -> _Step:
        status = response.status_code
        body = response.content
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            looks_html = body.lstrip()[:1] == b"<" or "html" in response.headers.get(
                "Content-Type", ""
            )
            what = "an HTML page" if looks_html else f"non-JSON ({_server_message(response)})"
            error = WebSearchResponseError(
                f"{self.url} answered {status} with {what} instead of JSON: check that "
                "base_url is a SearXNG instance that honours format=json",
                query=query,
                url=self.url,
            )
            return _Step(status_code=status, error=error)
        return _Step(payload=payload, status_code=status)

    def _finish(
        self, step: _Step, query: str, max_results: int, retries: int, started: float
    ) -> WebResults:
        results = parse_answer(
            step.payload,
            query=query,
            url=self.url,
            status_code=step.status_code,
            max_results=max_results,
            config=self.config,
        )
        results.info = results.info.replace(retries=retries, duration_ms=_ms_since(started))
        return results

    def _delay(self, retries: int, step: _Step) -> float:
        delay = self.config.retry_delay(retries, self._rng.random(), step.retry_after)
        self._log.debug(
            "crag.web_search.retry",
            url=self.url,
            status=step.status_code or None,
            error=type(step.error).__name__,
            retry=retries + 1,
            delay_s=round(delay, 3),
        )
        return delay

    # -- circuit and logging ------------------------------------------------------------

    def _acquire(self, query: str) -> int:
        if self.breaker is None:
            return 0
        try:
            return self.breaker.acquire()
        except WebSearchError as error:
            error.query, error.url = query, self.url
            self._log.info(
                EVENT,
                url=self.url,
                status=None,
                results=0,
                retries=0,
                duration_ms=0.0,
                error=type(error).__name__,
                circuit=self.breaker.state.value,
            )
            raise

    def _report(
        self,
        ticket: int,
        query: str,
        error: BaseException | None,
        status: int | None,
        retries: int,
        started: float,
        results: WebResults | None = None,
    ) -> None:
        breaker = self.breaker
        if breaker is not None:
            if error is None or (isinstance(error, WebSearchError) and not _is_failure(error)):
                breaker.record_success(ticket)
            elif isinstance(error, WebSearchError):
                breaker.record_failure(ticket)
            else:
                breaker.release(ticket)
        fields: dict[str, Any] = {
            "url": self.url,
            "status": status,
            "results": len(results) if results is not None else 0,
            "retries": retries,
            "duration_ms": _ms_since(started),
            "error": type(error).__name__ if error is not None else None,
            "circuit": breaker.state.value if breaker is not None else None,
        }
        if results is not None and results.info.unresponsive_engines:
            fields["unresponsive"] = [name for name, _ in results.info.unresponsive_engines]
        if isinstance(error, WebSearchEnginesFailed):
            fields["unresponsive"] = list(error.engines)
        self._log.info(EVENT, **fields)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 1)


def _endpoint(base_url: Any) -> str:
    if not isinstance(base_url, str):
        raise ConfigError("base_url", base_url, "must be a string")
    url = base_url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError("base_url", base_url, f"is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError("base_url", base_url, "must be an http(s) URL with a host")
    if parts.query or parts.fragment:
        raise ConfigError("base_url", base_url, "must not hold a query or fragment")
    return url if parts.path.endswith("/search") else url + "/search"


def _check_call(query: Any, max_results: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError(query, "must be a non-empty string")
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise InputError(f"max_results must be an integer >= 1, got {max_results!r}")
    return query.strip()
