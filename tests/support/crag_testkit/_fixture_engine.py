"""A programmable loopback search engine for SearXNG's ``json_engine``.

:class:`FixtureEngine` answers ``GET /api?q=...`` with
``{"items": [{"link", "name", "snippet"}]}``, or with whatever a test
programmed for that query (and engine): results, nothing, an HTTP error, a
garbage body, a slow answer. It runs in a thread of the test process
(``http.server``) on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FixtureEngine", "FixtureReply", "fixture_item"]


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
