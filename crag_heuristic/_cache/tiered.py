"""Two cache tiers: a bounded in-process tier in front of a shared one (Redis).

A Redis hit is a network round trip: on a busy host a blocking socket read
waits to be rescheduled, and a hit measured 2 ms against 0.02 ms in process,
more than a warm evaluation costs. :class:`TieredCache` keeps what this
process reads often in a :class:`~crag_heuristic.MemoryCache` (LRU + TTL) and
goes to the shared tier for what other processes computed:

* ``near_kinds`` (evaluations and grades by default) are read from the
  in-process tier first; a miss there reads the shared tier and keeps the
  answer in process; a write goes to both;
* ``far_kinds`` are the kinds the shared tier holds: every kind by default
  (``None``): what other processes computed, and web results. Pass
  ``far_kinds=("grade", "web")`` where a round trip to Redis costs more than
  evaluating the chunks again (``benchmarks/results/evaluator_micro.md``
  measures both in one run: a first sight through Redis against a cold
  evaluation).

The kind of a value is the kind part of its key
(``<namespace>:v<version>:<kind>:<hex>``, see :mod:`.keys`): invalidation is
by key version, as with one tier. The in-process tier's time to live is
``near_ttl`` at most, so a value removed from the shared tier lingers here no
longer than that. A shared tier that fails raises its
:class:`~crag_heuristic.CacheError` as it would alone (the router records it
and goes on); what the in-process tier holds is still served.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from typing import Any

from .._checks import is_finite_number
from .._deadline import is_bounded
from .._exceptions import CacheError, ConfigError
from .._protocols import AsyncCache, Cache
from .codec import check_key, check_ttl, check_value
from .memory import MemoryCache
from .redis import RedisCache
from .signing import UnsignedPolicy, check_unsigned, signer_of
from .stats import CacheStats, Counters

_BACKEND = "tiered"


def key_kind(key: str) -> str:
    """The kind part of a cache key (``"eval"``, ``"web"``, ``"grade"`` ...); ``""`` for a
    key of another layout."""
    parts = key.rsplit(":", 2)
    return parts[1] if len(parts) == 3 else ""


def _kinds(name: str, kinds: Iterable[str] | None) -> frozenset[str] | None:
    if kinds is None:
        return None
    if (
        isinstance(kinds, str)
        or not isinstance(kinds, Iterable)
        or not all(isinstance(k, str) and k for k in kinds)
    ):
        raise ConfigError(name, kinds, "must be an iterable of key kinds ('eval', 'grade' ...)")
    return frozenset(kinds)


class TieredCache:
    """A :class:`~crag_heuristic._protocols.Cache` and ``AsyncCache`` of two tiers.

    Args:
        far: the shared tier (a :class:`~crag_heuristic.RedisCache`, or any
            cache with ``get``/``set`` and/or ``aget``/``aset``).
        near: the in-process tier; by default a :class:`MemoryCache` of
            ``max_entries``.
        near_kinds: the key kinds the in-process tier holds.
        far_kinds: the key kinds the shared tier holds; ``None`` for all.
        near_ttl: the longest an entry lives in process, in seconds.
        max_entries: the in-process tier's bound, when it is made here.
        secret: sign what goes to the shared tier with HMAC-SHA256 over key,
            expiry and text (at least 16 bytes; see
            :mod:`crag_heuristic._cache.signing`): a value read back from it
            unsigned, badly signed or past its expiry raises ``CacheError``
            (``kind="signature"``), counted as a miss, and is not kept in
            process. The in-process tier holds what this process wrote or
            checked (no longer than the value's expiry). A
            :class:`~crag_heuristic.RedisCache` shared tier can sign instead
            (``RedisCache(secret=...)``).
        unsigned: with neither secret, for a shared tier of your own (a
            ``RedisCache`` or ``MemoryCache`` applies its own setting):
            ``"warn"`` (a ``crag.store.unsigned`` event and an
            :class:`~crag_heuristic.cache.UnsignedStoreWarning`), ``"refuse"`` (a
            ``ConfigError``) or ``"allow"``.

    Raises:
        ConfigError: a bad argument (a bad secret is never shown), or no
            secret under ``unsigned="refuse"``.
    """

    backend = _BACKEND

    def __init__(
        self,
        far: Cache | AsyncCache,
        *,
        near: MemoryCache | None = None,
        near_kinds: Iterable[str] = ("eval", "grade"),
        far_kinds: Iterable[str] | None = None,
        near_ttl: float = 600.0,
        max_entries: int = 10_000,
        secret: str | bytes | None = None,
        unsigned: UnsignedPolicy = "warn",
    ) -> None:
        if not isinstance(far, Cache | AsyncCache):
            raise ConfigError("far", far, "must be a cache (get/set or aget/aset)")
        if near is not None and not isinstance(near, MemoryCache):
            raise ConfigError("near", near, "must be a MemoryCache or None")
        if (
            isinstance(near_ttl, bool)
            or not isinstance(near_ttl, int | float)
            or not math.isfinite(near_ttl)
            or near_ttl <= 0
        ):
            raise ConfigError("near_ttl", near_ttl, "must be a finite number of seconds > 0")
        self.far: Cache | AsyncCache = far
        self.near = near if near is not None else MemoryCache(max_entries=max_entries)
        self.near_kinds = _kinds("near_kinds", near_kinds) or frozenset()
        self.far_kinds = _kinds("far_kinds", far_kinds)
        self.near_ttl = float(near_ttl)
        self._signer = signer_of(secret, "secret")
        if not isinstance(far, RedisCache | MemoryCache | TieredCache):  # those apply theirs
            check_unsigned(
                "TieredCache", self._signer, unsigned, advice="give it (or its far tier) a secret"
            )
        self._counters = Counters(_BACKEND)

    @property
    def signed(self) -> bool:
        """Whether what goes to the shared tier is signed (here, or by the tier)."""
        return self._signer is not None or bool(getattr(self.far, "signed", False))

    @property
    def bounded(self) -> bool:
        """Whether every call ends by itself: the in-process tier's do; the shared
        tier's when it says so (a ``RedisCache`` with socket timeouts)."""
        return is_bounded(self.far)

    def __repr__(self) -> str:
        shared = "all" if self.far_kinds is None else sorted(self.far_kinds)
        return (
            f"TieredCache(near={self.near!r} for {sorted(self.near_kinds)}, "
            f"far={self.far!r} for {shared})"
        )

    # -- routing -------------------------------------------------------------------------

    def _tiers(self, key: str) -> tuple[bool, bool]:
        """Whether the in-process and the shared tier hold values of this key's kind."""
        kind = key_kind(check_key(key))
        return kind in self.near_kinds, self.far_kinds is None or kind in self.far_kinds

    def _near_ttl(self, ttl: float | None) -> float:
        seconds = check_ttl(ttl, None)
        return self.near_ttl if seconds is None else min(seconds, self.near_ttl)

    def _sync_far(self, operation: str) -> Cache:
        if not isinstance(self.far, Cache):
            raise CacheError(
                f"the shared tier is async-only: use a{operation}",
                backend=_BACKEND,
                operation=operation,
                kind="unsupported",
            )
        return self.far

    def _local(self, key: str) -> tuple[str | None, bool, bool]:
        """The in-process tier's value (a hit is counted), and whether each tier holds
        this key's kind (a miss is counted when the shared tier does not)."""
        near, far = self._tiers(key)
        if near:
            value = self.near.get(key)
            if value is not None:
                self._counters.add("hits")
                return value, near, far
        if not far:
            self._counters.add("misses")
        return None, near, far

    def _found(self, key: str, value: str | None, near: bool) -> str | None:
        ttl = self.near_ttl
        if value is not None and self._signer is not None:
            try:
                stored, value = value, self._signer.open(key, value, backend=_BACKEND)
            except CacheError as exc:
                self._counters.error(exc.kind)
                self._counters.add("misses")
                raise
            left = self._signer.remaining(stored)
            ttl = ttl if left is None else min(ttl, max(left, 0.001))
        if value is not None and near:
            self.near.set(key, value, ttl)
        self._counters.add("hits" if value is not None else "misses")
        return value

    def _shared(self, key: str, value: str, ttl: float | None) -> str:
        """``value`` as the shared tier stores it (signed, with a secret, to expire when
        the shared tier's entry does: ``ttl``, else its ``default_ttl``)."""
        if self._signer is None:
            return value
        check_value(value, backend=_BACKEND)  # the in-process tier checks it too
        default: Any = getattr(self.far, "default_ttl", None)
        lifetime = check_ttl(
            ttl, float(default) if is_finite_number(default) and default > 0 else None
        )
        return self._signer.sign(key, value, lifetime)

    # -- sync API -----------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        """The value from the in-process tier, else the shared one (kept in process).

        Raises:
            CacheError: the shared tier failed (what this process holds is served first).
        """
        value, near, far = self._local(key)
        if value is not None or not far:
            return value
        return self._found(key, self._sync_far("get").get(key), near)

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """Store in each tier that holds this key's kind (the in-process one first).

        Raises:
            CacheError: a value that is not JSON text, or the shared tier failed.
        """
        near, far = self._tiers(key)
        if near:
            self.near.set(key, value, self._near_ttl(ttl))
        if far:
            self._sync_far("set").set(key, self._shared(key, value, ttl), ttl)
        self._counters.add("sets")

    def delete(self, key: str) -> bool:
        """Remove ``key`` from both tiers; ``True`` if either had it."""
        check_key(key)
        found = self.near.delete(key)
        delete = getattr(self.far, "delete", None)
        if callable(delete) and delete(key):
            found = True
        self._counters.add("deletes")
        return found

    # -- async API ----------------------------------------------------------------------

    async def aget(self, key: str) -> str | None:
        """:meth:`get` with the shared tier's async client (or its sync one in a thread)."""
        value, near, far = self._local(key)
        if value is not None or not far:
            return value
        if isinstance(self.far, AsyncCache):
            found = await self.far.aget(key)
        else:
            found = await asyncio.to_thread(self.far.get, key)
        return self._found(key, found, near)

    async def aset(self, key: str, value: str, ttl: float | None = None) -> None:
        """:meth:`set` with the shared tier's async client (or its sync one in a thread)."""
        near, far = self._tiers(key)
        if near:
            self.near.set(key, value, self._near_ttl(ttl))
        if far:
            shared = self._shared(key, value, ttl)
            if isinstance(self.far, AsyncCache):
                await self.far.aset(key, shared, ttl)
            else:
                await asyncio.to_thread(self.far.set, key, shared, ttl)
        self._counters.add("sets")

    # -- state --------------------------------------------------------------------------

    @property
    def stats(self) -> CacheStats:
        """Hits and misses of the two tiers together (a hit in either is a hit), and
        each tier's own counters in ``tiers`` (``"near"``, ``"far"``)."""
        mine = self._counters.snapshot()
        tiers = {"near": self.near.stats}
        far_stats = getattr(self.far, "stats", None)
        if isinstance(far_stats, CacheStats):
            tiers["far"] = far_stats
        errors: dict[str, int] = dict(mine.errors_by_kind)  # refused signatures
        for tier in tiers.values():
            for kind, count in tier.errors_by_kind.items():
                errors[kind] = errors.get(kind, 0) + count
        return CacheStats(
            backend=_BACKEND,
            hits=mine.hits,
            misses=mine.misses,
            sets=mine.sets,
            deletes=mine.deletes,
            evictions=tiers["near"].evictions,
            expirations=tiers["near"].expirations,
            errors=sum(errors.values()),
            errors_by_kind=dict(sorted(errors.items())),
            skipped=sum(tier.skipped for tier in tiers.values()),
            tiers=tiers,
        )

    def reset_stats(self) -> None:
        """Set this cache's counters and each tier's back to zero."""
        self._counters.reset()
        self.near.reset_stats()
        reset = getattr(self.far, "reset_stats", None)
        if callable(reset):
            reset()

    @property
    def healthy(self) -> bool:
        """The shared tier's health (the in-process tier is always up)."""
        return bool(getattr(self.far, "healthy", True))

    def ping(self) -> bool:
        """Ping the shared tier."""
        ping = getattr(self.far, "ping", None)
        return bool(ping()) if callable(ping) else True

    def close(self) -> None:
        """Close the shared tier (if it closes)."""
        close = getattr(self.far, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        """Close the shared tier's clients for this event loop."""
        aclose = getattr(self.far, "aclose", None)
        if callable(aclose):
            await aclose()
        else:
            self.close()
