"""What one HTTP attempt at a SearXNG instance came to: an answer or a typed error.

:func:`from_response` and :func:`from_exception` turn whatever ``httpx`` hands
back (a response of any status, or an exception) into a :class:`Step`: the
decoded JSON payload, or a :class:`~crag_heuristic.WebSearchError` and whether
another attempt may help. The client's retry loop (sync and async alike) only
reads steps; no ``httpx`` or ``json`` exception leaves this module, except
those that are not I/O at all (a bug), which propagate unchanged.

=====================================  ===================================  ==========
what happened                          error                                retryable
=====================================  ===================================  ==========
2xx, JSON                              (the payload)                        -
2xx, not JSON (an HTML page ...)       ``WebSearchResponseError``           no
3xx (not followed)                     ``WebSearchHTTPError``               no
403                                    ``WebSearchFormatDisabled``          no
429                                    ``WebSearchRateLimited``             yes
other 4xx                              ``WebSearchHTTPError``               no
5xx                                    ``WebSearchHTTPError``               yes
timeout (connect, read, write, pool)   ``WebSearchTimeout``                 no
refused, DNS, proxy, bad scheme        ``WebSearchConnectionError``         no
reset / dropped mid-answer             ``WebSearchConnectionError``         yes
bad gzip, redirect loop                ``WebSearchResponseError``           no
=====================================  ===================================  ==========
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .._optional import requires

with requires("web", "the web search (crag_heuristic.web)"):
    import httpx

from .. import _exceptions as errors
from .._retry import retry_after_seconds

FORMAT_HOWTO = (
    "enable JSON in the instance's settings.yml with `search: formats: [html, json]` and restart it"
)
_MESSAGE_CHARS = 200


@dataclass(frozen=True, slots=True)
class Step:
    """The outcome of one attempt.

    Attributes:
        payload: the decoded JSON (when ``error`` is ``None``).
        status_code: the HTTP status, 0 when no response came.
        error: the typed error, or ``None``.
        retryable: whether another attempt may succeed.
        retry_after: the server's ``Retry-After``, in seconds, if it sent one.
    """

    payload: Any = None
    status_code: int = 0
    error: errors.WebSearchError | None = None
    retryable: bool = False
    retry_after: float | None = None


def _retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (a number or an HTTP date), if any
    (:func:`crag_heuristic._retry.retry_after_seconds`)."""
    return retry_after_seconds(response.headers)


def _server_text(response: httpx.Response) -> str | None:
    """The instance's ``{"error": ...}`` text, else the start of the body (``None``
    for an empty one): kept on the error as ``detail``, never in its message (the
    server may echo the query)."""
    try:
        data = json.loads(response.content)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])[:_MESSAGE_CHARS]
    text = response.content[:_MESSAGE_CHARS].decode("utf-8", "replace").strip()
    return " ".join(text.split()) or None


def _body_kind(response: httpx.Response) -> str:
    """What the body is, in words that quote none of it."""
    body = response.content
    if not body.strip():
        return "an empty body"
    if body.lstrip()[:1] == b"<" or "html" in response.headers.get("Content-Type", ""):
        return "an HTML page"
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return f"a body of {len(body)} bytes that is not JSON"
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return "an error message (in the error's detail)"
    return f"JSON of {len(body)} bytes"


def _host(location: str) -> str:
    """The host of a redirect's target (``"the same host"`` for a relative one): its
    path and query may hold the query's words."""
    try:
        host = urlsplit(location).hostname
    except ValueError:
        host = None
    return host or "the same host"


def from_response(response: httpx.Response, *, url: str, query: str, max_retries: int) -> Step:
    """Classify a response of any status (see the module docstring)."""
    status = response.status_code
    if 200 <= status < 300:
        return _decode(response, url=url, query=query)
    where = {"query": query, "url": url}
    if status == 403:
        error: errors.WebSearchError = errors.WebSearchFormatDisabled(
            f"{url} answered 403 to format=json: the instance does not serve JSON; " + FORMAT_HOWTO,
            status_code=status,
            **where,
        )
        return Step(status_code=status, error=error)
    if status == 429:
        error = errors.WebSearchRateLimited(
            f"{url} answered 429 (rate limited) after {max_retries} retries; its limiter "
            "may be blocking this client: allow it in limiter.toml or turn server.limiter off",
            status_code=status,
            **where,
        )
        retry_after = _retry_after(response)
        return Step(status_code=status, error=error, retryable=True, retry_after=retry_after)
    detail = _server_text(response)
    if 300 <= status < 400:
        target = response.headers.get("Location", "")
        detail = target or None
        text = (
            f"{url} redirected ({status}) to {_host(target)}; redirects are not followed: "
            "use the final address as base_url (a redirect to '/' is the bot detection)"
        )
    elif status == 404:
        text = f"{url} answered 404: is base_url the instance's root?"
    else:
        text = f"{url} answered HTTP {status} with {_body_kind(response)}"
    error = errors.WebSearchHTTPError(text, status_code=status, detail=detail, **where)
    return Step(status_code=status, error=error, retryable=status >= 500)


def _decode(response: httpx.Response, *, url: str, query: str) -> Step:
    status = response.status_code
    body = response.content
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, deep nesting
        error = errors.WebSearchResponseError(
            f"{url} answered {status} with {_body_kind(response)} instead of JSON: check "
            "that base_url is a SearXNG instance that honours format=json",
            query=query,
            url=url,
            detail=_server_text(response),
        )
        return Step(status_code=status, error=error)
    return Step(payload=payload, status_code=status)


def from_exception(exc: Exception, *, url: str, query: str, timeout: float) -> Step:
    """Classify an exception raised while sending; the typed error chains it.

    Raises:
        Exception: ``exc`` itself when it is not an I/O error (a bug).
    """
    step = _classify(exc, url=url, query=query, timeout=timeout)
    if step.error is not None:
        step.error.__cause__ = exc
    return step


def _classify(exc: Exception, *, url: str, query: str, timeout: float) -> Step:
    where = {"query": query, "url": url}
    if isinstance(exc, httpx.TimeoutException):
        message = (
            f"{url} did not answer within {timeout:g} s ({type(exc).__name__}); "
            "the client's timeout must exceed the instance's engine timeout"
        )
        return Step(error=errors.WebSearchTimeout(message, **where))
    if isinstance(exc, httpx.ConnectError | httpx.ProxyError | httpx.UnsupportedProtocol):
        message = f"cannot connect to {url}: {exc or type(exc).__name__}"
        return Step(error=errors.WebSearchConnectionError(message, **where))
    if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
        message = f"connection to {url} dropped: {exc or type(exc).__name__}"
        return Step(error=errors.WebSearchConnectionError(message, **where), retryable=True)
    if isinstance(exc, httpx.DecodingError | httpx.TooManyRedirects):
        message = f"{url} sent an unreadable answer: {exc}"
        return Step(error=errors.WebSearchResponseError(message, **where))
    if isinstance(exc, httpx.HTTPError | httpx.InvalidURL | httpx.StreamError | OSError):
        message = f"request to {url} failed: {type(exc).__name__}: {exc}"
        return Step(error=errors.WebSearchConnectionError(message, **where))
    raise exc
