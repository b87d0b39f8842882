"""redis-py clients built for a cache: short timeouts, no retries.

A cache is optional, so a client built here gives up quickly: redis-py's
default client waits 5 s on a socket and retries with backoff, which would
turn a Redis outage into seconds of latency on every query. Built clients get
bounded ``socket_timeout`` and ``socket_connect_timeout`` (defaults well under
a second) and ``Retry(NoBackoff(), 0)``; the cache's own down window
(:mod:`.health`) then decides when to try again. redis is imported only when
a client is built, so ``import crag_heuristic`` stays light.

After a connection-level failure, :func:`drop_idle` / :func:`adrop_idle`
disconnect the idle connections of the client's pool: they may point at a
server that is gone (a restart), and redis-py's asyncio pool (seen with 8.1, with
maintenance notifications on ``"auto"``, the default) hands such connections
out without checking them, so each would fail one more call after Redis is
back. Disconnected connections stay in the pool and reconnect on next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from .._checks import is_finite_number
from .._exceptions import ConfigError
from .._optional import requires
from .._redact import credentials, redact, redact_url

URL_SCHEMES = ("redis://", "rediss://", "unix://")


def check_seconds(name: str, value: Any) -> float:
    """``value`` as float seconds, or :class:`ConfigError` unless finite and > 0."""
    if not is_finite_number(value) or value <= 0:
        raise ConfigError(name, value, "must be a finite number of seconds > 0")
    return float(value)


def check_url(url: Any) -> str:
    """``url`` if it is a redis://, rediss:// or unix:// URL, else :class:`ConfigError`
    (its credentials masked, whatever they hold)."""
    if not isinstance(url, str) or not url.startswith(URL_SCHEMES):
        shown = redact_url(url) if isinstance(url, str) else f"<a {type(url).__name__}>"
        raise ConfigError("url", shown, f"must start with one of {', '.join(URL_SCHEMES)}")
    return url


def build_client(
    url: str,
    *,
    asynchronous: bool,
    socket_timeout: float,
    socket_connect_timeout: float,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """A ``redis.Redis`` (or ``redis.asyncio.Redis``) for ``url``, failing fast.

    ``options`` go to ``from_url`` last, so they can override anything here. The
    URL's credentials are taken out of it and given to redis-py as ``username``
    and ``password`` (a password may then hold ``/``, ``?``, ``#`` or ``@``
    unescaped), so redis-py never sees them in the URL, nor echoes them.

    Raises:
        ConfigError: the URL scheme is not redis://, rediss:// or unix://, or
            redis-py refuses the URL or an option (the message never shows the
            credentials: redis-py's own message about the URL is left out).
    """
    check_url(url)
    login, bare = credentials(url)
    with requires("redis", "RedisCache"):
        from redis.backoff import NoBackoff

    factory: Any
    retry: Any
    if asynchronous:
        from redis.asyncio import Redis as AsyncRedis
        from redis.asyncio.retry import Retry as AsyncRetry

        factory, retry = AsyncRedis.from_url, AsyncRetry(NoBackoff(), 0)
    else:
        from redis import Redis
        from redis.retry import Retry

        factory, retry = Redis.from_url, Retry(NoBackoff(), 0)
    settings: dict[str, Any] = {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": socket_connect_timeout,
        "retry": retry,
    }
    if login is not None:
        settings["username"] = login[0] or None
        settings["password"] = login[1] or None
    settings.update(options or {})
    try:
        client = factory(bare, **settings)
        pool = client.connection_pool  # a connection is made on first use: try one now
        pool.connection_class(**pool.connection_kwargs)
    except ValueError as exc:  # its message may quote part of the URL: never shown
        reason = f"redis-py refused it ({type(exc).__name__}): check its host, port and database"
        raise ConfigError("url", redact_url(url), reason) from None
    except TypeError as exc:  # an option redis-py does not take
        raise ConfigError("client_options", sorted(options or {}), redact(str(exc))) from None
    return client


def _idle_disconnect(client: Any) -> Any:
    """The pool's ``disconnect`` (``None`` for clients without one pool, e.g. a cluster)."""
    pool = getattr(client, "connection_pool", None)
    return getattr(pool, "disconnect", None)


def drop_idle(client: Any) -> None:
    """Disconnect the idle connections of a sync client's pool; never raises."""
    disconnect = _idle_disconnect(client)
    if disconnect is not None:
        with contextlib.suppress(Exception):
            disconnect(inuse_connections=False)


async def adrop_idle(client: Any) -> None:
    """Disconnect the idle connections of an async client's pool; never raises."""
    disconnect = _idle_disconnect(client)
    if disconnect is not None:
        with contextlib.suppress(Exception):
            await disconnect(inuse_connections=False)


class LoopClients:
    """Async clients built on demand, one per event loop, closed with the loop.

    A ``redis.asyncio`` connection belongs to the event loop it was opened on;
    reusing it from another loop (``asyncio.run()`` called twice, or one loop
    per thread) fails. This keeps one client per loop. Each client is closed
    when its loop shuts down (``asyncio.run`` and ``loop.shutdown_asyncgens()``
    finalise the loop's async generators, and a small one here awaits the
    client's ``aclose``), so a cache used from many short-lived loops leaves no
    connection behind; :meth:`aclose` closes the running loop's client earlier.

    Args:
        factory: builds a new async client.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        # loop -> (client, the async generator that closes it when the loop shuts down,
        # the task that starts that generator: referenced so it is not collected early)
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop,
            tuple[Any, AsyncGenerator[None, None], asyncio.Task[None]],
        ] = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        """The client of the running loop, built on first use.

        Raises:
            RuntimeError: no event loop is running.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.get(loop)
            if entry is None:
                client = self._factory()
                closer = _close_at_shutdown(client)
                started = loop.create_task(_start(closer))
                entry = self._clients[loop] = (client, closer, started)
        return entry[0]

    async def aclose(self) -> None:
        """Close and forget the running loop's client, if it has one."""
        with self._lock:
            entry = self._clients.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[1].aclose()  # runs the generator's finally: closes the client


async def _close_at_shutdown(client: Any) -> AsyncGenerator[None, None]:
    """Suspended once started; the loop finalises it at shutdown, closing ``client``."""
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            closer = getattr(client, "aclose", None) or client.close
            await closer()


async def _start(closer: AsyncGenerator[None, None]) -> None:
    """Start ``closer`` so that the loop knows it (and finalises it at shutdown)."""
    with contextlib.suppress(StopAsyncIteration):
        await closer.__anext__()
