"""Credentials out of everything the library logs or returns.

A SearXNG or Redis address may hold a password (``http://user:pass@host``,
``redis://:pass@host``, ``redis://host?password=pass``). :func:`redact` is the
one function that hides it: every URL, repr, event field, error message and
result field that shows an address goes through it. The SearXNG client takes
the credentials out of its address (:func:`split_userinfo`) and sends them as
HTTP basic auth, so the address it requests and shows holds none.

A password may hold characters a URL reserves (``/``, ``?``, ``#``, ``@``)
unescaped, as people write them. So the user-info of an address runs from
``scheme://`` to the **last** ``@`` of the address (its run of characters up
to white space or a quote), when what comes before that ``@`` is
``user:password`` (a ``:`` before the first ``/``, ``?`` or ``#``); otherwise
(``http://host/path?email=a@b.org``) only an ``@`` before the first ``/``,
``?`` or ``#`` ends a user-info, as the URL standard has it. Masking too much
of an odd address is the safe side of the choice.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

_SCHEME = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://")
_ADDRESS_END = re.compile(r"[\s'\"<>`]")
# ?password=... / &token=... in a query string
_SECRET_PARAM = re.compile(
    r"([?&](?:password|passwd|pwd|pass|secret|token|access_token|api_?key|apikey|auth)=)[^&#\s]*",
    re.IGNORECASE,
)
MASK = "***"


def _userinfo_end(text: str, start: int, end: int) -> int:
    """The index of the ``@`` that ends the user-info of the address
    ``text[start:end]`` (``start`` just after ``scheme://``), or -1 when it has none."""
    last = text.rfind("@", start, end)
    if last < 0:
        return -1
    span = text[start:last]
    cut = min((i for i in map(span.find, "/?#") if i >= 0), default=-1)
    if cut < 0 or ":" in span[:cut]:
        return last  # user:password, whatever the password holds
    return text.rfind("@", start, start + cut)  # a plain user-info ends before / ? #


def split_userinfo(url: str) -> tuple[str | None, str]:
    """``(user-info, the address without it)`` of one address (its user-info is
    ``None`` when it has none); the whole text is the address.

    >>> split_userinfo("http://user:pa/ss@host:8080/")
    ('user:pa/ss', 'http://host:8080/')
    """
    found = _SCHEME.match(url)
    if found is None:
        return None, url
    start = found.end()
    at = _userinfo_end(url, start, len(url))
    if at < 0:
        return None, url
    return url[start:at], url[:start] + url[at + 1 :]


def redact_url(url: str) -> str:
    """One address (the whole text) with its credentials masked, whatever its
    password holds (white space too).

    >>> redact_url("redis://:p w/x@cache:6379/0?password=y")
    'redis://***@cache:6379/0?password=***'
    """
    userinfo, bare = split_userinfo(url)
    if userinfo is not None:
        scheme_end = url.index("://") + 3
        bare = f"{bare[:scheme_end]}{MASK}@{bare[scheme_end:]}"
    return _SECRET_PARAM.sub(rf"\g<1>{MASK}", bare)


def credentials(url: str) -> tuple[tuple[str, str] | None, str]:
    """``((user, password), the address without them)``, percent-escapes decoded, or
    ``(None, url)`` when the address holds none (a user alone has an empty password).

    >>> credentials("http://me:p%40ss/w@host/")
    (('me', 'p@ss/w'), 'http://host/')
    """
    userinfo, bare = split_userinfo(url)
    if userinfo is None:
        return None, url
    colon = userinfo.find(":")  # the user ends at the first ":" (a password may hold more)
    user, password = (userinfo, "") if colon < 0 else (userinfo[:colon], userinfo[colon + 1 :])
    return (unquote(user), unquote(password)), bare


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it masked.

    >>> redact("http://user:pw@host:8080/search?q=x&token=t")
    'http://***@host:8080/search?q=x&token=***'
    >>> redact("http://user:pa/ss#@host/")
    'http://***@host/'
    """
    if "@" not in text and "=" not in text:  # the common case, cheaply
        return text
    if "@" in text:
        parts = []
        done = 0
        for found in _SCHEME.finditer(text):
            start = found.end()
            if start <= done:  # inside an address already masked
                continue
            ended = _ADDRESS_END.search(text, start)
            at = _userinfo_end(text, start, len(text) if ended is None else ended.start())
            if at >= 0:
                parts += [text[done:start], MASK, "@"]
                done = at + 1
        text = "".join(parts) + text[done:]
    return _SECRET_PARAM.sub(rf"\g<1>{MASK}", text)


def describe(error: BaseException) -> str:
    """``"ErrorType: message"``, the form errors take on a result (credentials in
    any URL masked: the message may come from a user's part)."""
    return redact(f"{type(error).__name__}: {error}")
