"""The judging half of benchmarks/load_faults.py: ground truth, checks, report.

Every definition (a failure, a flag, an unflagged failure, a hang) is in the
docstring of ``load_faults.py``; :func:`analyse` applies them to a run and
:func:`to_markdown` / :func:`write_report` present the result.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crag_heuristic import CRAGResult, Failure, FailureStage
from crag_heuristic.testing import TracedCall

if TYPE_CHECKING:
    from load_faults_run import Run

# -- the analysis --------------------------------------------------------------------------


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest rank: the value at rank ceil(p/100 * n) of ``ordered`` (sorted, non-empty)."""
    return ordered[max(0, math.ceil(p / 100.0 * len(ordered)) - 1)]


def latency(values: Iterable[float]) -> dict[str, float | int]:
    """``n``, nearest-rank ``p50`` and ``p99``, and ``max`` of ``values`` (ms, rounded)."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {
        "n": len(ordered),
        "p50": round(percentile(ordered, 50), 1),
        "p99": round(percentile(ordered, 99), 1),
        "max": round(ordered[-1], 1),
    }


@dataclass
class Truth:
    """The ground truth for one query that returned a result, and its flags."""

    web_causes: list[str]  # "injected: engine http_500", "circuit refusal", "not injected: X"
    cache_failed_calls: list[TracedCall]
    cache_calls_in_outage: list[TracedCall]
    web_flag: Failure | None  # the result's web failure
    cache_flag: Failure | None  # its last cache failure

    @property
    def web_failed(self) -> bool:
        return bool(self.web_causes)

    @property
    def cache_failed(self) -> bool:
        return bool(self.cache_failed_calls or self.cache_calls_in_outage)

    @property
    def web_unflagged(self) -> bool:
        return self.web_failed and self.web_flag is None

    @property
    def cache_unflagged(self) -> bool:
        return self.cache_failed and self.cache_flag is None


CIRCUIT_REFUSAL = "circuit refusal"


def classify_web_call(call: TracedCall, failed_texts: dict[str, str]) -> str:
    """What one web call came to: ``"answered"``, ``"injected: engine <kind>"`` (it
    reached the engine with a text the engine fails), ``"circuit refusal"`` (the open
    circuit refused it: no request was sent, whatever its text) or ``"not injected:
    <error>"`` (it failed with nothing injected)."""
    if call.error_type == "CircuitOpenError":
        return CIRCUIT_REFUSAL
    text = call.arg.strip()  # what the client sends and SearXNG passes on
    if text in failed_texts:
        return f"injected: engine {failed_texts[text]}"
    return "answered" if call.ok else f"not injected: {call.error_type}"


def web_accounting(
    calls: Sequence[TracedCall], failed_texts: dict[str, str], served: dict[str, int]
) -> dict[str, Any]:
    """Injected faults, circuit refusals and other failures of the web calls, apart.

    ``served`` is what the engine served per outcome (``FaultyEngine.served_counts``).
    A refused call never reached the engine: it is a consequence of the circuit,
    counted by whether the engine would have failed its text or answered it.
    """
    web = [c for c in calls if c.part == "web"]
    outcomes = [classify_web_call(c, failed_texts) for c in web]
    refused = [c for c, o in zip(web, outcomes, strict=True) if o == CIRCUIT_REFUSAL]
    would_fail = sum(c.arg.strip() in failed_texts for c in refused)
    return {
        "calls": len(web),
        "answered": outcomes.count("answered"),
        "injected_faults_served": {k: v for k, v in served.items() if k != "ok"},
        "calls_that_met_an_injected_fault": dict(
            sorted(
                Counter(
                    o.removeprefix("injected: engine ") for o in outcomes if o.startswith("inj")
                ).items()
            )
        ),
        "circuit_refusals": len(refused),
        "refusals_the_engine_would_have_failed": would_fail,
        "refusals_the_engine_would_have_answered": len(refused) - would_fail,
        "other_failures": dict(
            sorted(
                Counter(
                    o.removeprefix("not injected: ") for o in outcomes if o.startswith("not inj")
                ).items()
            )
        ),
    }


def _flag_cause(truth: Truth) -> str:
    """The kind of failure behind a query's web_error flag (its first failed call)."""
    if not truth.web_causes:
        return "no failure"
    cause = truth.web_causes[0]
    if cause == CIRCUIT_REFUSAL:
        return CIRCUIT_REFUSAL
    return "injected fault" if cause.startswith("injected") else "other failure"


