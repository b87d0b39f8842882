"""What the router returns: the chunks, the decision, and the evidence for it."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload

from .._evaluator.refine import Refinement
from .._exceptions import CragError, InputError
from .._failures import Failure, FailureStage, FailureText, last_failure
from .._grading.escalation import CascadeReport
from .._types import Chunk, Evaluation, Verdict

T = TypeVar("T")


class Strategy(str, enum.Enum):
    """The correction the router applied."""

    NONE = "none"  # fast path, or no correction possible
    QUERY_EXPANSION = "query_expansion"  # PARTIAL: expand, re-retrieve, fuse
    WEB_SEARCH = "web_search"  # IRRELEVANT: keyword query to the web searcher
    COMBINED = "combined"  # expansion, then web search as well


@dataclass(frozen=True, slots=True, kw_only=True)
class WebOutcome:
    """What the web stage of one query did.

    Attributes:
        query: the keyword query for the web: the one sent, or, without a web
            searcher, the one that would have been; ``None`` when the route
            never went to the web.
        used: whether web results are among the final chunks.
        results: the usable web results (http(s) sources).
        cache_hit: whether they came from the cache (checked before use: a
            refused value is no hit).
        miss: why the web gave nothing (``"no web searcher configured"``,
            ``"the web search failed"``, ``"the web search found nothing"``),
            or ``None``.
        failure: the web search's failure (also in ``CRAGResult.failures``),
            or ``None``. A failed web search keeps the original chunks.
    """

    query: str | None = None
    used: bool = False
    results: int = 0
    cache_hit: bool = False
    miss: str | None = None
    failure: Failure | None = None

    @property
    def error(self) -> CragError | None:
        """The web search's error (a :class:`~crag_heuristic.WebSearchError`), or ``None``."""
        return None if self.failure is None else self.failure.error

    @property
    def error_text(self) -> str | None:
        """``"WebSearchTimeout: ..."`` (the failure's text), or ``None``."""
        return None if self.failure is None else self.failure.text


class _HasWeb(Protocol):
    @property
    def web(self) -> WebOutcome: ...


class OfWeb(Generic[T]):
    """A read-only attribute that is one of the object's ``web`` outcome's."""

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.__doc__ = doc

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> OfWeb[T]: ...
    @overload
    def __get__(self, obj: _HasWeb, owner: type | None = None) -> T: ...
    def __get__(self, obj: _HasWeb | None, owner: type | None = None) -> OfWeb[T] | T:
        if obj is None:
            return self
        value: T = getattr(obj.web, self.name)
        return value


