"""Watching a guarantee at run time: the grader's answers logged, the audit sample checked.

A set cascade with a :class:`~crag_heuristic.config.Guarantee` promises, for traffic
like the lists it was chosen on, that its risk (the share of failed lists passing
without the grader, or of the gate's own decisions the grader would overturn) is
at most ``eps`` with probability ``1 - delta``. Traffic drifts. With an audit share
(``SetEscalation(audit=a)``), a uniform sample of all lists goes to the grader
whatever the gate thought; :class:`GuaranteeMonitor` reads each result:

* every list the grader answered is a record in an append-only log
  (:class:`JsonlGradeLog`, a file; :class:`RedisGradeLog`, a Redis stream): the
  query's SHA-256 (never its text), the gate's set probability and evidence, the
  band, whether it was audited, the grader's combined answer and decision, the
  gate's and the grader's fingerprints. ``crag-heuristic calibrate --grade-log``
  reads the audited records to choose the band again;
* on the audited lists it counts the risk as the guarantee defines it (for
  ``recall``: failed audited lists, and those above the band; for
  ``agreement``: audited lists, and those the gate decided alone against the
  grader) and tests it: when the one-sided Clopper-Pearson lower bound at
  ``1 - delta`` of the observed rate exceeds ``eps``, the guarantee is
  breached (a ``crag.guarantee.breach`` event, once per breach, and the
  metrics sink's ``guarantee_breach`` when it has one); it is restored
  (``crag.guarantee.restored``) when the bound falls back.

The monitor never fails a query: a log that cannot be written is counted
(``status().log_errors``) and logged (``crag.guarantee.log_error``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._config import Guarantee
from .._exceptions import ConfigError, InputError
from .._logging import get_logger
from .._types import Evaluation
from .escalation import CascadeReport
from .guarantee import binomial_lower


class Observed(Protocol):
    """What the monitor reads of a result (a :class:`~crag_heuristic.CRAGResult` is one)."""

    @property
    def query(self) -> str: ...
    @property
    def cascade(self) -> CascadeReport | None: ...
    @property
    def initial_evaluation(self) -> Evaluation: ...
    @property
    def evaluation(self) -> Evaluation: ...


RECORD_VERSION = 1
"""The grade log's record layout (``"v"`` of each record)."""


@runtime_checkable
class GradeLog(Protocol):
    """An append-only log of the grader's answers (records are JSON-ready dicts)."""

    def append(self, record: Mapping[str, Any]) -> None: ...

    def records(self) -> Iterator[dict[str, Any]]: ...


class JsonlGradeLog:
    """The grade log as a file of JSON lines, appended (``O_APPEND``: concurrent
    writers in one or several processes never interleave a line).

    Args:
        path: the file (its folder must exist; the file is created).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise ConfigError("path", str(self.path), "its folder does not exist")
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"JsonlGradeLog({str(self.path)!r})"

    def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(dict(record), sort_keys=True, separators=(",", ":")) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def records(self) -> Iterator[dict[str, Any]]:
        """The records in order; a last line cut short (a crash mid-write) is skipped,
        any other unreadable line is an :class:`~crag_heuristic.InputError`."""
        if not self.path.exists():
            return
        lines = self.path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):  # no newline after it: cut short
                    return
                raise InputError(f"{self.path}: line {number} is not a JSON record") from None
            if not isinstance(record, dict):
                raise InputError(f"{self.path}: line {number} is not a JSON object")
            yield record


class RedisGradeLog:
    """The grade log as a Redis stream (``XADD``, trimmed to about ``maxlen`` records).

    Args:
        client: a ``redis.Redis`` client (the ``redis`` extra).
        stream: the stream's key.
        maxlen: the stream is trimmed to about this many records (``None``: never).
    """

    def __init__(self, client: Any, *, stream: str = "crag:grades", maxlen: int | None = 1_000_000):
        if not isinstance(stream, str) or not stream:
            raise ConfigError("stream", stream, "must be a non-empty string")
        if maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int)):
            raise ConfigError("maxlen", maxlen, "must be a positive integer or None")
        if maxlen is not None and maxlen < 1:
            raise ConfigError("maxlen", maxlen, "must be a positive integer or None")
        self.client = client
        self.stream = stream
        self.maxlen = maxlen

    def __repr__(self) -> str:
        return f"RedisGradeLog(stream={self.stream!r})"

    def append(self, record: Mapping[str, Any]) -> None:
        payload = json.dumps(dict(record), sort_keys=True, separators=(",", ":"))
        if self.maxlen is None:
            self.client.xadd(self.stream, {"record": payload})
        else:
            self.client.xadd(self.stream, {"record": payload}, maxlen=self.maxlen, approximate=True)

    def records(self) -> Iterator[dict[str, Any]]:
        start = "-"
        while True:
            batch = self.client.xrange(self.stream, min=start, max="+", count=1000)
            if not batch:
                return
            for _entry_id, fields in batch:
                raw = fields.get(b"record", fields.get("record"))
                if isinstance(raw, bytes):
                    raw = raw.decode("utf-8")
                record = json.loads(raw)
                if isinstance(record, dict):
                    yield record
            last = batch[-1][0]
            last = last.decode() if isinstance(last, bytes) else str(last)
            start = "(" + last


def query_digest(query: str) -> str:
    """The SHA-256 of a query's text: what a record keeps of it."""
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


