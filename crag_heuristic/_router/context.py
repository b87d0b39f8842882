"""What one run of the flow needs and records: the parts, the settings, and the
timings, notes and failures of the query (built by the router per query, read
by the flow and by the parents expansion)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._cache.keys import ChunkDigests, checked_evaluation_key
from .._cache.signing import Signer
from .._checks import CheckedQuery
from .._config import RouterConfig
from .._evaluator.evaluator import Evaluator
from .._exceptions import CacheError
from .._failures import Failure, FailureStage, wrap
from .._grading.escalation import Escalation
from .._grading.lists import SetEscalation
from .._protocols import AsyncRetriever, QueryExpander, Retriever
from .._text.corpus import CorpusStats
from .._types import Chunk, Evaluation
from .cached import OpenedEvaluations


@dataclass
class Context:
    """Everything one run of the flow needs (built by the router per query)."""

    retriever: Retriever | AsyncRetriever
    evaluator: Evaluator
    config: RouterConfig
    corpus_stats: CorpusStats | None
    get_expander: Callable[[], QueryExpander | None] = lambda: None
    lexical: Retriever | AsyncRetriever | None = None
    has_web: bool = False
    has_cache: bool = False
    parents: Any = None  # the parents lookup of this query (ParentLookup / AsyncParentLookup)
    retriever_size: int | None = None  # len(retriever), when it tells
    web_fingerprint: str = ""
    log: Callable[..., None] = lambda event, **kv: None
    on_stage: Callable[[str, float], None] = lambda stage, ms: None
    on_cache_error: Callable[[CacheError], None] = lambda error: None
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)  # what failed, in order
    escalation: Escalation | SetEscalation | None = None  # a cascade: what goes to the grader
    grader_fingerprint: str = ""
    grades: dict[tuple[str, str], float] = field(default_factory=dict)  # (id, text) -> answer
    stream: bool = False  # yield each stage's event (Emit) as it happens
    signer: Signer | None = None  # cached values signed and checked with a secret
    chunk_digests: ChunkDigests = field(default_factory=ChunkDigests)  # the router's, kept
    opened: OpenedEvaluations = field(default_factory=OpenedEvaluations)  # the router's, kept
    learning: Any = None  # a learning cascade's snapshot: the gate and policy of this query

    def evaluation_key(self, query: CheckedQuery, chunks: Sequence[Chunk]) -> str:
        """The cache key of the evaluator's evaluation of ``chunks`` (checked already)."""
        evaluator, stats = self.evaluator, self.corpus_stats
        return checked_evaluation_key(
            query,
            chunks,
            config_fingerprint=evaluator.fingerprint,
            corpus_fingerprint=None if stats is None else stats.fingerprint(),
            analyzer_fingerprint=evaluator.analyzer.fingerprint,
            all_evidence=evaluator.all_evidence,
            digest=self.chunk_digests,
        )

    def failed(self, stage: FailureStage, error: BaseException) -> Failure:
        """Record that ``stage`` failed with ``error`` (a part's own exception
        wrapped in the stage's error): the query goes on without it."""
        failure = Failure(stage, wrap(stage, error))
        self.failures.append(failure)
        return failure

    def cache_failed(self, error: BaseException, what: str, *, refused: bool = False) -> None:
        """Record a cache failure: the query goes on without the cache. With
        ``refused``, a cached ``what`` was refused as invalid: a miss, recomputed
        and overwritten."""
        failure = self.failed(FailureStage.CACHE, error)
        if isinstance(failure.error, CacheError):
            self.on_cache_error(failure.error)
        note = (
            f"a cached {what} was refused: recomputed and overwritten"
            if refused
            else f"the cache failed ({what}): going on without it"
        )
        if note not in self.notes:
            self.notes.append(note)

    def timed(self, stage: str, started: float) -> None:
        """Record the milliseconds since ``started`` under ``stage`` (adding up)."""
        elapsed = (time.perf_counter() - started) * 1000.0
        self.timings[stage] = self.timings.get(stage, 0.0) + elapsed
        self.on_stage(stage, elapsed)

    def evaluate(self, query: CheckedQuery, chunks: Sequence[Chunk], stage: str) -> Evaluation:
        """Grade the first ``gate_k`` chunks (all when unset); timed and logged. The
        lists graded here are rankings the drivers checked (``retrieved_chunks``), or
        lists the flow made (fused, web results): not checked again as rankings."""
        if self.config.gate_k:
            chunks = chunks[: self.config.gate_k]
        started = time.perf_counter()
        if self.grades:  # the cascade's answers hold for every list that has those chunks
            known = {
                c.id: self.grades[c.id, c.text] for c in chunks if (c.id, c.text) in self.grades
            }
            evaluation = self.evaluator.evaluate(
                query, chunks, self.corpus_stats, chunk_grades=known or None, ranked=False
            )
        else:
            evaluation = self.evaluator.evaluate(query, chunks, self.corpus_stats, ranked=False)
        self.timed(stage, started)
        self.log(
            "crag.evaluate",
            stage=stage,
            verdict=evaluation.verdict.value,
            score=round(evaluation.score, 4),
            chunks=len(chunks),
        )
        return evaluation
