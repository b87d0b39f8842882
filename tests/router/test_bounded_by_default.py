"""Every stage is bounded with the defaults, on a bounded set of threads (issue 26).

A hung retriever hung ``retrieve`` forever (``retriever_timeout`` defaulted to
None); the sync router ignored ``web_timeout``; a custom cache or expander
could hang a query, the expander ran on the event loop; each timed-out sync
call left a thread behind (500 queries, 501 threads), six hung web calls took
the loop's executor so that a healthy query on the same loop stalled; at thread
exhaustion an untyped ``RuntimeError`` escaped. The parts here hang on an
event until the test releases them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from crag_heuristic import (
    CRAG,
    CacheError,
    Chunk,
    Evaluator,
    EvaluatorConfig,
    MemoryCache,
    RetrieverError,
    RouterConfig,
    WebSearchTimeout,
)
from crag_heuristic._deadline import ABANDONED, EXHAUSTED, Workers, _Job
from crag_heuristic.expansion import Expansion
from crag_heuristic.testing import ListRetriever

CHUNKS = [Chunk(id="a", text="solar panels in winter", score=0.3, score_kind="cosine")]


class Gate:
    """Everything a part waits on; released at the end of each test."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def hang(self) -> None:
        self.release.wait(60)


@pytest.fixture
def gate() -> Iterator[Gate]:
    found = Gate()
    yield found
    found.release.set()


class HungRetriever:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def search(self, query: str, k: int) -> list[Chunk]:
        self.gate.hang()
        return list(CHUNKS)


class SyncOnly:
    """A healthy retriever with a sync search only (it needs a thread in async code)."""

    def search(self, query: str, k: int) -> list[Chunk]:
        return list(CHUNKS)


class HungWeb:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.calls = 0

    def search(self, query: str, max_results: int = 5) -> list[Chunk]:
        self.calls += 1
        self.gate.hang()
        return []


