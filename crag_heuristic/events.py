"""Stage events: :meth:`CRAG.stream` / :meth:`CRAG.astream` yield one per stage, as it ends.

``retrieved`` (the first retrieval, before it is graded), ``evaluated`` (each
chunk's grade and the set's verdict), ``corrected``, ``web``, ``parents``,
``refined`` (when those stages run) and ``done``, whose ``result`` is the
:class:`~crag_heuristic.CRAGResult` that :meth:`CRAG.retrieve` returns. Each
event is frozen, has a ``stage`` (a :class:`Stage`) and ``elapsed_ms``,
``to_dict()`` (JSON-ready) and ``summary()`` (log-safe: no text, no query)::

    for event in crag.stream(query):
        if event.stage is Stage.EVALUATED:
            show(event.evaluation.verdict, event.evaluation.chunks)
"""

from ._router.events import (
    Corrected,
    Done,
    Evaluated,
    ParentsExpanded,
    Refined,
    Retrieved,
    Stage,
    StageEvent,
    WebSearched,
)

__all__ = [
    "Corrected",
    "Done",
    "Evaluated",
    "ParentsExpanded",
    "Refined",
    "Retrieved",
    "Stage",
    "StageEvent",
    "WebSearched",
]
