"""A grader's labels for a calibration, kept as they arrive, and the budget a guarantee needs.

Calibrating on a grader (``crag-heuristic calibrate --grader``) pays for one grader
call per list. With a real model behind it some calls fail (a timeout, an answer
that cannot be read, a server that restarts), and a run may be killed. So:

* **Each answer is kept as it arrives.** :func:`label_lists` appends a record per
  answered list to a grade log (:class:`~crag_heuristic.grading.JsonlGradeLog`,
  :class:`~crag_heuristic.grading.RedisGradeLog`: the monitor's records, with
  each chunk's grade, the list's digest and its query id added;
  :func:`~crag_heuristic._grading.monitor.labelled_record`). A list already in the
  log, graded by the same grader (its fingerprint) for the same query (its
  SHA-256) and the same chunks (ids and texts), is not graded again: a run that
  stopped resumes where it was.
* **A failed list is skipped and counted**, never fatal: the failure is named by
  the list's id (a query id, never the query's text), its error type and its
  message (the query masked). After ``stop_after`` failures in a row the run
  stops (the server is likely gone; the labels so far are kept). The lists are
  graded in a seeded random order, so the labels of a run that stopped early
  are a uniform sample of the lists, as a band needs them to be; failed lists
  are not (what the grader cannot answer may differ): the summary says how many.
* **The budget before paying.** :func:`label_budget` says how many labelled lists
  a band with a guarantee needs, from the gate's own probabilities on the lists
  (their expected failures), before any is graded: a ``recall`` band at ``eps``
  and ``delta`` needs at least ``labels_needed(eps, delta)`` failed lists among
  the labels (22 at 0.1 and 0.1), so at an expected failure share ``f`` about
  ``22 / f`` lists; an ``agreement`` band needs that many lists. Lists already
  labelled count with their grader's decision.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._cache.keys import text_digest
from .._exceptions import CragError, GraderError, GraderHTTPError
from .._logging import get_logger
from .._protocols import Grader
from .._types import Chunk, Evaluation
from .graders import checked_grades, grader_fingerprint
from .guarantee import _check, labels_needed, list_decision, window_labels_needed
from .monitor import GradeLog, labelled_record

DEFAULT_STOP_AFTER = 10
"""Failures in a row after which :func:`label_lists` stops (the grader is likely gone)."""

_NAMED = 20  # failed lists named in a summary at most
_MESSAGE_CHARS = 240


class ListToLabel(Protocol):
    """A retrieved list to label (the calibration's ``GateExample`` is one)."""

    @property
    def group(self) -> str: ...  # its id (a query id): what logs and failures name
    @property
    def query(self) -> str: ...
    @property
    def chunks(self) -> Sequence[Chunk]: ...


def list_key(chunks: Sequence[Chunk]) -> str:
    """A list's digest: its chunks' ids and text digests, in order (16 hex digits)."""
    text = "\x1f".join(f"{c.id}\x1e{text_digest(c.text)}" for c in chunks)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class LabelFailure:
    """A list the grader did not label.

    Attributes:
        query_id: the list's id (a query id; never the query's text).
        error: the error's type name (``GraderTimeout``, ``GraderOutputError`` ...).
        message: its message, cut short, the query's text masked.
        status: the HTTP status, for a :class:`~crag_heuristic.grading.GraderHTTPError`.
    """

    query_id: str
    error: str
    message: str
    status: int | None = None


@dataclass(frozen=True)
class Labelling:
    """What :func:`label_lists` made.

    Attributes:
        grades: per position in the lists given, the grader's grades (answered now
            or read from the log); a failed or ungraded list has none.
        resumed: lists whose grades came from the log.
        graded: lists the grader answered in this run.
        failures: the lists it failed on, in the order tried.
        not_graded: lists never tried (the run stopped).
        stopped: why the run stopped early (``None``: it did not).
        grader: the grader's fingerprint.
    """

    grades: dict[int, tuple[float, ...]]
    resumed: int
    graded: int
    failures: tuple[LabelFailure, ...] = ()
    not_graded: int = 0
    stopped: str | None = None
    grader: str = ""
    log_errors: int = field(default=0)

    @property
    def complete(self) -> bool:
        """Every list is labelled."""
        return not self.failures and not self.not_graded

    def warnings(self) -> tuple[str, ...]:
        """What a user should hear: labels of one class (the grader said the same
        of every list: a band for recall cannot be certified, a refit learns
        nothing, and a grader that always says "yes" is likely broken), lists
        that failed or were never tried, records the log did not take."""
        out = []
        good = sum(list_decision(g) for g in self.grades.values())
        labelled = len(self.grades)
        if labelled and good in (0, labelled):
            said = "good (an answer in every one)" if good else "failed (no answer in any)"
            out.append(
                f"the grader labelled all {labelled} lists {said}: labels of one class "
                "certify no recall band and teach a refit nothing; check the grader"
            )
        if self.failures or self.not_graded:
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(Counter(
                f.error for f in self.failures).items()))  # fmt: skip
            failed = f"{len(self.failures)} failed ({kinds})" if self.failures else ""
            untried = f"{self.not_graded} never tried" if self.not_graded else ""
            out.append(
                f"{' and '.join(x for x in (failed, untried) if x)} of "
                f"{labelled + len(self.failures) + self.not_graded} lists: the calibration "
                f"uses the {labelled} labelled (run it again to grade the others)"
            )
        if self.log_errors:
            out.append(f"the grade log did not take {self.log_errors} record(s)")
        return tuple(out)

    def summary(self) -> dict[str, Any]:
        """A JSON-ready account: counts, failures by error type, the first failed
        lists' ids (at most 20) and the first message of each error type."""
        kinds = Counter(f.error for f in self.failures)
        first: dict[str, str] = {}
        for failure in self.failures:
            first.setdefault(failure.error, failure.message)
        out: dict[str, Any] = {
            "labelled": len(self.grades),
            "resumed": self.resumed,
            "graded": self.graded,
            "failed": len(self.failures),
            "not_graded": self.not_graded,
        }
        if self.failures:
            out["failures"] = dict(sorted(kinds.items()))
            out["failed_queries"] = [f.query_id for f in self.failures[:_NAMED]]
            out["failure_messages"] = first
        if self.stopped is not None:
            out["stopped"] = self.stopped
        if self.log_errors:
            out["log_errors"] = self.log_errors
        return out


