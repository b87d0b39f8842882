"""The gate service under load while its Redis dies: nothing lost, every failure typed.

    python benchmarks/serve_load.py [--requests 1000] [--concurrency 50]
                                    [--out benchmarks/results/serve_load]

Real parts only, all on 127.0.0.1: the service (``crag_heuristic.serve.create_app``
run by uvicorn in a thread of this process, ``serving``) over an index
directory of the bundled sample (built first, ``IndexDirectory.build``), with
a ``RedisCache(retry_interval=0.25, secret=...)`` (signed) on a real ``redis-server``
(:class:`RedisServer`, the test kit) and an API key; and an ``httpx.AsyncClient``
sending ``--requests`` requests, ``--concurrency`` at a time.

The requests (seeded): ``/v1/retrieve`` with generated questions, each with a
unique token (so each has its own cache entries and the cache cannot hide a
failure), some repeats of earlier ones (cache hits) and the bundled sample's
queries; ``/v1/stream`` and ``/v1/evaluate`` in turn; and a share of bad ones
that must be refused with their own type (a blank query: ``InvalidQueryError``;
``k`` past the limit, a body that is not JSON: ``InputError``; a wrong key:
``UnauthorizedError``). A background task SIGKILLs Redis once ``--kill-at`` of
the requests are answered and restarts it at ``--restart-at``.

Ground truth comes from outside the service: the router's cache is wrapped in
a :class:`TracedCache` (it only watches), and each request's calls are tagged
with its ``X-Request-ID`` (an ASGI wrapper around the app sets the tag, so it
follows the request into the router's tasks). A request **had a cache
failure** when one of its cache calls raised, or lay inside the certain outage
(Redis reaped, not yet restarted); it is **flagged** when its result's JSON
says so (``cache_error``, a ``cache`` failure in ``failures``).

Checks (the run fails unless all hold): every request got an HTTP answer
(**lost**: a connection error or no answer within the deadline: 0); every answer
that is not a result is JSON naming a type of the library's error tree
(**untyped**: 0; ``InternalError`` counts as untyped), a stream's error event
too; every bad request got its expected type; every cache failure is flagged
(**unflagged**: 0) and no flag is without one; Redis was killed and restarted
and cache failures happened (else the run proved nothing). Latency is the
client's, from its slot to the whole answer; p50 / p99 nearest-rank.

Writes ``serve_load.json`` and ``serve_load.md`` to ``--out``; prints the Markdown.
Exit status 0 when every check passed, else 1. :func:`run_serve_load` is the
whole benchmark as a function (tests/load runs it with 100 requests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import secrets
import shlex
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import testkit_path  # noqa: F401 - puts tests/support (crag_testkit) on sys.path
from crag_testkit import RedisServer
from load_faults_report import latency as latency_of
from load_faults_run import Timeline

from crag_heuristic import CRAG, CragError, RedisCache, RouterConfig
from crag_heuristic.index import IndexDirectory
from crag_heuristic.metrics import PrometheusMetrics
from crag_heuristic.sample import load_sample_corpus, load_sample_queries
from crag_heuristic.serve import ServeSettings, create_app, serving
from crag_heuristic.testing import CallTrace, TracedCache

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "serve_load"
KEY = "load-test-key-0123456789"
TOPICS = ("a canoe paddle", "a leather saddle", "violin strings", "a bicycle chain",
          "a tent zipper", "hiking boots", "a chess clock", "a cast iron pan")  # fmt: skip
VERBS = ("repair", "clean", "sharpen", "store", "replace", "restore", "oil", "patch")
# what each bad request must be answered with
BAD = {
    "blank": (400, "InvalidQueryError"),
    "k_too_big": (400, "InputError"),
    "not_json": (400, "InputError"),
    "wrong_key": (401, "UnauthorizedError"),
}


def error_types() -> set[str]:
    """The names of the library's error tree: what a typed answer may be named."""
    found, todo = set(), [CragError]
    while todo:
        kind = todo.pop()
        found.add(kind.__name__)
        todo.extend(kind.__subclasses__())
    return found


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadSettings:
    """One run's parameters (times in seconds)."""

    requests: int = 1000
    concurrency: int = 50
    kill_at: float = 0.3
    restart_at: float = 0.6
    retry_interval: float = 0.25
    repeat_share: float = 0.10
    sample_share: float = 0.10
    stream_share: float = 0.10
    evaluate_share: float = 0.10
    bad_share: float = 0.05
    k: int = 3
    max_concurrency: int = 16
    request_timeout: float = 10.0
    client_timeout: float = 30.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.requests < 1 or self.concurrency < 1:
            raise ValueError("requests and concurrency must be >= 1")
        if not 0.0 < self.kill_at < self.restart_at < 1.0:
            raise ValueError("need 0 < kill_at < restart_at < 1")


