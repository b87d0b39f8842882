"""Load with faults: many async queries through the router while Redis and the web fail.

    python benchmarks/load_faults.py [--queries 1000] [--concurrency 50]
                                     [--out benchmarks/results/load_faults]

Real parts only, all on 127.0.0.1: a ``redis-server`` (:class:`RedisServer`),
a SearXNG (:class:`SearxngServer`, from ``CRAG_SEARXNG_PYTHON`` or the venv at
``<repo>/.searxng-venv``, made on first use) fed by a :class:`FaultyEngine`,
and a :class:`CRAG` over :func:`sample_retriever` (FAISS) with
``RedisCache(url=..., retry_interval=0.25, secret=...)`` and a :class:`SearxngClient`
(with a :class:`CircuitBreaker` in its failure-rate mode: it opens when at
least 5 failures make up at least half of the calls of the last 10 s, with a
1 s cool-down; ``--consecutive-breaker`` for the default mode, 5 failures in a
row) and
a shared ``httpx.AsyncClient``. Timeouts: SearXNG's engine timeout 2 s, the
client's 6 s (one retry), the router's ``web_timeout`` 13 s. The router uses
``k=3`` and ``web_on_partial=True``: it has no lexical retriever and no
expander, so a PARTIAL retrieval has nothing to expand with and goes to the
web (strategy ``web_search``).
``--queries`` calls of ``CRAG.aretrieve`` run under an
``asyncio.Semaphore(--concurrency)``.

The queries (seeded): mostly generated off-topic questions ("How to repair a
canoe paddle q3f9a01c") with a unique token, so each has its own web query
and the web cache cannot hide a failure; some repeats of earlier ones (cache
hits); and the bundled sample queries in turn (answered ones take the fast
path, the others expansion and / or the web).

Faults:

* the engine fails a deterministic share of query texts (``--failure-share``,
  0.25 by default) with an HTTP 500, a body that is not JSON, or an answer
  slower than the SearXNG engine timeout, and records what it served;
* a background task SIGKILLs Redis once 30 % of the queries are done
  (``--kill-at``) and restarts it on the same port at 60 % (``--restart-at``),
  recording the times: ``kill_done`` (the process is reaped) and
  ``restart_started`` (before the new process is spawned) bound the *certain
  outage*, when no Redis process exists.

Ground truth comes from outside the router: a :class:`CallTrace` records
each cache and web call the router makes (the real cache and client are
wrapped, not replaced), tagged with the query that made it, and the engine
records what it served for each query text. Per query:

* it **had a web failure** when one of its web calls raised (``CircuitOpenError``
  and timeouts included), or sent a text the engine served a failing reply;
  it is **flagged** for it when ``result.web_error`` is set;
* it **had a cache failure** when one of its cache calls raised, or lay
  entirely inside the certain outage (such a call cannot have succeeded); it
  is **flagged** for it when ``result.cache_error`` is set;
* an **unflagged failure** is a failure of either kind whose flag is missing
  (the benchmark fails unless there are none);
* a **hang** is a query whose ``aretrieve`` had not returned by the hard
  deadline (``web_timeout`` of the router + 5 s, after it got its semaphore
  slot); it is cancelled and counted;
* an **exception** is an ``aretrieve`` that raised (no result).

It also checks that no result carries a flag without a failure, that every
engine request is a text some query sent (else the ground truth could not be
attributed), that no cache call succeeded inside the certain outage, that no
result has no chunks without a note and that no process is left behind, and
counts cache hits, web results used and circuit-breaker openings.
Latency is from the semaphore slot to the result; percentiles are nearest-rank
(p = the value at rank ceil(p/100 * n) of the sorted latencies).

The report (built by ``load_faults_report.py``, next to this file) is written
as ``load_faults.json`` and ``load_faults.md`` in ``--out``; the Markdown is
printed. Exit status 0 when every check passed, 1 when one failed, 2 when
SearXNG cannot be installed here. :func:`run_load_faults` is the whole
benchmark as a function (tests/load calls it with fewer queries).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import math
import os
import random
import secrets
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import testkit_path  # noqa: F401 - puts tests/support (crag_testkit) on sys.path
from crag_testkit import (
    FaultyEngine,
    RedisServer,
    SearxngServer,
    SearxngUnavailable,
    find_searxng_python,
)
from load_faults_report import analyse, to_markdown, write_report
from load_faults_run import LoadSettings, Outcome, Planned, Run, Timeline

from crag_heuristic import CRAG, CircuitBreaker, CRAGResult, RedisCache, RouterConfig, SearxngClient
from crag_heuristic.sample import load_sample_queries, sample_retriever
from crag_heuristic.testing import CallTrace, TracedCache, TracedWebSearcher

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "load_faults"

VERBS = (
    "repair", "clean", "paint", "sharpen", "polish", "store", "fold", "replace", "install",
    "waterproof", "restore", "glue", "sand", "measure", "adjust", "oil", "patch", "dye",
)  # fmt: skip
OBJECTS = (
    "a canoe paddle", "a leather saddle", "ski wax", "violin strings", "a wooden fence",
    "window screens", "a bicycle chain", "ceramic glaze", "a tent zipper", "hiking boots",
    "a kayak hull", "garden hoses", "a chess clock", "knitting needles", "a cast iron pan",
    "a sailboat mast", "a skateboard deck", "a climbing rope", "a pottery wheel", "a drum head",
)  # fmt: skip


# -- the queries ---------------------------------------------------------------------------


def make_queries(settings: LoadSettings) -> list[Planned]:
    """The run's queries, the same for the same settings (see the module doc)."""
    rng = random.Random(settings.seed)
    samples = load_sample_queries()
    planned: list[Planned] = []
    generated: list[str] = []
    for index in range(settings.queries):
        roll = rng.random()
        old_enough = len(generated) - 2 * settings.concurrency
        if roll < settings.sample_share:
            sample = samples[sum(p.kind.startswith("sample") for p in planned) % len(samples)]
            planned.append(Planned(index, sample["text"], f"sample-{sample['metadata']['expect']}"))
        elif roll < settings.sample_share + settings.repeat_share and old_enough > 0:
            planned.append(Planned(index, generated[rng.randrange(old_enough)], "repeat"))
        else:
            token = hashlib.sha256(f"{settings.seed}:{index}".encode()).hexdigest()[:8]
            text = f"How to {rng.choice(VERBS)} {rng.choice(OBJECTS)} q{token}"
            generated.append(text)
            planned.append(Planned(index, text, "generated"))
    return planned