def logged_grades(
    records: Iterable[Mapping[str, Any]], grader: str
) -> dict[tuple[str, str], tuple[float, ...]]:
    """The grades a grade log holds for ``grader``, by (query SHA-256, list digest):
    the records :func:`~crag_heuristic._grading.monitor.labelled_record` writes;
    any other record (a monitor's, another grader's, one whose grades are not
    numbers in [0, 1]) is passed over."""
    out: dict[tuple[str, str], tuple[float, ...]] = {}
    for record in records:
        if not isinstance(record, Mapping) or record.get("grader") != grader:
            continue
        query, key, grades = record.get("query"), record.get("list"), record.get("grades")
        if not isinstance(query, str) or not isinstance(key, str) or not isinstance(grades, list):
            continue
        try:
            values = tuple(checked_grades(grades, len(grades), grader=grader))
        except GraderError:
            continue
        if any(isinstance(g, bool) for g in grades) or len(values) != record.get("chunks"):
            continue
        out[(query, key)] = values
    return out


def resumed_grades(
    lists: Sequence[ListToLabel], records: Iterable[Mapping[str, Any]], grader: str
) -> dict[int, tuple[float, ...]]:
    """The grades of ``lists`` a grade log's ``records`` already hold for ``grader``
    (the same query, the same chunks), by position."""
    known = logged_grades(records, grader)
    out: dict[int, tuple[float, ...]] = {}
    for i, ex in enumerate(lists):
        found = known.get((text_digest(ex.query), list_key(ex.chunks)))
        if found is not None and len(found) == len(ex.chunks):
            out[i] = found
    return out