@dataclass(frozen=True, slots=True)
class Planned:
    """One request of the run."""

    index: int
    route: str  # retrieve / stream / evaluate
    kind: str  # generated / repeat / sample / evaluate / a key of BAD
    query: str

    @property
    def tag(self) -> str:
        return f"r{self.index:05d}"


@dataclass
class Answer:
    """What one request got."""

    planned: Planned
    started: float
    ended: float
    status: int | None = None  # None: lost (no HTTP answer)
    error: str | None = None  # the answer's error type, or the client's failure
    flagged: bool = False  # the result says a cache call failed
    typed: bool = True
    detail: str = ""

    @property
    def latency_ms(self) -> float:
        return (self.ended - self.started) * 1000.0


def plan(settings: LoadSettings) -> list[Planned]:
    """The run's requests, the same for the same settings."""
    rng = random.Random(settings.seed)
    samples = [q["text"] for q in load_sample_queries()]
    corpus = load_sample_corpus()
    generated: list[str] = []
    planned = []
    for index in range(settings.requests):
        roll = rng.random()
        if roll < settings.bad_share:
            kind = sorted(BAD)[index % len(BAD)]
            planned.append(Planned(index, "retrieve", kind, "a question"))
            continue
        roll -= settings.bad_share
        if roll < settings.evaluate_share:
            planned.append(
                Planned(index, "evaluate", "evaluate", corpus[index % len(corpus)].text[:60])
            )
            continue
        roll -= settings.evaluate_share
        route = "stream" if rng.random() < settings.stream_share else "retrieve"
        if roll < settings.sample_share:
            planned.append(Planned(index, route, "sample", samples[index % len(samples)]))
        elif roll < settings.sample_share + settings.repeat_share and generated:
            planned.append(Planned(index, route, "repeat", rng.choice(generated)))
        else:
            token = hashlib.sha256(f"{settings.seed}:{index}".encode()).hexdigest()[:8]
            text = f"How to {rng.choice(VERBS)} {rng.choice(TOPICS)} q{token}"
            generated.append(text)
            planned.append(Planned(index, route, "generated", text))
    return planned


def tagging(app: Any, trace: CallTrace) -> Callable[..., Awaitable[None]]:
    """The app, each request's cache calls tagged with its ``X-Request-ID``."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        tag = dict(scope["headers"]).get(b"x-request-id", b"").decode("ascii", "replace")
        with trace.tagged(tag):
            await app(scope, receive, send)

    return wrapped


def _request(planned: Planned, k: int) -> tuple[str, dict[str, str], bytes]:
    """The route, headers and body of a request."""
    headers = {"X-API-Key": KEY, "X-Request-ID": planned.tag, "Content-Type": "application/json"}
    body: dict[str, Any] = {"query": planned.query, "k": k}
    if planned.kind == "blank":
        body["query"] = "   "
    elif planned.kind == "k_too_big":
        body["k"] = 10_000
    elif planned.kind == "wrong_key":
        headers["X-API-Key"] = KEY[::-1]
    elif planned.kind == "evaluate":
        chunk = {"id": f"mine-{planned.index}", "text": planned.query, "score": 0.7,
                 "score_kind": "cosine"}  # fmt: skip
        body = {"query": planned.query.split()[0], "chunks": [chunk]}
    raw = b"{not json" if planned.kind == "not_json" else json.dumps(body).encode()
    return f"/v1/{planned.route}", headers, raw


def _judge_json(answer: Answer, data: Any, known: set[str]) -> None:
    """Read an answer's JSON: a result (its cache flag) or a typed error."""
    if answer.status == 200:
        if answer.planned.route == "evaluate":
            answer.typed = isinstance(data, dict) and "verdict" in data
            return
        failures = data.get("failures") or []
        answer.flagged = data.get("cache_error") is not None or any(
            f.get("stage") == "cache" for f in failures
        )
        return
    answer.error = data.get("error") if isinstance(data, dict) else None
    answer.typed = answer.error in known and answer.error != "InternalError"


