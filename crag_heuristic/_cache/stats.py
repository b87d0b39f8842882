"""Cache counters: a thread-safe tally and its frozen snapshot.

Each backend keeps a :class:`Counters` and hands out :class:`CacheStats`
snapshots, so a caller can read consistent numbers (hit rate, error kinds)
while other threads keep using the cache.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheStats:
    """A snapshot of a cache's counters since it was created (or last reset).

    Attributes:
        backend: ``"memory"`` or ``"redis"``.
        hits: ``get`` calls that returned a value.
        misses: ``get`` calls that returned ``None`` (absent, expired, or a
            corrupt payload, which also counts as an error).
        sets: values stored.
        deletes: keys removed by ``delete`` (whether or not they existed).
        evictions: entries dropped to stay within the size bound (memory only;
            Redis counts its own in ``INFO stats``).
        expirations: entries found past their time to live (memory only).
        errors: backend failures, all kinds together.
        errors_by_kind: failures by :attr:`CacheError.kind
            <crag_heuristic.CacheError.kind>` (``"connection"``, ``"timeout"``,
            ``"oom"``, ``"payload"`` ...).
        skipped: calls refused at once because the backend was marked down.
        tiers: each tier's own counters, for a cache of tiers
            (:class:`~crag_heuristic.cache.TieredCache`: ``"near"``, the in-process
            tier, and ``"far"``, the shared one); empty for one backend.
    """

    backend: str
    hits: int = 0
    misses: int = 0
    sets: int = 0
    deletes: int = 0
    evictions: int = 0
    expirations: int = 0
    errors: int = 0
    errors_by_kind: Mapping[str, int] = field(default_factory=dict)
    skipped: int = 0
    tiers: Mapping[str, CacheStats] = field(default_factory=dict)

    @property
    def lookups(self) -> int:
        """``hits + misses``."""
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float | None:
        """``hits / (hits + misses)``, or ``None`` before the first lookup."""
        return self.hits / self.lookups if self.lookups else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the counters (and the hit rate)."""
        return {
            "backend": self.backend,
            "hits": self.hits,
            "misses": self.misses,
            "sets": self.sets,
            "deletes": self.deletes,
            "evictions": self.evictions,
            "expirations": self.expirations,
            "errors": self.errors,
            "errors_by_kind": dict(sorted(self.errors_by_kind.items())),
            "skipped": self.skipped,
            "hit_rate": self.hit_rate,
            "tiers": {name: tier.to_dict() for name, tier in self.tiers.items()},
        }


_FIELDS = ("hits", "misses", "sets", "deletes", "evictions", "expirations", "skipped")


class Counters:
    """Thread-safe counters behind :class:`CacheStats`."""

    def __init__(self, backend: str) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_FIELDS, 0)
        self._errors: dict[str, int] = {}

    def add(self, name: str, amount: int = 1) -> None:
        """Add ``amount`` to the counter ``name`` (one of the snapshot's fields)."""
        with self._lock:
            self._counts[name] += amount

    def error(self, kind: str) -> None:
        """Count one failure of this kind."""
        with self._lock:
            self._errors[kind] = self._errors.get(kind, 0) + 1

    def snapshot(self) -> CacheStats:
        """The counters now, as an immutable :class:`CacheStats`."""
        with self._lock:
            counts = dict(self._counts)
            errors = dict(sorted(self._errors.items()))
        return CacheStats(
            backend=self._backend,
            hits=counts["hits"],
            misses=counts["misses"],
            sets=counts["sets"],
            deletes=counts["deletes"],
            evictions=counts["evictions"],
            expirations=counts["expirations"],
            errors=sum(errors.values()),
            errors_by_kind=MappingProxyType(errors),
            skipped=counts["skipped"],
        )

    def reset(self) -> None:
        """Set every counter back to zero."""
        with self._lock:
            self._counts = dict.fromkeys(_FIELDS, 0)
            self._errors = {}
