"""Router metrics: the :class:`MetricsSink` protocol and :class:`PrometheusMetrics`
(the ``metrics`` extra)."""

from ._metrics import PrometheusMetrics
from ._protocols import MetricsSink

__all__ = ["MetricsSink", "PrometheusMetrics"]
