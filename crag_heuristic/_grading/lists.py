"""The escalation policy for whole lists: a grader settles the set verdict where the gate is unsure.

The chunk cascade (:mod:`crag_heuristic._grading.escalation`) asks the
expensive grader about single chunks. The decision that drives the router's
routes is the set's: P(good retrieval). A :class:`SetEscalation` asks the
grader about a list when that probability ``p`` lies in the uncertain band
``[low, high]`` (inclusive; by default the gate's PARTIAL band
``[partial, relevant]``: the lists the router would correct without being
sure they need it). The grader grades the list's first ``max_chunks`` chunks
(all by default). Its answers ``g_i`` in [0, 1] become one set probability
``g`` (``combine``)::

    noisy_or   g = 1 - prod_i (1 - min(g_i, certainty))      at least one chunk answers, each
                                                             answer at most ``certainty`` sure
    max        g = max_i g_i                                 the best chunk decides
    mean       g = mean_i g_i                                the share of chunks that answer

``noisy_or`` (the default) counts every chunk the grader believes in: a list
with three chunks graded relevant is surer than one with one, as a count of
relevant chunks is when an LLM's labels are used as a gate (with binary
labels, ``max`` throws that away). The set probability becomes::

    p' = g                                                   trust = None (the grader decides)
    logit(p') = logit(p) + trust * (2 * g - 1)               trust = a number

The second form is Bayes' rule for a grader whose answer multiplies the odds
by ``e^trust`` (a "yes" of a grader with sensitivity ``se`` and specificity
``sp`` is worth ``ln(se / (1 - sp))``): it keeps the gate's ranking within
each answer, and a small ``trust`` moves a list only across a nearby band.
The set verdict is ``p'`` banded by the gate's own thresholds; the chunks'
grades become the grader's answers.

**A band with a guarantee.** :meth:`SetEscalation.guaranteed` takes its band from
a :class:`~crag_heuristic.config.Guarantee` (chosen on the grader's labels by
Learn-then-Test, :mod:`crag_heuristic._grading.guarantee`). **Audits.** With
``audit = a``, a share ``a`` of all lists, chosen by a hash of the query (the
same query is always in or out: ``sha256(seed:query)`` read as a number in
[0, 1) below ``a``), goes to the grader whatever its probability: a uniform
sample of the traffic on which a monitor (:class:`~crag_heuristic.grading.GuaranteeMonitor`)
checks the guarantee and from which the band can be chosen again. The report
says ``audited``. Failures, timeouts, caching and the
report are the chunk cascade's (:class:`~crag_heuristic._grading.escalation.CascadeReport`,
``level="set"``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._cache.keys import text_digest
from .._checks import CheckedQuery
from .._config import EvaluatorConfig, Guarantee, Thresholds, _check_number, checked_band
from .._evaluator.evaluator import Evaluator, verdict_for
from .._exceptions import ConfigError
from .._text.corpus import CorpusStats
from .._types import Chunk, Evaluation
from .escalation import Escalation, Selection, logit, policy_fields, recorded_bands

_EPSILON = 1e-9  # the band's edges are widened by it, so the share's last score is inside
COMBINE = ("noisy_or", "max", "mean")
"""The ways a list's grades make one (see the module doc)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SetEscalation:
    """When a cascade asks its expensive grader about a whole list. Frozen,
    keyword-only, validated.

    Attributes:
        band: ``(low, high)``: a list whose set probability lies within it
            (inclusive) is escalated. ``None``: the gate's PARTIAL band
            (``[partial, relevant]`` of the thresholds the evaluation used).
            :meth:`for_share` derives a band from a target share of lists.
        max_chunks: the grader sees the list's first ``max_chunks`` chunks
            (``None``: every chunk the gate graded).
        combine: how the chunks' grades make one (``"noisy_or"``, ``"max"``,
            ``"mean"``; module doc).
        certainty: the most a single grade counts for in ``noisy_or`` (in (0, 1]).
        trust: how the grader's answer moves the set probability (module
            doc): ``None`` replaces it; a positive number shifts its
            log-odds by at most that much.
        timeout: seconds a grading call may take (``None``: no limit); past
            it the gate's verdict stands and the result says ``GraderTimeout``.
        cache_grades: keep the grader's answers in the router's cache, per
            (grader, query, chunk id, text): the chunk cascade's entries.
        grade_ttl: seconds a cached answer lives.
        audit: the share of all lists also sent to the grader for an audit
            (module doc), in [0, 1]; 0: none.
        audit_seed: the seed of the audit's hash (another seed, another sample).
        guarantee: the :class:`~crag_heuristic.config.Guarantee` the band comes
            from (:meth:`guaranteed`); a ``band`` given beside it must be its own.
    """

    band: tuple[float, float] | None = None
    max_chunks: int | None = None
    combine: str = "noisy_or"
    certainty: float = 0.95
    trust: float | None = None
    timeout: float | None = 30.0
    cache_grades: bool = True
    grade_ttl: float = 7 * 86400.0
    audit: float = 0.0
    audit_seed: int = 0
    guarantee: Guarantee | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "band", checked_band(self.band))
        _check_number("audit", self.audit, low=0.0, high=1.0)
        _check_number("audit_seed", self.audit_seed, low=0, integer=True)
        if self.guarantee is not None:
            if not isinstance(self.guarantee, Guarantee):
                raise ConfigError("guarantee", self.guarantee, "must be a Guarantee")
            if self.band is not None and self.band != self.guarantee.band:
                raise ConfigError(
                    "band", self.band, f"differs from the guarantee's band {self.guarantee.band}"
                )
            object.__setattr__(self, "band", self.guarantee.band)
        if self.max_chunks is not None:
            _check_number("max_chunks", self.max_chunks, low=1, integer=True)
        if self.combine not in COMBINE:
            raise ConfigError("combine", self.combine, f"must be one of {', '.join(COMBINE)}")
        _check_number("certainty", self.certainty, low=0.0, high=1.0, low_open=True)
        if self.trust is not None:
            _check_number("trust", self.trust, low=0.0, low_open=True)
        if self.timeout is not None:
            _check_number("timeout", self.timeout, low=0.0, low_open=True)
        if not isinstance(self.cache_grades, bool):
            raise ConfigError("cache_grades", self.cache_grades, "must be true or false")
        _check_number("grade_ttl", self.grade_ttl, low=0.0, low_open=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SetEscalation:
        """Build from a dict of the fields; unknown keys raise ConfigError."""
        return cls(**policy_fields(cls, data))

    @classmethod
    def guaranteed(cls, source: Guarantee | EvaluatorConfig, **fields: Any) -> SetEscalation:
        """The policy whose band is a guarantee's: ``source`` a
        :class:`~crag_heuristic.config.Guarantee`, or a profile that carries one
        (``crag-heuristic calibrate --grader ... --guarantee ...`` writes it).

        Raises:
            ConfigError: a profile without a guarantee.
        """
        guarantee = source.guarantee if isinstance(source, EvaluatorConfig) else source
        if guarantee is None:
            raise ConfigError(
                "guarantee",
                getattr(source, "name", source),
                "the profile carries no guarantee (crag-heuristic calibrate --grader ... "
                "--guarantee ... writes one)",
            )
        return cls(guarantee=guarantee, **fields)

    @classmethod
    def for_share(cls, scores: Any, share: float, *, around: float, **fields: Any) -> SetEscalation:
        """The policy whose band holds ``share`` of ``scores`` (set probabilities
        of a sample of the traffic, e.g. a calibration run), the ones closest to
        ``around`` in log-odds (e.g. the gate's relevant threshold).

        Raises:
            ConfigError: ``share`` outside [0, 1], no scores, or a score that
                is not a probability.
        """
        _check_number("share", share, low=0.0, high=1.0)
        values = [float(s) for s in scores]
        if not values or any(not 0.0 <= s <= 1.0 for s in values):
            raise ConfigError("scores", len(values), "must be a non-empty list of probabilities")
        _check_number("around", around, low=0.0, high=1.0)
        if share == 0.0:
            return cls(band=(around, around), **fields)
        centre = logit(around)
        distances = sorted(abs(logit(s) - centre) for s in values)
        width = distances[min(len(distances), math.ceil(share * len(distances))) - 1]
        low = 1.0 / (1.0 + math.exp(-(centre - width)))
        high = 1.0 / (1.0 + math.exp(-(centre + width)))
        return cls(band=(max(0.0, low - _EPSILON), min(1.0, high + _EPSILON)), **fields)


def set_band(evaluation: Evaluation, policy: SetEscalation) -> tuple[float, float]:
    """The band ``policy`` applies to ``evaluation``: its own, or the gate's
    PARTIAL band recorded in ``details["bands"]``."""
    if policy.band is not None:
        return policy.band
    bands = evaluation.details.get("bands")
    if isinstance(bands, Mapping):
        try:
            return float(bands["partial"]), float(bands["relevant"])
        except (KeyError, TypeError, ValueError):
            pass
    return 0.0, 1.0


def combined_grade(grades: Sequence[float], policy: SetEscalation) -> float:
    """The list's grades made one by ``policy.combine`` (module doc); 0 for none."""
    values = list(grades)
    if not values:
        return 0.0
    if policy.combine == "max":
        return max(values)
    if policy.combine == "mean":
        return sum(values) / len(values)
    miss = 1.0
    for g in values:
        miss *= 1.0 - min(g, policy.certainty)
    return 1.0 - miss


def escalated_set_score(gate_score: float, grades: Sequence[float], policy: SetEscalation) -> float:
    """The set probability after the grader's answers (module doc)."""
    g = combined_grade(grades, policy)
    if policy.trust is None:
        return g
    z = logit(gate_score) + policy.trust * (2.0 * g - 1.0)
    return 1.0 / (1.0 + math.exp(-z))


def thresholds_of(evaluation: Evaluation, fallback: Thresholds) -> Thresholds:
    """The set bands ``evaluation`` was banded with (``fallback`` when unrecorded)."""
    return recorded_bands(evaluation, "bands", fallback)


def audited(query: str, policy: SetEscalation) -> bool:
    """Whether ``query``'s list is in the audit sample of ``policy`` (module doc)."""
    if policy.audit <= 0.0:
        return False
    digest = text_digest(f"{policy.audit_seed}:{query}")  # any str, surrogates too
    return int(digest[:16], 16) / 2.0**64 < policy.audit


def select_list(evaluation: Evaluation, policy: SetEscalation, query: str = "") -> Selection:
    """The chunks ``policy`` sends to the grader: the list's first ``max_chunks``
    when its set probability lies in the band or the list is audited (``query``
    decides, module doc), else none."""
    band = set_band(evaluation, policy)
    threshold = thresholds_of(evaluation, Thresholds(relevant=band[1], partial=band[0])).relevant
    uncertain = bool(evaluation.chunks) and band[0] <= evaluation.score <= band[1]
    audit = bool(evaluation.chunks) and audited(query, policy)
    grades = evaluation.chunks[: policy.max_chunks] if uncertain or audit else ()
    return Selection(
        band=band,
        threshold=threshold,
        candidates=1 if uncertain else 0,
        chosen=tuple(g.chunk_id for g in grades),
        gate_scores={g.chunk_id: g.score for g in grades},
        total=len(evaluation.chunks),
        audited=audit,
    )


def escalated_set_evaluation(
    evaluator: Evaluator,
    query: CheckedQuery,
    chunks: Sequence[Chunk],
    corpus_stats: CorpusStats | None,
    gate: Evaluation,
    grades: Mapping[str, float],
    policy: SetEscalation,
) -> Evaluation:
    """The evaluation with the grader's answers as the chunks' grades and the set
    probability and verdict recomputed from them (module doc); ``details
    ["set_escalation"]`` records how."""
    if not grades:
        return gate
    graded = evaluator.evaluate(query, chunks, corpus_stats, chunk_grades=grades)
    combined = combined_grade(list(grades.values()), policy)
    score = escalated_set_score(gate.score, list(grades.values()), policy)
    thresholds = thresholds_of(gate, evaluator.config.thresholds)
    verdict = verdict_for(score, thresholds)
    how = "the grader decides" if policy.trust is None else f"trust {policy.trust:g}"
    details = {
        **graded.details,
        "set_escalation": {
            "gate_score": gate.score,
            "grader_score": combined,
            "combine": policy.combine,
            "trust": policy.trust,
            "graded": len(grades),
        },
    }
    reasoning = (
        f"{verdict.value} ({score:.2f}): the list was uncertain (gate {gate.score:.2f}); the "
        f"grader's {policy.combine} of {len(grades)} chunk grade(s) is {combined:.2f} ({how}); "
        f"gate: {gate.reasoning}"
    )
    return replace(graded, score=score, verdict=verdict, details=details, reasoning=reasoning)


def escalation_policy(
    value: Escalation | SetEscalation | Mapping[str, Any] | None,
) -> Escalation | SetEscalation:
    """A cascade's policy: ``value`` itself, the default chunk policy (``None``),
    or an :class:`Escalation` built from a dict of its fields."""
    if isinstance(value, SetEscalation):
        return value
    return Escalation.of(value)
