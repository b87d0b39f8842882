"""Stage events: what the router has done so far, as it happens.

:meth:`CRAG.stream` and :meth:`CRAG.astream` yield one frozen event per stage
of the decision flow (``crag_heuristic._router.flow``), in order:

===============  ==================  ==========================================================
``stage``        event               when, and what it carries
===============  ==================  ==========================================================
``retrieved``    :class:`Retrieved`  the first retrieval is back (before it is graded): its
                                     chunks
``evaluated``    :class:`Evaluated`  the gate graded it (a cascade's grader included): the
                                     evaluation the route follows, each chunk's grade in
                                     ``evaluation.chunks``, whether it came from the cache
``corrected``    :class:`Corrected`  PARTIAL (or IRRELEVANT without a web answer): the
                                     re-retrieval was fused and graded again
``web``          :class:`WebSearched`  the route went to the web: what the web gave, or why
                                     not
``parents``      :class:`ParentsExpanded`  parent expansion ran (``CRAG(parents=...)``)
``refined``      :class:`Refined`    knowledge refinement ran (``RouterConfig.refine``)
``done``         :class:`Done`       the :class:`CRAGResult`, the one :meth:`CRAG.retrieve`
                                     returns for the same inputs
===============  ==================  ==========================================================

A stage that does not run (the fast path has no correction) has no event;
``retrieved``, ``evaluated`` and ``done`` always come. ``elapsed_ms`` counts
from the start of the query. :meth:`StageEvent.to_dict` is JSON-ready (for
Server-Sent Events, say: ``examples/stream_sse.py``); :meth:`StageEvent.summary`
is what may go to a log: ids, verdicts, scores, counts and error types, never
a text or the query.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar

from .._evaluator.refine import Refinement
from .._failures import Failure, FailureStage, FailureText, last_failure
from .._grading.escalation import CascadeReport
from .._types import Chunk, Evaluation
from .result import CRAGResult, OfWeb, Strategy, WebOutcome


class Stage(str, enum.Enum):
    """The stages of the decision flow, in the order they can happen."""

    RETRIEVED = "retrieved"
    EVALUATED = "evaluated"
    CORRECTED = "corrected"
    WEB = "web"
    PARENTS = "parents"
    REFINED = "refined"
    DONE = "done"


def _error_type(failure: Failure | None) -> str | None:
    """``"WebSearchTimeout"``: the failure's type name, for a log (the message may
    echo a user's part, a URL with the query in it; the type never does)."""
    return None if failure is None else failure.type_name


# the result's error flags, by stage (each the type of the stage's last failure in a summary)
_FLAGS = (
    ("web", FailureStage.WEB),
    ("cache", FailureStage.CACHE),
    ("grader", FailureStage.GRADER),
    ("parent", FailureStage.PARENTS),
)


def _grades(evaluation: Evaluation) -> str:
    return " ".join(f"{g.chunk_id}:{g.verdict.value}:{g.score:.2f}" for g in evaluation.chunks)


