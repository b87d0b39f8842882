"""Credentials out of everything the library logs or returns.

A SearXNG or Redis address may hold a password (``http://user:pass@host``,
``redis://:pass@host``, ``redis://host?password=pass``). :func:`redact` is the
one function that hides it: every URL, repr, event field, error message and
result field that shows an address goes through it. The clients keep the
address as given for the connection itself.
"""

from __future__ import annotations

import re

# scheme://userinfo@ -- the user-info runs to the last "@" before the host's end
# (a password may hold an unescaped "@"); "/", "?", "#" and white space end it.
_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#]*@")
# ?password=... / &token=... in a query string
_SECRET_PARAM = re.compile(
    r"([?&](?:password|passwd|pwd|pass|secret|token|access_token|api_?key|apikey|auth)=)[^&#\s]*",
    re.IGNORECASE,
)
MASK = "***"


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it masked.

    >>> redact("http://user:pw@host:8080/search?q=x&token=t")
    'http://***@host:8080/search?q=x&token=***'
    """
    if "@" not in text and "=" not in text:  # the common case, cheaply
        return text
    text = _USERINFO.sub(rf"\g<1>{MASK}@", text)
    return _SECRET_PARAM.sub(rf"\g<1>{MASK}", text)


def describe(error: BaseException) -> str:
    """``"ErrorType: message"``, the form errors take on a result (credentials in
    any URL masked: the message may come from a user's part)."""
    return redact(f"{type(error).__name__}: {error}")
