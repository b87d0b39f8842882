"""The SearXNG client's options: a frozen, keyword-only, validated value object.

Build it once; a change is a new object (:meth:`SearxngConfig.replace`). A bad
value raises :class:`~crag_heuristic.ConfigError` naming the field and the
value. Nothing here reads the environment.

Retry delays (429, 5xx, a dropped connection) grow exponentially with jitter
(:mod:`crag_heuristic._retry`, shared with the LLM grader)::

    base(n)  = min(backoff_max, backoff * 2**n)        n = 0, 1, ... (the retry)
    delay(n) ~ Uniform[base(n) * (1 - jitter), base(n)]

so with the defaults (0.5 s, 8 s, 0.5) the first retry waits 0.25-0.5 s and the
second 0.5-1 s. A ``Retry-After`` header (seconds) raises the delay to at
least its value, still capped at ``backoff_max``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._checks import is_finite_number
from .._exceptions import ConfigError, _short
from .._retry import backoff_delay

DEFAULT_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        # SearXNG's bot detection answers 429 to a User-Agent that starts like a
        # library's ("python-httpx/..."), to an Accept without text/html and to a
        # missing Accept-Language. A browser *version* is deliberately absent: a
        # User-Agent naming Firefox >= 90 or Chrome >= 80 must also send the
        # Sec-Fetch-* headers over https or it is redirected to the home page.
        "User-Agent": "Mozilla/5.0 (compatible; crag-heuristic)",
        "Accept": "application/json, text/html;q=0.9, */*;q=0.8",
        "Accept-Language": "en-US,en;q=0.8",
    }
)
"""Browser-like headers that SearXNG's limiter lets through (``headers=`` overrides)."""

_SAFESEARCH_LEVELS = (0, 1, 2)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_PRINTABLE = re.compile(r"^[\x20-\x7e\t]*\Z")


