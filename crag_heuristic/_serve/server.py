"""Running the gate service: uvicorn on a socket of its own, stopped gracefully.

:func:`run_server` binds the address first (port 0: one the system picks, said to
``on_listening``), refuses an address other machines reach unless API keys
are configured (without a key the service listens on 127.0.0.1 only), and
runs uvicorn until SIGINT or SIGTERM: then it stops accepting connections,
gives the requests in flight ``graceful_timeout`` seconds to finish (then
cancels them), and closes the router's cache.
It never configures logging (``log_config=None``): the application does.

Every connection is bounded (:mod:`crag_heuristic._serve.connections`): a
deadline for its headers, a cap on open connections fitted to the file
descriptor limit (the slowest shed first), the listen backlog within the same
budget, JSON for a request that is not HTTP, and asyncio's and uvicorn's
messages logged at most once per message per window, without tracebacks.
uvicorn's own ``limit_concurrency`` stays off: it counts connections and tasks
together and answers a plain-text 503, where the cap and the service's slots
(``max_concurrency``, ``max_queue``: a JSON 503 with ``Retry-After``) do its
work.

:func:`serving` runs an app in a thread of this process for as long as a
``with`` block lasts, on a free loopback port: for tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._exceptions import InputError
from .._logging import get_logger
from .._optional import requires
from .app import create_app, is_loopback
from .connections import (
    KEEP_ALIVE_TIMEOUT,
    MAX_BACKLOG,
    MAX_HEADER_BYTES,
    ConnectionLimits,
    connection_limits,
    guarded_protocol,
    install_loop_handler,
)
from .settings import ServeSettings

if TYPE_CHECKING:
    from .._router.router import CRAG


def check_address(host: str, settings: ServeSettings) -> None:
    """Refuse to listen where other machines reach the service without a key.

    Raises:
        InputError: ``host`` is not a loopback address and no API key is configured.
    """
    if not is_loopback(host) and not settings.api_keys:
        raise InputError(
            f"--host {host}: without an API key the service listens on 127.0.0.1 only; "
            "configure keys (--api-key-file, or CRAG_HEURISTIC_API_KEYS) to serve other hosts"
        )


def bind(host: str, port: int, backlog: int = MAX_BACKLOG) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: one the system picks).

    Raises:
        InputError: the address cannot be listened on (in use, not this machine's).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on the accepted connections only for a
    # socket that says it is TCP (proto 0 left each response's body waiting for the
    # client's delayed ACK of its headers: 40 ms a request)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _config(app: Any, graceful_timeout: float, limits: ConnectionLimits) -> Any:
    """uvicorn's settings for the service (its graceful timeout in whole seconds), its
    connections bounded by ``limits``."""
    with requires("serve", "the gate service"):
        import uvicorn
    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        ws="none",  # no route takes a WebSocket: no upgrade past the header deadline
        log_config=None,  # the application configures logging, not the library
        log_level="warning",
        access_log=False,  # the service logs its own access events (crag.http)
        lifespan="on",
        timeout_graceful_shutdown=max(1, round(graceful_timeout)),  # whole seconds
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
        backlog=limits.backlog,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=None,  # the cap and the service's slots (see the module doc)
        server_header=False,
    )


def _server(
    config: Any, limits: ConnectionLimits, on_started: Callable[[], None] | None = None
) -> Any:
    """A uvicorn server whose loop logs its errors bounded (see
    :func:`install_loop_handler`); ``on_started`` called once it serves. Its
    connection limits are said at start (a ``crag.connections`` event), and what
    they did at the end (header timeouts, connections shed or refused)."""
    import uvicorn

    log = get_logger()

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            install_loop_handler(asyncio.get_running_loop())
            await super().startup(sockets=sockets)
            for sock in sockets or ():  # the kernel's queue long again (see connections)
                with contextlib.suppress(OSError):
                    sock.listen(MAX_BACKLOG)
            log.info("crag.connections", state="limits", **dataclasses.asdict(limits))
            # said once serving, SIGTERM handled: a signal after the line stops it gracefully
            if self.started and on_started is not None:
                on_started()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets=sockets)
            done = getattr(self.config.http, "guard_counts", {})
            log.info("crag.connections", state="stopped", **done)

    return Server(config)


def _limits(app: Any) -> ConnectionLimits:
    """The connection limits of ``app``'s settings (:func:`create_app`'s), else the
    defaults'."""
    service = getattr(getattr(app, "state", None), "service", None)
    settings = getattr(service, "settings", None)
    return connection_limits(settings if isinstance(settings, ServeSettings) else ServeSettings())


def run_server(
    crag: CRAG,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    settings: ServeSettings | None = None,
    info: Mapping[str, Any] | None = None,
    graceful_timeout: float = 10.0,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve ``crag`` over HTTP until SIGINT or SIGTERM (see the module doc).

    Raises:
        InputError: an address refused (see :func:`check_address`) or not free.
        MissingDependencyError: Starlette or uvicorn is missing (the ``serve`` extra).
    """
    with requires("serve", "the gate service"):
        import uvicorn  # noqa: F401 - missing, it is said before the address is taken

    settings = settings or ServeSettings()
    check_address(host, settings)
    app = create_app(crag, settings, info=info)
    limits = connection_limits(settings)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}"

    def started() -> None:
        if on_listening is not None:
            on_listening(url)

    server = _server(_config(app, graceful_timeout, limits), limits, started)
    try:
        with _stopped_by_signals():
            server.run(sockets=[sock])
    finally:
        sock.close()
        crag.close()  # the router's worker threads
        close = getattr(crag.cache, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """While uvicorn runs: SIGINT and SIGTERM stop it gracefully (uvicorn's own
    handlers), and the signal it raises again once stopped is taken here, so that a
    service stopped on purpose returns (exit status 0) instead of being killed by it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = (signal.SIGINT, signal.SIGTERM)
    before = {number: signal.signal(number, lambda *_: None) for number in taken}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def serving(app: Any, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run ``app`` (an ASGI app, e.g. :func:`create_app`'s) in a thread while the block
    lasts; yields its base URL (``http://127.0.0.1:PORT``). Stopped gracefully on exit.

    Raises:
        InputError: the address cannot be listened on.
        RuntimeError: the server did not start within 30 s.
    """
    limits = _limits(app)
    config = _config(app, 5.0, limits)  # raises naming the extra before a socket is bound
    sock = bind(host, port)
    server = _server(config, limits)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="crag-serve", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the gate service did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