def record_of(result: Observed, *, profile: str = "") -> dict[str, Any] | None:
    """The grade-log record of a result whose set cascade got the grader's answers
    (``None`` otherwise: no set cascade, nothing escalated, or the grader failed)."""
    report = result.cascade
    if report is None or report.level != "set" or not report.grades or report.failure is not None:
        return None
    gate = result.initial_evaluation
    escalation = result.evaluation.details.get("set_escalation", {})
    grader_score = escalation.get("grader_score")
    if grader_score is None:
        return None
    low, high = report.band
    features = gate.details.get("features") or {}
    return {
        "v": RECORD_VERSION,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "query": query_digest(result.query),
        "profile": profile,
        "grader": report.grader,
        "score": gate.score,
        "band": [low, high],
        "in_band": low <= gate.score <= high,
        "audited": report.audited,
        "grader_score": float(grader_score),
        "grader_good": float(grader_score) >= 0.5,
        "chunks": len(report.escalated),
        "features": {k: v for k, v in features.items() if isinstance(v, int | float) or v is None},
    }


@dataclass(frozen=True, slots=True)
class MonitorStatus:
    """What the monitor has seen.

    Attributes:
        target, eps, delta: the guarantee's.
        records: lists the grader answered; ``audited``: those in the audit sample.
        counted: audited lists the risk counts over; ``violations``: among them.
        observed: ``violations / counted`` (``None`` before any).
        lower_bound: the Clopper-Pearson lower bound on the risk at ``1 - delta``.
        breached: ``lower_bound > eps``.
        log_errors: records the log could not take.
    """

    target: str
    eps: float
    delta: float
    records: int
    audited: int
    counted: int
    violations: int
    observed: float | None
    lower_bound: float
    breached: bool
    log_errors: int


