"""Helpers for testing code built on crag-heuristic (and for its own tests).

* :class:`ListRetriever`, :class:`StaticExpander`, :class:`RecordingWebSearcher`:
  deterministic stand-ins to drive one route of the router.
"""

from ._fakes import ListRetriever, RecordingWebSearcher, StaticExpander, StaticExpansion

__all__ = ["ListRetriever", "RecordingWebSearcher", "StaticExpander", "StaticExpansion"]
