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

A grade log is data others may write (a Redis stream shared by every process,
a file on a shared disk), and it chooses a band that carries a guarantee:
records are read strictly (:func:`check_record`: every required field of
:data:`RECORD_FIELDS`, each field of its type, no field it does not list;
``"audited": "false"`` is no bool, so the record is refused, not counted as
audited), and with a
``secret`` each record is appended as a signed envelope
(:mod:`crag_heuristic._cache.signing`: HMAC-SHA256 over the record's text, no
expiry) and read back only when its signature holds. A record refused on read
is skipped and counted (``skipped``, by kind in ``skipped_by_kind``:
``"unreadable"``, ``"signature"``, ``"invalid"``). What signing cannot show: a
record deleted, or the log cut short (a writer of the store can remove
entries); a signed record copied is the same query again, which
:func:`audited_labels` counts once.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .._cache.keys import text_digest
from .._cache.signing import Signer, UnsignedPolicy, check_unsigned, signer_of
from .._checks import is_finite_number
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

SIGNED_KEY = "crag_heuristic.grade_log"
"""What a grade-log record is signed for (the same in a file and a stream: records may
move between them)."""


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _probability(value: Any) -> bool:
    return is_finite_number(value) and 0.0 <= value <= 1.0


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _band(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(_probability(end) for end in value)
        and value[0] <= value[1]
    )


def _features(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(name, str) and (number is None or is_finite_number(number))
        for name, number in value.items()
    )


def _grades(value: Any) -> bool:
    return isinstance(value, list) and all(_probability(grade) for grade in value)


def _propensity(value: Any) -> bool:
    return _probability(value) and value > 0.0


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _feature_rows(value: Any) -> bool:
    return isinstance(value, list) and all(_features(row) for row in value)


class RecordField(NamedTuple):
    """One field of a grade-log record: its check, what it must be, and whether every
    record has it."""

    check: Callable[[Any], bool]
    expected: str
    required: bool = True


RECORD_FIELDS: Mapping[str, RecordField] = {
    "v": RecordField(
        lambda value: type(value) is int and value == RECORD_VERSION,
        f"{RECORD_VERSION} (the record layout's version this library reads)",
    ),
    "time": RecordField(_string, "a string (ISO 8601)"),
    "query": RecordField(_string, "a string (the query's SHA-256)"),
    "profile": RecordField(_string, "a string (the gate's fingerprint)"),
    "profile_name": RecordField(_string, "a string"),
    "grader": RecordField(_string, "a string (the grader's fingerprint)"),
    "score": RecordField(_probability, "a number in [0, 1]"),
    "band": RecordField(_band, "[low, high] in [0, 1]"),
    "in_band": RecordField(_flag, "a bool"),
    "audited": RecordField(_flag, "a bool"),
    "grader_score": RecordField(_probability, "a number in [0, 1]"),
    "grader_good": RecordField(_flag, "a bool"),
    "chunks": RecordField(_count, "an integer >= 0"),
    "features": RecordField(_features, "an object of numbers (or null)"),
    # the labels of crag-heuristic calibrate --grader: where they come from, the list's
    # query id and digest, and each chunk's grade
    "source": RecordField(_string, "a string", required=False),
    "query_id": RecordField(_string, "a string", required=False),
    "list": RecordField(_string, "a string (the list's digest)", required=False),
    "grades": RecordField(_grades, "a list of numbers in [0, 1]", required=False),
    # the labels of a learning cascade (crag_heuristic.calibration.LearningCascade): its
    # fingerprint, the gate that decided, whether it explored, the chance the list had
    # of being labelled, the fallback that scored it, each graded chunk's evidence
    "learner": RecordField(_string, "a string (the cascade's fingerprint)", required=False),
    "model": RecordField(_count, "an integer >= 0 (the gate in force)", required=False),
    "exploring": RecordField(_flag, "a bool", required=False),
    "propensity": RecordField(_propensity, "a number in (0, 1]", required=False),
    "fallback": RecordField(_strings, "a list of strings", required=False),
    "chunk_features": RecordField(
        _feature_rows, "a list of objects of numbers (or null)", required=False
    ),
}
"""Every field a grade-log record may hold (:func:`record_of` writes the required
ones), with its check and what it must be: the one list a record is read against
(:func:`check_record`). A new field is one more line here."""
_REQUIRED = frozenset(name for name, spec in RECORD_FIELDS.items() if spec.required)