def _read_stream(answer: Answer, text: str, known: set[str]) -> None:
    """An SSE body: the ``done`` event's result, or a typed ``error`` event."""
    events, name = [], None
    for line in text.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: ") and name is not None:
            events.append((name, json.loads(line[len("data: ") :])))
            name = None
    if not events:
        answer.typed, answer.detail = False, "an empty stream"
        return
    last, data = events[-1]
    if last == "done":
        _judge_json(answer, data["result"], known)
    else:
        answer.error = data.get("error")
        answer.typed = last == "error" and answer.error in known and answer.error != "InternalError"


async def _drive(
    settings: LoadSettings,
    base: str,
    planned: list[Planned],
    redis: RedisServer,
    clock: Callable[[], float],
) -> tuple[list[Answer], Timeline]:
    timeline = Timeline(started=clock())
    semaphore = asyncio.Semaphore(settings.concurrency)
    kill_now, restart_now = asyncio.Event(), asyncio.Event()
    kill_after = math.ceil(settings.kill_at * len(planned))
    restart_after = math.ceil(settings.restart_at * len(planned))
    answers: list[Answer] = []
    known = error_types()
    limits = httpx.Limits(max_connections=settings.concurrency + 10)
    async with httpx.AsyncClient(
        base_url=base, limits=limits, timeout=settings.client_timeout
    ) as http:

        async def one(item: Planned) -> None:
            route, headers, body = _request(item, settings.k)
            async with semaphore:
                answer = Answer(item, clock(), 0.0)
                try:
                    response = await http.post(route, content=body, headers=headers)
                    answer.status = response.status_code
                    if item.route == "stream" and response.status_code == 200:
                        _read_stream(answer, response.text, known)
                    else:
                        _judge_json(answer, response.json(), known)
                except httpx.HTTPError as exc:  # no HTTP answer: lost
                    answer.error, answer.detail = type(exc).__name__, str(exc)[:200]
                except ValueError as exc:  # an answer that is not JSON: untyped
                    answer.typed, answer.error = False, "not JSON"
                    answer.detail = str(exc)[:200]
                answer.ended = clock()
            answers.append(answer)
            if len(answers) >= kill_after:
                kill_now.set()
            if len(answers) >= restart_after:
                restart_now.set()

        async def faults() -> None:
            try:
                await kill_now.wait()
                timeline.completed_at_kill = len(answers)
                await asyncio.to_thread(redis.kill)
                timeline.kill_done = clock()
                await restart_now.wait()
                timeline.completed_at_restart = len(answers)
                timeline.restart_started = clock()
                await asyncio.to_thread(redis.restart)
                timeline.restart_ready = clock()
            except Exception as exc:  # noqa: BLE001 - reported, and fails the run
                timeline.error = f"{type(exc).__name__}: {exc}"

        fault_task = asyncio.create_task(faults())
        await asyncio.gather(*(one(item) for item in planned))
        timeline.ended = clock()
        await fault_task
    return sorted(answers, key=lambda a: a.planned.index), timeline