def label_lists(
    lists: Sequence[ListToLabel],
    grader: Grader,
    *,
    log: GradeLog | None = None,
    gates: Sequence[Evaluation] | None = None,
    profile: str = "",
    seed: int | None = 0,
    stop_after: int | None = DEFAULT_STOP_AFTER,
    progress: Callable[[Any, str], Any] | None = None,
    done: Mapping[int, Sequence[float]] | None = None,
) -> Labelling:
    """The grader's grades of ``lists`` (module doc).

    Args:
        lists: the lists (each with ``group``, ``query`` and ``chunks``).
        grader: the grader (its ``grade(query, chunks)``).
        log: a grade log to resume from and append to (``None``: neither).
        gates: per list, the gate's evaluation of it (its set probability and
            evidence go into the log's records); needed with ``log``.
        profile: the gate's fingerprint, recorded.
        seed: the grading order's seed (``None``: the lists' own order).
        stop_after: failures in a row after which the run stops (``None``: never).
        progress: wraps the lists graded (``progress(items, "grading")``).
        done: the grades already known, by position (:func:`resumed_grades`;
            ``None``: read from ``log``).

    Raises:
        ValueError: ``log`` without ``gates``, or ``gates`` of another length.
    """
    if log is not None and gates is None:
        raise ValueError("a grade log records the gate's view of each list: give gates")
    if gates is not None and len(gates) != len(lists):
        raise ValueError(f"{len(gates)} gate evaluations for {len(lists)} lists")
    name = grader_fingerprint(grader)
    logger = get_logger()
    if done is None:
        done = resumed_grades(lists, log.records(), name) if log is not None else {}
    grades = {i: tuple(g) for i, g in done.items()}
    todo = [i for i in range(len(lists)) if i not in grades]
    keys = [list_key(ex.chunks) for ex in lists]
    resumed = len(grades)
    if seed is not None:
        random.Random(seed).shuffle(todo)
    failures: list[LabelFailure] = []
    in_a_row = log_errors = graded = 0
    stopped: str | None = None
    tried = 0
    items = progress(todo, "grading") if progress is not None else todo
    for i in items:
        if stop_after is not None and in_a_row >= stop_after:
            stopped = f"{in_a_row} lists failed in a row: the grader looks unavailable"
            break
        tried += 1
        ex = lists[i]
        try:
            answer = _graded(grader, ex, name)
        except GraderError as error:
            failure = _failure(ex, error)
            failures.append(failure)
            in_a_row += 1
            logger.warning(
                "crag.calibrate.list_failed",
                query_id=failure.query_id,
                error=failure.error,
                status=failure.status,
            )
            continue
        in_a_row = 0
        graded += 1
        grades[i] = answer
        if log is not None and gates is not None:
            record = labelled_record(
                ex.query, answer, grader=name, gate=gates[i], profile=profile,
                query_id=ex.group, list_key=keys[i],
            )  # fmt: skip
            try:
                log.append(record)
            except Exception as exc:  # noqa: BLE001 - a label is kept in memory all the same
                log_errors += 1
                logger.warning("crag.calibrate.log_error", error=type(exc).__name__)
    if stopped is not None:
        logger.warning("crag.calibrate.stopped", reason=stopped, not_graded=len(todo) - tried)
    return Labelling(
        grades=grades,
        resumed=resumed,
        graded=graded,
        failures=tuple(failures),
        not_graded=len(todo) - tried,
        stopped=stopped,
        grader=name,
        log_errors=log_errors,
    )


def _graded(grader: Grader, ex: ListToLabel, name: str) -> tuple[float, ...]:
    """The grader's checked grades of one list.

    Raises:
        GraderError: the grader's own, or any other error of it wrapped in one.
    """
    try:
        answer = grader.grade(ex.query, list(ex.chunks))
    except GraderError:
        raise
    except CragError as exc:
        raise GraderError(f"the grader raised {type(exc).__name__}: {exc}", grader=name) from exc
    except Exception as exc:  # a grader of the user's: its failure, typed and named
        raise GraderError(
            f"the grader raised {type(exc).__name__} on a list of {len(ex.chunks)} chunk(s)",
            grader=name,
        ) from exc
    return tuple(checked_grades(answer, len(ex.chunks), grader=name))


