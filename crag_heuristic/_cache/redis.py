"""The Redis backend: JSON text in Redis, every failure a CacheError, fast when down.

:class:`RedisCache` stores each value with one ``SET key value PX ttl`` and
reads it with one ``GET``: single-key commands only, so the same code runs on
a standalone Redis, a replica set behind a proxy, or Redis Cluster
(``redis.cluster.RedisCluster`` offers the same ``get`` / ``set`` /
``delete``). Values are UTF-8 JSON text, checked on the way in and out, and
never pickled: a shared Redis must not be a way to run code in the service.

Failures never escape as redis-py exceptions: each becomes a
:class:`~crag_heuristic.CacheError` with ``backend="redis"``, the operation,
and a ``kind`` (``"connection"``, ``"timeout"``, ``"oom"``, ``"auth"`` ...)
counted in :attr:`RedisCache.stats`. A stored payload that is not JSON text
(written by something else) is a ``CacheError`` with ``kind="payload"``,
counted as a miss and a ``"payload"`` error, never a crash: the router flags
it as ``cache_error``, recomputes the value and overwrites it.

Redis down or hung must not slow every query down to a socket timeout: after
a connection-level failure the cache fails fast (``kind="down"``) for
``retry_interval`` seconds, then lets one call probe Redis, and is up again as
soon as one succeeds (see :mod:`.health`); redis-py reconnects by itself, so
no new client is needed. A connection-level failure also disconnects the
idle connections of the failing client's pool (see :mod:`.clients`), so
after a restart no call is handed a connection to the dead server. Errors
the server answers (``OOM``, ``READONLY``) do not mark it down: reads still
work when writes are refused.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import CacheError, ConfigError
from .._logging import get_logger
from .clients import LoopClients, adrop_idle, build_client, check_seconds, check_url, drop_idle
from .codec import check_key, check_ttl, check_value, decode_text, decode_value
from .health import DownWindow, classify, redis_errors
from .signing import UnsignedPolicy, check_unsigned, signer_of
from .stats import CacheStats, Counters

if TYPE_CHECKING:
    import redis
    import redis.asyncio
    import redis.asyncio.cluster
    import redis.cluster

logger = get_logger()

_BACKEND = "redis"
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")
_CHECKED_SIZE = 512  # texts remembered as checked JSON (one per key)
_T = TypeVar("_T")


def _log(level: str, op: str, key: str | None, **fields: Any) -> None:
    """One ``crag.cache`` event; keys appear only by prefix (``crag:v0.1.0:eval``)."""
    prefix = None if key is None else key.rpartition(":")[0]
    getattr(logger, level)("crag.cache", op=op, backend=_BACKEND, key_prefix=prefix, **fields)


def _timed(client: Any) -> bool:
    """Whether a redis-py client's connections have a socket timeout."""
    pool = getattr(client, "connection_pool", None)
    options = getattr(pool, "connection_kwargs", None) or {}
    timeout = options.get("socket_timeout")
    return isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0