class HungCache:
    """A cache of someone else's whose get and set hang."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    def get(self, key: str) -> str | None:
        self.gate.hang()
        return None

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        self.gate.hang()


class HungAsyncCache:
    async def aget(self, key: str) -> str | None:
        await asyncio.sleep(60)
        return None

    async def aset(self, key: str, value: str, ttl: float | None = None) -> None:
        await asyncio.sleep(60)


class HungExpander:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.threads: list[str] = []

    def expand(
        self, query: str, *, chunks: Sequence[Chunk] = (), corpus_stats: Any = None
    ) -> Expansion:
        self.threads.append(threading.current_thread().name)
        self.gate.hang()
        return Expansion(original=query, queries=(query + " sun",), method="hung")


def irrelevant() -> Evaluator:
    config = EvaluatorConfig.from_profile("synapse")
    return Evaluator(config.replace(thresholds={"relevant": 1.0, "partial": 1.0}))


def partial() -> Evaluator:
    config = EvaluatorConfig.from_profile("synapse")
    return Evaluator(config.replace(thresholds={"relevant": 1.0, "partial": 0.0}))


def run(crag: CRAG, asynchronous: bool, query: str = "solar panels") -> Any:
    return asyncio.run(crag.aretrieve(query)) if asynchronous else crag.retrieve(query)


BOTH = pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])


def test_every_stage_has_a_timeout_by_default() -> None:
    config = RouterConfig()
    assert (config.retriever_timeout, config.web_timeout) == (10.0, 30.0)
    assert (config.cache_timeout, config.expander_timeout, config.worker_threads) == (1.0, 5.0, 8)


@BOTH
def test_web_timeout_is_honoured_by_both_routers(gate: Gate, asynchronous: bool) -> None:
    crag = CRAG(ListRetriever(CHUNKS), irrelevant(), web=HungWeb(gate), config={"web_timeout": 0.2})
    result = run(crag, asynchronous)  # the web searcher answers only once released
    assert isinstance(result.web.failure.error if result.web.failure else None, WebSearchTimeout)
    assert "within 0.2 s" in (result.web_error or "")
    crag.close()


@pytest.mark.parametrize(
    ("asynchronous", "kind"), [(False, "sync-cache"), (True, "sync-cache"), (True, "async-cache")]
)
def test_a_hung_cache_is_a_flagged_timeout(gate: Gate, asynchronous: bool, kind: str) -> None:
    cache = HungCache(gate) if kind == "sync-cache" else HungAsyncCache()
    crag = CRAG(ListRetriever(CHUNKS), cache=cache, config={"cache_timeout": 0.1})
    result = run(crag, asynchronous)  # the cache answers only once released
    errors = [f.error for f in result.failures if isinstance(f.error, CacheError)]
    assert errors and all(e.kind == "timeout" for e in errors)
    assert result.chunks  # the query went on without the cache
    crag.close()


@BOTH
def test_a_hung_expander_is_a_failure_and_runs_off_the_event_loop(
    gate: Gate, asynchronous: bool
) -> None:
    expander = HungExpander(gate)
    crag = CRAG(
        ListRetriever(CHUNKS), partial(), expander=expander, config={"expander_timeout": 0.1}
    )
    result = run(crag, asynchronous)
    assert any("query expansion failed" in note for note in result.notes)
    assert "within 0.1 s" in str(result.failures[0].error)
    assert expander.threads and expander.threads[0].startswith("crag-router-")
    crag.close()


def test_a_default_retriever_timeout_bounds_a_hung_retriever(gate: Gate) -> None:
    crag = CRAG(HungRetriever(gate), config={"retriever_timeout": 0.1, "first_search_timeout": 0.1})
    with pytest.raises(RetrieverError) as info:
        crag.retrieve("solar")
    assert info.value.timeout == 0.1
    crag.close()


class WarmingRetriever:
    """Its first search waits for a model to load (``warm_up`` seconds), the second hangs."""

    def __init__(self, gate: Gate, warm_up: float) -> None:
        self.gate, self.warm_up, self.calls = gate, warm_up, 0

    def search(self, query: str, k: int) -> list[Chunk]:
        self.calls += 1
        if self.calls == 1:
            time.sleep(self.warm_up)
        else:
            self.gate.hang()
        return list(CHUNKS)


@BOTH
def test_a_retrievers_first_search_has_the_longer_first_search_timeout(
    gate: Gate, asynchronous: bool
) -> None:
    """A store whose first search loads its model (past retriever_timeout) is not failed
    by it: the first search of each retriever is bounded by first_search_timeout (120 s
    by default); the searches after it by retriever_timeout."""
    assert RouterConfig().first_search_timeout == 120.0
    retriever = WarmingRetriever(gate, warm_up=0.3)
    crag = CRAG(retriever, config={"retriever_timeout": 0.05})
    assert run(crag, asynchronous).chunks  # 0.3 s > 0.05 s: within the first search's bound
    with pytest.raises(RetrieverError) as info:  # warm now: retriever_timeout bounds it
        run(crag, asynchronous)
    assert info.value.timeout == 0.05
    crag.close()


def test_500_timed_out_calls_leave_at_most_the_pool_behind(gate: Gate) -> None:
    crag = CRAG(
        HungRetriever(gate),
        config={"retriever_timeout": 0.01, "first_search_timeout": 0.01, "worker_threads": 4},
    )
    before = threading.active_count()

    async def many() -> list[Any]:
        return await asyncio.gather(
            *(crag.aretrieve(f"solar {i}") for i in range(450)), return_exceptions=True
        )

    outcomes = asyncio.run(many())
    for i in range(50):  # and the sync router
        with pytest.raises(RetrieverError):
            crag.retrieve(f"wind {i}")
    assert all(isinstance(o, RetrieverError) and o.timeout == 0.01 for o in outcomes)
    exhausted = [o for o in outcomes if "no worker thread came free" in str(o)]
    assert exhausted  # typed, as the others
    # this router's threads (other tests' idle ones may still be alive: counted apart)
    assert crag._workers.threads <= 4 and threading.active_count() - before <= 4
    gate.release.set()
    crag.close()
    deadline = time.monotonic() + 5
    while crag._workers.threads and time.monotonic() < deadline:
        time.sleep(0.01)
    assert crag._workers.threads == 0  # closed with the router


def test_six_hung_web_calls_do_not_stall_a_healthy_query(gate: Gate) -> None:
    web = HungWeb(gate)
    stuck = CRAG(SyncOnly(), irrelevant(), web=web, cache=False)
    healthy = CRAG(SyncOnly(), cache=False)

    async def scenario() -> Any:
        hung = [asyncio.ensure_future(stuck.aretrieve(f"q {i}")) for i in range(6)]
        waited = 0
        while web.calls < 4 and waited < 500:  # the web calls have taken their threads
            await asyncio.sleep(0.01)
            waited += 1
        assert web.calls == 4, [f.exception() for f in hung if f.done()]
        await asyncio.sleep(0.05)
        result = await asyncio.wait_for(healthy.aretrieve("solar panels"), 5)
        gate.release.set()
        await asyncio.gather(*hung)
        return result

    result = asyncio.run(scenario())
    assert result.chunks and result.failures == ()
    stuck.close()
    healthy.close()


def test_a_thread_the_system_refuses_is_a_typed_error(
    gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    crag = CRAG(SyncOnly(), config={"retriever_timeout": 0.1, "first_search_timeout": 0.1})
    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RetrieverError, match="no worker thread came free"):
        crag.retrieve("solar")
    monkeypatch.undo()
    assert crag.retrieve("solar").chunks  # threads again
    crag.close()


# -- the pool itself ----------------------------------------------------------------------


def test_one_kind_holds_at_most_its_share_of_the_threads(gate: Gate) -> None:
    workers = Workers(4, name="crag-test-share")
    outcomes: list[Any] = []
    hung = [
        threading.Thread(target=lambda: outcomes.append(workers.call(gate.hang, 2, "web")))
        for _ in range(3)
    ]
    for thread in hung:
        thread.start()
    deadline = time.monotonic() + 5
    while sum(workers._busy.values()) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert workers.cap == 2 and workers.call(lambda: 7, 2, "retriever") == 7
    gate.release.set()
    for thread in hung:
        thread.join()
    assert outcomes == [None, None, None]  # the third waited for a web thread, then ran
    workers.close()


def test_a_late_answer_is_dropped_and_a_queued_call_never_runs(gate: Gate) -> None:
    workers = Workers(1, name="crag-test-late")
    ran: list[str] = []

    def slow() -> str:
        gate.hang()
        ran.append("slow")
        return "late"

    assert workers.call(slow, 0.05, "a") is ABANDONED
    assert workers.call(lambda: ran.append("queued"), 0.05, "b") is EXHAUSTED
    gate.release.set()
    assert workers.call(lambda: "next", 5, "b") == "next"
    assert ran == ["slow"]  # the call given up in the queue never ran
    workers.close()


def test_two_calls_that_find_one_idle_thread_both_start(gate: Gate) -> None:
    """The idle thread is handed the first call (taken off the idle list as it is): the
    second starts a thread of its own (it once waited forever behind a hung one: a lost
    wake-up)."""
    workers = Workers(4, share=1.0, name="crag-test-wake")
    assert workers.call(lambda: 1, 5, "a") == 1  # one thread, idle now
    started = threading.Semaphore(0)

    def hang() -> None:
        started.release()
        gate.hang()

    jobs = [_Job(hang, "a", None), _Job(hang, "a", None)]
    for job in jobs:  # the second before the woken thread can run
        workers._submit(job)
    assert started.acquire(timeout=5) and started.acquire(timeout=5)
    assert workers.threads == 2
    gate.release.set()
    assert all(job.wait(5) for job in jobs)
    workers.close()


def test_the_thread_that_went_idle_last_takes_the_next_call() -> None:
    """Calls one after the other run on one thread (its caches, and the OpenMP team a
    model started on it, stay warm), and the pool's threads end when it closes."""
    workers = Workers(4, share=1.0, name="crag-test-lifo")
    names = [workers.call(lambda: threading.current_thread().name, 5, "a") for _ in range(20)]
    assert len(set(names)) == 1 and workers.threads == 1
    workers.close()
    deadline = time.monotonic() + 5
    while workers.threads and time.monotonic() < deadline:
        time.sleep(0.005)
    assert workers.threads == 0
    assert workers.call(lambda: 2, 5, "a") == 2  # threads again after a close
    workers.close()


def test_an_idle_thread_ends_after_its_idle_time() -> None:
    workers = Workers(2, idle=0.05, name="crag-test-idle")
    assert workers.call(lambda: 1, 5, "a") == 1
    deadline = time.monotonic() + 5
    while workers.threads and time.monotonic() < deadline:
        time.sleep(0.005)
    assert workers.threads == 0
    assert workers.call(lambda: 3, 5, "a") == 3
    workers.close()


def test_a_memory_cache_and_bm25_are_called_in_the_calling_thread() -> None:
    seen: list[str] = []

    class Watched(MemoryCache):
        def get(self, key: str) -> str | None:
            seen.append(threading.current_thread().name)
            return super().get(key)

    crag = CRAG(ListRetriever(CHUNKS), cache=Watched())
    crag.retrieve("solar")
    assert seen == [threading.current_thread().name]