def analyse(
    settings: LoadSettings,
    answers: list[Answer],
    timeline: Timeline,
    trace: CallTrace,
    command: str,
) -> dict[str, Any]:
    """The report: counts, the checks, and the anomalies that failed them."""
    calls = trace.by_tag()
    outage = (timeline.kill_done, timeline.restart_started)
    lost = [a for a in answers if a.status is None]
    untyped = [a for a in answers if a.status is not None and not a.typed]
    wrong_bad, unflagged, false_flags = [], [], []
    cache_failures, by_kind = 0, Counter[str]()
    for answer in answers:
        item = answer.planned
        if item.kind in BAD:
            if (answer.status, answer.error) != BAD[item.kind]:
                wrong_bad.append(answer)
            continue
        mine = [c for c in calls.get(item.tag, []) if c.part == "cache"]
        failed = [c for c in mine if not c.ok]
        in_outage = [
            c for c in mine
            if outage[0] is not None and outage[1] is not None
            and outage[0] <= c.started and c.ended <= outage[1]
        ]  # fmt: skip
        had = bool(failed or in_outage)
        cache_failures += had
        by_kind.update(c.kind or c.error_type or "?" for c in failed)
        if answer.status == 200 and had and not answer.flagged:
            unflagged.append(answer)
        if answer.flagged and not had:
            false_flags.append(answer)
    ok_in_outage = [
        c for c in trace.calls
        if c.part == "cache" and c.ok and outage[0] is not None and outage[1] is not None
        and outage[0] <= c.started and c.ended <= outage[1]
    ]  # fmt: skip
    statuses = Counter(f"{a.planned.route} {a.status}" for a in answers)
    errors = Counter(a.error for a in answers if a.error)
    checks = {
        "every request answered (0 lost)": not lost,
        "every failure typed (0 untyped)": not untyped,
        "every bad request refused with its type": not wrong_bad,
        "every cache failure flagged on its result": not unflagged,
        "no flag without a cache failure": not false_flags,
        "no cache call succeeded while Redis was down": not ok_in_outage,
        "Redis killed and restarted": timeline.error is None and timeline.restart_ready is not None,
        "cache failures happened": cache_failures > 0,
    }
    latency = {
        route: latency_of(
            [a.latency_ms for a in answers if a.planned.route == route and a.status == 200]
        )
        for route in ("retrieve", "stream", "evaluate")
    }
    anomalies = [
        {"request": a.planned.tag, "kind": a.planned.kind, "route": a.planned.route,
         "status": a.status, "error": a.error, "detail": a.detail, "problem": problem}
        for problem, group in (("lost", lost), ("untyped", untyped), ("wrong type", wrong_bad),
                               ("unflagged", unflagged), ("false flag", false_flags))
        for a in group
    ][:50]  # fmt: skip
    return {
        "benchmark": "serve_load",
        "command": command,
        "passed": all(checks.values()),
        "settings": asdict(settings),
        "requests": len(answers),
        "seconds": round(timeline.ended - timeline.started, 3),
        "lost": len(lost),
        "untyped": len(untyped),
        "checks": checks,
        "statuses": dict(sorted(statuses.items())),
        "errors": dict(sorted(errors.items())),
        "cache": {
            "requests_with_a_failure": cache_failures,
            "flagged": sum(a.flagged for a in answers),
            "unflagged": len(unflagged),
            "false_flags": len(false_flags),
            "failed_calls_by_kind": dict(sorted(by_kind.items())),
            "calls": sum(c.part == "cache" for c in trace.calls),
        },
        "redis": {
            "killed_at_s": _since(timeline.kill_done, timeline.started),
            "restarted_at_s": _since(timeline.restart_ready, timeline.started),
            "completed_at_kill": timeline.completed_at_kill,
            "completed_at_restart": timeline.completed_at_restart,
            "error": timeline.error,
        },
        "latency_ms": latency,
        "anomalies": anomalies,
        "load_average": os.getloadavg(),
    }


def _since(moment: float | None, start: float) -> float | None:
    return None if moment is None else round(moment - start, 3)


