"""Events with stable names and key-values; Prometheus metrics on a private registry."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from crag_heuristic import Evaluator, WebSearchTimeout
from crag_heuristic._router.router import CRAG
from crag_heuristic.testing import RecordingWebSearcher

QUERY = "How do honeybees communicate the distance to food?"


def test_events_are_silent_by_default_and_structured_when_enabled(
    retriever: Any, always_irrelevant: Evaluator, caplog: pytest.LogCaptureFixture
) -> None:
    crag = CRAG(
        retriever,
        always_irrelevant,
        web=RecordingWebSearcher(error=WebSearchTimeout("slow")),
        cache=False,  # the second call must evaluate again, not read the cache
        expander=False,  # no fallback expansion after the failed web search
    )
    with caplog.at_level(logging.WARNING, logger="crag_heuristic"):
        crag.retrieve(QUERY, 3)
    assert caplog.records == []  # DEBUG / INFO events: nothing at the default level
    with caplog.at_level(logging.DEBUG, logger="crag_heuristic"):
        crag.retrieve(QUERY, 3)
    events = [r.getMessage() for r in caplog.records]
    assert events == [
        "crag.retrieve",
        "crag.evaluate",
        "crag.web_search",
        "crag.route",
        "crag.result",
    ]
    result: Any = caplog.records[-1]  # a LogRecord with the event's fields as attributes
    assert result.verdict == "irrelevant" and result.strategy == "web_search"
    assert result.web_error == "WebSearchTimeout: slow"
    assert len(result.query_id) == 12  # a hash, never the query text itself
    web: Any = caplog.records[2]
    assert web.ok is False and web.error == "WebSearchTimeout"


def test_prometheus_metrics(retriever: Any, always_irrelevant: Evaluator) -> None:
    prometheus = pytest.importorskip("prometheus_client")
    from crag_heuristic._metrics import PrometheusMetrics

    registry = prometheus.CollectorRegistry()
    metrics = PrometheusMetrics(registry)
    crag = CRAG(
        retriever,
        always_irrelevant,
        metrics=metrics,
        web=RecordingWebSearcher(error=WebSearchTimeout("slow")),
    )
    for _ in range(3):
        crag.retrieve(QUERY, 3)

    def value(name: str, **labels: str) -> float | None:
        sample: float | None = registry.get_sample_value(name, labels)
        return sample

    assert value("crag_decisions_total", verdict="irrelevant") == 3
    assert value("crag_corrections_total", strategy="web_search") == 3
    assert value("crag_web_errors_total", kind="WebSearchTimeout") == 3
    assert value("crag_stage_seconds_count", stage="retrieve") == 3
    assert value("crag_stage_seconds_count", stage="web_search") == 3


def test_a_broken_metrics_sink_never_fails_a_query(
    retriever: Any, always_irrelevant: Evaluator
) -> None:
    class Broken:
        def __getattr__(self, name: str) -> Any:
            def fail(*args: Any) -> None:
                raise RuntimeError("metrics backend down")

            return fail

    assert CRAG(retriever, always_irrelevant, metrics=Broken()).retrieve(QUERY, 3).chunks
