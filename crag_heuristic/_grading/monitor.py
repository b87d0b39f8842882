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
  grader) and tests it. Testing after every list would look at the data again
  and again, and a risk at ``eps`` exactly would be called breached about half
  the time within a thousand lists. So it tests on a schedule: when the lists
  counted reach ``n_j = 20 * 2^j`` (20, 40, 80, ...), the null "the risk is at
  most ``eps``" is rejected when ``P(Binomial(n_j, eps) >= violations) <=
  delta_j``, with ``delta_j = delta / ((j + 1) (j + 2))``: the ``delta_j`` sum to
  ``delta``, so while the risk stays within ``eps`` the monitor calls a breach at
  some point of the schedule with probability at most ``delta``, however long it
  runs (a union bound over the schedule). A rejection is a breach (a
  ``crag.guarantee.breach`` event, once, and the metrics sink's
  ``guarantee_breach`` when it has one); a later test that does not reject
  restores it (``crag.guarantee.restored``).

A list's decision by the grader is one definition everywhere (the calibration
that chose the band, this monitor, the log): good when the grader grades one of
its chunks at least 0.5 (:func:`~crag_heuristic._grading.guarantee.list_decision`).

The monitor never fails a query: a log that cannot be written is counted
(``status().log_errors``) and logged (``crag.guarantee.log_error``).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .._cache.keys import text_digest
from .._checks import as_real
from .._config import Guarantee
from .._exceptions import ConfigError, InputError
from .._logging import get_logger
from .._types import Evaluation
from .escalation import CascadeReport
from .guarantee import binomial_cdf, binomial_lower, list_decision


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
        self.skipped = 0

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
        """The records in order, read line by line. A line that is not a JSON object (a
        write cut short by a crash, and the record appended after it on the same
        line) is skipped and counted in :attr:`skipped` (and a
        ``crag.guarantee.log_skipped`` event says how many once the file is read)."""
        self.skipped = 0
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    record = None
                if not isinstance(record, dict):
                    self.skipped += 1
                    continue
                yield record
        if self.skipped:
            get_logger().warning("crag.guarantee.log_skipped", lines=self.skipped)


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
        self.skipped = 0

    def __repr__(self) -> str:
        return f"RedisGradeLog(stream={self.stream!r})"

    def append(self, record: Mapping[str, Any]) -> None:
        payload = json.dumps(dict(record), sort_keys=True, separators=(",", ":"))
        if self.maxlen is None:
            self.client.xadd(self.stream, {"record": payload})
        else:
            self.client.xadd(self.stream, {"record": payload}, maxlen=self.maxlen, approximate=True)

    def records(self) -> Iterator[dict[str, Any]]:
        """The stream's records in order; an entry that is not a JSON object is
        skipped and counted in :attr:`skipped`."""
        self.skipped = 0
        start = "-"
        while True:
            batch = self.client.xrange(self.stream, min=start, max="+", count=1000)
            if not batch:
                return
            for _entry_id, fields in batch:
                raw = fields.get(b"record", fields.get("record"))
                try:
                    record = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
                except (TypeError, UnicodeDecodeError, json.JSONDecodeError):
                    record = None
                if isinstance(record, dict):
                    yield record
                else:  # an entry another writer put there: skipped, counted
                    self.skipped += 1
            last = batch[-1][0]
            last = last.decode() if isinstance(last, bytes) else str(last)
            start = "(" + last


def record_of(result: Observed, *, profile: str = "") -> dict[str, Any] | None:
    """The grade-log record of a result whose set cascade got the grader's answers
    (``None`` otherwise: no set cascade, nothing escalated, or the grader failed)."""
    report = result.cascade
    if report is None or report.level != "set" or not report.grades or report.failure is not None:
        return None
    gate = result.initial_evaluation  # after the grader's answers: the score is the gate's
    escalation = gate.details.get("set_escalation") or result.evaluation.details.get(
        "set_escalation", {}
    )
    grader_score = escalation.get("grader_score")
    if grader_score is None:
        return None
    score = float(escalation.get("gate_score", gate.score))
    low, high = report.band
    features = gate.details.get("features") or {}
    return {
        "v": RECORD_VERSION,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "query": text_digest(result.query),  # the SHA-256 of its text, never the text
        "profile": profile,
        "profile_name": gate.profile,
        "grader": report.grader,
        "score": score,
        "band": [low, high],
        "in_band": low <= score <= high,
        "audited": report.audited,
        "grader_score": float(grader_score),
        "grader_good": list_decision(report.grades.values()),
        "chunks": len(report.escalated),
        "features": {k: v for k, v in features.items() if isinstance(v, int | float) or v is None},
    }


SCHEDULE_START = 20
"""The first count of the breach test's schedule (module doc): ``20 * 2^j``."""


def breach_p_value(violations: int, counted: int, eps: float) -> float:
    """``P(Binomial(counted, eps) >= violations)``: the p-value of "the risk is at most
    ``eps``" given ``violations`` among ``counted``."""
    return 1.0 - binomial_cdf(violations - 1, counted, eps) if violations > 0 else 1.0


