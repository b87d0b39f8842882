"""The gate as an HTTP service (the ``serve`` extra: ``pip install 'crag-heuristic[serve]'``).

``crag-heuristic serve --index DIR`` runs it; :func:`create_app` makes the
Starlette app of any :class:`~crag_heuristic.CRAG` (mount it in your own
server, or run it with :func:`run_server`). ``POST /v1/retrieve``, ``/v1/evaluate``
and ``/v1/stream`` (stage events as Server-Sent Events), ``GET /healthz`` and
``/metrics``; API keys compared in constant time (without one: loopback
only); limits on bodies, ``k``, queries and concurrency; a timeout per
request; every error as JSON naming its type (:class:`ServiceError` and the
library's own). See ``docs/production.md``.
"""

from ._exceptions import (
    OverloadedError,
    RequestTimeoutError,
    RequestTooLargeError,
    ServiceError,
    UnauthorizedError,
)
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
    "create_app",
    "run_server",
    "serving",
]
