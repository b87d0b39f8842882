"""What the router returns: the chunks, the decision, and the evidence for it."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._evaluator.refine import Refinement
from .._grading import CascadeReport
from .._types import Chunk, Evaluation, Verdict

__all__ = ["CRAGResult", "Strategy"]


class Strategy(str, enum.Enum):
    """The correction the router applied."""

    NONE = "none"  # fast path, or no correction possible
    QUERY_EXPANSION = "query_expansion"  # PARTIAL: expand, re-retrieve, fuse
    WEB_SEARCH = "web_search"  # IRRELEVANT: keyword query to the web searcher
    COMBINED = "combined"  # expansion, then web search as well


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
        strategy: the correction applied.
        retrieved: the first retrieval, unchanged.
        expanded_queries: the queries the expansion re-retrieved with.
        web_query: the keyword query for the web: the one sent, or, without a
            web searcher, the one that would have been (``strategy`` is then
            not ``web_search``, and a note says no searcher is configured).
        web_search_used: whether web results are among the final chunks.
        web_error: why the web search failed (``"WebSearchTimeout: ..."``), or
            ``None``. A failed web search keeps the original chunks.
        cache_hit: whether the first evaluation came from the cache (checked
            before use: a refused value is no hit).
        web_cache_hit: whether the web results came from the cache (likewise).
        cache_error: the last cache failure during this query (``"CacheError:
            ..."``), or ``None``. The query went on without the cache. A cached
            value refused as invalid or not JSON is one too (kind ``invalid`` or
            ``payload``): it was recomputed and its entry overwritten.
        parent_error: the last failure of the parents lookup (``"KeyError:
            ..."``), or ``None``. The chunks whose parent it could not give
            stay; ``notes`` names them.
        retries: correction rounds used.
        timings_ms: milliseconds per stage (``retrieve``, ``evaluate``,
            ``expand``, ``re_retrieve``, ``fuse``, ``re_evaluate``,
            ``rewrite``, ``web_search``, ``cache``, ``grade``, ``parents``,
            ``parent_evaluate``, ``refine``, ``total``).
        counts: sizes at each step (``retrieved``, ``expanded_rankings``,
            ``fused``, ``web_results``, ``dropped``, ``parents_fetched``,
            ``parents_missing``, ``parents_over_budget``, ``parents_used``,
            ``final``).
        notes: short human-readable remarks on what happened and why.
        refinement: the knowledge refinement, when it ran.
        cascade: what the cascade did (escalated ids and share, the grader's
            answers, cache hits, the gate's own verdict), when a grader is set.
        grader_error: why the cascade's grader gave nothing usable
            (``"GraderTimeout: ..."``), or ``None``. The gate's verdict stood.
    """

    query: str
    chunks: tuple[Chunk, ...]
    verdict: Verdict
    evaluation: Evaluation
    initial_evaluation: Evaluation
    strategy: Strategy
    retrieved: tuple[Chunk, ...]
    expanded_queries: tuple[str, ...] = ()
    web_query: str | None = None
    web_search_used: bool = False
    web_error: str | None = None
    cache_hit: bool = False
    web_cache_hit: bool = False
    cache_error: str | None = None
    parent_error: str | None = None
    retries: int = 0
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    refinement: Refinement | None = None
    cascade: CascadeReport | None = None
    grader_error: str | None = None

    @property
    def corrected(self) -> bool:
        """True when the final chunks differ from the first retrieval's."""
        return [c.id for c in self.chunks] != [c.id for c in self.retrieved]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of everything above."""
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
        }