def _failure(ex: ListToLabel, error: GraderError) -> LabelFailure:
    message = " ".join(str(error).split())
    query = " ".join(ex.query.split())
    if query:
        message = message.replace(query, "***")
    return LabelFailure(
        query_id=str(ex.group),
        error=type(error).__name__,
        message=message[:_MESSAGE_CHARS],
        status=error.status_code if isinstance(error, GraderHTTPError) else None,
    )


@dataclass(frozen=True, slots=True)
class LabelBudget:
    """The labels a band with a guarantee needs, against what the lists promise.

    Attributes:
        target, eps, delta, window: the guarantee asked for.
        needed: lists the band's risk must count over at the least: failed lists
            for ``recall``, any list for ``agreement``
            (:func:`~crag_heuristic._grading.guarantee.labels_needed`).
        lists: the lists available (labelled or not).
        expected: of them, how many are expected to count: the gate's expected
            failures (``sum(1 - p)`` over the unlabelled, the grader's over the
            labelled) for ``recall``, every list for ``agreement``.
        lists_needed: lists to label for ``needed`` at the expected share
            (``None`` when no list is expected to count).
        enough: ``expected >= needed``.
    """

    target: str
    eps: float
    delta: float
    window: int | None
    needed: int
    lists: int
    expected: float
    lists_needed: int | None
    enough: bool

    def describe(self) -> str:
        """One sentence a user reads before paying for the labels."""
        what = "failed lists" if self.target == "recall" else "lists"
        over = "" if self.window is None else f" over a window of {self.window}"
        article = "an" if self.target == "agreement" else "a"
        head = (
            f"{article} {self.target} band at eps {self.eps:g}{over} and delta {self.delta:g} "
            f"needs at least {self.needed} {what} among the labels"
        )
        if self.target == "agreement":
            return f"{head}; {self.lists} lists are available"
        share = self.expected / self.lists if self.lists else 0.0
        size = (
            f"about {self.lists_needed} lists to label"
            if self.lists_needed is not None
            else "no number of lists"
        )
        return (
            f"{head}; the gate expects {self.expected:.1f} failed among these {self.lists} lists "
            f"({share:.1%}): {size} (twice as many to refit the gate as well)"
        )


def label_budget(
    scores: Sequence[float],
    *,
    target: str,
    eps: float,
    delta: float,
    window: int | None = None,
    known: Mapping[int, bool] | None = None,
) -> LabelBudget:
    """The budget of a ``target`` band at ``eps`` and ``delta`` on lists the gate
    scored ``scores`` (its probability that each is good), ``known`` the grader's
    decisions (good or not) of those already labelled, by position (module doc).

    Raises:
        InsufficientLabelsError: a window no sample certifies.
        ConfigError: a bad target, eps or delta.
    """
    _check(target, eps, delta)
    needed = (
        labels_needed(eps, delta) if window is None else window_labels_needed(eps, delta, window)
    )
    decided = dict(known or {})
    if target == "recall":
        expected = math.fsum(
            (0.0 if decided[i] else 1.0) if i in decided else 1.0 - float(s)
            for i, s in enumerate(scores)
        )
    else:
        expected = float(len(scores))
    share = expected / len(scores) if scores else 0.0
    return LabelBudget(
        target=target,
        eps=eps,
        delta=delta,
        window=window,
        needed=needed,
        lists=len(scores),
        expected=expected,
        lists_needed=math.ceil(needed / share - 1e-9) if share > 0 else None,
        enough=expected >= needed,
    )


def decisions(grades: Mapping[int, Sequence[float]]) -> dict[int, bool]:
    """The grader's decision (good or not) of each labelled list
    (:func:`~crag_heuristic._grading.guarantee.list_decision`)."""
    return {i: list_decision(g) for i, g in grades.items()}
