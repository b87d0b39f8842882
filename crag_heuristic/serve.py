"""The gate as an HTTP service (the ``serve`` extra: ``pip install 'crag-heuristic[serve]'``).

``crag-heuristic serve --index DIR`` runs it; :func:`create_app` makes the
Starlette app of any :class:`~crag_heuristic.CRAG` (mount it in your own
server, or run it with :func:`run_server`). ``POST /v2/retrieve``, ``/v2/evaluate``
and ``/v2/stream`` (stage events as Server-Sent Events) answer with each chunk's
text once (:func:`result_answer`, :func:`evaluation_answer`; ``"view": "grades"``
for ids and grades only); ``/v1/...`` with everything the library's objects
say (``to_dict()``); ``GET /healthz`` and ``/metrics``; API keys compared in
constant time (without one: loopback only); limits on bodies, ``k``, queries
and concurrency; a timeout per request; every error as JSON naming its type
(:class:`ServiceError` and the library's own). See ``docs/production.md``.
"""

from ._exceptions import (
    OverloadedError,
    RequestTimeoutError,
    RequestTooLargeError,
    ServiceError,
    UnauthorizedError,
)
from ._serve.answers import VIEWS, evaluation_answer, result_answer
from ._serve.app import create_app
from ._serve.server import run_server, serving
from ._serve.settings import REQUEST_OPTIONS, ServeSettings

__all__ = [
    "OverloadedError",
    "REQUEST_OPTIONS",
    "RequestTimeoutError",
    "RequestTooLargeError",
    "ServeSettings",
    "ServiceError",
    "UnauthorizedError",
    "VIEWS",
    "create_app",
    "evaluation_answer",
    "result_answer",
    "run_server",
    "serving",
]
