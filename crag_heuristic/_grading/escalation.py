"""The escalation policy of a cascade: which chunks the expensive grader sees.

The cheap gate gives each chunk ``p_i`` = P(chunk relevant). A chunk is
*uncertain* when ``low <= p_i <= high`` (the band; by default the gate's own
PARTIAL band for chunks, ``[chunk partial, chunk relevant]``: the chunks CRAG
calls ambiguous). Of the uncertain chunks, the ones closest to the decision
threshold ``t`` (the chunk relevant band) on the log-odds scale go first::

    distance_i = | logit(p_i) - logit(t) |        logit(p) = ln(p / (1 - p))

(ties by list position), and at most ``floor(budget * n)`` of a list's ``n``
chunks are escalated (and at most ``max_chunks``). The grader's answers
replace those chunks' probabilities; with ``recompute_set`` the set stage is
run again on the updated probabilities (``best_chunk`` = the highest of them,
and so on), so the set verdict can change; without it only the chunk grades
change. This is the cascade of Viola and Jones (2001) applied to relevance
grading: the cheap stage settles the confident cases, the expensive one the
rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._checks import CheckedQuery
from .._config import EvaluatorConfig, Thresholds, _check_number, checked_band
from .._evaluator.evaluator import Evaluator, verdict_for
from .._exceptions import ConfigError
from .._failures import Failure
from .._text.corpus import CorpusStats
from .._types import Chunk, ChunkEvaluation, Evaluation, Verdict
from .._usage import GraderUsage

_EPSILON = 1e-9


def logit(p: float) -> float:
    """``ln(p / (1 - p))``, with ``p`` kept a hair inside (0, 1)."""
    p = min(1.0 - _EPSILON, max(_EPSILON, p))
    return math.log(p / (1.0 - p))


@dataclass(frozen=True, kw_only=True, slots=True)
class Escalation:
    """When a cascade asks its expensive grader. Frozen, keyword-only, validated.

    Attributes:
        band: ``(low, high)``: chunks whose gate probability lies within it
            (inclusive) may be escalated. ``None``: the gate's PARTIAL band
            for chunks (``[chunk partial, chunk relevant]`` of the thresholds
            the evaluation used). ``(0, 1)`` makes every chunk a candidate.
        budget: the largest share of a list's chunks escalated per call, in
            [0, 1]: at most ``floor(budget * n)`` chunks, the most uncertain
            first (closest to the chunk relevant threshold in log-odds).
        max_chunks: at most this many chunks per call (``None``: no cap).
        timeout: seconds a grading call may take (``None``: no limit); past
            it the call is abandoned, the result says ``GraderTimeout`` and
            the gate's verdict stands. A sync call with a timeout runs in a
            daemon thread, which cannot be stopped: its late answer is
            dropped (give a grader that holds resources its own timeout too).
        recompute_set: run the set stage again on the updated chunk
            probabilities, so the set verdict reflects the grader's answers;
            ``False``: only the chunk grades change.
        cache_grades: keep the grader's answers in the router's (or the
            cascade's) cache, per (grader, query, chunk id, text).
        grade_ttl: seconds a cached answer lives.
    """

    band: tuple[float, float] | None = None
    budget: float = 0.3
    max_chunks: int | None = None
    timeout: float | None = 30.0
    recompute_set: bool = True
    cache_grades: bool = True
    grade_ttl: float = 7 * 86400.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "band", checked_band(self.band))
        _check_number("budget", self.budget, low=0.0, high=1.0)
        if self.max_chunks is not None:
            _check_number("max_chunks", self.max_chunks, low=0, integer=True)
        if self.timeout is not None:
            _check_number("timeout", self.timeout, low=0.0, low_open=True)
        for name in ("recompute_set", "cache_grades"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "must be true or false")
        _check_number("grade_ttl", self.grade_ttl, low=0.0, low_open=True)

    @classmethod
    def of(cls, value: Escalation | Mapping[str, Any] | None) -> Escalation:
        """``value`` itself, the default (``None``), or built from a dict of the fields."""
        if value is None:
            return cls()
        return value if isinstance(value, Escalation) else cls.from_dict(value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Escalation:
        """Build from a dict of the fields; unknown keys raise ConfigError."""
        return cls(**policy_fields(cls, data))


def policy_fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of an escalation policy ``cls`` from a dict of them.

    Raises:
        ConfigError: not a dict, or a key that is not one of the fields.
    """
    if not isinstance(data, Mapping):
        raise ConfigError("escalation", data, f"must be a {cls.__name__} or a dict")
    known: Any = getattr(cls, "__dataclass_fields__", {})
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"escalation.{unknown[0]}", data[unknown[0]], "unknown field")
    return dict(data)