def check_record(record: Any) -> dict[str, Any]:
    """``record`` if it is a grade-log record: a JSON object with every required field
    of :data:`RECORD_FIELDS`, no field that is not there, and each of its type (a bool
    is a JSON bool: ``"audited": "false"`` is refused, never read as true).

    Raises:
        InputError: what is wrong (the first field that does not fit).
    """
    if not isinstance(record, Mapping):
        raise InputError(f"a grade-log record must be a JSON object, not {type(record).__name__}")
    missing = sorted(_REQUIRED - set(record))
    extra = sorted(str(name) for name in set(record) - set(RECORD_FIELDS))
    if missing or extra:
        raise InputError(
            "a grade-log record of other fields"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra[:5])}" if extra else "")
        )
    for name, value in record.items():
        spec = RECORD_FIELDS[name]
        if not spec.check(value):
            raise InputError(f"a grade-log record's {name!r} must be {spec.expected}")
    return dict(record)


@runtime_checkable
class GradeLog(Protocol):
    """An append-only log of the grader's answers (records are JSON-ready dicts)."""

    def append(self, record: Mapping[str, Any]) -> None: ...

    def records(self) -> Iterator[dict[str, Any]]: ...


class _Records:
    """What a grade log shares between its stores: the text a record is appended as
    (checked; signed, with a secret), a stored entry read back strictly, and the count
    of those skipped."""

    def __init__(self, secret: str | bytes | Signer | None) -> None:
        self.signer = signer_of(secret, "secret")
        self.skipped_by_kind: dict[str, int] = {}

    def text(self, record: Mapping[str, Any]) -> str:
        checked = check_record(record)
        text = json.dumps(checked, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return text if self.signer is None else self.signer.sign(SIGNED_KEY, text)

    def read(self, raw: Any) -> dict[str, Any] | None:
        """The record stored as ``raw`` (bytes or text), or ``None``: skipped, counted."""
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            if not isinstance(text, str):
                raise TypeError(type(text).__name__)
            text = text.strip()  # a file's line ends with its newline
        except (TypeError, UnicodeDecodeError):
            self._skip("unreadable")
            return None
        if self.signer is not None:
            try:
                text = self.signer.unseal(SIGNED_KEY, text)
            except ValueError:  # unsigned, forged, edited, or signed with another secret
                self._skip("signature")
                return None
        try:
            record = json.loads(text)
        except (ValueError, RecursionError):
            self._skip("unreadable")
            return None
        if self.signer is None and isinstance(record, dict) and set(record) == _ENVELOPE:
            self._skip("signature")  # signed: read without the secret, unchecked
            return None
        try:
            return check_record(record)
        except InputError:
            self._skip("invalid")
            return None

    def _skip(self, kind: str) -> None:
        self.skipped_by_kind[kind] = self.skipped_by_kind.get(kind, 0) + 1
        return

    def start(self) -> None:
        self.skipped_by_kind = {}

    def finish(self, log: str) -> None:
        if self.skipped_by_kind:
            get_logger().warning(
                "crag.guarantee.log_skipped",
                log=log,
                lines=sum(self.skipped_by_kind.values()),
                **{f"skipped_{kind}": n for kind, n in sorted(self.skipped_by_kind.items())},
            )


_ENVELOPE = frozenset({"mac", "exp", "v"})


class _SharedLog:
    """What the two grade logs share: their records' signing and strict reading, and
    the count of what the last read skipped."""

    def __init__(self, secret: str | bytes | None) -> None:
        self._records = _Records(secret)

    @property
    def signed(self) -> bool:
        """Whether records are signed (the log was given a secret)."""
        return self._records.signer is not None

    @property
    def skipped(self) -> int:
        """Entries the last read of ``records()`` skipped (see ``skipped_by_kind``)."""
        return sum(self._records.skipped_by_kind.values())

    @property
    def skipped_by_kind(self) -> dict[str, int]:
        """Entries the last read skipped, by why: ``"unreadable"`` (not a JSON object: a
        write cut short, another writer's entry), ``"signature"`` (unsigned or badly
        signed where a secret signs them, or signed and read without it),
        ``"invalid"`` (:func:`check_record` refused it)."""
        return dict(self._records.skipped_by_kind)


class JsonlGradeLog(_SharedLog):
    """The grade log as a file of JSON lines, appended (``O_APPEND``: concurrent
    writers in one or several processes never interleave a line).

    Args:
        path: the file (its folder must exist; the file is created).
        secret: sign each record (HMAC-SHA256, at least 16 bytes; see the module
            doc) and read back only records signed with it.

    Raises:
        ConfigError: no such folder, or a bad secret (never shown).
    """

    def __init__(self, path: str | os.PathLike[str], *, secret: str | bytes | None = None) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise ConfigError("path", str(self.path), "its folder does not exist")
        self._lock = threading.Lock()
        super().__init__(secret)

    def __repr__(self) -> str:
        return f"JsonlGradeLog({str(self.path)!r})"

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record (checked with :func:`check_record`; signed, with a secret).

        Raises:
            InputError: not a grade-log record.
        """
        line = (self._records.text(record) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def records(self) -> Iterator[dict[str, Any]]:
        """The records in order, read line by line. A line that is not a record (a write
        cut short by a crash, and the record appended after it on the same line; a
        record of the wrong types; a bad signature) is skipped and counted in
        :attr:`skipped` (and a ``crag.guarantee.log_skipped`` event says how many, by
        kind, once the file is read)."""
        self._records.start()
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                record = self._records.read(line)
                if record is not None:
                    yield record
        self._records.finish("jsonl")

    def tail(self, cursor: int | None) -> tuple[list[dict[str, Any]], int]:
        """The records after ``cursor`` (a byte offset this method returned; ``None``: the
        start) and the offset after the last whole line read (a line still being written
        is left for the next call): what a reader that follows the log (a learning
        cascade in another process) reads each time. Entries that are not records are
        skipped and added to :attr:`skipped_by_kind`."""
        start = cursor or 0
        if not self.path.exists():
            return [], start
        with self.path.open("rb") as handle:
            handle.seek(start)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        out: list[dict[str, Any]] = []
        for line in data[:end].split(b"\n"):
            if line.strip():
                record = self._records.read(line)
                if record is not None:
                    out.append(record)
        return out, start + end


class RedisGradeLog(_SharedLog):
    """The grade log as a Redis stream (``XADD``, trimmed to about ``maxlen`` records).

    Args:
        client: a ``redis.Redis`` client (the ``redis`` extra).
        stream: the stream's key.
        maxlen: the stream is trimmed to about this many records (``None``: never).
        secret: sign each record (HMAC-SHA256, at least 16 bytes; see the module
            doc) and read back only records signed with it: the setting for a
            Redis others can write to (every process needs the same secret).
        unsigned: without a secret, ``"warn"`` (a ``crag.store.unsigned`` event
            and an :class:`~crag_heuristic.cache.UnsignedStoreWarning` when the log is
            made), ``"refuse"`` (a ``ConfigError``) or ``"allow"`` (nobody else
            can write to this Redis).

    Raises:
        ConfigError: a bad argument, a bad secret (never shown), or no secret
            under ``unsigned="refuse"``.
    """

    def __init__(
        self,
        client: Any,
        *,
        stream: str = "crag:grades",
        maxlen: int | None = 1_000_000,
        secret: str | bytes | None = None,
        unsigned: UnsignedPolicy = "warn",
    ):
        if not isinstance(stream, str) or not stream:
            raise ConfigError("stream", stream, "must be a non-empty string")
        if maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int)):
            raise ConfigError("maxlen", maxlen, "must be a positive integer or None")
        if maxlen is not None and maxlen < 1:
            raise ConfigError("maxlen", maxlen, "must be a positive integer or None")
        self.client = client
        self.stream = stream
        self.maxlen = maxlen
        super().__init__(secret)
        check_unsigned("RedisGradeLog", self._records.signer, unsigned, advice="give it secret=...")

    def __repr__(self) -> str:
        return f"RedisGradeLog(stream={self.stream!r})"

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record (as :meth:`JsonlGradeLog.append`), as a stream entry."""
        payload = self._records.text(record)
        if self.maxlen is None:
            self.client.xadd(self.stream, {"record": payload})
        else:
            self.client.xadd(self.stream, {"record": payload}, maxlen=self.maxlen, approximate=True)

    def records(self) -> Iterator[dict[str, Any]]:
        """The stream's records in order; an entry that is not a record (another
        writer's; the wrong types; a bad signature) is skipped and counted in
        :attr:`skipped`."""
        self._records.start()
        start = "-"
        while True:
            batch = self.client.xrange(self.stream, min=start, max="+", count=1000)
            if not batch:
                break
            for _entry_id, fields in batch:
                record = self._records.read(fields.get(b"record", fields.get("record")))
                if record is not None:
                    yield record
            last = batch[-1][0]
            last = last.decode() if isinstance(last, bytes) else str(last)
            start = "(" + last
        self._records.finish("redis")

    def tail(self, cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """The records after ``cursor`` (a stream id this method returned; ``None``: the
        start) and the id of the last entry read: what a reader that follows the log
        reads each time. Entries that are not records are skipped and added to
        :attr:`skipped_by_kind`."""
        out: list[dict[str, Any]] = []
        while True:
            start = "-" if cursor is None else "(" + cursor
            batch = self.client.xrange(self.stream, min=start, max="+", count=1000)
            if not batch:
                return out, cursor
            for _entry_id, fields in batch:
                record = self._records.read(fields.get(b"record", fields.get("record")))
                if record is not None:
                    out.append(record)
            last = batch[-1][0]
            cursor = last.decode() if isinstance(last, bytes) else str(last)


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
        "features": _numbers(features),
    }


def _numbers(features: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in features.items() if v is None or is_finite_number(v)}


def labelled_record(
    query: str,
    grades: Sequence[float],
    *,
    grader: str,
    gate: Evaluation,
    query_id: str,
    list_key: str,
    profile: str = "",
) -> dict[str, Any]:
    """The grade-log record of a list a calibration had labelled (``crag-heuristic
    calibrate --grader``): the monitor's record of a list the grader answered,
    every list being sent (its band is [0, 1]) and audited (the lists are a sample
    of the user's), with ``source`` ``"calibrate"``, the query's id, the list's
    digest (``list``: its chunks' ids and texts) and each chunk's grade
    (``grades``), so that a later run reuses them. ``grader_score`` is the
    largest grade."""
    values = [float(g) for g in grades]
    return {
        "v": RECORD_VERSION,
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "query": text_digest(query),  # the SHA-256 of its text, never the text
        "profile": profile,
        "profile_name": gate.profile,
        "grader": grader,
        "score": gate.score,
        "band": [0.0, 1.0],
        "in_band": True,
        "audited": True,
        "grader_score": max(values, default=0.0),
        "grader_good": list_decision(values),
        "chunks": len(values),
        "features": _numbers(gate.details.get("features") or {}),
        "source": "calibrate",
        "query_id": query_id,
        "list": list_key,
        "grades": values,
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
            InputError: not a grade-log record (:func:`check_record`).
        """
        checked = check_record(record)
        return self.count_label(checked["audited"], checked["score"], checked["grader_good"])

    def count_label(self, audited: bool, score: float, good: bool) -> bool:
        """Count one label: whether the list was audited, the gate's score of it, the
        grader's decision (what :meth:`count` reads of a record); whether the
        guarantee stands breached after it."""
        g = self.guarantee
        low, high = g.band
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


def audited_labels(records: Iterable[Mapping[str, Any]]) -> tuple[list[float], list[bool], str]:
    """The gate's scores and the grader's decisions of the audited records of a grade
    log (the uniform sample a band may be chosen on again; a query audited again is
    counted once: the audit sample is one of queries), and the grader's fingerprint
    (refused when the records mix graders).

    Raises:
        InputError: a record that is not one (:func:`check_record`: another version
            among them), several graders, or no audited record.
    """
    scores: list[float] = []
    good: list[bool] = []
    graders: set[str] = set()
    seen: set[str] = set()
    for record in records:
        checked = check_record(record)
        if not checked["audited"]:
            continue
        score, decision, query = checked["score"], checked["grader_good"], checked["query"]
        if query and query in seen:  # the audit follows the query: a repeat is one label
            continue
        seen.add(query)
        scores.append(float(score))
        good.append(decision)
        graders.add(checked["grader"])
    if not scores:
        raise InputError("the grade log holds no audited record (SetEscalation(audit=...))")
    if len(graders) > 1:
        raise InputError(f"the grade log mixes graders: {', '.join(sorted(graders))}")
    return scores, good, graders.pop()