class RedisCache:
    """A :class:`~crag_heuristic._protocols.Cache` and ``AsyncCache`` on Redis.

    Give it clients, or a URL to build them from::

        RedisCache(url="redis://localhost:6379/0")
        RedisCache(redis.Redis(...), async_client=redis.asyncio.Redis(...))
        RedisCache(redis.cluster.RedisCluster(host="...", port=7000))

    Clients built from ``url`` get short timeouts and no retries (the cache is
    optional: failing fast beats waiting), and the async one is built per event
    loop on first use; injected clients are used as they are, so give them
    bounded ``socket_timeout`` and ``socket_connect_timeout`` yourself. With
    only a sync client, the async methods run it in a worker
    thread; with only an async client, the sync methods raise ``CacheError``
    (``kind="unsupported"``).

    Args:
        client: a ``redis.Redis`` or ``redis.cluster.RedisCluster``.
        async_client: a ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``.
        url: ``redis://``, ``rediss://`` or ``unix://`` URL for the clients not given.
        namespace: prepended to every key as ``<namespace>:<key>``, to share a
            Redis between applications; required by :meth:`clear`.
        default_ttl: seconds a value lives when ``set`` gives no ``ttl``
            (one day); ``None`` keeps it until Redis evicts it.
        socket_timeout: seconds to wait for an answer, for built clients.
        socket_connect_timeout: seconds to wait for a connection, for built clients.
        retry_interval: seconds to fail fast after a connection-level failure.
        client_options: more keyword arguments for ``from_url`` (``ssl_ca_certs`` ...).
        clock: a monotonic clock in seconds, for the retry window.
        secret: sign every value with HMAC-SHA256 over its key, its expiry
            (its time to live from now) and its text (at least 16 bytes; see
            :mod:`crag_heuristic._cache.signing`): a value read back unsigned,
            badly signed or past its expiry raises ``CacheError``
            (``kind="signature"``), counted as a miss. Set it on any Redis
            that others can write to; every process sharing the entries needs
            the same secret.
        unsigned: without a secret, ``"warn"`` (a ``crag.store.unsigned``
            event and an :class:`~crag_heuristic.cache.UnsignedStoreWarning` when the
            cache is made), ``"refuse"`` (a ``ConfigError``) or ``"allow"``
            (nobody else can write to this Redis, or a layer above signs:
            ``CRAG(cache_secret=...)``, ``TieredCache(secret=...)``).

    Raises:
        ConfigError: no client nor URL, a bad URL, a bad number, a bad
            secret (never shown), or no secret under ``unsigned="refuse"``.
    """

    backend = _BACKEND

    def __init__(
        self,
        client: redis.Redis | redis.cluster.RedisCluster | None = None,
        *,
        async_client: redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster | None = None,
        url: str | None = None,
        namespace: str | None = None,
        default_ttl: float | None = 86_400.0,
        socket_timeout: float = 0.25,
        socket_connect_timeout: float = 0.25,
        retry_interval: float = 1.0,
        client_options: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        secret: str | bytes | None = None,
        unsigned: UnsignedPolicy = "warn",
    ) -> None:
        if client is None and async_client is None and url is None:
            raise ConfigError("url", url, "give a client, an async_client or a url")
        if namespace is not None and (
            not isinstance(namespace, str) or not namespace or any(c.isspace() for c in namespace)
        ):
            raise ConfigError("namespace", namespace, "must be a non-empty string without spaces")
        if not callable(clock):
            raise ConfigError("clock", clock, "must be a callable returning seconds")
        self.namespace = namespace
        self.default_ttl = (
            None if default_ttl is None else check_seconds("default_ttl", default_ttl)
        )
        self.socket_timeout = check_seconds("socket_timeout", socket_timeout)
        self.socket_connect_timeout = check_seconds(
            "socket_connect_timeout", socket_connect_timeout
        )
        self.retry_interval = check_seconds("retry_interval", retry_interval)
        self._clock = clock
        self._signer = signer_of(secret, "secret")
        # key -> the last payload found JSON (or opened) under it, its text and, signed,
        # the envelope that was verified
        self._parsed: dict[str, tuple[Any, str, str]] = {}
        self._window = DownWindow(self.retry_interval, clock)
        self._counters = Counters(_BACKEND)
        self._errors = redis_errors()
        self._owns_client = False
        self._built_async: LoopClients | None = None  # one built client per event loop
        self._client: Any = client
        self._async_client: Any = async_client
        if url is not None:
            check_url(url)
            make = functools.partial(
                build_client,
                url,
                socket_timeout=self.socket_timeout,
                socket_connect_timeout=self.socket_connect_timeout,
                options=client_options,
            )
            if client is None:
                self._client, self._owns_client = make(asynchronous=False), True
            if async_client is None:
                self._built_async = LoopClients(functools.partial(make, asynchronous=True))
        check_unsigned(
            "RedisCache", self._signer, unsigned, advice="give it secret=... (the same everywhere)"
        )

    @property
    def signed(self) -> bool:
        """Whether this cache signs its values (it was given a secret)."""
        return self._signer is not None

    @property
    def bounded(self) -> bool:
        """Whether every call ends by itself: clients built here have socket
        timeouts; an injected one does when its pool was given a
        ``socket_timeout``. Then the router calls this cache directly, never on
        a worker thread (``RouterConfig.cache_timeout`` bounds the others)."""
        return all(
            client is None or (client is self._client and self._owns_client) or _timed(client)
            for client in (self._client, self._async_client)
        )

    def __repr__(self) -> str:
        state = "up" if self.healthy else "down"
        return f"RedisCache(namespace={self.namespace!r}, {state})"

    @property
    def client(self) -> Any:
        """The sync client (``None`` when there is only an async one)."""
        return self._client

    @property
    def async_client(self) -> Any:
        """The async client: the injected one, or the one built for the running
        event loop (``None`` when there is only a sync client, or when called
        outside a loop on a cache that builds its own)."""
        try:
            return self._loop_client()
        except RuntimeError:  # no running event loop
            return None

    @property
    def _has_async(self) -> bool:
        return self._async_client is not None or self._built_async is not None

    def _loop_client(self) -> Any:
        built = self._built_async
        return self._async_client if built is None else built.get()

    # -- health ---------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """False while the cache is marked down after a connection-level failure."""
        return self._window.up

    @property
    def stats(self) -> CacheStats:
        """A snapshot of the counters (``evictions`` and ``expirations`` stay 0:
        Redis counts those itself, see ``INFO stats``)."""
        return self._counters.snapshot()

    def reset_stats(self) -> None:
        """Set the counters back to zero."""
        self._counters.reset()

    def _admit(self, op: str) -> None:
        """Let the call through, or fail fast while marked down."""
        remaining = self._window.admit()
        if remaining is None:
            return
        self._counters.add("skipped")
        _log("debug", op, None, error="down", skipped=True)
        raise CacheError(
            f"redis cache marked down after a failure; next try in {remaining:.2f} s",
            backend=_BACKEND,
            operation=op,
            kind="down",
            retry_after=remaining,
        )

    def _up(self) -> None:
        if self._window.mark_up():
            _log("info", "up", None, state="up")

    def _failure(self, op: str, key: str | None, exc: BaseException) -> CacheError:
        kind, marks_down = classify(exc)
        self._counters.error(kind)
        if marks_down:
            self._window.mark_down()
        else:
            self._up()
        _log(
            "warning",
            op,
            key,
            error=kind,
            exc_type=type(exc).__name__,
            detail=str(exc)[:200],
            state="down" if marks_down else "up",
        )
        return CacheError(
            f"redis {op} failed ({kind}): {exc}", backend=_BACKEND, operation=op, kind=kind
        )

    def _unsupported(self, op: str, missing: str) -> CacheError:
        self._counters.error("unsupported")
        return CacheError(
            f"redis {op}: this cache has no {missing} client",
            backend=_BACKEND,
            operation=op,
            kind="unsupported",
        )

    def _run(self, op: str, key: str | None, call: Callable[[Any], _T]) -> _T:
        client = self._client
        if client is None:
            raise self._unsupported(op, "sync")
        self._admit(op)
        try:
            result = call(client)
        except self._errors as exc:
            if classify(exc)[1]:
                drop_idle(client)
            raise self._failure(op, key, exc) from exc
        self._up()
        return result

    async def _arun(self, op: str, key: str | None, call: Callable[[Any], Any]) -> Any:
        self._admit(op)
        client = None
        try:
            client = self._loop_client()
            result = await call(client)
        except self._errors as exc:
            if client is not None and classify(exc)[1]:
                await adrop_idle(client)
            raise self._failure(op, key, exc) from exc
        self._up()
        return result

    def _store_key(self, key: str) -> str:
        return key if self.namespace is None else f"{self.namespace}:{key}"

    def _px(self, ttl: float | None) -> int | None:
        seconds = check_ttl(ttl, self.default_ttl)
        return None if seconds is None else max(1, round(seconds * 1000))

    def _payload(self, key: str, value: str, px: int | None) -> bytes:
        try:
            data = check_value(value, backend=_BACKEND)
        except CacheError as exc:
            self._counters.error(exc.kind)
            _log("warning", "set", key, error=exc.kind)
            raise
        if self._signer is None:
            return data
        ttl = None if px is None else px / 1000
        return self._signer.sign(self._store_key(key), value, ttl).encode("utf-8")

    def _finish_get(self, key: str, raw: Any) -> str | None:
        text = None
        if raw is not None:
            try:
                text = self._checked(key, raw) if self._signer is None else self._opened(key, raw)
            except CacheError as exc:  # stored by someone else: refused, and said so
                self._counters.error(exc.kind)
                self._counters.add("misses")
                _log("warning", "get", key, error=exc.kind)
                raise
        self._counters.add("hits" if text is not None else "misses")
        _log("debug", "get", key, hit=text is not None)
        return text

    def _checked(self, key: str, raw: Any) -> str:
        """The JSON text of ``raw``, decoded and parsed once per payload: the same bytes
        read again under a key (a repeated hit) give the text made the first time, the
        same object (neither decoded nor parsed again, and known as the same text by
        what compares it after: the parse cost as much as the evaluation a hit saves).
        Bounded: emptied at ``_CHECKED_SIZE`` keys.

        Raises:
            CacheError: ``kind="payload"`` when it is not UTF-8 JSON text.
        """
        seen = self._parsed.get(key)
        if seen is not None and type(raw) is type(seen[0]) and raw == seen[0]:
            return seen[1]
        text = decode_value(raw, backend=_BACKEND)
        self._remember(key, raw, text)
        return text

    def _opened(self, key: str, raw: Any) -> str:
        """The text signed in ``raw`` for ``key``, its signature checked once per payload:
        the same bytes read again under a key give the text opened the first time (the
        bytes that were verified, compared whole; not parsed: JSON text when set, checked
        then). Its expiry is read again on every hit, so an expired value is refused.

        Raises:
            CacheError: ``kind="signature"`` (not signed, not with this secret for this
                key, or expired) or ``kind="payload"`` (not UTF-8).
        """
        signer = self._signer
        assert signer is not None
        seen = self._parsed.get(key)
        if seen is not None and type(raw) is type(seen[0]) and raw == seen[0]:
            left = signer.remaining(seen[2])
            if left is None or left >= 0:
                return seen[1]
        stored = decode_text(raw, backend=_BACKEND)
        text = signer.open(self._store_key(key), stored, backend=_BACKEND)
        self._remember(key, raw, text, stored)
        return text

    def _remember(self, key: str, raw: Any, text: str, stored: str = "") -> None:
        if type(raw) is bytes or type(raw) is str:  # immutable: safe to compare with later
            if len(self._parsed) >= _CHECKED_SIZE:
                self._parsed.clear()
            self._parsed[key] = (raw, text, stored)

    def _finish_set(self, key: str, px: int | None) -> None:
        self._counters.add("sets")
        _log("debug", "set", key, ttl_ms=px)

    # -- sync API ---------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        """The JSON text under ``key``, or ``None`` (absent or expired).

        Raises:
            InputError: ``key`` is not a non-empty string.
            CacheError: Redis failed, or is marked down (``kind="down"``), or
                the stored value is not UTF-8 JSON text (``kind="payload"``,
                counted as a miss: the router flags it and overwrites it).
        """
        name = self._store_key(check_key(key))
        raw = self._run("get", key, lambda c: c.get(name))
        return self._finish_get(key, raw)

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        """Store JSON text under ``key`` for ``ttl`` seconds (``default_ttl`` if ``None``).

        Raises:
            InputError: a bad ``key``, a non-string ``value`` or a bad ``ttl``.
            CacheError: ``value`` is not JSON text (``kind="payload"``), Redis
                refused or failed (``"oom"``, ``"timeout"`` ...), or is marked down.
        """
        name = self._store_key(check_key(key))
        px = self._px(ttl)
        data = self._payload(key, value, px)
        self._run("set", key, lambda c: c.set(name, data, px=px))
        self._finish_set(key, px)

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it existed.

        Raises:
            CacheError: Redis failed or is marked down.
        """
        name = self._store_key(check_key(key))
        removed = self._run("delete", key, lambda c: c.delete(name))
        self._counters.add("deletes")
        return bool(removed)

    def clear(self) -> int:
        """Delete every key under :attr:`namespace` (``SCAN`` + one ``DEL`` per key).

        Returns the number of keys deleted.

        Raises:
            CacheError: ``kind="unsupported"`` without a namespace (this never
                flushes a whole shared Redis), or Redis failed.
        """
        if self.namespace is None:
            self._counters.error("unsupported")
            raise CacheError(
                "clear() needs a namespace: it never empties a whole shared Redis",
                backend=_BACKEND,
                operation="clear",
                kind="unsupported",
            )
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self.namespace) + ":*"

        def clear_all(client: Any) -> int:
            return sum(
                int(client.delete(name))
                for name in list(client.scan_iter(match=pattern, count=500))
            )

        return self._run("clear", None, clear_all)

    def ping(self) -> bool:
        """Ask Redis for ``PING`` now, even while marked down; ``True`` if it answered.

        A success marks the cache up, a failure down. Never raises.
        """
        if self._client is None:
            return False
        try:
            answered = bool(self._client.ping())
        except self._errors as exc:
            if classify(exc)[1]:
                drop_idle(self._client)
            self._failure("ping", None, exc)
            return False
        self._up()
        return answered

    def close(self) -> None:
        """Close the sync client if this cache built it (injected ones are left open)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- async API ----------------------------------------------------------------------

    async def aget(self, key: str) -> str | None:
        """:meth:`get` on the async client (or the sync one in a worker thread)."""
        if not self._has_async:
            return await asyncio.to_thread(self.get, key)
        name = self._store_key(check_key(key))
        raw = await self._arun("get", key, lambda c: c.get(name))
        return self._finish_get(key, raw)

    async def aset(self, key: str, value: str, ttl: float | None = None) -> None:
        """:meth:`set` on the async client (or the sync one in a worker thread)."""
        if not self._has_async:
            await asyncio.to_thread(self.set, key, value, ttl)
            return
        name = self._store_key(check_key(key))
        px = self._px(ttl)
        data = self._payload(key, value, px)
        await self._arun("set", key, lambda c: c.set(name, data, px=px))
        self._finish_set(key, px)

    async def adelete(self, key: str) -> bool:
        """:meth:`delete` on the async client (or the sync one in a worker thread)."""
        if not self._has_async:
            return await asyncio.to_thread(self.delete, key)
        name = self._store_key(check_key(key))
        removed = await self._arun("delete", key, lambda c: c.delete(name))
        self._counters.add("deletes")
        return bool(removed)

    async def aping(self) -> bool:
        """:meth:`ping` on the async client (or the sync one in a worker thread)."""
        if not self._has_async:
            return await asyncio.to_thread(self.ping)
        client = None
        try:
            client = self._loop_client()
            answered = bool(await client.ping())
        except self._errors as exc:
            if client is not None and classify(exc)[1]:
                await adrop_idle(client)
            self._failure("ping", None, exc)
            return False
        self._up()
        return answered

    async def aclose(self) -> None:
        """Close the clients this cache built for this event loop (injected ones
        are left open)."""
        self.close()
        if self._built_async is not None:
            await self._built_async.aclose()

    async def __aenter__(self) -> RedisCache:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
