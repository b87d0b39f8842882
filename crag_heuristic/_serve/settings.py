"""The gate service's limits and keys: frozen, keyword-only, validated."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from .._checks import MAX_K
from .._exceptions import ConfigError

_VISIBLE_ASCII = re.compile(r"[!-~]+")

#: RouterConfig fields a request may set for itself (``options`` of /v1/retrieve and
#: /v1/stream): what changes an answer, none of the service's bounds (timeouts, TTLs).
REQUEST_OPTIONS = (
    "drop_irrelevant",
    "expand_parents",
    "fetch_k",
    "gate_k",
    "max_retries",
    "refine",
    "web_max_results",
    "web_on_partial",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeSettings:
    """What the gate service accepts, and from whom.

    Attributes:
        api_keys: the accepted API keys (none: no key asked for, and only
            loopback clients answered): 16 or more visible ASCII characters
            each (``!`` to ``~``: what an HTTP header carries as it is; a key
            with a space or a non-ASCII character could never match, so it is
            refused here). Compared in constant time (``hmac.compare_digest``);
            never shown in a repr, a log or an error.
        api_key_header: the request header that carries the key.
        max_body_bytes: the largest request body (413 past it).
        max_k: the largest ``k`` a request may ask for.
        max_query_chars: the longest query, in characters.
        max_chunks: the most chunks /v1/evaluate grades in one request.
        max_concurrency: requests worked on at once; the others wait.
        max_queue: requests that may wait for a slot; past it, 503 at once.
        request_timeout: seconds from a request's arrival (its headers read)
            to its answer, reading its body and waiting for a slot included;
            past it, 504 and the work is abandoned (a stream ends with an
            ``error`` event); a body not read whole by then closes the
            connection.
        header_timeout: seconds a connection has to send a request's headers,
            from its first byte (or from connecting, or from the end of the
            previous answer for an idle keep-alive connection that starts
            another): past it the connection is closed. A deadline, not an
            idle timer: a client sending a byte a second does not extend it.
            Enforced by the server (:func:`run_server`, :func:`serving`),
            not by the app mounted elsewhere.
        max_connections: open connections at most; at the limit a new one
            closes the connection that has waited longest for its headers (or
            its body), never one whose request is at work; when every one is at
            work, the new one gets a 503 and is closed. The server lowers it
            to what the process's file descriptor limit (``RLIMIT_NOFILE``)
            leaves room for (see :mod:`crag_heuristic._serve.connections`).
    """

    api_keys: tuple[str, ...] = field(default=(), repr=False)
    api_key_header: str = "X-API-Key"
    max_body_bytes: int = 1 << 20
    max_k: int = 100
    max_query_chars: int = 4096
    max_chunks: int = 200
    max_concurrency: int = 16
    max_queue: int = 256
    request_timeout: float = 30.0
    header_timeout: float = 10.0
    max_connections: int = 1024

    def __post_init__(self) -> None:
        keys: Any = self.api_keys
        if isinstance(keys, str) or not isinstance(keys, tuple | list):
            raise ConfigError("api_keys", "<hidden>", "must be a list of keys")
        if any(not isinstance(key, str) or len(key.strip()) < 16 for key in keys):
            raise ConfigError("api_keys", "<hidden>", "each key must be a string of 16+ characters")
        for position, key in enumerate(keys, 1):
            if not _VISIBLE_ASCII.fullmatch(key.strip()):
                raise ConfigError(
                    "api_keys",
                    "<hidden>",
                    f"key {position} holds a character that is not visible ASCII ('!' to '~'): "
                    "an HTTP header carries such a key only as bytes that never match it "
                    "(spaces, accents, non-Latin letters); make one with secrets.token_hex(32)",
                )
        object.__setattr__(self, "api_keys", tuple(key.strip() for key in keys))
        header = self.api_key_header
        if not isinstance(header, str) or not header or not header.isascii() or " " in header:
            raise ConfigError("api_key_header", header, "must be an HTTP header name")
        for name, low, high in (
            ("max_body_bytes", 1024, 1 << 30),
            ("max_k", 1, MAX_K),
            ("max_query_chars", 1, 1 << 20),
            ("max_chunks", 1, MAX_K),
            ("max_concurrency", 1, 4096),
            ("max_queue", 0, 1 << 20),
            ("max_connections", 1, 1 << 20),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(name, value, f"must be an integer in [{low}, {high}]")
        for name in ("request_timeout", "header_timeout"):
            timeout = getattr(self, name)
            if (
                isinstance(timeout, bool)
                or not isinstance(timeout, int | float)
                or not math.isfinite(timeout)
                or timeout <= 0
            ):
                raise ConfigError(name, timeout, "must be a positive number of seconds")
