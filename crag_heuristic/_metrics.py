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
``crag_cache_lookups_total``                    counter     ``cache``, ``tier``, ``outcome``
==============================================  ==========  ==================================

``crag_cache_lookups_total`` is read from the caches' own counters
(:class:`~crag_heuristic.CacheStats`) when the registry is scraped: the hits
and misses of a cache (``tier="all"``) and, for a
:class:`~crag_heuristic.cache.TieredCache`, of each tier (``"near"``, the in-process
one, and ``"far"``, the shared one). The router hands its cache to
:meth:`PrometheusMetrics.observe_cache` itself.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from ._cache.stats import CacheStats
from ._exceptions import ConfigError
from ._optional import requires

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*\Z")

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
        MissingDependencyError: prometheus-client is not installed (an
            ``ImportError`` naming the ``metrics`` extra).
    """

    def __init__(self, registry: Any = None, *, namespace: str = "crag") -> None:
        with requires("metrics", "PrometheusMetrics"):
            import prometheus_client as prom
        if registry is not None and not callable(getattr(registry, "register", None)):
            raise ConfigError("registry", registry, "must be a prometheus_client CollectorRegistry")
        if not isinstance(namespace, str) or not _NAME.match(namespace):
            raise ConfigError(
                "namespace", namespace, "must be a metric name: [a-zA-Z_:][a-zA-Z0-9_:]*"
            )
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
        from prometheus_client.core import CounterMetricFamily

        self._caches = _CacheLookups(CounterMetricFamily, f"{namespace}_cache_lookups")
        self.registry.register(self._caches)
        self._learning = _Learning(namespace)
        self.registry.register(self._learning)

    def observe_learning(self, cascade: object) -> None:
        """Report a learning cascade's state (its ``status()`` at scrape time) as the
        ``crag_learning_*`` metrics."""
        self._learning.cascade = cascade

    def observe_cache(self, cache: object, name: str = "router") -> None:
        """Report this cache's hits and misses (each tier's too) as
        ``crag_cache_lookups_total``, read from its ``stats`` at scrape time.
        A cache without ``stats`` is ignored; the same cache twice is one."""
        self._caches.add(cache, name)

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


class _CacheLookups:
    """A collector of the observed caches' lookups (their ``stats`` at scrape time)."""

    def __init__(self, family: Any, name: str) -> None:
        self._family = family  # prometheus_client.core.CounterMetricFamily
        self._name = name
        self._lock = threading.Lock()
        self._caches: dict[int, tuple[object, str]] = {}

    def add(self, cache: object, name: str) -> None:
        with self._lock:
            self._caches[id(cache)] = (cache, name)

    def describe(self) -> list[Any]:
        return []  # the collector's samples change with the caches observed

    def collect(self) -> Iterator[Any]:
        family = self._family(
            self._name,
            "Cache lookups, by cache, tier and outcome",
            labels=["cache", "tier", "outcome"],
        )
        with self._lock:
            caches = list(self._caches.values())
        for cache, name in caches:
            stats = getattr(cache, "stats", None)
            if not isinstance(stats, CacheStats):
                continue
            for tier, counts in (("all", stats), *stats.tiers.items()):
                family.add_metric([name, tier, "hit"], counts.hits)
                family.add_metric([name, tier, "miss"], counts.misses)
        yield family


class _Learning:
    """A collector of a learning cascade's status (read at scrape time)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.cascade: object = None

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        status_of = getattr(self.cascade, "status", None)
        if not callable(status_of):
            return
        s = status_of()
        name = f"{self.namespace}_learning"
        gauges = {
            "labels": ("Labels a learning cascade has read", s.labels),
            "audited": ("Of them, audited or explored (the certifying sample)", s.audited),
            "refits": ("Gates refitted from the labels", s.refits),
            "model": ("The gate in force (0: the shipped one)", s.model),
            "certified": ("1 when a certified band is in force", int(s.band is not None)),
            "band_high": (
                "The upper edge of the band in force",
                1.0 if s.band is None else s.band[1],
            ),
            "needed": ("Counted labels a first band still needs", s.needed),
        }
        for key, (text, value) in gauges.items():
            yield GaugeMetricFamily(f"{name}_{key}", text, value=value)
        yield CounterMetricFamily(f"{name}_lists", "Lists decided by this process", value=s.lists)
        yield CounterMetricFamily(f"{name}_graded", "Lists sent to the grader", value=s.graded)
        yield CounterMetricFamily(
            f"{name}_log_errors", "Labels the log refused", value=s.log_errors
        )
