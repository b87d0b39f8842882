"""Helpers for testing code built on crag-heuristic: light, in-process, no servers.

* :class:`ListRetriever`, :class:`StaticExpander`, :class:`RecordingWebSearcher`:
  deterministic stand-ins to drive one route of the router.
* :func:`capture_events`: the library's structured events as dicts.
* :class:`CallTrace`, :class:`TracedCache`, :class:`TracedWebSearcher`: per-query
  tracing of the cache and web calls the router makes (what a load test
  compares the flags on each result with).

For integration tests, use the real parts (a FAISS index, a Redis server, a
SearXNG instance); this project's own kit that starts them lives in its test
tree (``tests/support/crag_testkit``), not in the wheel.
"""

from ._fakes import ListRetriever, RecordingWebSearcher, StaticExpander
from ._logs import capture_events
from ._trace import CallTrace, TracedCache, TracedCall, TracedWebSearcher

__all__ = [
    "CallTrace",
    "ListRetriever",
    "RecordingWebSearcher",
    "StaticExpander",
    "TracedCache",
    "TracedCall",
    "TracedWebSearcher",
    "capture_events",
]
