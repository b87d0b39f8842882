"""Small stand-ins for the router's parts, for tests of code built on crag-heuristic.

They are deliberately simple and deterministic. Use them to drive one route
of the router, or to test your own code around it; use the real parts (a
FAISS index, a SearXNG instance, a Redis server) for integration tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._expansion.base import Expansion
from .._text.corpus import CorpusStats
from .._types import Chunk, ScoreKind


class ListRetriever:
    """A retriever over a fixed ranking: every query gets the same chunks.

    Args:
        chunks: the ranking, best first.
        by_query: optional per-query rankings that override ``chunks``.
    """

    def __init__(
        self, chunks: Sequence[Chunk], *, by_query: dict[str, Sequence[Chunk]] | None = None
    ) -> None:
        self.chunks = list(chunks)
        self.by_query = dict(by_query or {})
        self.calls: list[tuple[str, int]] = []

    def search(self, query: str, k: int) -> list[Chunk]:
        self.calls.append((query, k))
        return list(self.by_query.get(query, self.chunks))[:k]

    async def asearch(self, query: str, k: int) -> list[Chunk]:
        await asyncio.sleep(0)
        return self.search(query, k)


class StaticExpander:
    """An expander that answers every query with the same expanded queries."""

    def __init__(self, queries: Sequence[str]) -> None:
        self.queries = tuple(queries)
        self.calls: list[str] = []

    def expand(
        self,
        query: str,
        *,
        chunks: Sequence[Chunk] = (),
        corpus_stats: CorpusStats | None = None,
    ) -> Expansion:
        self.calls.append(query)
        return Expansion(original=query, queries=self.queries, method="static")


@dataclass
class RecordingWebSearcher:
    """A web searcher that records its calls and answers from a list or fails.

    Args:
        results: (title, url, content) triples returned for every query, or a
            callable ``query -> triples``.
        error: raise this instead of answering (e.g. ``WebSearchTimeout("...")``).
        delay: seconds the async search waits before answering.
    """

    results: Sequence[tuple[str, str, str]] | Callable[[str], Sequence[tuple[str, str, str]]] = ()
    error: BaseException | None = None
    delay: float = 0.0
    calls: list[tuple[str, int]] = field(default_factory=list)

    def search(self, query: str, max_results: int = 5) -> list[Chunk]:
        self.calls.append((query, max_results))
        if self.error is not None:
            raise self.error
        triples = self.results(query) if callable(self.results) else self.results
        return [
            Chunk(
                id=f"web:{position}:{url}",
                text=f"{title}\n{content}",
                score=None,
                score_kind=ScoreKind.WEB,
                source=url,
                metadata={"title": title, "position": position},
            )
            for position, (title, url, content) in enumerate(list(triples)[:max_results], 1)
        ]

    async def asearch(self, query: str, max_results: int = 5) -> list[Chunk]:
        if self.delay:
            await asyncio.sleep(self.delay)
        return self.search(query, max_results)
