"""100 HTTP requests, 50 at a time, to the gate service while its Redis is killed.

The same code as ``python benchmarks/serve_load.py``, smaller: nothing lost, every
answer a result or a typed error, every bad request refused with its own type,
every cache failure flagged on its result (and none flagged without one), and the
fault really happened (or the test would prove nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REQUESTS = 100


def test_nothing_is_lost_and_every_failure_is_typed(
    serve_load: ModuleType, built: Any, tmp_path: Path
) -> None:
    settings = serve_load.LoadSettings(requests=REQUESTS, concurrency=50)
    report = serve_load.run_serve_load(settings, out=tmp_path, command="test", index=built.path)
    failed = {name: ok for name, ok in report["checks"].items() if not ok}
    assert failed == {}, report["anomalies"]
    assert report["requests"] == REQUESTS and report["lost"] == 0 and report["untyped"] == 0
    cache = report["cache"]
    assert cache["requests_with_a_failure"] > 0 and cache["unflagged"] == 0
    assert cache["flagged"] == cache["requests_with_a_failure"]
    # "cancelled": a cache call the router abandoned at its deadline (a slow Redis under
    # load), flagged on its result as a timeout
    assert set(cache["failed_calls_by_kind"]) <= {"connection", "down", "timeout", "cancelled"}
    assert set(report["errors"]) <= {"InvalidQueryError", "InputError", "UnauthorizedError"}
    assert report["latency_ms"]["retrieve"]["n"] > 0
    written = json.loads((tmp_path / "serve_load.json").read_text())
    assert written["passed"] is True
    assert "**lost** (no HTTP answer) | **0**" in (tmp_path / "serve_load.md").read_text()
