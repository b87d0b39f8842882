"""Optional Prometheus metrics for the router.

The router reports to any object with the :class:`MetricsSink` methods;
without one it reports nothing. :class:`PrometheusMetrics` is the
implementation on ``prometheus-client`` (install the ``metrics`` extra). It
registers its collectors on the registry it is given, never on a global one
unless asked to, so two routers or a test suite do not collide.

==============================================  ==========  ==================================
metric                                          type        labels
==============================================  ==========  ==================================
``crag_decisions_total``                        counter     ``verdict`` (first evaluation)
``crag_corrections_total``                      counter     ``strategy``
``crag_web_errors_total``                       counter     ``kind`` (exception class)
``crag_cache_errors_total``                     counter     ``kind``
``crag_stage_seconds``                          histogram   ``stage``
==============================================  ==========  ==================================
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["MetricsSink", "PrometheusMetrics"]


@runtime_checkable
class MetricsSink(Protocol):
    """What the router reports. Every method must be cheap and never raise."""

    def decision(self, verdict: str) -> None: ...

    def correction(self, strategy: str) -> None: ...

    def web_error(self, kind: str) -> None: ...

    def cache_error(self, kind: str) -> None: ...

    def stage(self, stage: str, seconds: float) -> None: ...


# Stage latencies run from tens of microseconds (evaluation) to seconds (web).
_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0)  # fmt: skip


class PrometheusMetrics:
    """:class:`MetricsSink` on prometheus-client.

    Args:
        registry: the ``CollectorRegistry`` to register on; a new private one
            by default (pass ``prometheus_client.REGISTRY`` to expose the
            metrics on the default ``/metrics`` endpoint).
        namespace: the metric name prefix.

    Raises:
        ImportError: prometheus-client is not installed (``pip install
            'crag-heuristic[metrics]'``).
    """

    def __init__(self, registry: Any = None, *, namespace: str = "crag") -> None:
        try:
            import prometheus_client as prom
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "PrometheusMetrics needs prometheus-client: pip install 'crag-heuristic[metrics]'"
            ) from exc
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        options: dict[str, Any] = {"namespace": namespace, "registry": self.registry}
        self._decisions = prom.Counter(
            "decisions", "First-pass verdicts of the gate", ["verdict"], **options
        )
        self._corrections = prom.Counter(
            "corrections", "Corrections applied, by strategy", ["strategy"], **options
        )
        self._web_errors = prom.Counter(
            "web_errors", "Failed web searches, by error kind", ["kind"], **options
        )
        self._cache_errors = prom.Counter(
            "cache_errors", "Failed cache calls, by error kind", ["kind"], **options
        )
        self._stages = prom.Histogram(
            "stage_seconds", "Latency per router stage", ["stage"], buckets=_BUCKETS, **options
        )

    def decision(self, verdict: str) -> None:
        self._decisions.labels(verdict=verdict).inc()

    def correction(self, strategy: str) -> None:
        self._corrections.labels(strategy=strategy).inc()

    def web_error(self, kind: str) -> None:
        self._web_errors.labels(kind=kind).inc()

    def cache_error(self, kind: str) -> None:
        self._cache_errors.labels(kind=kind).inc()

    def stage(self, stage: str, seconds: float) -> None:
        self._stages.labels(stage=stage).observe(seconds)