def recorded_bands(evaluation: Evaluation, key: str, fallback: Thresholds) -> Thresholds:
    """The bands the evaluator recorded under ``details[key]`` (``"bands"`` for the
    set, ``"chunk_bands"`` for chunks), else ``fallback``."""
    recorded = evaluation.details.get(key)
    if isinstance(recorded, Mapping):
        try:
            return Thresholds(relevant=recorded["relevant"], partial=recorded["partial"])
        except (KeyError, ConfigError):
            pass
    return fallback


def chunk_bands(evaluation: Evaluation, config: EvaluatorConfig) -> Thresholds:
    """The chunk bands ``evaluation`` was graded with (recorded by the evaluator
    in ``details["chunk_bands"]``), else ``config``'s."""
    return recorded_bands(evaluation, "chunk_bands", config.effective_chunk_thresholds)


def rank_uncertain(
    probs: Sequence[float],
    *,
    low: float,
    high: float,
    threshold: float,
    budget: float,
    max_chunks: int | None = None,
) -> tuple[int, list[int]]:
    """``(candidates, chosen)``: how many of ``probs`` lie in ``[low, high]``, and
    the positions to escalate, most uncertain first (see the module doc)."""
    target = logit(threshold)
    candidates = [i for i, p in enumerate(probs) if low <= p <= high]
    candidates.sort(key=lambda i: (abs(logit(probs[i]) - target), i))
    cap = math.floor(budget * len(probs) + 1e-9)
    if max_chunks is not None:
        cap = min(cap, max_chunks)
    return len(candidates), candidates[:cap]


@dataclass(frozen=True, slots=True)
class Selection:
    """What :func:`select` chose: the band, the threshold, the candidates' count,
    the chosen chunk ids (most uncertain first) and their gate probabilities."""

    band: tuple[float, float]
    threshold: float
    candidates: int
    chosen: tuple[str, ...]
    gate_scores: dict[str, float]
    total: int
    audited: bool = False


def select(evaluation: Evaluation, policy: Escalation, config: EvaluatorConfig) -> Selection:
    """The chunks of ``evaluation`` that ``policy`` escalates (``config``: the
    evaluator's, for evaluations that do not record their chunk bands)."""
    bands = chunk_bands(evaluation, config)
    band = policy.band if policy.band is not None else (bands.partial, bands.relevant)
    probs = [grade.score for grade in evaluation.chunks]
    candidates, chosen = rank_uncertain(
        probs,
        low=band[0],
        high=band[1],
        threshold=bands.relevant,
        budget=policy.budget,
        max_chunks=policy.max_chunks,
    )
    ids = tuple(evaluation.chunks[i].chunk_id for i in chosen)
    return Selection(
        band=band,
        threshold=bands.relevant,
        candidates=candidates,
        chosen=ids,
        gate_scores={evaluation.chunks[i].chunk_id: probs[i] for i in chosen},
        total=len(probs),
    )


