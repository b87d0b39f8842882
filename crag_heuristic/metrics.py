"""Router metrics: the :class:`MetricsSink` protocol and :class:`PrometheusMetrics`
(the ``metrics`` extra)."""

from ._metrics import MetricsSink, PrometheusMetrics

__all__ = ["MetricsSink", "PrometheusMetrics"]
