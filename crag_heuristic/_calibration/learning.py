"""A cascade that learns from its grader: every verdict kept, the gate refitted, the band
certified again, on the user's own traffic.

A set cascade (:class:`~crag_heuristic._grading.lists.SetEscalation`) pays an expensive
grader for the lists its gate is unsure of. Each answer is a label of the user's own
traffic, which the shipped gate never saw. :class:`LearningCascade` keeps every one in
the grade log and learns from them, without giving up the guarantee:

1. **Explore, then audit.** The first ``explore`` lists all go to the grader (nothing
   is known yet: the gate decides nothing alone, and the status says how many labels
   a first band still needs); afterwards every list whose set probability lies in the
   band in force goes to it, and so does a share ``audit`` of all lists, chosen by a
   seeded hash of the query whatever the gate thinks (the *audit*:
   :func:`~crag_heuristic._grading.lists.audited`). The explored and audited lists
   are a sample of the traffic that does not depend on the gate; the lists escalated
   because the gate was unsure are not, and they are only used to fit.
2. **Refit at checkpoints.** When the labels reach ``first_refit * 2^j`` (100, 200, 400,
   ... up to ``refits`` times), the gate's set stage is refitted on every label so far,
   each weighted by the inverse of the probability it had of being labelled (1 in the
   band or while exploring, ``audit`` outside it: the Horvitz-Thompson weight, so the
   lists the gate was unsure of do not count for more than their share of the
   traffic), on the shipped gate's evidence and a few more (``features``), pulled
   towards the shipped gate's coefficients (a maximum a posteriori fit with strength
   ``prior_c``: :func:`~crag_heuristic._calibration.refit.refit_stage`). Its verdict
   bands (RELEVANT / PARTIAL) are chosen again on the audited labels; with
   ``learn_chunks``, the chunk stage is refitted the same way on the grader's chunk
   grades.
3. **Certify on the labels that support the claim.** Each gate (the shipped one and
   every refit) has a :class:`~crag_heuristic._grading.betting.BettingCertificate`
   fed only with audited lists that arrived *after* that gate was fixed: for those,
   the gate's scores are independent of the labels, and the audit is a sample of the
   traffic. Its tests are anytime-valid, so the band is read after every label. The
   ``delta`` is shared out in advance: ``shipped_share`` of it to the shipped gate,
   the rest in equal parts to the ``refits`` refits; by the union bound, with
   probability at least ``1 - delta`` every certified band of every gate holds at
   once.
4. **Use the best certified band.** The gate in force is the one whose certified band
   sends the fewest audited lists to the grader (the shipped gate on ties). A band is
   never used without its certificate: before the first, every list goes to the grader.

**State.** The grade log is the state: each label is a record (the query's SHA-256,
never its text; the gate's evidence; how likely the list was to be labelled; whether it
was audited; the grader's decision and chunk grades), appended as it arrives. A
cascade given a log reads it first and goes on from there (a restart loses nothing),
and reads what other processes appended before each decision (several processes share
one log and reach the same gates and bands: the refits and the certificates are
functions of the log's records in order). Records of another gate, grader or settings
(another ``fingerprint``) are skipped and counted.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._cache.keys import text_digest
from .._config import (
    EvaluatorConfig,
    Guarantee,
    LogisticStage,
    ModelConfig,
    ModelTerm,
    Thresholds,
    _check_number,
    load_config,
)
from .._evaluator.evaluator import Evaluator
from .._evaluator.model import apply
from .._evidence import SET, signal_of
from .._exceptions import ConfigError, CragError, InputError
from .._grading.betting import BettingCertificate
from .._grading.guarantee import TARGETS, Target, list_decision
from .._grading.lists import SetEscalation
from .._grading.monitor import RECORD_VERSION as MONITOR_RECORD_VERSION
from .._grading.monitor import GuaranteeMonitor, check_record
from .._logging import get_logger
from .._optional import requires
from .._text.analyzer import Analyzer
from .gate import WIDER_SET_FEATURES, _bands, _chunk_bands
from .refit import refit_stage

LEARNED_FEATURES: tuple[str, ...] = WIDER_SET_FEATURES
"""The set evidence a refit reads beside the shipped gate's own (none of it reads the
chunk stage, so a list's evidence is the same under every refit)."""

