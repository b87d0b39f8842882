"""The embedded default cache: a bounded, thread-safe LRU with per-entry TTL.

Entries live in an :class:`~collections.OrderedDict` from least to most
recently used. A ``get`` moves its entry to the end; a ``set`` past
``max_entries`` drops entries from the front (counted as evictions). An entry
past its time to live is dropped when it is next looked at (counted as an
expiration), or by :meth:`MemoryCache.purge_expired`. Times come from an
injectable monotonic clock, so tests can move time by hand.

Values are JSON text, checked on ``set`` exactly as the Redis backend checks
them, so that code developed against this cache behaves the same in
production.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .._checks import is_finite_number
from .._exceptions import CacheError, ConfigError
from .._logging import get_logger
from .codec import check_key, check_ttl, check_value
from .stats import CacheStats, Counters

logger = get_logger()

_BACKEND = "memory"


def _key_prefix(key: str) -> str:
    return key.rpartition(":")[0]


class MemoryCache:
    """An in-process LRU cache of JSON text with per-entry time to live.

    Implements the :class:`~crag_heuristic._protocols.Cache` and
    :class:`~crag_heuristic._protocols.AsyncCache` protocols. Safe to share
    between threads (one lock around each operation) and between tasks (the
    async methods never wait on anything).

    Args:
        max_entries: the most entries kept; the least recently used go first.
        default_ttl: seconds an entry lives when ``set`` gives no ``ttl``;
            ``None`` keeps it until evicted.
        clock: a monotonic clock in seconds (``time.monotonic``).

    Raises:
        ConfigError: ``max_entries`` is not an integer >= 1, ``default_ttl``
            not ``None`` nor a finite number > 0, or ``clock`` not callable.
    """

    backend = _BACKEND

    bounded = True
    """Its calls end by themselves (in-process work): the router calls it directly,
    never on a worker thread (see ``crag_heuristic._deadline``)."""

    def __init__(
        self,
        *,
        max_entries: int = 10_000,
        default_ttl: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ConfigError("max_entries", max_entries, "must be an integer >= 1")
        if default_ttl is not None and (not is_finite_number(default_ttl) or default_ttl <= 0):
            raise ConfigError("default_ttl", default_ttl, "must be None or a finite number > 0")
        if not callable(clock):
            raise ConfigError("clock", clock, "must be a callable returning seconds")
        self.max_entries = max_entries
        self.default_ttl = None if default_ttl is None else float(default_ttl)
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, float | None]] = OrderedDict()
        self._counters = Counters(_BACKEND)

    def __repr__(self) -> str:
        return (
            f"MemoryCache(max_entries={self.max_entries}, default_ttl={self.default_ttl}, "
            f"entries={len(self._entries)})"
        )

    # -- sync API -----------------------------------------------------------------

    def get(self, key: str) -> str | None:
        """The JSON text stored under ``key``, or ``None`` (absent or expired).

        Raises:
            InputError: ``key`` is not a non-empty string.
        """
        check_key(key)
        expired = False
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[1] is not None and self._clock() >= entry[1]:
                del self._entries[key]
                expired = True
                entry = None
            elif entry is not None:
                self._entries.move_to_end(key)
        if expired:
            self._counters.add("expirations")
        self._counters.add("hits" if entry is not None else "misses")
        logger.debug(
            "crag.cache",
            op="get",
            backend=_BACKEND,
            hit=entry is not None,
            expired=expired,
            key_prefix=_key_prefix(key),
        )
        return None if entry is None else entry[0]

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """Store JSON text under ``key`` for ``ttl`` seconds (``default_ttl`` if ``None``).

        Raises:
            InputError: a bad ``key``, a non-string ``value`` or a bad ``ttl``.
            CacheError: ``kind="payload"`` when ``value`` is not JSON text.
        """
        check_key(key)
        seconds = check_ttl(ttl, self.default_ttl)
        try:
            check_value(value, backend=_BACKEND)
        except CacheError as exc:
            self._counters.error(exc.kind)
            logger.warning(
                "crag.cache",
                op="set",
                backend=_BACKEND,
                error=exc.kind,
                key_prefix=_key_prefix(key),
            )
            raise
        evicted = expired = 0
        with self._lock:
            now = self._clock()
            self._entries[key] = (value, None if seconds is None else now + seconds)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                _, (_, expires_at) = self._entries.popitem(last=False)
                if expires_at is not None and now >= expires_at:
                    expired += 1
                else:
                    evicted += 1
        self._counters.add("sets")
        if evicted:
            self._counters.add("evictions", evicted)
        if expired:
            self._counters.add("expirations", expired)
        logger.debug(
            "crag.cache", op="set", backend=_BACKEND, ttl=seconds, key_prefix=_key_prefix(key)
        )

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there (expired or not)."""
        check_key(key)
        with self._lock:
            found = self._entries.pop(key, None) is not None
        self._counters.add("deletes")
        return found

    def clear(self) -> None:
        """Remove every entry (the counters are kept)."""
        with self._lock:
            self._entries.clear()

    def purge_expired(self) -> int:
        """Drop every entry past its time to live; return how many."""
        with self._lock:
            now = self._clock()
            dead = [k for k, (_, exp) in self._entries.items() if exp is not None and now >= exp]
            for key in dead:
                del self._entries[key]
        if dead:
            self._counters.add("expirations", len(dead))
        return len(dead)

    def __len__(self) -> int:
        """The number of live entries (expired ones are purged first)."""
        self.purge_expired()
        with self._lock:
            return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Whether a live entry exists for ``key`` (does not count as a lookup)."""
        if not isinstance(key, str):
            return False
        with self._lock:
            entry = self._entries.get(key)
            return entry is not None and (entry[1] is None or self._clock() < entry[1])

    @property
    def stats(self) -> CacheStats:
        """A snapshot of the counters."""
        return self._counters.snapshot()

    def reset_stats(self) -> None:
        """Set the counters back to zero."""
        self._counters.reset()

    @property
    def healthy(self) -> bool:
        """Always ``True``: an in-process cache has nothing to lose contact with."""
        return True

    def ping(self) -> bool:
        """Always ``True`` (for symmetry with :class:`RedisCache`)."""
        return True

    def close(self) -> None:
        """Nothing to release; present for symmetry with :class:`RedisCache`."""

    # -- async API ----------------------------------------------------------------

    async def aget(self, key: str) -> str | None:
        """:meth:`get` for async code (never blocks on I/O)."""
        return self.get(key)

    async def aset(self, key: str, value: str, ttl: float | None = None) -> None:
        """:meth:`set` for async code (never blocks on I/O)."""
        self.set(key, value, ttl)

    async def adelete(self, key: str) -> bool:
        """:meth:`delete` for async code."""
        return self.delete(key)

    async def aping(self) -> bool:
        """Always ``True``."""
        return True

    async def aclose(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> MemoryCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
