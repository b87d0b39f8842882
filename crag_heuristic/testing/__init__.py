"""Helpers for testing code built on crag-heuristic (and for its own tests).

* :class:`ListRetriever`, :class:`StaticExpander`, :class:`RecordingWebSearcher`:
  deterministic stand-ins to drive one route of the router.
* :func:`ensure_searxng_venv`, :class:`FixtureEngine`, :class:`SearxngServer`:
  a real SearXNG, offline, fed by a programmable loopback engine.
"""

from ._fakes import ListRetriever, RecordingWebSearcher, StaticExpander, StaticExpansion
from ._fixture_engine import FixtureEngine, FixtureReply, fixture_item
from ._searxng import SearxngServer, SearxngStartError
from ._searxng_venv import SEARXNG_PACKAGE, SearxngUnavailable, ensure_searxng_venv

__all__ = [
    "SEARXNG_PACKAGE",
    "FixtureEngine",
    "FixtureReply",
    "ListRetriever",
    "RecordingWebSearcher",
    "SearxngServer",
    "SearxngStartError",
    "SearxngUnavailable",
    "StaticExpander",
    "StaticExpansion",
    "ensure_searxng_venv",
    "fixture_item",
]
