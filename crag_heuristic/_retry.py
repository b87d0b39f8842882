"""Retry delays of the HTTP clients (the SearXNG client, the LLM grader): one formula.

A retry (after a 429, a 5xx, a dropped connection) waits longer each time,
with jitter so that clients that failed together do not come back together::

    base(n)  = min(backoff_max, backoff * 2**n)        n = 0, 1, ... (the retry)
    delay(n) = base(n) * (1 - jitter * u)              u ~ Uniform[0, 1): the random draw

so ``delay(n)`` lies in ``[base(n) * (1 - jitter), base(n)]``. A server's
``Retry-After`` (or OpenAI's ``retry-after-ms``) raises the delay to at least
its value, still capped at ``backoff_max``: a server asking for a minute does
not hold a request for a minute (the caller's deadline decides, and the next
answer may be the same 429).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime


def backoff_delay(
    retry: int,
    unit: float,
    *,
    backoff: float,
    backoff_max: float,
    jitter: float,
    retry_after: float | None = None,
) -> float:
    """Seconds to wait before retry number ``retry`` (0-based), ``unit`` the random
    draw in [0, 1) (see the module doc).

    >>> backoff_delay(2, 0.5, backoff=0.5, backoff_max=8.0, jitter=0.5)
    1.5
    >>> backoff_delay(0, 0.0, backoff=0.5, backoff_max=8.0, jitter=0.5, retry_after=60.0)
    8.0
    """
    base = min(backoff_max, backoff * 2.0**retry)
    delay = base * (1.0 - jitter * unit)
    if retry_after is not None:
        delay = min(backoff_max, max(delay, retry_after))
    return delay


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for, in seconds: ``retry-after-ms`` (OpenAI's,
    milliseconds), else ``Retry-After`` (seconds or an HTTP date); ``None`` when
    neither is there or readable. Never negative. ``headers`` is looked up by
    the exact names above and their lower-case forms (``httpx.Headers`` is
    case-insensitive anyway).

    >>> retry_after_seconds({"Retry-After": "2"})
    2.0
    >>> retry_after_seconds({"retry-after-ms": "250", "Retry-After": "9"})
    0.25
    """
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        seconds = _number(millis)
        if seconds is not None:
            return seconds / 1000.0
    value = _header(headers, "Retry-After")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is None:
        try:
            seconds = max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return seconds


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.lower())
    return value.strip() or None if isinstance(value, str) else None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return max(0.0, value) if math.isfinite(value) else None