@dataclass(frozen=True, slots=True, kw_only=True)
class StageEvent:
    """One stage of the flow, done (see the module doc).

    Attributes:
        stage: which stage (a class constant of each event type).
        elapsed_ms: milliseconds since the query started.
    """

    stage: ClassVar[Stage]
    elapsed_ms: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``stage``, ``elapsed_ms`` and the event's fields."""
        return {"stage": self.stage.value, "elapsed_ms": self.elapsed_ms, **self._fields()}

    def summary(self) -> dict[str, Any]:
        """Key-values safe for a log: ids, verdicts, scores, counts, error types."""
        return {"stage": self.stage.value, "elapsed_ms": round(self.elapsed_ms, 3)}

    def _fields(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Retrieved(StageEvent):
    """The first retrieval, before the gate grades it.

    Attributes:
        chunks: the retrieved chunks (the first ``k``), best first.
        depth: how many the retriever was asked for (``RouterConfig.fetch_k``).
    """

    stage: ClassVar[Stage] = Stage.RETRIEVED
    chunks: tuple[Chunk, ...]
    depth: int

    def summary(self) -> dict[str, Any]:
        return {
            **StageEvent.summary(self),
            "chunks": len(self.chunks),
            "ids": " ".join(c.id for c in self.chunks),
        }

    def _fields(self) -> dict[str, Any]:
        return {"chunks": [c.to_dict() for c in self.chunks], "depth": self.depth}


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluated(StageEvent):
    """The gate's evaluation of the first retrieval: the route follows it.

    Attributes:
        evaluation: the set's verdict and score, each chunk's grade in
            ``evaluation.chunks`` (after a cascade's grader, when there is one).
        cache_hit: whether it came from the cache.
        cascade: what the cascade did, when a grader is set.
    """

    stage: ClassVar[Stage] = Stage.EVALUATED
    evaluation: Evaluation
    cache_hit: bool = False
    cascade: CascadeReport | None = None

    def summary(self) -> dict[str, Any]:
        extra = {} if self.cascade is None else {"escalated": len(self.cascade.escalated)}
        return {
            **StageEvent.summary(self),
            "verdict": self.evaluation.verdict.value,
            "score": round(self.evaluation.score, 4),
            "cache_hit": self.cache_hit,
            "grades": _grades(self.evaluation),
            **extra,
        }

    def _fields(self) -> dict[str, Any]:
        return {
            "evaluation": self.evaluation.to_dict(),
            "cache_hit": self.cache_hit,
            "cascade": None if self.cascade is None else self.cascade.to_dict(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Corrected(StageEvent):
    """The correction: the re-retrievals fused (RRF) with the retrieval, graded again.

    Attributes:
        strategy: the route so far (``query_expansion``).
        chunks: the fused list.
        evaluation: its evaluation.
        expanded_queries: the expanded queries re-retrieved (none by default).
        rankings: how many re-retrieved rankings joined the fusion.
    """

    stage: ClassVar[Stage] = Stage.CORRECTED
    strategy: Strategy
    chunks: tuple[Chunk, ...]
    evaluation: Evaluation
    expanded_queries: tuple[str, ...] = ()
    rankings: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            **StageEvent.summary(self),
            "strategy": self.strategy.value,
            "verdict": self.evaluation.verdict.value,
            "score": round(self.evaluation.score, 4),
            "chunks": len(self.chunks),
            "rankings": self.rankings,
        }

    def _fields(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy.value,
            "chunks": [c.to_dict() for c in self.chunks],
            "evaluation": self.evaluation.to_dict(),
            "expanded_queries": list(self.expanded_queries),
            "rankings": self.rankings,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSearched(StageEvent):
    """The web stage: the keyword query, and what the web gave or why it gave nothing.

    Attributes:
        web: what the web stage did (the :class:`~crag_heuristic.WebOutcome` the
            result will hold).
        chunks: the list after this stage.
        evaluation: its evaluation.

    ``web_query``, ``used`` (whether web results replaced the chunks: then
    ``chunks`` and ``evaluation`` are the new list and its grade),
    ``results`` (usable web results), ``error`` (``"WebSearchTimeout: ..."``
    or ``None``), ``miss`` (why the web gave nothing, or ``None``) and
    ``cache_hit`` read ``web``.
    """

    stage: ClassVar[Stage] = Stage.WEB
    web: WebOutcome
    chunks: tuple[Chunk, ...]
    evaluation: Evaluation

    web_query = OfWeb[str | None]("query", "The keyword rewrite of the query (``web.query``).")
    used = OfWeb[bool]("used", "Whether web results replaced the chunks (``web.used``).")
    results = OfWeb[int]("results", "Usable web results, http(s) sources (``web.results``).")
    error = OfWeb[str | None](
        "error_text", 'Why the web search failed (``"WebSearchTimeout: ..."``), or ``None``.'
    )
    miss = OfWeb[str | None]("miss", "Why the web gave nothing, or ``None`` (``web.miss``).")
    cache_hit = OfWeb[bool](
        "cache_hit", "Whether the results came from the cache (``web.cache_hit``)."
    )

    def summary(self) -> dict[str, Any]:
        return {
            **StageEvent.summary(self),
            "used": self.used,
            "results": self.results,
            "cache_hit": self.cache_hit,
            "error": _error_type(self.web.failure),
            "verdict": self.evaluation.verdict.value,
        }

    def _fields(self) -> dict[str, Any]:
        return {
            "web_query": self.web_query,
            "used": self.used,
            "results": self.results,
            "error": self.error,
            "miss": self.miss,
            "cache_hit": self.cache_hit,
            "chunks": [c.to_dict() for c in self.chunks],
            "evaluation": self.evaluation.to_dict(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ParentsExpanded(StageEvent):
    """Parent expansion: chunks graded PARTIAL re-graded as their parents.

    Attributes:
        chunks: the list after it (parents in place of the children they beat).
        evaluation: its evaluation.
        used: how many parents replaced their chunks.
        failures: the failures of the parents lookup (or of its answers), in order.
    """

    stage: ClassVar[Stage] = Stage.PARENTS
    chunks: tuple[Chunk, ...]
    evaluation: Evaluation
    used: int
    failures: tuple[Failure, ...] = ()

    error = FailureText(
        FailureStage.PARENTS, 'The last failure\'s text (``"KeyError: ..."``), or ``None``.'
    )

    def summary(self) -> dict[str, Any]:
        return {
            **StageEvent.summary(self),
            "used": self.used,
            "chunks": len(self.chunks),
            "verdict": self.evaluation.verdict.value,
            "error": _error_type(self.failures[-1] if self.failures else None),
        }

    def _fields(self) -> dict[str, Any]:
        return {
            "chunks": [c.to_dict() for c in self.chunks],
            "evaluation": self.evaluation.to_dict(),
            "used": self.used,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Refined(StageEvent):
    """Knowledge refinement: the sentence strips kept within the token budget.

    Attributes:
        refinement: the strips, the refined chunks and their text.
    """

    stage: ClassVar[Stage] = Stage.REFINED
    refinement: Refinement

    def summary(self) -> dict[str, Any]:
        return {
            **StageEvent.summary(self),
            "strips": len(self.refinement.kept),
            "chunks": len(self.refinement.chunks),
            "tokens": round(self.refinement.tokens, 1),
        }

    def _fields(self) -> dict[str, Any]:
        return {"refinement": self.refinement.to_dict()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Done(StageEvent):
    """The end: the result :meth:`CRAG.retrieve` returns for the same inputs.

    Attributes:
        result: the :class:`CRAGResult`.
    """

    stage: ClassVar[Stage] = Stage.DONE
    result: CRAGResult

    def summary(self) -> dict[str, Any]:
        result = self.result
        return {
            **StageEvent.summary(self),
            "verdict": result.verdict.value,
            "initial_verdict": result.initial_evaluation.verdict.value,
            "strategy": result.strategy.value,
            "chunks": len(result.chunks),
            **{
                f"{name}_error": _error_type(last_failure(result.failures, stage))
                for name, stage in _FLAGS
            },
        }

    def _fields(self) -> dict[str, Any]:
        return {"result": self.result.to_dict()}
