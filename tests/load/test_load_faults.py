"""200 async queries, 50 at a time, through real Redis and SearXNG while both fail.

The same code as ``python benchmarks/load_faults.py``, smaller: the engine
fails a quarter of the query texts (HTTP 500, garbage, too slow), Redis is
SIGKILLed at 30 % of the run and restarted at 60 %. Every query must get a
result, every failure must be flagged on it, nothing may hang, and both kinds
of fault must really have happened (or the test would prove nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.slow

QUERIES = 200


def test_every_failure_is_flagged_under_load(
    load_faults: ModuleType, searxng_python: Path, tmp_path: Path
) -> None:
    settings = load_faults.LoadSettings(queries=QUERIES, concurrency=50)
    report = load_faults.run_load_faults(settings, searxng_python=searxng_python, out=tmp_path)

    failed = {name: ok for name, ok in report["checks"].items() if not ok}
    assert failed == {}, report["anomalies"]
    assert report["results"] == QUERIES
    assert report["exceptions"] == 0
    assert report["hangs"] == 0 and report["hung_tasks_not_cancelled"] == 0
    assert report["unflagged_failures"] == 0
    assert report["web"]["unflagged"] == 0 and report["cache"]["unflagged"] == 0

    # both faults happened, reached the router and were flagged
    web, cache = report["web"], report["cache"]
    injected = {c: n for c, n in web["failure_causes"].items() if c.startswith("injected")}
    assert sum(injected.values()) > 0, web
    assert web["flagged"] >= sum(injected.values())
    assert sum(n for kind, n in web["engine_served"].items() if kind != "ok") > 0
    # each web call is counted once: answered, injected fault, circuit refusal or other
    met = sum(web["calls_that_met_an_injected_fault"].values())
    other = sum(web["other_failures"].values())
    assert web["answered"] + met + web["circuit_refusals"] + other == web["calls"]
    assert (
        web["refusals_the_engine_would_have_failed"]
        + web["refusals_the_engine_would_have_answered"]
        == (web["circuit_refusals"])
    )
    assert sum(web["flagged_by_cause"].values()) == web["flagged"]
    assert web["flagged_by_cause"].get("injected fault", 0) == met
    assert report["settings"]["breaker"].startswith("failure rate")
    assert cache["flagged"] > 0 and cache["queries_with_failure"] == cache["flagged"]
    assert set(cache["flagged_by_kind"]) <= {"connection", "down", "timeout"}
    redis = report["redis"]
    assert redis["kill_done_s"] < redis["restart_started_s"] < redis["restart_ready_s"]
    assert report["children_left"] == []

    # the run also did real work: web results, fast path, expansion
    assert web["results_used"] > 0
    assert {"none", "web_search"} <= set(report["latency_ms"]["by_route"])
    overall = report["latency_ms"]["overall"]
    assert overall["n"] == QUERIES and overall["p50"] <= overall["p99"] <= overall["max"]

    written = json.loads((tmp_path / "load_faults.json").read_text())
    assert written["unflagged_failures"] == 0 and written["queries"] == QUERIES
    assert "unflagged failures** | **0**" in (tmp_path / "load_faults.md").read_text()