def _number(
    name: str, value: Any, *, low: float, low_open: bool = False, high: float | None = None
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(name, value, "must be a number")
    if not is_finite_number(value):
        raise ConfigError(name, value, "must be finite (not NaN, inf or beyond the float range)")
    if value < low or (low_open and value == low):
        raise ConfigError(name, value, f"must be {'>' if low_open else '>='} {low}")
    if high is not None and value > high:
        raise ConfigError(name, value, f"must be <= {high}")


def _integer(name: str, value: Any, *, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, value, "must be an integer")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ConfigError(name, value, f"must be {bound}")


def _names(name: str, value: Any) -> tuple[str, ...]:
    """A tuple of non-empty names from a sequence or a comma-separated string."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, Sequence):
        raise ConfigError(name, value, "must be a list of names or a comma-separated string")
    names = []
    for item in value:
        if not isinstance(item, str) or not item.strip() or "," in item:
            raise ConfigError(name, value, "each name must be a non-empty string without commas")
        names.append(item.strip())
    return tuple(names)


def _headers(headers: Any) -> dict[str, str]:
    """``headers`` checked: token names, printable ASCII values (httpx encodes them as
    ASCII; a line break would split the request). Errors name the header, never
    show its value."""
    if not isinstance(headers, Mapping):
        raise ConfigError("headers", f"<a {type(headers).__name__}>", "must be a mapping")
    checked = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ConfigError("headers", _short(name), "header names must be HTTP tokens")
        if not isinstance(value, str) or not _PRINTABLE.match(value):
            raise ConfigError(
                f"headers[{name!r}]", "***", "must be printable ASCII text without line breaks"
            )
        checked[name] = value
    return checked


@dataclass(frozen=True, kw_only=True, slots=True, repr=False)
class SearxngConfig:
    """How :class:`~crag_heuristic.SearxngClient` queries a SearXNG instance.

    Attributes:
        timeout: seconds allowed for each HTTP attempt (connect, read, write).
            SearXNG waits for its slowest engine before it answers, up to the
            engine timeout (3 s by default): keep this above it.
        max_retries: extra attempts after a 429, a 5xx or a dropped connection
            (0 = no retry). Timeouts and refused connections are not retried.
        backoff: the first retry's delay ceiling, in seconds (then doubled).
        backoff_max: the ceiling of any retry delay, in seconds.
        jitter: the fraction of each delay drawn at random, in [0, 1].
        categories: SearXNG categories to search (``"general"``, ``"news"``
            ...); empty = the instance's default.
        engines: engine names to use; empty = the instance's default.
        language: a language code such as ``"en"`` or ``"de-CH"``; ``None`` =
            the instance's default.
        safesearch: 0 (off), 1 (moderate) or 2 (strict); ``None`` = default.
        max_content_chars: each result's snippet is cut to this many
            characters (ellipsis included) after cleaning.
        max_title_chars: the same for titles.
        headers: extra request headers, overriding :data:`DEFAULT_HEADERS` by
            name (case-insensitive): names are HTTP tokens, values printable
            ASCII (no line breaks). Their values may be credentials: the repr
            shows ``***`` for each, and an error about one never shows it.
    """

    timeout: float = 10.0
    max_retries: int = 2
    backoff: float = 0.5
    backoff_max: float = 8.0
    jitter: float = 0.5
    categories: Sequence[str] = ()
    engines: Sequence[str] = ()
    language: str | None = None
    safesearch: int | None = None
    max_content_chars: int = 2000
    max_title_chars: int = 300
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _number("timeout", self.timeout, low=0.0, low_open=True)
        _integer("max_retries", self.max_retries, low=0, high=10)
        _number("backoff", self.backoff, low=0.0)
        _number("backoff_max", self.backoff_max, low=0.0)
        if self.backoff_max < self.backoff:
            raise ConfigError(
                "backoff_max", self.backoff_max, f"must be >= backoff ({self.backoff})"
            )
        _number("jitter", self.jitter, low=0.0, high=1.0)
        object.__setattr__(self, "categories", _names("categories", self.categories))
        object.__setattr__(self, "engines", _names("engines", self.engines))
        if self.language is not None and (
            not isinstance(self.language, str) or not self.language.strip()
        ):
            raise ConfigError("language", self.language, "must be a non-empty string or None")
        if self.safesearch is not None and (
            type(self.safesearch) is not int  # not a bool, nor a Decimal('sNaN') that == signals
            or self.safesearch not in _SAFESEARCH_LEVELS
        ):
            raise ConfigError("safesearch", self.safesearch, "must be 0, 1, 2 or None")
        _integer("max_content_chars", self.max_content_chars, low=1)
        _integer("max_title_chars", self.max_title_chars, low=1)
        object.__setattr__(self, "headers", MappingProxyType(_headers(self.headers)))

    def __repr__(self) -> str:
        fields = []
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "headers":
                value = dict.fromkeys(value, "***")
            fields.append(f"{name}={value!r}")
        return f"SearxngConfig({', '.join(fields)})"

    def replace(self, **changes: Any) -> SearxngConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def request_headers(self) -> dict[str, str]:
        """:data:`DEFAULT_HEADERS` with :attr:`headers` laid over them."""
        merged = dict(DEFAULT_HEADERS)
        for name, value in self.headers.items():
            for existing in [key for key in merged if key.lower() == name.lower()]:
                del merged[existing]
            merged[name] = value
        return merged

    def request_params(self, query: str) -> dict[str, str]:
        """The query string of ``GET /search`` for ``query``."""
        params = {"q": query, "format": "json"}
        if self.categories:
            params["categories"] = ",".join(self.categories)
        if self.engines:
            params["engines"] = ",".join(self.engines)
        if self.language is not None:
            params["language"] = self.language.strip()
        if self.safesearch is not None:
            params["safesearch"] = str(self.safesearch)
        return params

    def retry_delay(self, retry: int, unit: float, retry_after: float | None = None) -> float:
        """The delay before retry number ``retry`` (0-based), for ``unit`` in [0, 1).

        ``unit`` is the random draw (``random.random()``); see the module
        docstring for the formula.
        """
        return backoff_delay(
            retry,
            unit,
            backoff=self.backoff,
            backoff_max=self.backoff_max,
            jitter=self.jitter,
            retry_after=retry_after,
        )