@dataclass(frozen=True, slots=True)
class MonitorStatus:
    """What the monitor has seen.

    Attributes:
        target, eps, delta: the guarantee's.
        records: lists the grader answered; ``audited``: those in the audit sample.
        counted: audited lists the risk counts over; ``violations``: among them.
        observed: ``violations / counted`` (``None`` before any).
        lower_bound: the Clopper-Pearson lower bound on the risk at ``1 - delta``
            (for reading; the breach test is the schedule's, module doc).
        breached: the last test of the schedule rejected "the risk is at most eps".
        tested_at: the count of that test (``None`` before the first).
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
    tested_at: int | None
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
        profile: the gate's fingerprint, recorded (``calibrate --grade-log`` refuses
            lists scored by another gate; each record also names the profile).
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
        if not isinstance(profile, str):
            raise ConfigError("profile", profile, "must be a string (a fingerprint)")
        self.guarantee = guarantee
        self.log = log
        self.metrics = metrics
        self.profile = profile
        self._lock = threading.Lock()
        self._records = self._audited = self._counted = self._violations = 0
        self._log_errors = 0
        self._breached = False
        self._tested_at: int | None = None
        self._next_test = SCHEDULE_START
        self._step = 0
        self._logger = get_logger()

    def __repr__(self) -> str:
        g = self.guarantee
        return f"GuaranteeMonitor({g.target} {g.eps:g} at delta {g.delta:g}, log={self.log!r})"

    def observe(self, result: Observed) -> bool:
        """Take one result into account (module doc); whether the guarantee stands
        breached after it."""
        record = record_of(result, profile=self.profile)
        if record is None:
            return self._breached
        if self.log is not None:
            try:
                self.log.append(record)
            except Exception as exc:  # noqa: BLE001 - a log never fails a query
                with self._lock:
                    self._log_errors += 1
                self._logger.warning("crag.guarantee.log_error", error=type(exc).__name__)
        return self.count(record)

    def count(self, record: Mapping[str, Any]) -> bool:
        """Count one record (what :meth:`observe` does after logging it); whether the
        guarantee stands breached after it.

        Raises:
            InputError: a record without a probability ``score`` or a bool ``grader_good``.
        """
        g = self.guarantee
        low, high = g.band
        audited, score, good = _read_record(record)
        changed = False
        with self._lock:
            self._records += 1
            if audited:
                self._audited += 1
                if g.target == "recall":
                    if not good:
                        self._counted += 1
                        self._violations += score > high
                else:
                    self._counted += 1
                    self._violations += (score > high and not good) or (score < low and good)
                if self._counted >= self._next_test:
                    self._step += 1
                    level = g.delta / (self._step * (self._step + 1))
                    breached = breach_p_value(self._violations, self._counted, g.eps) <= level
                    changed, self._breached = breached != self._breached, breached
                    self._tested_at = self._counted
                    self._next_test = SCHEDULE_START * 2**self._step
            counts = (self._counted, self._violations, self._breached)
        if changed:
            counted, violations, breached = counts
            self._logger.warning(
                "crag.guarantee.breach" if breached else "crag.guarantee.restored",
                target=g.target,
                eps=g.eps,
                delta=g.delta,
                counted=counted,
                violations=violations,
                observed=violations / counted,
            )
            if breached:
                hook = getattr(self.metrics, "guarantee_breach", None)
                if callable(hook):
                    try:
                        hook(g.target)
                    except Exception as exc:  # noqa: BLE001 - metrics never fail a query
                        self._logger.warning("crag.metrics_error", error=repr(exc))
        return counts[2]

    def status(self) -> MonitorStatus:
        g = self.guarantee
        with self._lock:
            counted, violations = self._counted, self._violations
            records, audited, errors = self._records, self._audited, self._log_errors
            breached, tested_at = self._breached, self._tested_at
        return MonitorStatus(
            target=g.target,
            eps=g.eps,
            delta=g.delta,
            records=records,
            audited=audited,
            counted=counted,
            violations=violations,
            observed=violations / counted if counted else None,
            lower_bound=binomial_lower(violations, counted, g.delta),
            breached=breached,
            tested_at=tested_at,
            log_errors=errors,
        )


def _read_record(record: Mapping[str, Any]) -> tuple[bool, float, bool]:
    """A record's (audited, gate score, grader's decision).

    Raises:
        InputError: not a mapping, or a score that is not a probability or a decision
            that is not a bool.
    """
    if not isinstance(record, Mapping):
        raise InputError(f"a grade-log record must be a JSON object, not {type(record).__name__}")
    score = as_real(record.get("score"))
    good = record.get("grader_good")
    if score is None or not 0.0 <= score <= 1.0 or not isinstance(good, bool):
        raise InputError("a grade-log record needs a 'score' in [0, 1] and a bool 'grader_good'")
    return bool(record.get("audited")), score, good


def audited_labels(records: Iterable[Mapping[str, Any]]) -> tuple[list[float], list[bool], str]:
    """The gate's scores and the grader's decisions of the audited records of a grade
    log (the uniform sample a band may be chosen on again; a query audited again is
    counted once: the audit sample is one of queries), and the grader's fingerprint
    (refused when the records mix graders).

    Raises:
        InputError: a record of another version, several graders, or no audited record.
    """
    scores: list[float] = []
    good: list[bool] = []
    graders: set[str] = set()
    seen: set[str] = set()
    for record in records:
        if not isinstance(record, Mapping) or record.get("v") != RECORD_VERSION:
            version = record.get("v") if isinstance(record, Mapping) else None
            raise InputError(f"a grade-log record of version {version!r}, not 1")
        audited, score, decision = _read_record(record)
        if not audited:
            continue
        query = str(record.get("query", ""))
        if query and query in seen:  # the audit follows the query: a repeat is one label
            continue
        seen.add(query)
        scores.append(score)
        good.append(decision)
        graders.add(str(record.get("grader", "")))
    if not scores:
        raise InputError("the grade log holds no audited record (SetEscalation(audit=...))")
    if len(graders) > 1:
        raise InputError(f"the grade log mixes graders: {', '.join(sorted(graders))}")
    return scores, good, graders.pop()