def judge(
    result: CRAGResult,
    calls: Sequence[TracedCall],
    failed_texts: dict[str, str],
    outage: tuple[float, float] | None,
) -> Truth:
    """Compare one result's flags with what its traced calls and the engine say."""
    causes = []
    for call in (c for c in calls if c.part == "web"):
        outcome = classify_web_call(call, failed_texts)
        if outcome != "answered":
            causes.append(outcome)
    cache_calls = [c for c in calls if c.part == "cache"]
    return Truth(
        web_causes=causes,
        cache_failed_calls=[c for c in cache_calls if not c.ok],
        cache_calls_in_outage=[
            c for c in cache_calls if outage and outage[0] <= c.started and c.ended <= outage[1]
        ],
        web_flag=result.web.failure,
        cache_flag=next(
            (f for f in reversed(result.failures) if f.stage is FailureStage.CACHE), None
        ),
    )


def _web_outcome(result: CRAGResult) -> str:
    web = result.web
    if web.failure is not None:
        return "web error flagged"
    if web.cache_hit:
        return "web cache hit"
    return "web results used" if web.used else "web found nothing"


def _stray_cache_failures(run: Run) -> int:
    """Failed cache calls before the kill, or after Redis was back and the down window
    had passed: failures nobody injected (load, or a recovery that drags on)."""
    timeline, settings = run.timeline, run.settings
    recovered = (
        None
        if timeline.restart_ready is None
        else timeline.restart_ready + 2 * settings.retry_interval
    )
    return sum(
        1
        for c in run.calls
        if c.part == "cache"
        and not c.ok
        and (
            (timeline.kill_started is not None and c.ended < timeline.kill_started)
            or (recovered is not None and c.started > recovered)
        )
    )


