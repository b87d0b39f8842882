"""A cascade without the router: the gate grades a list, an expensive grader
settles the chunks the gate is unsure of.

:class:`Cascade` drives the router's own escalation step
(:func:`crag_heuristic._router.flow.escalate`), so it chooses, caches and
records exactly as ``CRAG(..., grader=...)`` does; ``evaluate`` runs its I/O
one request after the other, ``aevaluate`` concurrently (the cache reads) and
within the escalation's timeout (the grader).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._checks import check_query
from .._config import EvaluatorConfig, RouterConfig
from .._deadline import Workers
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError
from .._failures import Failure, FailureStage, FailureText
from .._grading.escalation import CascadeReport, Escalation
from .._grading.graders import acall_grader, call_grader, grader_fingerprint
from .._grading.lists import SetEscalation, escalation_policy
from .._logging import get_logger
from .._protocols import AsyncCache, AsyncGrader, Cache, EventLogger, Grader
from .._text.corpus import CorpusStats
from .._types import Chunk, Evaluation, Verdict, check_chunks
from .calls import Calls
from .context import Context
from .flow import CacheGet, CacheSet, GradeCall, Request, escalate


@dataclass(frozen=True, slots=True)
class CascadeResult:
    """One list graded by a cascade.

    Attributes:
        evaluation: the evaluation after the grader's answers (the gate's own
            when nothing was escalated or the grader failed).
        gate_evaluation: the gate's own evaluation.
        report: what was escalated, the answers, cache hits, the grader's failure.
        failures: what failed without failing the call, in order (cache calls,
            the grader: :class:`~crag_heuristic.Failure`); ``()`` when nothing did.
        notes: short remarks on what happened.
    """

    evaluation: Evaluation
    gate_evaluation: Evaluation
    report: CascadeReport
    failures: tuple[Failure, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        """The set verdict after the cascade."""
        return self.evaluation.verdict

    @property
    def grader_error(self) -> str | None:
        """Why the grader gave nothing usable, or ``None`` (``report.error``)."""
        return self.report.error

    cache_error = FailureText(
        FailureStage.CACHE, 'The last cache failure (``"CacheError: ..."``), or ``None``.'
    )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "evaluation": self.evaluation.to_dict(),
            "gate_evaluation": self.gate_evaluation.to_dict(),
            "cascade": self.report.to_dict(),
            "grader_error": self.grader_error,
            "cache_error": self.cache_error,
            "notes": list(self.notes),
            "failures": [failure.to_dict() for failure in self.failures],
        }


Step = Generator[list[Request], list[Any], CascadeResult]


class _NoSearch:
    """The retriever of a cascade's context: the escalation step never searches."""

    def search(self, query: str, k: int) -> list[Chunk]:
        return []


class Cascade:
    """The gate, and an expensive grader where the gate is unsure.

    Args:
        evaluator: the gate: an :class:`Evaluator`, or a config / profile name
            for one (``None``: the default profile).
        grader: a :class:`~crag_heuristic.grading.Grader` (``grade`` and/or
            ``agrade``).
        escalation: an :class:`~crag_heuristic.grading.Escalation` or a dict
            of its fields (default ``Escalation()``), or a
            :class:`~crag_heuristic.grading.SetEscalation` (whole lists).
        cache: where the grader's answers are kept (anything with
            ``get``/``set`` and/or ``aget``/``aset`` of JSON text, e.g. a
            :class:`MemoryCache` or :class:`RedisCache`); ``None`` for none.
        logger: a structlog logger for the ``crag.grade`` event.

    Raises:
        InputError: a grader or cache without the methods it needs.
        ConfigError: a bad escalation or grader fingerprint.
    """

    def __init__(
        self,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        grader: Grader | AsyncGrader | None = None,
        escalation: Escalation | SetEscalation | Mapping[str, Any] | None = None,
        *,
        cache: Cache | AsyncCache | None = None,
        logger: EventLogger | None = None,
    ) -> None:
        if grader is None or not (hasattr(grader, "grade") or hasattr(grader, "agrade")):
            raise InputError("grader must have grade(query, chunks) or agrade(query, chunks)")
        if cache is not None and not (hasattr(cache, "get") or hasattr(cache, "aget")):
            raise InputError("cache must have get/set or aget/aset (or be None)")
        self.evaluator = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        self.grader = grader
        self.escalation = escalation_policy(escalation)
        self.cache = cache
        self.fingerprint = grader_fingerprint(grader)
        self._log = logger if logger is not None else get_logger()
        self._config = RouterConfig()
        self._workers = Workers(4, name="crag-cascade")
        self._calls = Calls(self._config, self._workers, self._parts)

    def _parts(self) -> dict[str, Any]:
        return {"cache": self.cache, "web": None, "parents": None, "expander": None}

    def close(self) -> None:
        """End the cascade's worker threads (see ``CRAG.close``)."""
        self._workers.close()

    def __repr__(self) -> str:
        return f"Cascade(evaluator={self.evaluator!r}, grader={self.fingerprint!r})"

    def _step(self, query: str, chunks: Sequence[Chunk], stats: CorpusStats | None) -> Step:
        checked = check_query(query)
        check_chunks(chunks)
        ctx = Context(
            retriever=_NoSearch(),
            evaluator=self.evaluator,
            config=self._config,
            corpus_stats=stats,
            has_cache=self.cache is not None,
            escalation=self.escalation,
            grader_fingerprint=self.fingerprint,
            log=self._log.debug,
        )
        gate = self.evaluator.evaluate(checked, chunks, stats)
        evaluation, report = yield from escalate(ctx, checked, chunks, gate)
        return CascadeResult(evaluation, gate, report, tuple(ctx.failures), tuple(ctx.notes))

    def evaluate(
        self, query: str, chunks: Sequence[Chunk], corpus_stats: CorpusStats | None = None
    ) -> CascadeResult:
        """Grade ``chunks`` with the gate, then escalate (the grader within
        ``escalation.timeout``, in a worker thread when there is one).

        Raises:
            InvalidQueryError, InvalidChunkError: bad input, as
                :meth:`Evaluator.evaluate`. The grader's and the cache's
                failures are flags on the result, never raised.
        """
        step = self._step(query, chunks, corpus_stats)
        try:
            requests = next(step)
            while True:
                requests = step.send([self._call(r) for r in requests])
        except StopIteration as stop:
            result: CascadeResult = stop.value
            return result

    async def aevaluate(
        self, query: str, chunks: Sequence[Chunk], corpus_stats: CorpusStats | None = None
    ) -> CascadeResult:
        """The async :meth:`evaluate`: the grader within ``escalation.timeout``."""
        step = self._step(query, chunks, corpus_stats)
        try:
            requests = next(step)
            while True:
                outcomes = await asyncio.gather(*(self._acall(r) for r in requests))
                requests = step.send(list(outcomes))
        except StopIteration as stop:
            result: CascadeResult = stop.value
            return result

    def _call(self, request: Request) -> Any:
        if isinstance(request, GradeCall):
            return call_grader(
                self.grader,
                request.query,
                request.chunks,
                self.fingerprint,
                self.escalation.timeout,
                self._workers,
            )
        assert isinstance(request, CacheGet | CacheSet)
        return self._calls.cache(request, "aevaluate()")

    async def _acall(self, request: Request) -> Any:
        if isinstance(request, GradeCall):
            return await acall_grader(
                self.grader,
                request.query,
                request.chunks,
                self.fingerprint,
                self.escalation.timeout,
                self._workers,
            )
        assert isinstance(request, CacheGet | CacheSet)
        return await self._calls.acache(request)
