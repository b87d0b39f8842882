"""A real SearXNG for tests, offline, fed by fixture engines.

:class:`SearxngServer` runs ``python -m searx.webapp`` from a venv made by
:func:`~crag_testkit.ensure_searxng_venv`, with every internet
engine dropped and one ``json_engine`` per name pointing at a
:class:`~crag_testkit.FixtureEngine`. Nothing leaves 127.0.0.1.

Typical use (pytest fixtures would scope these to the session)::

    python = ensure_searxng_venv(repo / ".searxng-venv")   # ~30-40 s once, then instant
    with FixtureEngine() as engine, SearxngServer(python, engine.url) as server:
        engine.program("solar", FixtureReply(items=[fixture_item("https://a.org", "A", "...")]))
        SearxngClient(server.url, timeout=10).search("solar")

Nothing here reads the environment; the caller decides where the venv lives.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ._errors import SearxngStartError

__all__ = ["SearxngServer", "SearxngStartError"]

_LOG_TAIL_CHARS = 3000


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