RECORD_SOURCE = "learning"
"""The ``source`` of a learning cascade's grade-log records."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Learning:
    """How a :class:`LearningCascade` explores, refits and certifies (module doc).
    Frozen, keyword-only, validated.

    Attributes:
        target, eps, delta: the guarantee (``recall``: at most ``eps`` of failed
            lists pass without the grader; ``agreement``: the gate's own decisions
            disagree with the grader on at most ``eps`` of lists), with probability
            ``1 - delta``.
        explore: the first lists all sent to the grader (and every list, audited, for
            as long as no band is certified).
        audit: the share of all lists sent to the grader afterwards whatever the
            gate thinks, in (0, 1]: the sample that certifies bands (without it no
            band could ever be loosened).
        audit_seed: the seed of the audit's hash.
        first_refit: the labels at the first refit (then at each doubling).
        refits: the most refits (each certificate of a refit gets an equal part of
            ``(1 - shipped_share) * delta``); 0: the shipped gate is only certified.
        shipped_share: the part of ``delta`` the shipped gate's certificate gets.
        prior_c: how far a refit may move from the shipped gate (larger: further).
        features: the set evidence a refit reads beside the shipped gate's.
        learn_chunks: refit the chunk stage on the grader's chunk grades too.
        escalation: how lists go to the grader (chunks, combining, timeout, cache);
            its band, audit and guarantee are the cascade's and must be unset.
    """

    target: Target = "recall"
    eps: float = 0.1
    delta: float = 0.1
    explore: int = 400
    audit: float = 0.05
    audit_seed: int = 0
    first_refit: int = 100
    refits: int = 4
    shipped_share: float = 0.5
    prior_c: float = 0.5
    features: tuple[str, ...] = LEARNED_FEATURES
    learn_chunks: bool = True
    escalation: SetEscalation = field(default_factory=SetEscalation)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ConfigError("target", self.target, f"must be one of {', '.join(TARGETS)}")
        for name in ("eps", "delta"):
            _check_number(
                name, getattr(self, name), low=0.0, high=1.0, low_open=True, high_open=True
            )
        _check_number("explore", self.explore, low=0, integer=True)
        _check_number("audit", self.audit, low=0.0, high=1.0, low_open=True)
        _check_number("audit_seed", self.audit_seed, low=0, integer=True)
        _check_number("first_refit", self.first_refit, low=10, integer=True)
        _check_number("refits", self.refits, low=0, integer=True)
        _check_number("shipped_share", self.shipped_share, low=0.0, high=1.0, low_open=True)
        if self.refits and self.shipped_share >= 1.0:
            raise ConfigError("shipped_share", self.shipped_share, "must leave a share for refits")
        _check_number("prior_c", self.prior_c, low=0.0, low_open=True)
        features: object = self.features
        if isinstance(features, str) or not all(isinstance(f, str) for f in self.features):
            raise ConfigError("features", self.features, "must be a list of set feature names")
        object.__setattr__(self, "features", tuple(self.features))
        for name in self.features:
            if name not in SET:
                raise ConfigError("features", name, "is not a set feature")
            if signal_of(name, "set") == "chunk_model":
                raise ConfigError("features", name, "reads the chunk stage: it cannot be learnt")
        if not isinstance(self.learn_chunks, bool):
            raise ConfigError("learn_chunks", self.learn_chunks, "must be true or false")
        if not isinstance(self.escalation, SetEscalation):
            raise ConfigError("escalation", self.escalation, "must be a SetEscalation")
        e = self.escalation
        if e.band is not None or e.audit or e.guarantee is not None:
            raise ConfigError(
                "escalation", e, "its band, audit and guarantee are the learning cascade's"
            )

    def shares(self) -> tuple[float, float]:
        """``(delta of the shipped gate's certificate, delta of each refit's)``."""
        shipped = self.delta * (self.shipped_share if self.refits else 1.0)
        each = self.delta * (1.0 - self.shipped_share) / self.refits if self.refits else 0.0
        return shipped, each

    def checkpoints(self) -> tuple[int, ...]:
        """The label counts at which the gate is refitted."""
        return tuple(self.first_refit * 2**j for j in range(self.refits))


@dataclass(frozen=True, slots=True)
class LearningSnapshot:
    """What one request uses: the gate in force, the escalation policy, and how the
    learning cascade got there (the router takes one per request and hands it back
    with the result).

    Attributes:
        evaluator: the gate in force.
        escalation: the policy: its band (the certified one, or everything) and its
            audit share (1 while exploring).
        model: which gate: 0 the shipped one, ``j`` the ``j``-th refit.
        certified: whether the band is a certified one.
        exploring: whether every list still goes to the grader to explore.
        labels: the labels the cascade had read.
    """

    evaluator: Evaluator
    escalation: SetEscalation
    model: int
    certified: bool
    exploring: bool
    labels: int


@dataclass(frozen=True, slots=True)
class LearningDecision:
    """A result's part of the learning cascade (``CRAGResult.learning``).

    Attributes:
        model, certified, exploring: the snapshot's.
        band: the band the list was escalated by.
        audited: the list was sent to the grader whatever the gate thought.
        propensity: the probability it had of going to the grader.
        labelled: the grader's answer became a label (kept in the log).
        labels: the labels after this one.
    """

    model: int
    band: tuple[float, float]
    certified: bool
    exploring: bool
    audited: bool
    propensity: float
    labelled: bool
    labels: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        return {
            "model": self.model,
            "band": list(self.band),
            "certified": self.certified,
            "exploring": self.exploring,
            "audited": self.audited,
            "propensity": self.propensity,
            "labelled": self.labelled,
            "labels": self.labels,
        }


@dataclass(frozen=True, slots=True)
class ListView:
    """What a learning cascade reads of one decided list: the query's SHA-256, the
    gate's own set probability, its set evidence (and the fallback that scored it,
    when the input lacked some), each chunk's evidence by id.

    :meth:`of` reads them from an evaluation (before or after the grader's
    answers: the evidence a cascade reads does not read the chunk stage, and the
    gate's own probability is kept in ``details["set_escalation"]``)."""

    query: str
    score: float
    features: Mapping[str, float | None]
    fallback: tuple[str, ...]
    chunks: tuple[tuple[str, Mapping[str, float | None]], ...]

    @classmethod
    def of(cls, query: str, evaluation: Any) -> ListView:
        details = evaluation.details
        escalated = details.get("set_escalation")
        score = float(evaluation.score)
        if isinstance(escalated, Mapping) and isinstance(escalated.get("gate_score"), float):
            score = float(escalated["gate_score"])
        return cls(
            query=text_digest(query),
            score=score,
            features=_plain(details.get("features") or {}),
            fallback=tuple(details.get("bands", {}).get("fallback_for", ())),
            chunks=tuple((g.chunk_id, _plain(g.features)) for g in evaluation.chunks),
        )


@dataclass(frozen=True, slots=True)
class LearningStatus:
    """Where a learning cascade stands (for a status page, metrics, a monitor).

    Attributes:
        fingerprint: what its records are filed under (gate, grader, settings).
        labels: labels read from the log; ``audited``: of them, audited or explored.
        exploring: every list still goes to the grader.
        refits: refitted gates (``pending``: a refit being fitted).
        model: the gate in force (0: the shipped one).
        band: its band (``None``: none certified yet: every list goes to the grader).
        guarantee: what the band guarantees (``None`` without one), a
            :class:`~crag_heuristic.config.Guarantee` (``labels`` says how it was
            certified).
        needed: without a band, audited lists the risk counts that a first band
            still needs (at zero violations); 0 with one.
        lists, graded: lists this process decided, and those it sent to the grader;
            ``saved``: the share it did not (``None`` before any).
        skipped: log records of another cascade, or that are not records (the
            log's own count of what it refused: unreadable, badly signed, mistyped).
        log_errors: labels the log could not take (kept in memory).
    """

    fingerprint: str
    labels: int
    audited: int
    exploring: bool
    refits: int
    pending: bool
    model: int
    band: tuple[float, float] | None
    guarantee: Guarantee | None
    needed: int
    lists: int
    graded: int
    saved: float | None
    skipped: int
    log_errors: int

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields (the guarantee's own, and its sentence)."""
        g = self.guarantee
        return {
            "fingerprint": self.fingerprint,
            "labels": self.labels,
            "audited": self.audited,
            "exploring": self.exploring,
            "refits": self.refits,
            "pending": self.pending,
            "model": self.model,
            "band": None if self.band is None else list(self.band),
            "guarantee": None
            if g is None
            else {
                "target": g.target,
                "eps": g.eps,
                "delta": g.delta,
                "band": list(g.band),
                "counted": g.counted,
                "violations": g.violations,
                "escalated": g.escalated,
                "labels": g.labels,
            },
            "needed": self.needed,
            "lists": self.lists,
            "graded": self.graded,
            "saved": self.saved,
            "skipped": self.skipped,
            "log_errors": self.log_errors,
            "describe": self.describe(),
        }

    def describe(self) -> str:
        """One paragraph: what the cascade does now and why."""
        if self.band is None or self.guarantee is None:
            why = (
                f"exploring: every list goes to the grader ({self.labels} labels so far)"
                if self.exploring
                else "no band certified yet: every list goes to the grader"
            )
            return f"{why}; a first band needs {self.needed} more audited list(s) counted."
        return (
            f"gate {self.model} ({self.refits} refit(s) from {self.labels} labels), band "
            f"{self.band[0]:.3f}-{self.band[1]:.3f}: {self.guarantee.describe()}"
        )


@dataclass
class _Label:
    index: int
    query: str
    features: dict[str, float | None]
    fallback: tuple[str, ...]
    good: bool
    audited: bool
    propensity: float
    chunks: list[tuple[dict[str, float | None], float]]
    counts: bool = False  # certifies: audited, and its query's first audited label


@dataclass
class _Gate:
    index: int
    config: EvaluatorConfig
    evaluator: Evaluator
    certificate: BettingCertificate
    start: int  # the first label index its certificate counts
    audited_scores: list[float] = field(default_factory=list)


class LearningCascade:
    """The cascade of the module doc: give it to the router, ``CRAG(retriever,
    grader=..., learning=LearningCascade(...))``, or to ``crag-heuristic serve
    --learn``. Thread-safe.

    Args:
        gate: the gate to start from: an :class:`~crag_heuristic.Evaluator` (its
            analyzer is every refit's too: an index directory's, say), an evaluator
            config, a profile name or path (default: the shipped profile).
        settings: how it explores, refits and certifies (:class:`Learning`).
        log: the grade log (:class:`~crag_heuristic.grading.JsonlGradeLog`,
            :class:`~crag_heuristic.grading.RedisGradeLog`; ``None``: kept in
            memory, lost with the process).
        background: refit on a background thread (a request never waits for a
            fit); ``False``: at once, inside the call that reached the checkpoint.

    Raises:
        ConfigError: bad settings; a gate without a fitted model (nothing to refit).
        MissingDependencyError: without the ``calibrate`` extra (scikit-learn, SciPy).
    """

    def __init__(
        self,
        gate: Evaluator | EvaluatorConfig | str | None = None,
        *,
        settings: Learning | None = None,
        log: Any = None,
        background: bool = True,
    ) -> None:
        with requires("calibrate", "a learning cascade"):
            import scipy  # noqa: F401 - the refits' solver
            import sklearn  # noqa: F401 - the refits' folds
        self.settings = settings if settings is not None else Learning()
        if not isinstance(self.settings, Learning):
            raise ConfigError("settings", self.settings, "must be a Learning")
        if log is not None and not (
            callable(getattr(log, "append", None)) and callable(getattr(log, "records", None))
        ):
            raise ConfigError("log", log, "must have append(record) and records()")
        if not isinstance(background, bool):
            raise ConfigError("background", background, "must be true or false")
        self.analyzer = gate.analyzer if isinstance(gate, Evaluator) else Analyzer()
        base = gate.config if isinstance(gate, Evaluator) else load_config(gate)
        if base.model is None:
            raise ConfigError("gate", base.name, "has no fitted model to learn from")
        self.gate = _widened(base, self.settings.features)
        self.log = log
        self.background = background
        self._memory: list[dict[str, Any]] = []  # the log when there is none, and unlogged labels
        self._lock = threading.RLock()
        self._refit_lock = threading.Lock()
        self._logger = get_logger()
        self._grader = ""
        self._fingerprint = ""
        self._bound = False
        self._labels: list[_Label] = []
        self._gates: list[_Gate] = []
        self._deployed: tuple[int, tuple[float, float]] | None = None
        self._refitting: threading.Thread | None = None
        self._passed = 0  # checkpoints reached (their refits started)
        self._audited_queries: set[str] = set()
        self._revoked: set[int] = set()  # gates whose band in force saw a breach
        self._watch: GuaranteeMonitor | None = None
        self._history: list[tuple[int, tuple[int, tuple[float, float]] | None]] = []
        self._cursor: Any = None
        self._skipped = 0
        self._log_errors = 0
        self._lists = 0
        self._graded = 0
        self._last_sync = 0.0

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"LearningCascade({s.target} {s.eps:g} at delta {s.delta:g}, gate={self.gate.name!r}, "
            f"log={self.log!r})"
        )

    # -- binding and the log ---------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """What this cascade's records are filed under: its gate, grader and settings."""
        return self._fingerprint

    def bind(self, grader: str) -> None:
        """Tie the cascade to a grader's fingerprint and read the log (the router does
        this once; a second router must use the same grader).

        Raises:
            ConfigError: bound already to another grader.
        """
        with self._lock:
            if self._bound:
                if grader != self._grader:
                    raise ConfigError(
                        "grader", grader, "differs from the one this cascade learns from"
                    )
                return
            self._grader = grader
            s = self.settings
            payload = {
                "gate": self.gate.fingerprint(),
                "grader": grader,
                "settings": [
                    s.target,
                    s.eps,
                    s.delta,
                    s.explore,
                    s.audit,
                    s.audit_seed,
                    s.first_refit,
                    s.refits,
                    s.shipped_share,
                    s.prior_c,
                    list(s.features),
                    s.learn_chunks,
                ],
            }
            text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
            self._fingerprint = hashlib.sha256(text.encode()).hexdigest()[:16]
            shipped, _ = s.shares()
            self._gates = [self._new_gate(0, self.gate, shipped, 0)]
            self._bound = True
            self._sync(force=True)

    def _new_gate(self, index: int, config: EvaluatorConfig, delta: float, start: int) -> _Gate:
        s = self.settings
        centre = config.thresholds.relevant
        certificate = BettingCertificate(target=s.target, eps=s.eps, delta=delta, centre=centre)
        evaluator = Evaluator(config, analyzer=self.analyzer)
        return _Gate(index, config, evaluator, certificate, start)

    def _sync(self, *, force: bool = False) -> None:
        """Read what the log holds beyond what was read (other processes' labels)."""
        now = time.monotonic()
        if not force and now - self._last_sync < 0.5:
            return
        self._last_sync = now
        if self.log is None:
            fresh, self._cursor = self._memory[self._cursor or 0 :], len(self._memory)
        else:
            try:
                fresh, self._cursor = _tail(self.log, self._cursor)
            except Exception as exc:  # noqa: BLE001 - a log never fails a query
                self._log_errors += 1
                self._logger.warning("crag.learning.log_error", error=type(exc).__name__)
                return
        for record in fresh:
            self._ingest(record)

    # -- per request -----------------------------------------------------------------------

    def snapshot(self) -> LearningSnapshot:
        """The gate and policy for the next request (read after the log's news)."""
        with self._lock:
            if not self._bound:
                raise InputError(
                    "the learning cascade is not bound to a grader (CRAG(..., learning=...))"
                )
            self._sync()
            # without a certified band every list goes to the grader anyway: all of them
            # are then audited (the sample that certifies grows at no extra cost)
            exploring = len(self._labels) < self.settings.explore or self._deployed is None
            if self._deployed is None:
                gate, band, certified = self._gates[0], (0.0, 1.0), False
            else:
                index, band = self._deployed
                gate, certified = self._gates[index], True
            audit = 1.0 if exploring else self.settings.audit
            policy = replace(
                self.settings.escalation,
                band=band,
                audit=audit,
                audit_seed=self.settings.audit_seed,
            )
            return LearningSnapshot(
                evaluator=gate.evaluator,
                escalation=policy,
                model=gate.index,
                certified=certified,
                exploring=exploring,
                labels=len(self._labels),
            )

    def observe(self, result: Any, snapshot: LearningSnapshot) -> LearningDecision:
        """Take a result decided with ``snapshot`` into account (the router calls it):
        a list the grader answered becomes a label (appended to the log, then read
        back with the others'); any other list is counted. A log that fails never
        fails this (the label is kept in memory and ``log_errors`` counts it)."""
        report = result.cascade
        answered = report is not None and bool(report.grades) and report.failure is None
        return self.learn(
            ListView.of(result.query, result.initial_evaluation),
            snapshot,
            audited=bool(report is not None and report.audited),
            graded=bool(report is not None and report.escalated),
            grades=dict(report.grades) if answered else None,
        )

    def learn(
        self,
        view: ListView,
        snapshot: LearningSnapshot,
        *,
        audited: bool,
        graded: bool,
        grades: Mapping[str, float] | None,
    ) -> LearningDecision:
        """:meth:`observe` on what it reads of a result: the list (``view``),
        whether it was audited and sent to the grader, and the grader's chunk
        grades when it answered (a benchmark replaying a stream calls this)."""
        policy = snapshot.escalation
        band = policy.band or (0.0, 1.0)
        in_band = band[0] <= view.score <= band[1]
        propensity = 1.0 if in_band or snapshot.exploring else policy.audit
        record = None
        if grades:
            record = self._record(view, grades, snapshot, audited, propensity)
        with self._lock:
            self._lists += 1
            self._graded += graded
            if record is not None:
                self._append(record)
                self._sync(force=True)
            labels = len(self._labels)
        return LearningDecision(
            model=snapshot.model,
            band=band,
            certified=snapshot.certified,
            exploring=snapshot.exploring,
            audited=audited,
            propensity=propensity,
            labelled=record is not None,
            labels=labels,
        )

    def score(self, view: ListView, model: int) -> float:
        """The set probability gate ``model`` gives the list of ``view`` (from its
        evidence: the same under every gate of this cascade)."""
        with self._lock:
            config = self._gates[model].config
        return _score(config, view.features, view.fallback)

    def _record(
        self,
        view: ListView,
        grades: Mapping[str, float],
        snapshot: LearningSnapshot,
        audited: bool,
        propensity: float,
    ) -> dict[str, Any]:
        """The grade-log record of a label: the monitor's record of a list the grader
        answered (:func:`~crag_heuristic._grading.monitor.record_of`'s fields) with the
        cascade's own (``source`` ``"learning"``, ``learner``, ``model``,
        ``exploring``, ``propensity``, ``fallback``) and each graded chunk's grade and
        evidence (``grades``, ``chunk_features``)."""
        graded = [(chunk_id, row) for chunk_id, row in view.chunks if chunk_id in grades]
        values = [float(grades[chunk_id]) for chunk_id, _ in graded]
        band = snapshot.escalation.band or (0.0, 1.0)
        gate = self._gates[snapshot.model].config
        return {
            "v": MONITOR_RECORD_VERSION,
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "query": view.query,
            "profile": gate.fingerprint(),
            "profile_name": gate.name,
            "grader": self._grader,
            "score": view.score,
            "band": list(band),
            "in_band": band[0] <= view.score <= band[1],
            "audited": audited or snapshot.exploring,
            "grader_score": max(values, default=0.0),
            "grader_good": list_decision(values),
            "chunks": len(values),
            "features": _plain(view.features),
            "source": RECORD_SOURCE,
            "learner": self._fingerprint,
            "model": snapshot.model,
            "exploring": snapshot.exploring,
            "propensity": propensity,
            "fallback": list(view.fallback),
            "grades": values,
            "chunk_features": [_plain(row) for _, row in graded],
        }

    def _append(self, record: dict[str, Any]) -> None:
        if self.log is None:
            self._memory.append(record)
            return
        try:
            self.log.append(record)
        except Exception as exc:  # noqa: BLE001 - a log never fails a query
            self._log_errors += 1
            self._logger.warning("crag.learning.log_error", error=type(exc).__name__)
            self._ingest(record)  # kept in this process at least

    # -- learning --------------------------------------------------------------------------

    def _ingest(self, record: Mapping[str, Any]) -> None:
        """One record of the log, in order: a label, certificates fed, a checkpoint met."""
        label = _read(record, len(self._labels), self._fingerprint)
        if label is None:
            self._skipped += 1
            return
        self._labels.append(label)
        if label.audited and label.query not in self._audited_queries:
            # the audit follows the query: a query audited again is one draw of the sample
            self._audited_queries.add(label.query)
            label.counts = True
            for gate in self._gates:
                score = _score(gate.config, label.features, label.fallback)
                gate.audited_scores.append(score)
                if label.index >= gate.start:
                    gate.certificate.observe(score, label.good)
            self._watched(label)
        self._choose()
        self._next_refit()

    def _next_refit(self) -> None:
        """Start the next checkpoint's refit when its labels are in and none is running."""
        checkpoints = self.settings.checkpoints()
        if self._refitting is not None or self._passed >= len(checkpoints):
            return
        upto = checkpoints[self._passed]
        if len(self._labels) < upto:
            return
        self._passed += 1
        self._start_refit(self._passed, upto)

    def _choose(self) -> None:
        """The gate in force: the certified band sending the fewest audited lists to the
        grader (module doc, step 4), among the gates whose watch never saw a breach."""
        best: tuple[float, int, tuple[float, float]] | None = None
        for gate in self._gates:
            band = gate.certificate.band
            if band is None or gate.index in self._revoked:
                continue
            scores = np.array(gate.audited_scores)
            share = (
                float(np.mean((scores >= band[0]) & (scores <= band[1]))) if len(scores) else 1.0
            )
            if best is None or share < best[0] - 1e-12:
                best = (share, gate.index, band)
        deployed = None if best is None else (best[1], best[2])
        if deployed != self._deployed:
            self._deployed = deployed
            self._history.append((len(self._labels), deployed))
            self._watch = (
                None
                if deployed is None
                else GuaranteeMonitor(self._guarantee(self._gates[deployed[0]], deployed[1]))
            )

    def _watched(self, label: _Label) -> None:
        """The band in force watched on the audited lists after it was put in force (the
        monitor's breach test, :class:`~crag_heuristic.grading.GuaranteeMonitor`): when
        the traffic drifts and the test rejects the bound, that gate's bands are not used
        again (the next certified one is, or every list goes to the grader) and a
        ``crag.learning.breach`` event says so."""
        if self._watch is None or self._deployed is None:
            return
        model, _ = self._deployed
        score = _score(self._gates[model].config, label.features, label.fallback)
        if self._watch.count_label(True, score, label.good):
            status = self._watch.status()
            self._revoked.add(model)
            self._logger.warning(
                "crag.learning.breach", model=model, counted=status.counted,
                violations=status.violations, labels=len(self._labels),
            )  # fmt: skip
            self._choose()

    def _guarantee(self, gate: _Gate, band: tuple[float, float]) -> Guarantee:
        """What ``gate``'s certified ``band`` guarantees, as a :class:`Guarantee`."""
        s = self.settings
        state = gate.certificate.status()
        share = (
            float(np.mean([band[0] <= v <= band[1] for v in gate.audited_scores]))
            if gate.audited_scores
            else 1.0
        )
        return Guarantee(
            target=s.target,
            eps=s.eps,
            delta=s.delta,
            band=band,
            n=sum(1 for x in self._labels if x.counts and x.index >= gate.start),
            counted=state.counted,
            violations=state.violations,
            risk=state.violations / state.counted if state.counted else 0.0,
            risk_bound=s.eps,
            escalated=share,
            centre=None if s.target == "recall" else gate.certificate.centre,
            grader=self._grader,
            labels=f"certified by betting on the audited lists after gate {gate.index} was "
            f"fixed (delta {gate.certificate.delta:g} of {s.delta:g})",
        )

    def _start_refit(self, index: int, upto: int) -> None:
        labels = list(self._labels[:upto])
        if self.background:
            thread = threading.Thread(
                target=self._refit,
                args=(index, labels, upto),
                name="crag-learning-refit",
                daemon=True,
            )
            self._refitting = thread
            thread.start()
        else:
            self._refitting = threading.current_thread()
            self._refit(index, labels, upto)

    def _refit(self, index: int, labels: list[_Label], upto: int) -> None:
        try:
            config = refit_gate(
                self.gate, labels, self.settings, name=f"{self.gate.name}+learned{index}"
            )
        except CragError as exc:  # e.g. labels of one class: no refit, said
            self._logger.warning("crag.learning.refit_skipped", refit=index, reason=str(exc))
            config = None
        except Exception as exc:  # noqa: BLE001 - a refit never fails a query
            self._logger.warning("crag.learning.refit_error", refit=index, error=type(exc).__name__)
            config = None
        with self._lock:
            self._refitting = None
            if config is not None:
                _, each = self.settings.shares()
                gate = self._new_gate(len(self._gates), config, each, upto)
                for label in self._labels:
                    if label.counts:
                        gate.audited_scores.append(_score(config, label.features, label.fallback))
                        if label.index >= upto:
                            gate.certificate.observe(gate.audited_scores[-1], label.good)
                self._gates.append(gate)
                self._logger.info("crag.learning.refit", refit=index, labels=upto)
                self._choose()
            self._next_refit()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a refit being fitted (tests, benchmarks); whether none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                thread = self._refitting
            if thread is None or thread is threading.current_thread():
                return True
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)
            if deadline is not None and time.monotonic() >= deadline:
                with self._lock:
                    return self._refitting is None

    def history(self) -> list[tuple[int, int | None, tuple[float, float] | None]]:
        """Every change of the band in force, in order: ``(labels read, gate, band)``
        (``None, None``: no band, every list to the grader)."""
        with self._lock:
            return [
                (labels, None, None) if d is None else (labels, d[0], d[1])
                for labels, d in self._history
            ]

    def status(self) -> LearningStatus:
        """Where the cascade stands (:class:`LearningStatus`)."""
        with self._lock:
            s = self.settings
            audited = sum(1 for label in self._labels if label.audited)
            guarantee = None
            band = None
            model = 0
            needed = 0
            if self._deployed is not None:
                model, band = self._deployed
                guarantee = self._guarantee(self._gates[model], band)
            elif self._gates:
                needed = min(g.certificate.status().needed for g in self._gates)
            return LearningStatus(
                fingerprint=self._fingerprint,
                labels=len(self._labels),
                audited=audited,
                exploring=len(self._labels) < s.explore or self._deployed is None,
                refits=max(0, len(self._gates) - 1),
                pending=self._refitting is not None,
                model=model,
                band=band,
                guarantee=guarantee,
                needed=needed,
                lists=self._lists,
                graded=self._graded,
                saved=1.0 - self._graded / self._lists if self._lists else None,
                skipped=self._skipped + int(getattr(self.log, "skipped", 0) or 0),
                log_errors=self._log_errors,
            )


