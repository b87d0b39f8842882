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

Logs one structlog event ``crag.searxng`` per call, at INFO (``url``,
``status``, ``results``, ``retries``, ``duration_ms``, ``error``, ``circuit``,
``unresponsive``), and ``crag.searxng.retry`` per retry at DEBUG, through the
stdlib logger ``"crag_heuristic"`` (silent unless the application enables it;
see :mod:`crag_heuristic._logging`). The query text is never logged, nor is
anything the server wrote (an error's text, a redirect's target: errors give
the status and the host). The query travels in the body of a ``POST
/search`` (SearXNG takes both methods), so the URL that httpx logs at INFO
(``HTTP Request: POST http://host/search ...``) holds no query word; the
address's credentials (``http://user:pass@host``, the password holding any
character) are taken out of it and sent as HTTP basic auth (httpx ``auth=``):
no event, error, result, repr or httpx log line shows them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from .._optional import requires

with requires("web", "the web search (crag_heuristic.web)"):
    import httpx

from .._checks import check_query
from .._exceptions import (
    ConfigError,
    InputError,
    InvalidQueryError,
    WebSearchConnectionError,
    WebSearchEnginesFailed,
    WebSearchError,
    WebSearchFormatDisabled,
    WebSearchHTTPError,
    WebSearchTimeout,
    _short,
)
from .._logging import get_logger
from .._protocols import EventLogger
from .._redact import credentials, redact_url
from .attempt import Step, from_exception, from_response
from .circuit import CircuitBreaker
from .config import SearxngConfig
from .response import WebResults, parse_answer

EVENT = "crag.searxng"


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

    :attr:`fingerprint` names the instance and every setting that changes
    what it answers (the address without credentials, categories, engines,
    language, safesearch, the snippet limits, the request headers): the
    router's web cache keys carry it, so two clients that would answer
    differently never share an entry.

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
        logger: EventLogger | None = None,
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
        login, self._address = _endpoint(base_url)
        self._auth = None if login is None else httpx.BasicAuth(*login)
        # shown in events, errors, results, repr: "***@" says credentials are sent
        self.url = self._address if login is None else self._address.replace("://", "://***@", 1)
        self.fingerprint = _fingerprint(self._address, self.config)
        self.breaker = breaker
        self._client = client
        self._owns_client = client is None
        self._async_client = async_client
        self._rng = rng if rng is not None else random.Random()
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._headers = self.config.request_headers()
        self._lock = threading.Lock()
        self._log: EventLogger = logger if logger is not None else get_logger()

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
                step = self._attempt(lambda: client.post(**self._request(text)), text)
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
                    response = await client.post(**self._request(text))
                except Exception as exc:  # noqa: BLE001 - classified, never re-raised raw
                    step = self._from_exception(exc, text)
                else:
                    step = self._from_response(response, text)
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
        if not self._owns_client:
            return
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
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
        request = {
            "url": self._address,
            "data": self.config.request_params(query),  # in the body: never in a logged URL
            "headers": self._headers,
            "timeout": self.config.timeout,
        }
        if self._auth is not None:
            request["auth"] = self._auth
        return request

    def _attempt(self, send: Callable[[], httpx.Response], query: str) -> Step:
        try:
            response = send()
        except Exception as exc:  # noqa: BLE001 - classified, never re-raised raw
            return self._from_exception(exc, query)
        return self._from_response(response, query)

    def _from_exception(self, exc: Exception, query: str) -> Step:
        return from_exception(exc, url=self.url, query=query, timeout=self.config.timeout)

    def _from_response(self, response: httpx.Response, query: str) -> Step:
        return from_response(
            response, url=self.url, query=query, max_retries=self.config.max_retries
        )

    def _finish(
        self, step: Step, query: str, max_results: int, retries: int, started: float
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

    def _delay(self, retries: int, step: Step) -> float:
        delay = self.config.retry_delay(retries, self._rng.random(), step.retry_after)
        self._log.debug(
            "crag.searxng.retry",
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


def _endpoint(base_url: Any) -> tuple[tuple[str, str] | None, str]:
    """The credentials of ``base_url`` (``None``: none) and its search endpoint
    without them."""
    if not isinstance(base_url, str):
        raise ConfigError("base_url", f"<a {type(base_url).__name__}>", "must be a string")
    shown = redact_url(base_url)
    login, url = credentials(base_url.strip())
    url = url.rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - checked here, not on the first request
    except ValueError:  # its message may quote the address: left out
        raise ConfigError("base_url", shown, "is not a URL (check its host and port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("base_url", shown, "must be an http(s) URL with a host")
    if parts.query or parts.fragment:
        raise ConfigError("base_url", shown, "must not hold a query or fragment")
    if not url.isascii() or any(c.isspace() or ord(c) < 32 for c in url):
        raise ConfigError("base_url", shown, "must be ASCII without spaces (IDNA-encode the host)")
    return login, url if parts.path.endswith("/search") else url + "/search"


def _fingerprint(address: str, config: SearxngConfig) -> str:
    """``searxng:`` + SHA-256 of what changes the answers: the endpoint (without
    credentials) and the settings sent or applied (see :class:`SearxngClient`)."""
    payload = {
        "url": address,
        "categories": list(config.categories),
        "engines": list(config.engines),
        "language": config.language,
        "safesearch": config.safesearch,
        "max_content_chars": config.max_content_chars,
        "max_title_chars": config.max_title_chars,
        "headers": sorted(
            (name.lower(), value) for name, value in config.request_headers().items()
        ),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "searxng:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def _check_call(query: Any, max_results: Any) -> str:
    checked = check_query(query)
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise InputError(f"max_results must be an integer >= 1, got {_short(max_results)}")
    try:
        checked.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate: no request can carry it
        raise InvalidQueryError(
            f"<a query of {len(checked)} characters>", "holds a character UTF-8 cannot encode"
        ) from None
    return checked.strip()
