"""No credential and no query word in any log line, repr or error (issue 26).

A real HTTP server over a socket stands in for SearXNG: it checks the basic
auth, and answers as scripted: results, or a failure that echoes the query (a
400 whose error text quotes it, a 500 page, a redirect whose ``Location``
holds it, HTML). The address holds a password with every character a URL
reserves (``/ ? # @ :``). Every record of the library's logger
(``crag_heuristic``) and of httpx's own (``httpx``, at DEBUG, so INFO too) is
rendered and searched; so are the client's and its configuration's reprs, each
error's text, the router's result events and a refused Redis URL.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, quote

import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    ConfigError,
    Evaluator,
    EvaluatorConfig,
    RedisCache,
    ScoreKind,
    SearxngClient,
    WebSearchError,
)
from crag_heuristic.cache import MemoryCache
from crag_heuristic.testing import ListRetriever

USER = "crag-user"
PASSWORD = "pa/ss?w#o@rd:1 %x"
WORDS = ("zebra", "waggle", "quokka")
QUERY = " ".join(WORDS)
TOKEN = "Bearer hdr-t0ken-value"
SECRETS = (
    PASSWORD,
    "pa/ss",
    "rd:1",
    quote(PASSWORD, safe=""),
    base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),
    "hdr-t0ken",
)
MODES = ("ok", "error-400", "error-500", "redirect", "html", "not-json")


class _Server(BaseHTTPRequestHandler):
    mode = "ok"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        query = dict(parse_qsl(body)).get("q", "")
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self._send(401, b'{"error": "auth"}')
            return
        mode = type(self).mode
        if mode == "ok":
            results = [{"url": "https://example.org/z", "title": query, "content": query}]
            self._send(200, json.dumps({"query": query, "results": results}).encode())
        elif mode == "error-400":
            self._send(400, json.dumps({"error": f"bad query {query}"}).encode())
        elif mode == "error-500":
            self._send(500, f"engine crashed on {query}".encode(), "text/plain")
        elif mode == "redirect":
            self._send(302, b"", headers={"Location": f"/search?q={quote(query)}"})
        elif mode == "html":
            self._send(200, f"<html>{query}</html>".encode(), "text/html")
        else:
            self._send(200, f"{query} {query}".encode(), "text/plain")

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{USER}:{PASSWORD}@127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))
        self.lines.append(json.dumps(record.__dict__, default=str))  # every field


@pytest.fixture
def log_lines() -> Iterator[list[str]]:
    handler = _Lines()
    loggers = [logging.getLogger(name) for name in ("crag_heuristic", "httpx")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield handler.lines
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def leaks(text: str) -> list[str]:
    return [s for s in (*SECRETS, *WORDS) if s in text]


def never() -> Evaluator:
    """A gate that grades everything IRRELEVANT: every query goes to the web."""
    config = EvaluatorConfig.from_profile("synapse")
    return Evaluator(config.replace(thresholds={"relevant": 1.0, "partial": 1.0}))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("mode", MODES)
def test_no_credential_or_query_word_in_logs_reprs_or_errors(
    server: str, log_lines: list[str], mode: str, asynchronous: bool
) -> None:
    _Server.mode = mode
    client = SearxngClient(server, headers={"Authorization-Extra": TOKEN}, max_retries=1)
    client._sleep = lambda seconds: None

    async def no_wait(seconds: float) -> None:
        return None

    client._async_sleep = no_wait
    error: WebSearchError | None = None
    try:
        results = asyncio.run(client.asearch(QUERY)) if asynchronous else client.search(QUERY)
    except WebSearchError as exc:
        error = exc
    if mode == "ok":
        assert error is None and [c.source for c in results] == ["https://example.org/z"]
    else:
        assert error is not None and not leaks(str(error)) and not leaks(repr(error))
        assert error.url is not None and not leaks(error.url)

    chunks = [Chunk(id="a", text="bees", score=0.1, score_kind=ScoreKind.COSINE)]
    crag = CRAG(ListRetriever(chunks), never(), web=client, cache=MemoryCache())
    result = asyncio.run(crag.aretrieve(QUERY)) if asynchronous else crag.retrieve(QUERY)
    assert result.web_search_used is (mode == "ok")
    assert result.web_error is None or not leaks(result.web_error)
    assert [f for f in result.failures if leaks(f.text)] == []

    assert any(" crag.searxng" in line for line in log_lines)  # the events were captured
    assert any(line.startswith("httpx INFO HTTP Request: POST") for line in log_lines)
    assert [line for line in log_lines if leaks(line)] == []
    for shown in (repr(client), repr(client.config), client.url, repr(crag)):
        assert not leaks(shown), shown
    client.close()


def test_the_fingerprint_holds_no_credential(server: str) -> None:
    client = SearxngClient(server, headers={"Authorization-Extra": TOKEN})
    assert not leaks(client.fingerprint) and client.fingerprint.startswith("searxng:")
    assert client.url.startswith("http://***@127.0.0.1:")


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@cache:notaport/0",
        f"redis://{USER}:{PASSWORD}@cache:99999999/0",
        f"http://{USER}:{PASSWORD}@cache",
        f"rediss://{USER}:{PASSWORD}@[::1/0",
    ],
)
def test_a_refused_redis_url_never_echoes_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        RedisCache(url=url, unsigned="allow")
    error = info.value
    for shown in (str(error), repr(error.value), repr(error)):
        assert not leaks(shown), shown
    cause = error.__cause__ or error.__context__
    assert cause is None or not leaks(str(cause))


@pytest.mark.parametrize(
    "base_url",
    [
        f"ftp://{USER}:{PASSWORD}@host",
        f"http://{USER}:{PASSWORD}@host:port",
        f"http://{USER}:{PASSWORD}@host/?q=1",
        f"http://{USER}:{PASSWORD}@ho st",
    ],
)
def test_a_refused_searxng_url_never_echoes_its_password(base_url: str) -> None:
    with pytest.raises(ConfigError) as info:
        SearxngClient(base_url)
    assert not leaks(str(info.value)) and not leaks(repr(info.value.value))
    cause = info.value.__cause__ or info.value.__context__
    assert cause is None or not leaks(str(cause))