# -- refitting --------------------------------------------------------------------------------


def _widened(config: EvaluatorConfig, features: Sequence[str]) -> EvaluatorConfig:
    """``config`` whose set stage also reads ``features`` (weight 0: the same scores),
    so that every evaluation records them for the refits."""
    assert config.model is not None
    stage = config.model.set
    have = {term.feature for term in stage.terms}
    extra = tuple(ModelTerm(feature=f, weight=0.0) for f in features if f not in have)
    if not extra:
        return config
    model = replace(config.model, set=replace(stage, terms=stage.terms + extra))
    return replace(config, model=model)


def refit_gate(
    gate: EvaluatorConfig,
    labels: Sequence[_Label],
    settings: Learning,
    *,
    name: str,
) -> EvaluatorConfig:
    """The gate refitted on ``labels`` (module doc, step 2): the set stage (and the
    chunk stage with ``learn_chunks``) pulled towards ``gate``'s by
    :func:`~crag_heuristic._calibration.refit.refit_stage`, each label weighted by
    ``1 / propensity``; the verdict bands chosen again on the audited labels, from
    out-of-fold probabilities (three folds by query).

    Raises:
        InputError: labels of one class (nothing to learn a boundary from).
    """
    assert gate.model is not None
    main = [label for label in labels if not label.fallback]
    good = np.array([label.good for label in main])
    if not main or good.all() or not good.any():
        raise InputError("the labels are of one class")
    rows = [label.features for label in main]
    weights = np.array([1.0 / label.propensity for label in main])
    folds = np.array([_fold(label.query) for label in main])
    set_stage = _standardised(gate.model.set, rows, weights)
    fitted, oof = _refit_with_oof(set_stage, rows, good, weights, folds, settings.prior_c)
    thresholds = gate.thresholds
    audited = np.array([label.audited for label in main])
    if audited.sum() >= 50 and 0 < good[audited].sum() < audited.sum():
        relevant, partial, _ = _bands(
            oof[audited],
            good[audited],
            np.ones(int(audited.sum()), dtype=bool),
            target_precision=0.9,
            min_failure_recall=0.8,
            max_good_irrelevant=0.15,
        )
        thresholds = Thresholds(relevant=relevant, partial=partial)
    chunk_stage = gate.model.chunk
    chunk_thresholds = gate.chunk_thresholds
    reads_chunks = any(signal_of(t.feature, "set") == "chunk_model" for t in gate.model.set.terms)
    if settings.learn_chunks and not reads_chunks:
        rows_c = [row for label in main for row, _ in label.chunks]
        y_c = np.array([g >= 0.5 for label in main for _, g in label.chunks])
        if len(y_c) >= 50 and 0 < y_c.sum() < len(y_c):
            w_c = np.array([1.0 / label.propensity for label in main for _ in label.chunks])
            f_c = np.array([f for label, f in zip(main, folds, strict=True) for _ in label.chunks])
            chunk_stage, oof_c = _refit_with_oof(
                chunk_stage, rows_c, y_c, w_c, f_c, settings.prior_c
            )
            relevant_c, partial_c, _ = _chunk_bands(oof_c, y_c)
            chunk_thresholds = Thresholds(relevant=relevant_c, partial=partial_c)
    model = ModelConfig(
        chunk=chunk_stage,
        set=fitted,
        fitted_on=f"{len(labels)} grader labels of the user's traffic",
        fallbacks=gate.model.fallbacks,
    )
    return replace(
        gate, name=name, model=model, thresholds=thresholds, chunk_thresholds=chunk_thresholds
    )


