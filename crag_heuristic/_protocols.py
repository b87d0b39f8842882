"""The seams of the pipeline: what a retriever, a web searcher, a cache, a
query expander, a cascade's grader and a metrics sink must do.

Each is a :class:`typing.Protocol`, so any object with the right methods fits,
without inheriting from anything here. Sync and async halves are separate
protocols: a component may offer one or both, and the router uses what is
there (an async call on a sync-only component runs it in a worker thread).
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterable,
    Awaitable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Protocol, runtime_checkable

from ._expansion.base import Expansion
from ._text.corpus import CorpusStats
from ._types import Chunk


@runtime_checkable
class Retriever(Protocol):
    """Finds the ``k`` chunks most similar to a query, best first.

    Each chunk must carry its score and declare its :class:`ScoreKind`. Any
    iterable of chunks will do (a list, a tuple, a generator: the router reads
    it once); anything else is a :class:`~crag_heuristic.RetrieverError`.
    Errors should be raised as :class:`~crag_heuristic.RetrieverError`.
    """

    def search(self, query: str, k: int) -> Iterable[Chunk]: ...


@runtime_checkable
class AsyncRetriever(Protocol):
    """The async half of :class:`Retriever`: an ``async def asearch`` returning
    chunks, or an async generator of them."""

    def asearch(self, query: str, k: int) -> Awaitable[Iterable[Chunk]] | AsyncIterable[Chunk]: ...


@runtime_checkable
class StatsProvider(Protocol):
    """A retriever that knows its corpus's document frequencies (for IDF weights)."""

    def corpus_stats(self) -> CorpusStats | None: ...


ParentEntry = Chunk | str | Mapping[str, Any] | None
"""What a parents lookup answers: a chunk, a docstore-style entry (text, or a
mapping with ``text``, ``id``, ``source`` ...), or ``None`` when it has no such parent."""


@runtime_checkable
class ParentLookup(Protocol):
    """Where the router finds a chunk's parent (:attr:`Chunk.parent_id`).

    ``get(parent_id)`` returns the parent (see :data:`ParentEntry`) or ``None``.
    A plain ``dict`` of parent id -> chunk (or text, or mapping) is one. Used
    by parent expansion: ``CRAG(retriever, parents=lookup)``.
    """

    def get(self, parent_id: str, /) -> ParentEntry: ...


@runtime_checkable
class AsyncParentLookup(Protocol):
    """The async half of :class:`ParentLookup` (a document store over the network)."""

    def aget(self, parent_id: str, /) -> Awaitable[ParentEntry]: ...


@runtime_checkable
class WebSearcher(Protocol):
    """Searches the web; results are chunks with ``source`` = URL.

    Failures must raise :class:`~crag_heuristic.WebSearchError` (or a
    subclass); an empty list means the engine answered with no results.
    """

    def search(self, query: str, max_results: int = 5) -> list[Chunk]: ...


@runtime_checkable
class AsyncWebSearcher(Protocol):
    """The async half of :class:`WebSearcher`."""

    async def asearch(self, query: str, max_results: int = 5) -> list[Chunk]: ...


@runtime_checkable
class Cache(Protocol):
    """A string key -> JSON text store with per-entry time to live.

    ``get`` returns ``None`` on a miss. Backend failures raise
    :class:`~crag_heuristic.CacheError`; callers treat the cache as optional.
    """

    def get(self, key: str) -> str | None: ...

    def set(self, key: str, value: str, ttl: float | None = None) -> None: ...


@runtime_checkable
class AsyncCache(Protocol):
    """The async half of :class:`Cache`."""

    async def aget(self, key: str) -> str | None: ...

    async def aset(self, key: str, value: str, ttl: float | None = None) -> None: ...


@runtime_checkable
class EventLogger(Protocol):
    """A structlog-style logger: named events with key-value fields.

    A ``structlog`` bound logger is one (``structlog.get_logger()``), and so is
    the library's default, the stdlib logger ``"crag_heuristic"`` wrapped by
    structlog (see :mod:`crag_heuristic._logging`).
    """

    def bind(self, **fields: Any) -> EventLogger: ...

    def debug(self, event: str, **fields: Any) -> Any: ...

    def info(self, event: str, **fields: Any) -> Any: ...

    def warning(self, event: str, **fields: Any) -> Any: ...


@runtime_checkable
class Grader(Protocol):
    """Grades chunks against a query: one P(chunk relevant) in [0, 1] per chunk.

    ``fingerprint`` names the grader and every setting that changes its
    answers (model, prompt version ...); cached answers are keyed by it.
    Failures may raise anything: the cascade records them as a
    :class:`~crag_heuristic.grading.GraderError` and keeps the gate's verdict.
    A grader that knows what a call cost may return a
    :class:`~crag_heuristic.grading.Graded` (the grades with a
    :class:`~crag_heuristic.grading.GraderUsage`; its errors carry one in
    ``usage``): the cascade's report shows it. Adapters:
    :class:`~crag_heuristic.grading.CallableGrader`,
    :class:`~crag_heuristic.grading.CrossEncoderGrader`,
    :class:`~crag_heuristic.grading.OpenAIGrader`,
    :class:`~crag_heuristic.grading.RecordedGrader`.
    """

    @property
    def fingerprint(self) -> str: ...

    def grade(self, query: str, chunks: Sequence[Chunk]) -> Sequence[float]: ...


@runtime_checkable
class AsyncGrader(Protocol):
    """The async half of :class:`Grader` (used by ``aretrieve`` / ``aevaluate``;
    without it the sync ``grade`` runs in a worker thread)."""

    @property
    def fingerprint(self) -> str: ...

    async def agrade(self, query: str, chunks: Sequence[Chunk]) -> Sequence[float]: ...


@runtime_checkable
class QueryExpander(Protocol):
    """Turns a query (and, optionally, the first retrieval) into extra queries.

    ``chunks`` are the chunks of the first retrieval, best first; expanders
    that do not need them ignore them. ``corpus_stats`` gives document
    frequencies for IDF weights when the retriever knows them.
    Implementations must be deterministic and thread-safe.
    """

    def expand(
        self,
        query: str,
        *,
        chunks: Sequence[Chunk] = (),
        corpus_stats: CorpusStats | None = None,
    ) -> Expansion: ...


@runtime_checkable
class ResultObserver(Protocol):
    """Given every result of a router (``CRAG(..., monitor=...)``), after it is made:
    :class:`~crag_heuristic.grading.GuaranteeMonitor` is one. What it returns is
    ignored and what it raises never fails a query."""

    def observe(self, result: Any, /) -> Any: ...


@runtime_checkable
class Learner(Protocol):
    """A cascade that learns from its grader (``CRAG(..., learning=...)``):
    :class:`~crag_heuristic.calibration.LearningCascade` is one. The router binds it
    to its grader once, takes a snapshot per request (the gate and the escalation
    policy in force) and hands the result back with that snapshot; what
    ``observe`` raises never fails a query."""

    def bind(self, grader: str, /) -> None: ...

    def snapshot(self) -> Any: ...

    def observe(self, result: Any, snapshot: Any, /) -> Any: ...


@runtime_checkable
class MetricsSink(Protocol):
    """What the router reports. Every method must be cheap and never raise."""

    def decision(self, verdict: str) -> None: ...

    def correction(self, strategy: str) -> None: ...

    def web_error(self, kind: str) -> None: ...

    def cache_error(self, kind: str) -> None: ...

    def stage(self, stage: str, seconds: float) -> None: ...
