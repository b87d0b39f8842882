"""Cache values are JSON text, and only JSON text.

Every backend stores strings that parse as JSON, encoded as UTF-8. Nothing is
ever pickled: a shared Redis that anyone on the network can write to must not
become a way to run code in the service, and JSON cannot carry code.

:func:`dumps` and :func:`loads` turn Python values into that text and back,
raising :class:`~crag_heuristic.CacheError` with ``kind="payload"`` instead of
the ``TypeError`` / ``ValueError`` of :mod:`json`. :func:`check_value` is what a
backend runs on ``set``, and :func:`decode_value` what it runs on a stored
payload before handing it out: a payload that is not UTF-8 JSON text is
refused there, and the backends turn that refusal into a miss.
"""

from __future__ import annotations

import json
from typing import Any

from .._checks import is_finite_number
from .._exceptions import CacheError, InputError, _short


class JsonText(str):
    """Text :func:`dumps` made: ASCII JSON by construction, so :func:`check_value`
    does not parse it again (parsing what the router had just written cost as much
    as a third of an evaluation on every cache miss). Any other string is parsed."""

    __slots__ = ()


def dumps(value: Any, *, backend: str = "codec", sort_keys: bool = True) -> JsonText:
    """Compact ASCII JSON text for ``value`` (keys sorted unless ``sort_keys`` is
    false, no NaN or infinity), marked as such (:class:`JsonText`).

    Non-ASCII characters are ``\\uXXXX`` escapes, so the text always encodes
    as UTF-8, even with an unpaired surrogate in a string.

    Raises:
        CacheError: ``kind="payload"`` when ``value`` is not JSON-serialisable.
    """
    try:
        return JsonText(
            json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), allow_nan=False)
        )
    except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: nesting too deep
        raise CacheError(
            f"value is not JSON-serialisable: {exc}",
            backend=backend,
            operation="encode",
            kind="payload",
        ) from exc


def loads(text: str | bytes, *, backend: str = "codec") -> Any:
    """The value of JSON text (``bytes`` must be UTF-8).

    Raises:
        CacheError: ``kind="payload"`` when ``text`` is not UTF-8 JSON text.
    """
    try:
        if isinstance(text, bytes | bytearray):
            text = bytes(text).decode("utf-8")
        if not isinstance(text, str):
            raise TypeError(f"expected str or bytes, got {type(text).__name__}")
        return json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise CacheError(
            f"cached payload is not JSON text: {exc}",
            backend=backend,
            operation="decode",
            kind="payload",
        ) from exc


def check_key(key: Any) -> str:
    """Return ``key`` if it is a non-empty string, else raise :class:`InputError`."""
    if not isinstance(key, str) or not key:
        raise InputError(f"cache key must be a non-empty string, got {_short(key)}")
    return key


def check_ttl(ttl: Any, default: float | None) -> float | None:
    """The effective time to live: ``ttl``, or ``default`` when ``ttl`` is ``None``.

    Raises:
        InputError: ``ttl`` is not ``None`` nor a finite number of seconds > 0.
    """
    if ttl is None:
        return default
    if not is_finite_number(ttl):
        raise InputError(f"cache ttl must be None or a finite number of seconds, got {_short(ttl)}")
    if ttl <= 0:
        raise InputError(f"cache ttl must be > 0 seconds, got {_short(ttl)}")
    return float(ttl)


def check_value(value: Any, *, backend: str) -> bytes:
    """The UTF-8 bytes of a value to store, after checking it is JSON text.

    Raises:
        InputError: ``value`` is not a string (a caller bug).
        CacheError: ``kind="payload"`` when the string is not JSON or not
            encodable as UTF-8 (an unpaired surrogate).
    """
    if not isinstance(value, str):
        raise InputError(
            f"cache values are JSON text (str), got {type(value).__name__}; "
            "serialise with crag_heuristic._cache.codec.dumps"
        )
    if type(value) is JsonText:  # made by dumps: ASCII JSON already
        return value.encode("ascii")
    try:
        data = value.encode("utf-8")
        json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise CacheError(
            f"refusing to store a value that is not UTF-8 JSON text: {exc}",
            backend=backend,
            operation="set",
            kind="payload",
        ) from exc
    return data


def decode_text(raw: Any, *, backend: str) -> str:
    """The text of a stored payload (``bytes`` as UTF-8, or ``str``), not parsed.

    Raises:
        CacheError: ``kind="payload"`` when it is neither, or not UTF-8.
    """
    if isinstance(raw, str):
        return raw
    try:
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise TypeError(f"unexpected payload type {type(raw).__name__}")
        return bytes(raw).decode("utf-8")
    except (TypeError, ValueError) as exc:
        raise _not_json(exc, backend) from exc


def decode_value(raw: Any, *, backend: str) -> str:
    """The JSON text of a stored payload (``bytes`` or ``str``).

    Raises:
        CacheError: ``kind="payload"`` when it is not UTF-8 JSON text.
    """
    text = decode_text(raw, backend=backend)
    try:
        json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _not_json(exc, backend) from exc
    return text


def _not_json(error: Exception, backend: str) -> CacheError:
    return refusal(f"cached payload is not JSON text: {error}", backend=backend, kind="payload")


def refusal(message: str, *, backend: str, kind: str) -> CacheError:
    """The :class:`CacheError` of a stored value refused on the way out (a read's:
    the router counts it as a miss, recomputes the value and overwrites it)."""
    return CacheError(message, backend=backend, operation="get", kind=kind)
