"""Values signed with a secret: what this application did not write is refused.

Checking a cached value's shape (:mod:`crag_heuristic._router.cached`) refuses
junk, but not a well-formed lie: anyone who can write to a shared Redis can
store an evaluation that says RELEVANT 0.99 where the gate said IRRELEVANT.
With a secret, every value is signed with HMAC-SHA256 (RFC 2104) over its key
and its text::

    mac    = HMAC-SHA256(secret, utf8(key) + b"\\x00" + utf8(text))
    stored = '{"mac":"<mac, 64 hex digits>","v":' + text + '}'

so the stored text is still JSON. Reading checks the layout and compares the
MAC with :func:`hmac.compare_digest` (constant time); a value without the
layout (unsigned: written without the secret, or by someone else) or with
another MAC (forged, edited, or copied from another key) raises
:class:`~crag_heuristic.CacheError` with ``kind="signature"``: the router
counts it as a refused value, flags it on the result, recomputes it and
overwrites the entry. Only the MAC is checked here: what the signed text holds
is still checked by its reader.

The secret never appears in a repr, an event or an error message.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from .._exceptions import CacheError, ConfigError
from .codec import JsonText, refusal

MIN_SECRET_BYTES = 16
_PREFIX = '{"mac":"'
_MIDDLE = '","v":'
_MAC_CHARS = 64
_TEXT_START = len(_PREFIX) + _MAC_CHARS + len(_MIDDLE)
_HEX = frozenset("0123456789abcdef")


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
    """Signs and checks cache values with one secret (see the module docstring).

    Args:
        secret: at least 16 bytes (a ``str`` is taken as its UTF-8 bytes);
            ``secrets.token_hex(32)`` makes a good one.
        name: the argument's name in a :class:`ConfigError`.

    Raises:
        ConfigError: a secret that is not ``str`` / ``bytes`` or is too short
            (the message never shows it).
    """

    __slots__ = ("_secret",)

    def __init__(self, secret: str | bytes, *, name: str = "secret") -> None:
        self._secret = _secret_bytes(name, secret)

    def __repr__(self) -> str:
        return "Signer(secret=***)"

    def __reduce__(self) -> Any:
        raise TypeError("a Signer holds a secret: it is not pickled")

    def _mac(self, key: str, text: str) -> str:
        message = b"%b\x00%b" % (
            key.encode("utf-8", "surrogatepass"),
            text.encode("utf-8", "surrogatepass"),
        )
        return hmac.digest(self._secret, message, hashlib.sha256).hex()

    def sign(self, key: str, text: str) -> str:
        """``text`` (JSON text) signed for ``key``, as stored: JSON text made here when
        ``text`` was (:class:`~crag_heuristic._cache.codec.JsonText`), so it is not
        parsed again on its way into the cache."""
        signed = f"{_PREFIX}{self._mac(key, text)}{_MIDDLE}{text}}}"
        return JsonText(signed) if type(text) is JsonText else signed

    def open(self, key: str, stored: str, *, backend: str = "cache") -> str:
        """The text signed in ``stored`` for ``key``.

        Raises:
            CacheError: ``kind="signature"`` (``operation="get"``) when ``stored``
                is not signed, or not with this secret for this key.
        """
        if (
            not isinstance(stored, str)
            or not stored.startswith(_PREFIX)
            or not stored.endswith("}")
            or stored[_TEXT_START - len(_MIDDLE) : _TEXT_START] != _MIDDLE
        ):
            raise _refused(backend, "it is not signed (written without the secret?)")
        mac = stored[len(_PREFIX) : len(_PREFIX) + _MAC_CHARS]
        text = stored[_TEXT_START:-1]
        if not _HEX.issuperset(mac) or not hmac.compare_digest(mac, self._mac(key, text)):
            raise _refused(backend, "its signature does not match (forged, edited or moved)")
        return text


def _refused(backend: str, reason: str) -> CacheError:
    return refusal(f"a cached value was refused: {reason}", backend=backend, kind="signature")


def signer_of(secret: str | bytes | Signer | None, name: str) -> Signer | None:
    """A :class:`Signer` for ``secret`` (``None`` for none)."""
    if secret is None or isinstance(secret, Signer):
        return secret
    return Signer(secret, name=name)
