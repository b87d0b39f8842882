"""Credentials in a URL never reach a log, a result, a repr or an error message.

One helper (``crag_heuristic._redact.redact``) replaces the user-info part of
every URL in a text (``user:pass@`` becomes ``***@``) and the values of query
parameters that name a secret; every place that logs or returns a URL uses it.
The client still sends the credentials (HTTP basic auth, from the URL).
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
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
from crag_heuristic._redact import redact
from crag_heuristic.testing import ListRetriever, capture_events

SECRET = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:pw@host:8080/search", "http://***@host:8080/search"),
        ("https://user@host/", "https://***@host/"),
        ("redis://:pw@cache:6379/0", "redis://***@cache:6379/0"),
        ("rediss://default:p%40ss@cache", "rediss://***@cache"),
        ("http://u:p@ss@host/x", "http://***@host/x"),  # an unescaped @ in the password
        ("http://host/path?email=a@b.org", "http://host/path?email=a@b.org"),
        ("http://host/?q=1&password=pw&x=2", "http://host/?q=1&password=***&x=2"),
        ("redis://cache/0?password=pw", "redis://cache/0?password=***"),
        ("https://h/?api_key=k&token=t#f", "https://h/?api_key=***&token=***#f"),
        ("http://plain.host/search", "http://plain.host/search"),
        (
            "cannot connect to http://a:b@h/search: refused; retry http://c:d@h2",
            "cannot connect to http://***@h/search: refused; retry http://***@h2",
        ),
        ("not a url", "not a url"),
    ],
)
def test_redact_hides_credentials_in_urls(text: str, expected: str) -> None:
    assert redact(text) == expected


def answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "query": "q",
            "results": [{"url": "https://example.org/bees", "title": "Bees", "content": "Dance"}],
            "unresponsive_engines": [],
        },
    )


def test_the_client_sends_the_credentials_but_shows_none() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    url = f"http://user:{SECRET}@searx.test"
    client = SearxngClient(url, client=httpx.Client(transport=httpx.MockTransport(handler)))
    with capture_events() as events:
        results = client.search("how do bees dance")
    expected = "Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode()
    assert seen[0].headers["Authorization"] == expected
    assert client.url == "http://***@searx.test/search"
    assert SECRET not in repr(client)
    assert SECRET not in results.info.url
    assert events and all(SECRET not in json.dumps(e, default=str) for e in events)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_errors_and_web_error_carry_no_credentials(mode: str) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    url = f"http://user:{SECRET}@searx.test"
    transport = httpx.MockTransport(refuse)
    client = SearxngClient(
        url,
        client=httpx.Client(transport=transport),
        async_client=httpx.AsyncClient(transport=transport),
    )

    def search() -> Any:
        if mode == "sync":
            return client.search("bees")
        return asyncio.run(client.asearch("bees"))

    with capture_events() as events, pytest.raises(WebSearchError) as info:
        search()
    assert SECRET not in str(info.value) and SECRET not in (info.value.url or "")
    assert all(SECRET not in json.dumps(e, default=str) for e in events)

    chunks = [Chunk(id="a", text="bees", score=0.1, score_kind=ScoreKind.COSINE)]
    never = Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": 1.0, "partial": 1.0}
        )
    )
    crag = CRAG(ListRetriever(chunks), never, web=client, cache=False)
    with capture_events() as events:
        result = crag.retrieve("bees") if mode == "sync" else asyncio.run(crag.aretrieve("bees"))
    assert result.web_error is not None and "***@searx.test" in result.web_error
    assert SECRET not in json.dumps(result.to_dict())
    assert all(SECRET not in json.dumps(e, default=str) for e in events)


def test_a_foreign_searchers_error_is_redacted_on_the_result() -> None:
    class Leaky:
        def search(self, query: str, max_results: int = 5) -> list[Chunk]:
            raise RuntimeError(f"GET http://admin:{SECRET}@internal/search failed")

    chunks = [Chunk(id="a", text="bees", score=0.1, score_kind=ScoreKind.COSINE)]
    never = Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": 1.0, "partial": 1.0}
        )
    )
    result = CRAG(ListRetriever(chunks), never, web=Leaky(), cache=False).retrieve("bees")
    assert result.web_error is not None and "http://***@internal/search" in result.web_error
    assert SECRET not in json.dumps(result.to_dict())


def test_config_errors_do_not_echo_credentials() -> None:
    with pytest.raises(ConfigError) as info:
        SearxngClient(f"ftp://user:{SECRET}@host")
    assert SECRET not in str(info.value) and SECRET not in repr(info.value.value)
    with pytest.raises(ConfigError) as info:
        RedisCache(url=f"redis://:{SECRET}@cache:notaport/0", unsigned="allow")
    assert SECRET not in str(info.value) and SECRET not in repr(info.value.value)
    with pytest.raises(ConfigError) as info:
        RedisCache(url=f"http://:{SECRET}@cache", unsigned="allow")
    assert SECRET not in str(info.value)


class _Searx(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(
            {
                "query": "q",
                "results": [
                    {"url": "https://example.org/a", "title": "A", "content": "alpha"},
                ],
                "unresponsive_engines": [],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def searx_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Searx)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://user:{SECRET}@127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_cli_shows_events_not_query_text_or_credentials(searx_url: str, where: str) -> None:
    """--verbose turns on the library's events only: httpx and httpcore log the query
    in the URL they request, and stay at WARNING."""
    query = "zebra waggle quokka"  # matches nothing in the sample: IRRELEVANT -> web
    args = ["retrieve", "--query", query, "--searxng", searx_url, "--profile", "synapse"]
    args = ["--verbose", *args] if where == "before" else [*args, "--verbose"]
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from crag_heuristic._cli import main; "
         "sys.exit(main(sys.argv[1:]))", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "crag.searxng" in done.stderr and "crag.result" in done.stderr
    # each event with its fields, credentials masked as the library masks them
    searxng = next(line for line in done.stderr.splitlines() if " crag.searxng " in line)
    assert "url=http://***@127.0.0.1:" in searxng and "results=" in searxng
    assert "crag.stage stage=web " in done.stderr and "used=true" in done.stderr
    assert "zebra" not in done.stderr and "quokka" not in done.stderr
    assert "httpx" not in done.stderr and "httpcore" not in done.stderr
    assert SECRET not in done.stderr and SECRET not in done.stdout