@dataclass(frozen=True, slots=True)
class CascadeReport:
    """What a cascade did for one list.

    Attributes:
        grader: the grader's fingerprint.
        band: the uncertain band used ``(low, high)``: of chunk probabilities,
            or of the set probability for ``level="set"``.
        threshold: the relevant threshold uncertainty is measured from (the
            chunk one; the set one for ``level="set"``).
        candidates: how many chunks lay in the band (``level="set"``: 1 when
            the list did, else 0).
        escalated: the ids asked about (from the grader or its cached answers),
            most uncertain first.
        share: ``len(escalated)`` over the list's length.
        gate_scores: the gate's probability of each escalated chunk.
        grades: the grader's answer for each escalated chunk it answered
            (cached ones included); applied only when ``error`` is ``None``.
        cache_hits: the escalated ids answered from the cache.
        failure: the grader's failure (a :class:`~crag_heuristic.Failure` of
            stage ``grader``: its :class:`~crag_heuristic.grading.GraderError`),
            or ``None``. On a failure no grade is applied: the gate's verdict
            stands. ``error`` is its text (``"GraderTimeout: ..."``).
        gate_verdict: the set verdict of the gate alone.
        verdict: the set verdict after the cascade.
        ms: milliseconds spent on the cache and the grader.
        level: ``"chunk"`` (an :class:`Escalation`: single chunks) or ``"set"``
            (a :class:`~crag_heuristic._grading.lists.SetEscalation`: the list).
        audited: the list went to the grader as part of the audit sample (a
            set cascade's ``audit``), whether or not it lay in the band.
        usage: what the grader's call cost (requests, retries, tokens, its
            own milliseconds: a :class:`~crag_heuristic.grading.GraderUsage`),
            when the grader reports it (:class:`~crag_heuristic.grading.OpenAIGrader`
            does, on success and failure); ``None`` when it does not, or was
            not asked (every answer from the cache).
    """

    grader: str
    band: tuple[float, float]
    threshold: float
    candidates: int
    escalated: tuple[str, ...]
    share: float
    gate_scores: Mapping[str, float] = field(default_factory=dict)
    grades: Mapping[str, float] = field(default_factory=dict)
    cache_hits: tuple[str, ...] = ()
    failure: Failure | None = None
    gate_verdict: Verdict = Verdict.IRRELEVANT
    verdict: Verdict = Verdict.IRRELEVANT
    ms: float = 0.0
    level: str = "chunk"
    audited: bool = False
    usage: GraderUsage | None = None

    @property
    def error(self) -> str | None:
        """Why the grader gave nothing usable (``"GraderTimeout: ..."``), or ``None``."""
        return None if self.failure is None else self.failure.text

    @property
    def applied(self) -> bool:
        """Whether the grader's answers changed the evaluation's inputs."""
        return self.failure is None and bool(self.grades)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "level": self.level,
            "grader": self.grader,
            "band": list(self.band),
            "threshold": self.threshold,
            "candidates": self.candidates,
            "escalated": list(self.escalated),
            "share": self.share,
            "gate_scores": dict(self.gate_scores),
            "grades": dict(self.grades),
            "cache_hits": list(self.cache_hits),
            "error": self.error,
            "applied": self.applied,
            "gate_verdict": self.gate_verdict.value,
            "verdict": self.verdict.value,
            "ms": self.ms,
            "usage": None if self.usage is None else self.usage.to_dict(),
        }


def cascaded_evaluation(
    evaluator: Evaluator,
    query: CheckedQuery,
    chunks: Sequence[Chunk],
    corpus_stats: CorpusStats | None,
    gate: Evaluation,
    grades: Mapping[str, float],
    policy: Escalation,
) -> Evaluation:
    """The evaluation with the grader's answers in place of the gate's chunk
    probabilities: the set stage run again (``recompute_set``), or only the
    chunk grades replaced."""
    if not grades:
        return gate
    if policy.recompute_set:
        return evaluator.evaluate(query, chunks, corpus_stats, chunk_grades=grades)
    bands = chunk_bands(gate, evaluator.config)
    updated = tuple(
        _regraded(grade, grades[grade.chunk_id], bands) if grade.chunk_id in grades else grade
        for grade in gate.chunks
    )
    details = {**gate.details, "external_grades": dict(grades)}
    return replace(gate, chunks=updated, details=details)


def _regraded(grade: ChunkEvaluation, score: float, bands: Thresholds) -> ChunkEvaluation:
    return replace(grade, score=score, verdict=verdict_for(score, bands))