def analyse(run: Run, command: str | None = None) -> dict[str, Any]:
    """The report of a run (see the module doc for every definition)."""
    settings, timeline = run.settings, run.timeline
    by_tag: dict[str | None, list[TracedCall]] = {}
    for call in run.calls:
        by_tag.setdefault(call.tag, []).append(call)
    failed_texts = run.engine.failed_texts()
    orphans = sorted(set(run.engine.served) - {c.arg.strip() for c in run.calls if c.part == "web"})
    outage = None
    if timeline.kill_done is not None and timeline.restart_started is not None:
        outage = (timeline.kill_done, timeline.restart_started)

    status = Counter(o.status for o in run.outcomes)
    anomalies: list[dict[str, Any]] = [
        {"query": o.planned.index, "problem": o.status, "detail": o.error}
        for o in run.outcomes
        if o.result is None
    ]
    done = [(o, o.result) for o in run.outcomes if o.result is not None]
    truths = []
    for outcome, result in done:
        truth = judge(result, by_tag.get(outcome.planned.tag, []), failed_texts, outage)
        truths.append(truth)
        problems = [
            name
            for name, bad in (
                ("web failure not flagged", truth.web_unflagged),
                ("cache failure not flagged", truth.cache_unflagged),
                ("no chunks and no note", not result.chunks and not result.notes),
                ("result for another query", result.query != outcome.planned.text),
            )
            if bad
        ]
        for problem in problems:
            anomalies.append(
                {
                    "query": outcome.planned.index,
                    "problem": problem,
                    "web_causes": truth.web_causes,
                    "cache_failures": [c.error for c in truth.cache_failed_calls],
                    "cache_calls_in_outage": len(truth.cache_calls_in_outage),
                }
            )
    problem_count = Counter(a["problem"] for a in anomalies)
    web_unflagged = sum(t.web_unflagged for t in truths)
    cache_unflagged = sum(t.cache_unflagged for t in truths)
    web_spurious = sum(t.web_flag is not None and not t.web_failed for t in truths)
    cache_spurious = sum(t.cache_flag is not None and not t.cache_failed for t in truths)
    in_outage_ok = sum(c.ok for t in truths for c in t.cache_calls_in_outage)
    by_route: dict[str, list[float]] = {}
    by_web: dict[str, list[float]] = {}
    for outcome, result in done:
        by_route.setdefault(result.strategy.value, []).append(outcome.latency_ms)
        if result.web_query is not None:
            by_web.setdefault(_web_outcome(result), []).append(outcome.latency_ms)
    checks = {
        "every query returned a result for itself": status["result"] == settings.queries
        and not problem_count["result for another query"],
        "no unflagged failure": web_unflagged + cache_unflagged == 0,
        "no flag without a failure": web_spurious + cache_spurious == 0,
        "no hang": status["hang"] == 0 and run.stragglers == 0,
        "no result without chunks and without a note": not problem_count["no chunks and no note"],
        "every engine request attributed to a query": not orphans,
        "no cache call succeeded during the certain outage": in_outage_ok == 0,
        "Redis was killed and restarted": timeline.restart_ready is not None
        and timeline.error is None,
        "no process left behind": not run.children_left,
    }

    def since_start(t: float | None) -> float | None:
        return None if t is None else round(t - timeline.started, 3)

    web_flags = Counter(t.web_flag.type_name for t in truths if t.web_flag)
    cache_flags = Counter(
        (t.cache_failed_calls[-1].kind or t.cache_failed_calls[-1].error_type or "?")
        if t.cache_failed_calls
        else "no failed call"
        for t in truths
        if t.cache_flag
    )
    return {
        "benchmark": "load_faults",
        "command": command,
        "settings": {
            **dataclasses.asdict(settings),
            "deadline": settings.deadline,
            "breaker": "consecutive"
            if settings.breaker_failure_rate is None
            else f"failure rate >= {settings.breaker_failure_rate:.0%} over 10 s",
        },
        "environment": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "queries": settings.queries,
        "concurrency": settings.concurrency,
        "query_kinds": dict(sorted(Counter(o.planned.kind for o in run.outcomes).items())),
        "wall_time_s": round(timeline.ended - timeline.started, 2),
        "results": status["result"],
        "exceptions": status["exception"],
        "hangs": status["hang"],
        "hung_tasks_not_cancelled": run.stragglers,
        "unflagged_failures": web_unflagged + cache_unflagged,
        "latency_ms": {
            "overall": latency(o.latency_ms for o, _ in done),
            "by_route": {k: latency(v) for k, v in sorted(by_route.items())},
            "by_web_outcome": {k: latency(v) for k, v in sorted(by_web.items())},
        },
        "web": {
            **web_accounting(run.calls, failed_texts, run.engine.served_counts()),
            "engine_requests": len(run.engine.requests),
            "engine_served": run.engine.served_counts(),
            "queries_with_failure": sum(t.web_failed for t in truths),
            "failure_causes": dict(
                sorted(Counter(t.web_causes[0] for t in truths if t.web_causes).items())
            ),
            "flagged_by_kind": dict(sorted(web_flags.items())),
            "flagged_by_cause": dict(
                sorted(Counter(_flag_cause(t) for t in truths if t.web_flag).items())
            ),
            "flagged": sum(web_flags.values()),
            "unflagged": web_unflagged,
            "flagged_without_failure": web_spurious,
            "results_used": sum(r.web_search_used for _, r in done),
            "cache_hits": sum(r.web_cache_hit for _, r in done),
            "circuit_opens": sum(e.get("state") == "open" for e in run.breaker_events),
            "circuit_changes": [
                f"{since_start(e['at'])} s: {e.get('previous')} -> {e.get('state')}"
                for e in run.breaker_events
                if e.get("event") == "crag.circuit"
            ][:40],
            "orphan_engine_texts": orphans[:10],
        },
        "cache": {
            "calls": sum(c.part == "cache" for c in run.calls),
            "failed_calls": sum(c.part == "cache" and not c.ok for c in run.calls),
            "queries_with_failure": sum(t.cache_failed for t in truths),
            "flagged_by_kind": dict(sorted(cache_flags.items())),
            "flagged": sum(cache_flags.values()),
            "unflagged": cache_unflagged,
            "flagged_without_failure": cache_spurious,
            "calls_ok_in_certain_outage": in_outage_ok,
            "failed_calls_outside_outage": _stray_cache_failures(run),
            "evaluation_cache_hits": sum(r.cache_hit for _, r in done),
        },
        "redis": {
            "kill_started_s": since_start(timeline.kill_started),
            "kill_done_s": since_start(timeline.kill_done),
            "restart_started_s": since_start(timeline.restart_started),
            "restart_ready_s": since_start(timeline.restart_ready),
            "completed_at_kill": timeline.completed_at_kill,
            "completed_at_restart": timeline.completed_at_restart,
            "error": timeline.error,
        },
        "children_left": run.children_left,
        "checks": checks,
        "passed": all(checks.values()),
        "anomalies": anomalies[:50],
    }


# -- the report ------------------------------------------------------------------------------


def _table(rows: dict[str, dict[str, float | int]]) -> list[str]:
    lines = ["| route | n | p50 | p99 | max |", "|---|---:|---:|---:|---:|"]
    for name, row in rows.items():
        if row.get("n"):
            lines.append(f"| {name} | {row['n']} | {row['p50']} | {row['p99']} | {row['max']} |")
    return lines


