"""Every seam of the pipeline, as :class:`typing.Protocol`\\ s.

Any object with the right methods fits; nothing needs to inherit from these.
:class:`~crag_heuristic.CRAG` is typed with them: a retriever is a
:class:`Retriever` and/or an :class:`AsyncRetriever` (optionally a
:class:`StatsProvider`), the parents of chunks a :class:`ParentLookup` and/or an
:class:`AsyncParentLookup` (a ``dict`` is one), a web searcher a
:class:`WebSearcher` and/or an :class:`AsyncWebSearcher`, a cache a
:class:`Cache` and/or an :class:`AsyncCache`; the expander is a
:class:`QueryExpander`, the metrics a :class:`MetricsSink`, the logger an
:class:`EventLogger` (a structlog bound logger is one) and a cascade's grader a
:class:`Grader` and/or an :class:`AsyncGrader`; the engine that counts corpus
statistics a :class:`StatsEngine`.
"""

from ._protocols import (
    AsyncCache,
    AsyncGrader,
    AsyncParentLookup,
    AsyncRetriever,
    AsyncWebSearcher,
    Cache,
    EventLogger,
    Grader,
    MetricsSink,
    ParentLookup,
    QueryExpander,
    ResultObserver,
    Retriever,
    StatsProvider,
    WebSearcher,
)
from ._text.engines import StatsEngine

__all__ = [
    "AsyncCache",
    "AsyncGrader",
    "AsyncParentLookup",
    "AsyncRetriever",
    "AsyncWebSearcher",
    "Cache",
    "EventLogger",
    "Grader",
    "MetricsSink",
    "ParentLookup",
    "QueryExpander",
    "ResultObserver",
    "Retriever",
    "StatsEngine",
    "StatsProvider",
    "WebSearcher",
]
