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
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from ._errors import SearxngStartError
from ._process import ServerProcess

__all__ = ["SearxngServer", "SearxngStartError"]


class SearxngServer(ServerProcess):
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
    it) and removes the folder (:class:`~crag_testkit._process.ServerProcess`).
    Use it as a context manager.
    """

    name = "SearXNG"
    error = SearxngStartError

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
        super().__init__(port=port, startup_timeout=startup_timeout)
        self.python = python
        self.engine_url = engine_url
        self.json_enabled = json_enabled
        self.engine_timeout = engine_timeout
        self.engine_names = tuple(engine_names)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"SearxngServer({self.url if self.running else self.engine_url!r}, {state})"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (after :meth:`start`)."""
        return f"http://127.0.0.1:{self._bound_port}"

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

    def _command(self, port: int, folder: Path) -> tuple[list[str], dict[str, str]]:
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
        return [str(self.python), "-m", "searx.webapp"], env

    def _answers(self) -> bool:
        with urllib.request.urlopen(self.url + "/healthz", timeout=2) as answer:
            return bool(answer.status == 200)