@dataclass(frozen=True, slots=True)
class CRAGResult:
    """One corrected retrieval.

    Attributes:
        query: the user's query.
        chunks: the final chunks for the generator, best first. Never empty
            without a reason: when nothing better was found they are the
            original chunks, and ``notes`` says why.
        verdict: the final verdict (of ``evaluation``).
        evaluation: the evaluation of the final chunks (after correction).
        initial_evaluation: the evaluation of the first retrieval (with a
            cascade, after its grader's answers: the one the route follows).
        strategy: the correction applied: ``none`` on the fast path and when no
            correction was possible (a PARTIAL retrieval with no lexical retriever
            and no expanded query, an IRRELEVANT one with no web searcher and
            nothing to expand with: ``notes`` says why); the one tried otherwise,
            its failures in ``failures``.
        retrieved: the first retrieval, unchanged.
        expanded_queries: the queries the expansion re-retrieved with.
        web: what the web stage did (a :class:`WebOutcome`: the keyword query,
            whether its results were used, how many, from the cache, why it
            gave nothing, its failure). Without a web searcher ``web.query`` is
            the query that would have been sent (``strategy`` is then not
            ``web_search``, and a note says no searcher is configured).
        cache_hit: whether the first evaluation came from the cache (checked
            before use: a refused value is no hit).
        retries: correction rounds used.
        timings_ms: milliseconds per stage (``retrieve``, ``evaluate``,
            ``expand``, ``re_retrieve``, ``fuse``, ``re_evaluate``,
            ``rewrite``, ``web_search``, ``cache``, ``grade``, ``parents``,
            ``parent_evaluate``, ``refine``, ``total``).
        counts: sizes at each step (``retrieved``, ``expanded_rankings``,
            ``fused``, ``web_results``, ``dropped``, ``parents_fetched``,
            ``parents_missing``, ``parents_over_budget``, ``parents_used``,
            ``final``; ``duplicates``: repeated chunk ids a retriever handed back,
            dropped; ``reconciled``: lexical results given the store's id for
            the same text).
        notes: short human-readable remarks on what happened and why.
        refinement: the knowledge refinement, when it ran.
        cascade: what the cascade did (escalated ids and share, the grader's
            answers, cache hits, the gate's own verdict), when a grader is set.
        failures: what failed on the way without failing the query, in order: a
            :class:`~crag_heuristic.Failure` (stage and
            :class:`~crag_heuristic.CragError`) per failed web search, cache
            call, grader call, parents lookup, query expansion or
            re-retrieval; ``()`` when nothing failed.
        learning: with a learning cascade (``CRAG(..., learning=...)``), its part
            (a :class:`~crag_heuristic.calibration.LearningDecision`: the gate and
            band in force, whether certified, whether the list was audited and
            became a label).

    The flags of earlier releases are read-only views: ``web_query``,
    ``web_search_used``, ``web_cache_hit`` and ``web_error`` of ``web``;
    ``cache_error``, ``grader_error`` and ``parent_error`` the text
    (``"CacheError: ..."``) of the last failure of their stage.

    Raises:
        InputError: ``failures`` not of :class:`~crag_heuristic.Failure`, or
            ``web.failure`` not the last web failure of ``failures``.
    """

    query: str
    chunks: tuple[Chunk, ...]
    verdict: Verdict
    evaluation: Evaluation
    initial_evaluation: Evaluation
    strategy: Strategy
    retrieved: tuple[Chunk, ...]
    expanded_queries: tuple[str, ...] = ()
    web: WebOutcome = field(default_factory=WebOutcome)
    cache_hit: bool = False
    retries: int = 0
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    refinement: Refinement | None = None
    cascade: CascadeReport | None = None
    failures: tuple[Failure, ...] = ()
    learning: Any = None

    def __post_init__(self) -> None:
        failures = tuple(self.failures)  # a list is taken
        object.__setattr__(self, "failures", failures)
        if not all(isinstance(failure, Failure) for failure in failures):
            raise InputError("CRAGResult.failures must hold Failure objects")
        if last_failure(failures, FailureStage.WEB) is not self.web.failure:
            raise InputError("the web outcome's failure must be the last web one of failures")

    web_query = OfWeb[str | None]("query", "The keyword query for the web (``web.query``).")
    web_search_used = OfWeb[bool](
        "used", "Whether web results are among the final chunks (``web.used``)."
    )
    web_cache_hit = OfWeb[bool](
        "cache_hit", "Whether the web results came from the cache (``web.cache_hit``)."
    )
    web_error = FailureText(
        FailureStage.WEB, 'Why the web search failed (``"WebSearchTimeout: ..."``), or ``None``.'
    )
    cache_error = FailureText(
        FailureStage.CACHE,
        """The last cache failure of this query (``"CacheError: ..."``), or ``None``.
        The query went on without the cache; a cached value refused as invalid or
        not JSON is one too (kind ``invalid`` or ``payload``): recomputed, its
        entry overwritten.""",
    )
    grader_error = FailureText(
        FailureStage.GRADER,
        """Why the cascade's grader gave nothing usable (``"GraderTimeout: ..."``), or
        ``None``. The gate's verdict stood.""",
    )
    parent_error = FailureText(
        FailureStage.PARENTS,
        """The last failure of the parents lookup (``"KeyError: ..."``), or ``None``.
        The chunks whose parent it could not give stay; ``notes`` names them.""",
    )

    @property
    def corrected(self) -> bool:
        """True when the final chunks differ from the first retrieval's."""
        return [c.id for c in self.chunks] != [c.id for c in self.retrieved]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of everything above (the web outcome's flags flat, as
        ``web_query``, ``web_search_used``, ``web_error``, ``web_cache_hit``;
        ``failures`` as :meth:`Failure.to_dict` makes them)."""
        return {
            "query": self.query,
            "verdict": self.verdict.value,
            "strategy": self.strategy.value,
            "chunks": [chunk.to_dict() for chunk in self.chunks],
            "evaluation": self.evaluation.to_dict(),
            "initial_evaluation": self.initial_evaluation.to_dict(),
            "retrieved": [chunk.to_dict() for chunk in self.retrieved],
            "expanded_queries": list(self.expanded_queries),
            "web_query": self.web_query,
            "web_search_used": self.web_search_used,
            "web_error": self.web_error,
            "cache_hit": self.cache_hit,
            "web_cache_hit": self.web_cache_hit,
            "cache_error": self.cache_error,
            "parent_error": self.parent_error,
            "retries": self.retries,
            "corrected": self.corrected,
            "timings_ms": dict(self.timings_ms),
            "counts": dict(self.counts),
            "notes": list(self.notes),
            "refinement": None if self.refinement is None else self.refinement.to_dict(),
            "cascade": None if self.cascade is None else self.cascade.to_dict(),
            "grader_error": self.grader_error,
            "failures": [failure.to_dict() for failure in self.failures],
            "learning": None if self.learning is None else self.learning.to_dict(),
        }
