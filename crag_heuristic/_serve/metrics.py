"""The gate service's own Prometheus metrics, beside the router's.

==============================================  ==========  ==================================
metric                                          type        labels
==============================================  ==========  ==================================
``crag_http_requests_total``                    counter     ``route``, ``status``, ``error``
``crag_http_request_seconds``                   histogram   ``route``
``crag_http_in_flight``                         gauge       (requests being worked on)
``crag_http_queued``                            gauge       (requests waiting for a slot)
==============================================  ==========  ==================================

``error`` is the type of the error a request was answered with (``""`` for a
success). They are registered on the registry of the router's
:class:`~crag_heuristic.metrics.PrometheusMetrics` when it has one, so one
``GET /metrics`` shows both; else on a registry of their own. Two apps over one
registry (two ``create_app`` of one router) share one set
(:func:`metrics_for`): a registry takes each metric once.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .._optional import requires

# A request takes from a millisecond (a cache hit) to the request timeout.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class HttpMetrics:
    """The service's metrics on ``registry`` (a ``CollectorRegistry``; default: a new one).

    Raises:
        MissingDependencyError: prometheus-client is not installed (``metrics``).
    """

    def __init__(self, registry: Any = None, *, namespace: str = "crag") -> None:
        with requires("metrics", "the gate service's /metrics"):
            import prometheus_client as prom
        self._prom = prom
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        options: dict[str, Any] = {"namespace": namespace, "registry": self.registry}
        self._requests = prom.Counter(
            "http_requests", "Requests answered, by route, status and error type",
            ["route", "status", "error"], **options,
        )  # fmt: skip
        self._seconds = prom.Histogram(
            "http_request_seconds", "Time from a request's arrival to its answer, by route",
            ["route"], buckets=_BUCKETS, **options,
        )  # fmt: skip
        self.in_flight = prom.Gauge("http_in_flight", "Requests being worked on", **options)
        self.queued = prom.Gauge("http_queued", "Requests waiting for a slot", **options)

    def observe(self, route: str, status: int, error: str, seconds: float) -> None:
        """One request answered."""
        self._requests.labels(route=route, status=str(status), error=error).inc()
        self._seconds.labels(route=route).observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        """The registry in the Prometheus text format, and its content type."""
        return self._prom.generate_latest(self.registry), self._prom.CONTENT_TYPE_LATEST


_SHARED: weakref.WeakKeyDictionary[Any, HttpMetrics] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def metrics_for(registry: Any) -> HttpMetrics:
    """The service's metrics on ``registry`` (made once per registry; ``None``: a
    new registry of their own).

    Raises:
        MissingDependencyError: prometheus-client is not installed (``metrics``).
    """
    if registry is None:
        return HttpMetrics()
    with _SHARED_LOCK:
        metrics = _SHARED.get(registry)
        if metrics is None:
            metrics = _SHARED[registry] = HttpMetrics(registry)
        return metrics
