"""Values signed with a secret: what this application did not write is refused.

Checking a cached value's shape (:mod:`crag_heuristic._router.cached`) refuses
junk, but not a well-formed lie: anyone who can write to a shared Redis can
store an evaluation that says RELEVANT 0.99 where the gate said IRRELEVANT.
With a secret, every value is signed with HMAC-SHA256 (RFC 2104) over its key,
its expiry and its text::

    exp    = the time it expires, whole seconds since the epoch (UTC; rounded up),
             or null (never)
    mac    = HMAC-SHA256(secret, b"crag-heuristic signed 2\\x00" + utf8(key) + b"\\x00"
                                 + ascii(exp) + b"\\x00" + utf8(text))
    stored = '{"mac":"<mac, 64 hex digits>","exp":' + exp + ',"v":' + text + '}'

so the stored text is still JSON. Reading checks the layout, compares the MAC
with :func:`hmac.compare_digest` (constant time), then the expiry against the
reader's clock. A value without the layout (unsigned: written without the
secret, or by someone else), with another MAC (forged, edited, copied from
another key, or its expiry moved), or past its expiry (a value captured and
written back after its time to live: a replay) is refused.

The expiry is ``ttl`` seconds from the writer's clock; a reader whose clock is
ahead refuses it that much sooner (a recomputation, never a stale value).
Signed envelopes of the first layout, ``{"mac":...,"v":...}`` (crag-heuristic
before the expiry), carry no expiry: they are refused as such ("an envelope
without an expiry"), recomputed and overwritten; the cache keys carry the
library's version, so an upgrade reads none of them anyway.

Three users: the caches (:meth:`Signer.open` raises
:class:`~crag_heuristic.CacheError` with ``kind="signature"``: the router counts
it as a refused value, flags it on the result, recomputes it and overwrites the
entry), the grade logs (each record an envelope that never expires) and the
index directory's manifest (the same). Only the MAC and the expiry are checked
here: what the signed text holds is still checked by its reader.

A store others can write to and that holds unsigned values says so when it is
made (:func:`check_unsigned`: a ``crag.store.unsigned`` event and an
:class:`~crag_heuristic.cache.UnsignedStoreWarning`), or refuses to be made without a
secret (``unsigned="refuse"``).

The secret never appears in a repr, an event or an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
import warnings
from collections.abc import Callable
from typing import Any, Literal

from .._exceptions import ConfigError, UnsignedStoreWarning
from .._logging import get_logger
from .codec import JsonText, refusal

MIN_SECRET_BYTES = 16
_DOMAIN = b"crag-heuristic signed 2\x00"
_PREFIX = '{"mac":"'
_MAC_CHARS = 64
_EXP = '","exp":'
_EXP_START = len(_PREFIX) + _MAC_CHARS + len(_EXP)
_MIDDLE = ',"v":'
_OLD_MIDDLE = '","v":'  # the first layout: no expiry
_EXP_CHARS = 16  # digits of an expiry at most (seconds: until the year 300 million)
_HEX = frozenset("0123456789abcdef")
_DIGITS = frozenset("0123456789")

UnsignedPolicy = Literal["warn", "refuse", "allow"]
UNSIGNED_POLICIES: tuple[UnsignedPolicy, ...] = ("warn", "refuse", "allow")
"""What a shared store does when it is made without a secret: ``"warn"`` (the default:
a ``crag.store.unsigned`` event and an :class:`UnsignedStoreWarning`), ``"refuse"``
(a :class:`ConfigError`) or ``"allow"`` (nothing: a layer above signs, or nobody else
can write to the store)."""


def _secret_bytes(name: str, secret: Any) -> bytes:
    """``secret`` as bytes; a :class:`ConfigError` that never shows it otherwise."""
    if isinstance(secret, str):
        data = secret.encode("utf-8", "surrogatepass")
    elif isinstance(secret, bytes | bytearray):
        data = bytes(secret)
    else:
        raise ConfigError(name, f"<a {type(secret).__name__}>", "must be a str or bytes secret")
    if len(data) < MIN_SECRET_BYTES:
        raise ConfigError(
            name,
            f"<a secret of {len(data)} byte(s)>",
            f"must be at least {MIN_SECRET_BYTES} bytes (e.g. secrets.token_hex(32))",
        )
    return data


class Signer:
    """Signs and checks values with one secret (see the module docstring).

    Args:
        secret: at least 16 bytes (a ``str`` is taken as its UTF-8 bytes);
            ``secrets.token_hex(32)`` makes a good one.
        name: the argument's name in a :class:`ConfigError`.
        clock: the wall clock, in seconds since the epoch (``time.time``): what
            an expiry is written and checked against (tests pass their own).

    Raises:
        ConfigError: a secret that is not ``str`` / ``bytes`` or is too short
            (the message never shows it), or a clock that is not callable.
    """

    __slots__ = ("_clock", "_secret")

    def __init__(
        self,
        secret: str | bytes,
        *,
        name: str = "secret",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._secret = _secret_bytes(name, secret)
        if not callable(clock):
            raise ConfigError("clock", clock, "must be a callable returning seconds")
        self._clock = clock

    def __repr__(self) -> str:
        return "Signer(secret=***)"

    def __reduce__(self) -> Any:
        raise TypeError("a Signer holds a secret: it is not pickled")

    def _mac(self, key: str, expires: str, text: str) -> str:
        message = b"%b%b\x00%b\x00%b" % (
            _DOMAIN,
            key.encode("utf-8", "surrogatepass"),
            expires.encode("ascii"),
            text.encode("utf-8", "surrogatepass"),
        )
        return hmac.digest(self._secret, message, hashlib.sha256).hex()

    def sign(self, key: str, text: str, ttl: float | None = None) -> str:
        """``text`` (JSON text) signed for ``key``, as stored: it expires ``ttl``
        seconds from now (``None``: never). JSON text made here when ``text`` was
        (:class:`~crag_heuristic._cache.codec.JsonText`), so it is not parsed again
        on its way into the cache."""
        expires = "null" if ttl is None else str(math.ceil(self._clock() + ttl))
        signed = f"{_PREFIX}{self._mac(key, expires, text)}{_EXP}{expires}{_MIDDLE}{text}}}"
        return JsonText(signed) if type(text) is JsonText else signed

    def unseal(self, key: str, stored: Any) -> str:
        """The text signed in ``stored`` for ``key``, checked (see :meth:`open`).

        Raises:
            ValueError: why ``stored`` is refused (no secret in the message).
        """
        if not isinstance(stored, str) or not stored.startswith(_PREFIX):
            raise ValueError("it is not signed (written without the secret?)")
        if stored[len(_PREFIX) + _MAC_CHARS :].startswith(_OLD_MIDDLE):
            raise ValueError("an envelope without an expiry (an earlier layout): signed again")
        middle = stored.find(_MIDDLE, _EXP_START, _EXP_START + _EXP_CHARS + len(_MIDDLE))
        expires = stored[_EXP_START:middle] if middle > 0 else ""
        if (
            stored[len(_PREFIX) + _MAC_CHARS : _EXP_START] != _EXP
            or not stored.endswith("}")
            or not (expires == "null" or (expires and _DIGITS.issuperset(expires)))
        ):
            raise ValueError("it is not signed (written without the secret?)")
        mac = stored[len(_PREFIX) : len(_PREFIX) + _MAC_CHARS]
        text = stored[middle + len(_MIDDLE) : -1]
        if not _HEX.issuperset(mac) or not hmac.compare_digest(mac, self._mac(key, expires, text)):
            raise ValueError("its signature does not match (forged, edited or moved)")
        if expires != "null" and self._clock() > int(expires):
            raise ValueError("it expired (written back after its time to live?)")
        return text

    def open(self, key: str, stored: str, *, backend: str = "cache") -> str:
        """The text signed in ``stored`` for ``key``.

        Raises:
            CacheError: ``kind="signature"`` (``operation="get"``) when ``stored``
                is not signed, not with this secret for this key, or expired.
        """
        try:
            return self.unseal(key, stored)
        except ValueError as exc:
            raise refusal(
                f"a cached value was refused: {exc}", backend=backend, kind="signature"
            ) from None

    def remaining(self, stored: str) -> float | None:
        """Seconds until a value this signer signed (or opened) expires, by its clock
        (negative: expired; ``None``: never), read from its layout without checking it."""
        middle = stored.find(_MIDDLE, _EXP_START, _EXP_START + _EXP_CHARS + len(_MIDDLE))
        expires = stored[_EXP_START:middle] if middle > 0 else "null"
        if expires == "null" or not expires or not _DIGITS.issuperset(expires):
            return None
        return int(expires) - self._clock()


def signer_of(secret: str | bytes | Signer | None, name: str) -> Signer | None:
    """A :class:`Signer` for ``secret`` (``None`` for none)."""
    if secret is None or isinstance(secret, Signer):
        return secret
    return Signer(secret, name=name)


def check_unsigned(store: str, signer: Signer | None, unsigned: Any, *, advice: str) -> None:
    """Apply a shared store's ``unsigned`` setting (:data:`UNSIGNED_POLICIES`) when it is
    made: nothing with a ``signer``; else a ``crag.store.unsigned`` event and an
    :class:`UnsignedStoreWarning` (``"warn"``), a :class:`ConfigError` (``"refuse"``)
    or nothing (``"allow"``).

    Args:
        store: the store's name in the event and the messages (``"RedisCache"``).
        signer: its signer, if it has a secret.
        unsigned: its setting.
        advice: how to give it a secret (appended to the messages).

    Raises:
        ConfigError: an unknown setting, or no secret under ``"refuse"``.
    """
    if unsigned not in UNSIGNED_POLICIES:
        raise ConfigError("unsigned", unsigned, f"must be one of {list(UNSIGNED_POLICIES)}")
    if signer is not None or unsigned == "allow":
        return
    if unsigned == "refuse":
        raise ConfigError("secret", None, f"{store} needs a secret (unsigned='refuse'): {advice}")
    get_logger().warning("crag.store.unsigned", store=store)
    warnings.warn(
        UnsignedStoreWarning(
            f"{store} has no secret: anyone who can write to the store can plant values "
            f"it will hand out as its own; {advice} (unsigned='allow' when nobody else "
            "can write to it, or a layer above signs)"
        ),
        stacklevel=3,
    )