class GuaranteeMonitor:
    """Checks a :class:`~crag_heuristic.config.Guarantee` on the audit sample and logs
    the grader's answers (module doc). Thread-safe. ``CRAG(..., monitor=...)``
    calls :meth:`observe` with every result; any code may call it too.

    Args:
        guarantee: what to check (a profile's ``guarantee``, or
            :func:`~crag_heuristic.grading.guaranteed_band`'s).
        log: where records go (``None``: nowhere).
        metrics: a metrics sink; its ``guarantee_breach(target)`` is called on a
            breach when it has one.
        profile: the gate's fingerprint, recorded.
    """

    def __init__(
        self,
        guarantee: Guarantee,
        *,
        log: GradeLog | None = None,
        metrics: Any = None,
        profile: str = "",
    ) -> None:
        if not isinstance(guarantee, Guarantee):
            raise ConfigError("guarantee", guarantee, "must be a Guarantee")
        if log is not None and not isinstance(log, GradeLog):
            raise ConfigError("log", log, "must have append(record) and records()")
        self.guarantee = guarantee
        self.log = log
        self.metrics = metrics
        self.profile = profile
        self._lock = threading.Lock()
        self._records = self._audited = self._counted = self._violations = 0
        self._log_errors = 0
        self._breached = False
        self._logger = get_logger()

    def __repr__(self) -> str:
        g = self.guarantee
        return f"GuaranteeMonitor({g.target} {g.eps:g} at delta {g.delta:g}, log={self.log!r})"

    def observe(self, result: Observed) -> MonitorStatus:
        """Take one result into account (module doc); returns the status after it."""
        record = record_of(result, profile=self.profile)
        if record is None:
            return self.status()
        if self.log is not None:
            try:
                self.log.append(record)
            except Exception as exc:  # noqa: BLE001 - a log never fails a query
                with self._lock:
                    self._log_errors += 1
                self._logger.warning("crag.guarantee.log_error", error=type(exc).__name__)
        return self.count(record)

    def count(self, record: Mapping[str, Any]) -> MonitorStatus:
        """Count one record (what :meth:`observe` does after logging it)."""
        g = self.guarantee
        low, high = g.band
        with self._lock:
            self._records += 1
            if record.get("audited"):
                self._audited += 1
                score, good = float(record["score"]), bool(record["grader_good"])
                if g.target == "recall":
                    if not good:
                        self._counted += 1
                        self._violations += score > high
                else:
                    self._counted += 1
                    self._violations += (score > high and not good) or (score < low and good)
            status = self._status()
            changed = status.breached != self._breached
            self._breached = status.breached
        if changed:
            event = "crag.guarantee.breach" if status.breached else "crag.guarantee.restored"
            self._logger.warning(
                event,
                target=g.target,
                eps=g.eps,
                delta=g.delta,
                counted=status.counted,
                violations=status.violations,
                observed=status.observed,
                lower_bound=round(status.lower_bound, 6),
            )
            if status.breached:
                hook = getattr(self.metrics, "guarantee_breach", None)
                if callable(hook):
                    try:
                        hook(g.target)
                    except Exception as exc:  # noqa: BLE001 - metrics never fail a query
                        self._logger.warning("crag.metrics_error", error=repr(exc))
        return status

    def status(self) -> MonitorStatus:
        with self._lock:
            return self._status()

    def _status(self) -> MonitorStatus:
        g = self.guarantee
        lower = binomial_lower(self._violations, self._counted, g.delta)
        return MonitorStatus(
            target=g.target,
            eps=g.eps,
            delta=g.delta,
            records=self._records,
            audited=self._audited,
            counted=self._counted,
            violations=self._violations,
            observed=self._violations / self._counted if self._counted else None,
            lower_bound=lower,
            breached=lower > g.eps,
            log_errors=self._log_errors,
        )


def audited_labels(records: Iterable[Mapping[str, Any]]) -> tuple[list[float], list[bool], str]:
    """The gate's scores and the grader's decisions of the audited records of a grade
    log (the uniform sample a band may be chosen on again), and the grader's
    fingerprint (refused when the records mix graders).

    Raises:
        InputError: a record of another version, several graders, or no audited record.
    """
    scores: list[float] = []
    good: list[bool] = []
    graders: set[str] = set()
    for record in records:
        if record.get("v") != RECORD_VERSION:
            raise InputError(f"a grade-log record of version {record.get('v')!r}, not 1")
        if not record.get("audited"):
            continue
        scores.append(float(record["score"]))
        good.append(bool(record["grader_good"]))
        graders.add(str(record.get("grader", "")))
    if not scores:
        raise InputError("the grade log holds no audited record (SetEscalation(audit=...))")
    if len(graders) > 1:
        raise InputError(f"the grade log mixes graders: {', '.join(sorted(graders))}")
    return scores, good, graders.pop()