def run_serve_load(
    settings: LoadSettings | None = None,
    *,
    out: Path | None = None,
    command: str = "",
    index: Path | None = None,
) -> dict[str, Any]:
    """Build the index (unless ``index`` names the sample's, built), start Redis and the
    service, run the requests with the fault; the report (written to ``out`` when given)."""
    settings = settings or LoadSettings()
    trace = CallTrace()
    with contextlib.ExitStack() as stack:
        if index is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="serve-load-")))
            index = IndexDirectory.build(load_sample_corpus(), folder / "index").path
        redis = stack.enter_context(RedisServer())
        cache = RedisCache(  # signed, as the documented setting for a shared Redis
            url=redis.url, retry_interval=settings.retry_interval, secret=secrets.token_hex(32)
        )
        stack.callback(cache.close)
        crag = CRAG.from_index_dir(
            index,
            cache=TracedCache(cache, trace),
            metrics=PrometheusMetrics(),
            config=RouterConfig(k=settings.k),
        )
        service = ServeSettings(
            api_keys=(KEY,),
            max_concurrency=settings.max_concurrency,
            request_timeout=settings.request_timeout,
        )
        base = stack.enter_context(serving(tagging(create_app(crag, service), trace)))
        answers, timeline = asyncio.run(_drive(settings, base, plan(settings), redis, trace.clock))
    report = analyse(settings, answers, timeline, trace, command)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "serve_load.json").write_text(json.dumps(report, indent=2) + "\n")
        (out / "serve_load.md").write_text(to_markdown(report))
    return report


def to_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    verdict = "PASSED" if report["passed"] else "FAILED"
    settings, cache, redis = report["settings"], report["cache"], report["redis"]
    lines = [
        f"# The gate service under load with faults: {verdict}",
        "",
        f"`{report['command']}`",
        "",
        f"{report['requests']} HTTP requests, {settings['concurrency']} at a time, in "
        f"{report['seconds']} s, to the service (uvicorn in a thread of the benchmark's "
        f"process, {settings['max_concurrency']} requests at work at once) over the bundled "
        "sample's index directory, with a real Redis cache SIGKILLed after "
        f"{redis['completed_at_kill']} answers ({redis['killed_at_s']} s) and restarted after "
        f"{redis['completed_at_restart']} ({redis['restarted_at_s']} s). Load average "
        f"{report['load_average'][0]:.1f} (2 shared cores).",
        "",
        "| check | |",
        "|---|---|",
        *(f"| {name} | {'yes' if ok else '**no**'} |" for name, ok in report["checks"].items()),
        "",
        "| | |",
        "|---|---:|",
        f"| requests | {report['requests']} |",
        f"| **lost** (no HTTP answer) | **{report['lost']}** |",
        f"| **untyped** (an answer that is neither a result nor a typed error) | "
        f"**{report['untyped']}** |",
        f"| requests with a cache failure (ground truth) | {cache['requests_with_a_failure']} |",
        f"| flagged on their result (cache_error) | {cache['flagged']} |",
        f"| **unflagged** / flags without a failure | **{cache['unflagged']}** / "
        f"{cache['false_flags']} |",
        f"| failed cache calls by kind | "
        f"{', '.join(f'{k} {n}' for k, n in cache['failed_calls_by_kind'].items()) or 'none'} |",
        "",
        "Answers by route and status: "
        + ", ".join(f"{name} x{n}" for name, n in report["statuses"].items())
        + ". Error types answered: "
        + (", ".join(f"{name} x{n}" for name, n in report["errors"].items()) or "none")
        + " (the bad requests, each refused with its own type).",
        "",
        "Latency of the answered requests (ms, the client's, p50 / p99 nearest-rank):",
        "",
        "| route | n | p50 | p99 | max |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {route} | {cell['n']} | {cell.get('p50', '')} | {cell.get('p99', '')} | "
            f"{cell.get('max', '')} |"
            for route, cell in report["latency_ms"].items()
        ),
    ]
    if report["anomalies"]:
        lines += ["", "Anomalies:", "", *(f"- {json.dumps(a)}" for a in report["anomalies"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--kill-at", type=float, default=0.3)
    parser.add_argument("--restart-at", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    settings = LoadSettings(
        requests=args.requests,
        concurrency=args.concurrency,
        kill_at=args.kill_at,
        restart_at=args.restart_at,
        seed=args.seed,
    )
    command = shlex.join(
        ["python", "benchmarks/serve_load.py", *(argv if argv is not None else sys.argv[1:])]
    )
    started = time.perf_counter()
    report = run_serve_load(settings, out=args.out, command=command)
    print(to_markdown(report))
    print(f"({time.perf_counter() - started:.1f} s)", file=sys.stderr)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