def _kinds(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"


DEFINITIONS = (
    "Definitions (ground truth comes from outside the router: every cache and web call it "
    "makes is traced and tagged with its query, and the engine records what it served per "
    "query text):",
    "",
    "- a query **had a web failure** when one of its web calls raised (circuit open and "
    "timeouts included) or sent a text the engine served a failing reply (`injected`); it is "
    "**flagged** when its result has `web_error`;",
    "- a web call is counted once, as what it came to: **answered**, **met an injected "
    "fault** (it reached the engine with a text the engine fails), **refused by the open "
    "circuit** (no request sent, whatever its text: a consequence of the breaker, not of a "
    "fault) or **another failure** (nothing injected); an injected fault is an engine reply "
    "the engine chose to fail;",
    "- it **had a cache failure** when one of its cache calls raised, or lay entirely inside "
    "the certain outage (from the moment the killed Redis was reaped to the moment the new "
    "one was spawned); it is **flagged** when its result has `cache_error`;",
    "- an **unflagged failure** is a failure of either kind whose flag is missing;",
    "- a **hang** is a query without a result by the deadline (the router's web timeout "
    "+ 5 s, from its semaphore slot); it is cancelled and counted.",
)


def to_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    web, cache, redis_ = report["web"], report["cache"], report["redis"]
    overall = report["latency_ms"]["overall"]
    verdict = "PASSED" if report["passed"] else "FAILED"
    lines = [
        f"# Load with faults: {verdict}",
        "",
        f"`{report['command']}`" if report["command"] else "",
        "",
        f"{report['queries']} async queries, {report['concurrency']} at a time, in "
        f"{report['wall_time_s']} s, against a real Redis (SIGKILLed at "
        f"{redis_['kill_done_s']} s, restarted at {redis_['restart_started_s']} s, ready at "
        f"{redis_['restart_ready_s']} s) and a real SearXNG whose engine fails "
        f"{report['settings']['failure_share']:.0%} of query texts "
        f"({', '.join(report['settings']['fault_kinds'])}).",
        "",
        "| | |",
        "|---|---:|",
        f"| queries | {report['queries']} |",
        f"| results | {report['results']} |",
        f"| exceptions | {report['exceptions']} |",
        f"| hangs (deadline {report['settings']['deadline']} s) | {report['hangs']} |",
        f"| **unflagged failures** | **{report['unflagged_failures']}** |",
        f"| injected faults: failing engine replies served | "
        f"{sum(web['injected_faults_served'].values())} "
        f"({_kinds(web['injected_faults_served'])}) |",
        f"| web calls | {web['calls']}: {web['answered']} answered, "
        f"{sum(web['calls_that_met_an_injected_fault'].values())} met an injected fault, "
        f"{web['circuit_refusals']} refused by the open circuit, "
        f"{sum(web['other_failures'].values())} other failures "
        f"({_kinds(web['other_failures'])}) |",
        f"| circuit ({report['settings'].get('breaker', 'consecutive')}): openings / refusals "
        f"| {web['circuit_opens']} / {web['circuit_refusals']} "
        f"({web['refusals_the_engine_would_have_answered']} of texts the engine would have "
        f"answered, {web['refusals_the_engine_would_have_failed']} of texts it would have "
        "failed) |",
        f"| web errors flagged (queries) | {web['flagged']}: "
        f"{_kinds(web.get('flagged_by_cause', {}))} (by error: "
        f"{_kinds(web['flagged_by_kind'])}) |",
        f"| cache errors flagged | {cache['flagged']} ({_kinds(cache['flagged_by_kind'])}) |",
        f"| queries with a web failure (ground truth) | {web['queries_with_failure']} |",
        f"| queries with a cache failure (ground truth) | {cache['queries_with_failure']} |",
        f"| latency p50 / p99 / max (ms) | {overall.get('p50')} / {overall.get('p99')} / "
        f"{overall.get('max')} |",
        f"| web results used | {web['results_used']} ({web['cache_hits']} from the cache) |",
        f"| cache hits: evaluations / web results | {cache['evaluation_cache_hits']} / "
        f"{web['cache_hits']} |",
        f"| engine requests served | {_kinds(web['engine_served'])} |",
        f"| cache calls failed away from the outage | {cache['failed_calls_outside_outage']} |",
        "",
        "Latency is from a query's semaphore slot to its result; p50 / p99 are nearest-rank. "
        "Route = the result's strategy (`none` = fast path).",
        "",
        "Latency by route (ms):",
        "",
        *_table(report["latency_ms"]["by_route"]),
        "",
        "Queries that went to the web, by outcome (ms):",
        "",
        *_table(report["latency_ms"]["by_web_outcome"]),
        "",
        "Checks:",
        "",
        *(f"- [{'x' if ok else ' '}] {name}" for name, ok in report["checks"].items()),
        "",
        *DEFINITIONS,
    ]
    return "\n".join(lines) + "\n"


def write_report(report: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "load_faults.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "load_faults.md").write_text(to_markdown(report), encoding="utf-8")