# -- running them --------------------------------------------------------------------------


class EventLog:
    """A stand-in structlog logger that keeps the events, timed (for the circuit breaker)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.events: list[dict[str, Any]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append({"event": event, "at": self.clock(), **fields})

    debug = warning = info

    def bind(self, **fields: Any) -> EventLog:
        return self


async def _drive(
    settings: LoadSettings,
    crag: CRAG,
    queries: Sequence[Planned],
    trace: CallTrace,
    redis_server: RedisServer,
) -> tuple[list[Outcome], Timeline, int]:
    clock = trace.clock
    timeline = Timeline(started=clock())
    semaphore = asyncio.Semaphore(settings.concurrency)
    kill_now, restart_now = asyncio.Event(), asyncio.Event()
    kill_after = math.ceil(settings.kill_at * len(queries))
    restart_after = math.ceil(settings.restart_at * len(queries))
    outcomes: list[Outcome] = []
    hung: list[asyncio.Task[CRAGResult]] = []

    async def one(planned: Planned) -> None:
        async with semaphore:
            started = clock()
            with trace.tagged(planned.tag):
                task = asyncio.create_task(crag.aretrieve(planned.text, settings.k))
            done, _ = await asyncio.wait({task}, timeout=settings.deadline)
            outcome = Outcome(planned, "result", started, clock())
            if not done:
                task.cancel()
                hung.append(task)
                outcome.status, outcome.error = "hang", f"no result after {settings.deadline} s"
            else:
                try:
                    outcome.result = task.result()
                except BaseException as exc:  # noqa: BLE001 - counted: a query without a result
                    outcome.status, outcome.error = "exception", f"{type(exc).__name__}: {exc}"
        outcomes.append(outcome)
        if len(outcomes) >= kill_after:
            kill_now.set()
        if len(outcomes) >= restart_after:
            restart_now.set()

    def kill() -> None:
        timeline.kill_started = clock()
        redis_server.kill()
        timeline.kill_done = clock()

    def restart() -> None:
        timeline.restart_started = clock()
        redis_server.restart()
        timeline.restart_ready = clock()

    async def faults() -> None:
        try:
            await kill_now.wait()
            timeline.completed_at_kill = len(outcomes)
            await asyncio.to_thread(kill)
            await restart_now.wait()
            timeline.completed_at_restart = len(outcomes)
            await asyncio.to_thread(restart)
        except Exception as exc:  # noqa: BLE001 - reported, and fails the run
            timeline.error = f"{type(exc).__name__}: {exc}"

    fault_task = asyncio.create_task(faults())
    await asyncio.gather(*(one(planned) for planned in queries))
    timeline.ended = clock()
    await fault_task
    stragglers = 0
    if hung:  # cancelled above: give them a moment to unwind, count the ones that do not
        _, pending = await asyncio.wait(hung, timeout=5.0)
        stragglers = len(pending)
    return sorted(outcomes, key=lambda o: o.planned.index), timeline, stragglers


def _children() -> set[int]:
    """Live (not zombie) child processes of this process, from /proc (empty elsewhere)."""
    me, found = os.getpid(), set()
    for entry in Path("/proc").glob("[0-9]*/stat") if Path("/proc").is_dir() else []:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = entry.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.add(int(entry.parent.name))
    return found


def run_load(settings: LoadSettings, searxng_python: Path) -> Run:
    """Start the servers, run the queries with the faults, stop everything; the raw run."""
    queries = make_queries(settings)
    trace = CallTrace()
    breaker_log = EventLog(trace.clock)
    children_before = _children()
    with contextlib.ExitStack() as stack:
        redis_server = stack.enter_context(RedisServer())
        engine = stack.enter_context(
            FaultyEngine(
                failure_share=settings.failure_share,
                kinds=settings.fault_kinds,
                slow_delay=settings.slow_delay,
                seed=str(settings.seed),
            )
        )
        searxng = stack.enter_context(
            SearxngServer(searxng_python, engine.url, engine_timeout=settings.engine_timeout)
        )
        redis_cache = RedisCache(  # signed, as the documented setting for a shared Redis
            url=redis_server.url,
            retry_interval=settings.retry_interval,
            secret=secrets.token_hex(32),
        )
        stack.callback(redis_cache.close)
        breaker = CircuitBreaker(
            failure_threshold=settings.breaker_threshold,
            failure_rate=settings.breaker_failure_rate,
            window=10.0,
            cooldown=settings.breaker_cooldown,
            logger=breaker_log,
        )
        retriever = sample_retriever()

        async def main() -> tuple[list[Outcome], Timeline, int]:
            async with httpx.AsyncClient(
                limits=httpx.Limits(max_connections=settings.concurrency + 10)
            ) as http:
                client = SearxngClient(
                    searxng.url,
                    async_client=http,
                    breaker=breaker,
                    timeout=settings.client_timeout,
                    max_retries=settings.client_retries,
                    backoff=0.25,
                    backoff_max=1.0,
                    rng=random.Random(settings.seed),
                )
                crag = CRAG(
                    retriever,
                    web=TracedWebSearcher(client, trace),
                    cache=TracedCache(redis_cache, trace),
                    config=RouterConfig(
                        k=settings.k, web_on_partial=True, web_timeout=settings.web_timeout
                    ),
                )
                crag.expander  # noqa: B018 - build the default expander before the clock starts
                crag.corpus_stats()
                try:
                    return await _drive(settings, crag, queries, trace, redis_server)
                finally:
                    await redis_cache.aclose()

        outcomes, timeline, stragglers = asyncio.run(main())
    left = sorted(_children() - children_before)
    return Run(
        settings=settings,
        outcomes=outcomes,
        calls=trace.calls,
        engine=engine,
        timeline=timeline,
        breaker_events=breaker_log.events,
        stragglers=stragglers,
        children_left=left,
    )


def run_load_faults(
    settings: LoadSettings | None = None,
    *,
    searxng_python: Path | None = None,
    out: Path | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return its report (also written to ``out`` when given).

    Raises:
        SearxngUnavailable: no SearXNG python given and none can be installed.
    """
    settings = settings or LoadSettings()
    python = searxng_python or find_searxng_python(ROOT)
    report = analyse(run_load(settings, python), command)
    if out is not None:
        write_report(report, out)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--failure-share", type=float, default=0.25)
    parser.add_argument("--kill-at", type=float, default=0.3)
    parser.add_argument("--restart-at", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--consecutive-breaker",
        action="store_true",
        help="open the circuit on 5 failures in a row (the library's default mode) instead "
        "of on a failure rate of 50 %% over 10 s",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    settings = LoadSettings(
        queries=args.queries,
        concurrency=args.concurrency,
        failure_share=args.failure_share,
        kill_at=args.kill_at,
        restart_at=args.restart_at,
        seed=args.seed,
        breaker_failure_rate=None if args.consecutive_breaker else 0.5,
    )
    command = shlex.join(
        ["python", "benchmarks/load_faults.py", *(argv if argv is not None else sys.argv[1:])]
    )
    try:
        report = run_load_faults(settings, out=args.out, command=command)
    except SearxngUnavailable as exc:
        print(f"SearXNG is not available here: {exc}", file=sys.stderr)
        return 2
    print(to_markdown(report))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
