"""The testing helpers' own errors, apart from the library's ``CragError`` tree::

    HelperError (RuntimeError)     a test helper could not do its job
    ├── RedisServerError           RedisServer could not run its redis-server (url)
    ├── SearxngStartError          SearxngServer did not come up (a bug or a broken venv)
    ├── SearxngUnavailable         SearXNG cannot be installed here (tests skip on it)
    ├── OpenAIServerError          OpenAIServer did not come up (a bug: tests fail on it)
    └── OpenAIServerUnavailable    Starlette or uvicorn is missing (tests skip, or fail under CI)

They are not :class:`~crag_heuristic.CragError`\\ s on purpose: ``CragError``
is what the library raises while serving queries, and an application that
catches it should never see test infrastructure failing. A test that fails
on a ``HelperError`` failed to set up, not to pass.
"""

from __future__ import annotations

__all__ = [
    "HelperError",
    "OpenAIServerError",
    "OpenAIServerUnavailable",
    "RedisServerError",
    "SearxngStartError",
    "SearxngUnavailable",
]


class HelperError(RuntimeError):
    """Base class of the errors of :mod:`crag_testkit`."""


class RedisServerError(HelperError):
    """The test helper :class:`crag_testkit.RedisServer` failed.

    Raised when ``redis-server`` cannot be found, does not start or answer in
    time, or when an action needs a local process the helper does not own.

    Attributes:
        url: the server's URL, when known.
    """

    def __init__(self, message: str, *, url: str | None = None) -> None:
        self.url = url
        super().__init__(message)


class SearxngStartError(HelperError):
    """The SearXNG server did not come up (a bug or a broken venv: tests fail on it)."""


class SearxngUnavailable(HelperError):
    """SearXNG cannot be installed here (no network, old Python): tests skip on it."""


class OpenAIServerError(HelperError):
    """The test kit's chat-completions server did not come up (a bug: tests fail on it)."""


class OpenAIServerUnavailable(HelperError):
    """Starlette or uvicorn is not installed (tests skip on it, except under CI)."""
