"""URL normalisation for web results: one key per page, whatever the spelling.

Search engines return the same page under several spellings; SearXNG merges
only those that differ in ``http``/``https``. :func:`normalize_url` maps the
usual variants to one key so the client can drop duplicates (keeping the first
and its original URL as the chunk's ``source``), and :func:`web_chunk_id`
derives a stable chunk id from that key.

Rules, in order (each is a variant that points at the same page in practice):

1. surrounding white space is dropped; scheme and host are lower-cased;
2. ``http`` and ``https`` are the same (the key uses ``https``);
3. a leading ``www.`` and a trailing dot of the host are dropped, and so is the
   scheme's default port (``:80``, ``:443``);
4. the fragment (``#...``) is dropped: it never changes the page fetched;
5. tracking parameters are dropped: ``utm_*`` and the click ids in
   :data:`TRACKING_PARAMS` (``fbclid``, ``gclid`` ...); the others are sorted by
   name (stable, so repeated names keep their order);
6. an empty path becomes ``/`` and a trailing ``/`` after a path is dropped.

Percent-escapes, letter case in the path and the query values are kept: they
can name different resources. Anything that is not an absolute ``http(s)``
URL with a host is left as it is (stripped), so it still dedupes on exact text.
"""

from __future__ import annotations

import hashlib
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

TRACKING_PARAMS = frozenset(
    {
        "fbclid",
        "gclid",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "twclid",
        "yclid",
        "igshid",
        "mc_cid",
        "mc_eid",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
    }
)
"""Query parameters that only track the click (``utm_*`` is matched by prefix)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_ID_PREFIX = "web:"
_ID_HEX_CHARS = 16


def _is_tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("utm_") or lowered in TRACKING_PARAMS


def normalize_url(url: str) -> str:
    """The dedupe key of ``url`` (see the module docstring for the rules).

    >>> normalize_url("http://www.Example.org/a/?utm_source=x&b=2&a=1#top")
    'https://example.org/a?a=1&b=2'
    """
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:  # a bad port or bracketed host: keep the text as its own key
        return text
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    if scheme not in _DEFAULT_PORTS or not host:
        return text
    if host.startswith("www."):
        host = host[4:]
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    if "@" in parts.netloc:
        host = f"{parts.netloc.rsplit('@', 1)[0]}@{host}"
    path = parts.path or "/"
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = sorted((pair for pair in pairs if not _is_tracking(pair[0])), key=lambda p: p[0])
    query = urlencode(kept) if pairs else parts.query
    return urlunsplit(("https", host, path, query, ""))


def is_http_url(source: str | None) -> bool:
    """Whether a web chunk's ``source`` is an absolute http(s) URL with a host
    (``javascript:``, ``file://``, ``data:`` and relative addresses are not)."""
    if not source:
        return False
    scheme, sep, rest = source.partition("://")
    return bool(sep) and scheme.lower() in ("http", "https") and rest[:1] not in ("", "/")


def web_chunk_id(url: str) -> str:
    """A stable chunk id for a web page: ``"web:"`` + 16 hex digits of SHA-256.

    Spellings of one page (:func:`normalize_url`) share the id.
    """
    digest = hashlib.sha256(normalize_url(url).encode("utf-8")).hexdigest()
    return _ID_PREFIX + digest[:_ID_HEX_CHARS]