_FOLDS = 3


def _fold(query: str) -> int:
    """A query's fold (by a hash: every list of one query in one fold)."""
    return int(hashlib.sha256(query.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16) % _FOLDS


def _standardised(
    stage: LogisticStage, rows: Sequence[Mapping[str, float | None]], weights: np.ndarray
) -> LogisticStage:
    """``stage`` with each term it does not weigh yet (weight 0: the evidence a refit
    adds) standardised on ``rows``: its mean and scale the weighted mean and standard
    deviation there (a term of weight 0 scores nothing whatever its scale, so the
    stage's scores are unchanged; the prior's pull then means the same for every
    feature)."""
    terms = []
    for term in stage.terms:
        if term.weight == 0.0:
            values = [(r.get(term.feature), w) for r, w in zip(rows, weights, strict=True)]
            known = [(float(v), w) for v, w in values if v is not None]
            if known:
                x = np.array([v for v, _ in known])
                w = np.array([w for _, w in known])
                mean = float(np.average(x, weights=w))
                std = float(np.sqrt(np.average((x - mean) ** 2, weights=w)))
                term = replace(term, mean=mean, scale=std if std > 0 else 1.0)
        terms.append(term)
    return replace(stage, terms=tuple(terms))


def _refit_with_oof(
    stage: LogisticStage,
    rows: Sequence[Mapping[str, float | None]],
    labels: np.ndarray,
    weights: np.ndarray,
    folds: np.ndarray,
    c: float,
) -> tuple[LogisticStage, np.ndarray]:
    """The stage refitted on every row, and each row's probability from the refit on
    the other folds (the stage itself where a fold's training rows hold one class)."""
    oof = np.zeros(len(rows))
    for fold in range(_FOLDS):
        test = folds == fold
        train = ~test
        part = stage
        if len(set(labels[train].tolist())) == 2:
            part = refit_stage(
                stage,
                [rows[i] for i in np.flatnonzero(train).tolist()],
                labels[train],
                weights=weights[train],
                c=c,
            )
        for i in np.flatnonzero(test).tolist():
            oof[i] = apply(part, rows[i])[0]
    return refit_stage(stage, rows, labels, weights=weights, c=c), oof


def fit_on_views(
    gate: EvaluatorConfig,
    views: Sequence[ListView],
    grades: Sequence[Mapping[str, float]],
    settings: Learning | None = None,
    *,
    name: str = "refit",
) -> EvaluatorConfig:
    """:func:`refit_gate` on lists every one of which the grader graded (all of them
    audited, propensity 1): a gate fitted on a labelled sample, as a learning cascade
    refits (e.g. to measure what its chunk stage learns).

    Raises:
        InputError: labels of one class.
    """
    s = settings if settings is not None else Learning()
    labels = [
        _Label(
            index=i,
            query=view.query,
            features=dict(view.features),
            fallback=view.fallback,
            good=list_decision(grade.values()),
            audited=True,
            propensity=1.0,
            chunks=[(dict(row), float(grade[c])) for c, row in view.chunks if c in grade],
            counts=True,
        )
        for i, (view, grade) in enumerate(zip(views, grades, strict=True))
    ]
    return refit_gate(_widened(gate, s.features), labels, s, name=name)


def _score(
    config: EvaluatorConfig, features: Mapping[str, float | None], fallback: Sequence[str]
) -> float:
    """The set probability ``config`` gives a list of this evidence (its main stage,
    or the fallback the list was scored by: the refits keep the shipped fallbacks)."""
    assert config.model is not None
    stage: LogisticStage = config.model.set
    if fallback:
        chosen = config.model.for_missing(frozenset(fallback))
        if chosen is not None:
            stage = chosen.set
    return apply(stage, features)[0]


# -- records ----------------------------------------------------------------------------------


def _plain(values: Mapping[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for key, value in values.items():
        if value is None:
            out[str(key)] = None
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int | float) and math.isfinite(value):
            out[str(key)] = float(value)
    return out


def _read(record: Any, index: int, fingerprint: str) -> _Label | None:
    """A record of this cascade as a label; ``None`` for another's or one that is not a
    grade-log record (:func:`~crag_heuristic._grading.monitor.check_record`: every
    field strictly typed, so a string ``"false"`` is no bool), or that lacks what the
    cascade writes."""
    try:
        checked = check_record(record)
    except InputError:
        return None
    if checked.get("source") != RECORD_SOURCE or checked.get("learner") != fingerprint:
        return None
    if not all(name in checked for name in _LEARNING_FIELDS):
        return None
    grades, rows = checked["grades"], checked["chunk_features"]
    if len(grades) != len(rows):
        return None
    return _Label(
        index=index,
        query=checked["query"],
        features=dict(checked["features"]),
        fallback=tuple(checked["fallback"]),
        good=checked["grader_good"],
        audited=checked["audited"],
        propensity=float(checked["propensity"]),
        chunks=[(dict(row), float(grade)) for row, grade in zip(rows, grades, strict=True)],
    )


_LEARNING_FIELDS = ("learner", "model", "exploring", "propensity", "fallback", "grades",
                    "chunk_features")  # fmt: skip


def _tail(log: Any, cursor: Any) -> tuple[list[dict[str, Any]], Any]:
    """The log's records after ``cursor`` and the cursor after them (a log with
    ``tail`` reads only those; another is read whole and the first ``cursor`` skipped)."""
    tail = getattr(log, "tail", None)
    if callable(tail):
        records, after = tail(cursor)
        return list(records), after
    records = list(log.records())
    start = cursor or 0
    return records[start:], len(records)
