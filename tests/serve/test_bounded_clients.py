"""The service against clients that misbehave, over real sockets (``serving``): slow
headers and bodies, broken framing, lone surrogates, keys a header cannot carry,
IPv4-mapped loopback, streams abandoned half way, and what ``/healthz`` tells whom.

Asserted on events (answered, closed, typed), never on how fast:
``benchmarks/slow_clients.py`` measures the times.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from crag_heuristic import CRAG, Chunk, ConfigError, Evaluator
from crag_heuristic.serve import ServeSettings, create_app, serving
from crag_heuristic.testing import ListRetriever

KEY = "k" * 20
CHUNKS = [
    Chunk(id=f"c{i}", text=f"Roman roads were built in layers, part {i}.", score=0.9 - i / 10,
          score_kind="cosine")
    for i in range(3)
]  # fmt: skip


@pytest.fixture(scope="module")
def crag() -> CRAG:
    return CRAG(ListRetriever(CHUNKS), Evaluator(), cache=False)


@pytest.fixture(scope="module")
def url(crag: CRAG) -> Iterator[str]:
    settings = ServeSettings(request_timeout=1.0, header_timeout=1.0)
    with serving(create_app(crag, settings)) as base:
        yield base


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    return host, int(port)


def _closed(sock: socket.socket, within: float = 30.0) -> bytes:
    """Everything the server writes until it closes the connection (bounded wait:
    generous, the test asserts that it closes, not when)."""
    sock.settimeout(within)
    seen = b""
    try:
        while chunk := sock.recv(65536):
            seen += chunk
    except ConnectionResetError:
        pass
    return seen


def _json_answer(raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


# -- slow clients ------------------------------------------------------------------------------


def test_headers_that_never_end_are_cut_off(url: str) -> None:
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(b"POST /v1/retrieve HTTP/1.1\r\nHost: gate\r\nX-Slow: a")
        for _ in range(3):  # a byte now and then does not extend the deadline
            time.sleep(0.2)
            sock.sendall(b"a")
        assert _closed(sock) == b""  # closed, unanswered
    with socket.create_connection(_address(url)) as idle:  # nothing at all: the same
        assert _closed(idle) == b""


def test_a_kept_alive_connection_gets_a_new_header_deadline(url: str) -> None:
    body = json.dumps({"query": "roman roads", "k": 1}).encode()
    request = (
        b"POST /v1/retrieve HTTP/1.1\r\nHost: gate\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(request)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"POST /v1/retrieve HTTP/1.1\r\nHost: ga")  # the next one, stalled
        rest = _closed(sock)
        assert b"HTTP/1.1" not in rest  # closed without a second answer


@pytest.mark.parametrize("route", ["/v1/retrieve", "/v2/retrieve", "/v2/evaluate", "/v2/stream"])
def test_a_trickling_body_is_a_504_within_the_request_deadline_and_closes(
    url: str, route: str
) -> None:
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(
            b"POST %s HTTP/1.1\r\nHost: gate\r\nContent-Type: application/json\r\n"
            b"Content-Length: 500\r\n\r\n{" % route.encode()
        )
        sock.settimeout(30)
        raw = b""
        while b"\r\n\r\n" not in raw:  # a byte now and then, until the answer comes
            try:
                sock.sendall(b" ")
            except OSError:
                break
            try:
                raw += sock.recv(65536)
            except TimeoutError:
                continue
        raw += _closed(sock)
    status, headers, body = _json_answer(raw)
    assert status == 504 and headers["connection"] == "close"
    assert body["error"] == "RequestTimeoutError" and "body" in body["message"]


# -- framing and bodies --------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"GARBAGE\r\n\r\n",
        b"POST /v1/retrieve HTTP/1.1\r\nHost: gate\r\nContent-Length: ten\r\n\r\n",
        b"POST /v1/retrieve HTTP/1.1\r\nHost: gate\r\nBad Header\r\n\r\n",
        b"POST /v1/retrieve HTTP/1.1\r\nHost: gate\r\nX-Big: " + b"a" * 20_000,  # unfinished
        b"POST /v1/retrieve HTTP/1.1\r\nTransfer-Encoding: chunked\r\nHost: g\r\n\r\nzz\r\n",
    ],
    ids=["request line", "content-length", "header line", "huge header", "chunk size"],
)
def test_broken_framing_gets_a_json_error(url: str, raw: bytes) -> None:
    with socket.create_connection(_address(url)) as sock:
        sock.sendall(raw)
        answer = _closed(sock)
    status, headers, body = _json_answer(answer)
    assert status == 400 and headers["content-type"] == "application/json"
    assert body["error"] == "ServiceError" and body["request_id"] == headers["x-request-id"]


@pytest.mark.parametrize(
    ("route", "body", "name", "field"),
    [
        ("/v1/retrieve", b'{"query": "roman \\ud800 roads"}', "InvalidQueryError", None),
        ("/v1/stream", b'{"query": "\\udfff"}', "InvalidQueryError", None),
        ("/v1/evaluate", b'{"query": "roads", "chunks": [{"id": "\\ud800", "text": "x"}]}',
         "InvalidChunkError", "id"),
        ("/v1/evaluate", b'{"query": "roads", "chunks": [{"id": "a", "text": "x \\udc00"}]}',
         "InvalidChunkError", "text"),
        ("/v1/retrieve", b'{"query": "roads", "options": {"\\ud800": 1}}', "InputError", None),
        ("/v2/retrieve", b'{"query": "roman \\ud800 roads"}', "InvalidQueryError", None),
        ("/v2/stream", b'{"query": "\\udfff"}', "InvalidQueryError", None),
        ("/v2/evaluate", b'{"query": "roads", "chunks": [{"id": "\\ud800", "text": "x"}]}',
         "InvalidChunkError", "id"),
        ("/v2/retrieve", b'{"query": "roads", "view": "\\ud800"}', "InputError", None),
    ],
)  # fmt: skip
def test_a_lone_surrogate_is_a_typed_400(
    url: str, route: str, body: bytes, name: str, field: str | None
) -> None:
    answer = httpx.post(f"{url}{route}", content=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["error"] == name and "surrogate" in error["message"]
    if field is not None:
        assert error["attributes"]["field"] == field and error["attributes"]["index"] == 0
    pair = json.dumps({"query": "roman roads \U0001f6e3"}).encode()  # a pair: fine
    assert httpx.post(f"{url}/v1/retrieve", content=pair).status_code == 200


# -- keys, loopback, health ----------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["clé-secrète-du-service", "a key with spaces in it", "k" * 19 + "\u00e9"]
)
def test_keys_a_header_cannot_carry_are_refused_at_load(key: str) -> None:
    with pytest.raises(ConfigError, match="visible ASCII") as raised:
        ServeSettings(api_keys=(KEY, key))
    assert key not in str(raised.value) and "key 2" in str(raised.value)
    assert ServeSettings(api_keys=("!" + "~" * 15,)).api_keys  # the whole visible range


def test_ipv4_mapped_loopback_is_loopback(crag: CRAG) -> None:
    from crag_heuristic._serve.app import is_loopback

    assert is_loopback("::ffff:127.0.0.1") and is_loopback("::ffff:127.8.9.10")
    assert not is_loopback("::ffff:192.0.2.7") and not is_loopback("::ffff:10.0.0.1")

    async def from_host(host: str) -> int:
        transport = httpx.ASGITransport(app=create_app(crag), client=(host, 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gate") as client:
            answer = await client.post("/v1/retrieve", json={"query": "roads", "k": 1})
            return answer.status_code

    assert asyncio.run(from_host("::ffff:127.0.0.1")) == 200
    assert asyncio.run(from_host("::ffff:192.0.2.7")) == 403


def test_healthz_is_minimal_unless_authenticated(crag: CRAG) -> None:
    info = {"documents": 3, "index_created": "2026-01-01"}
    with serving(create_app(crag, ServeSettings(api_keys=(KEY,)), info=info)) as base:
        anonymous = httpx.get(f"{base}/healthz")
        assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}
        wrong = httpx.get(f"{base}/healthz", headers={"X-API-Key": KEY + "x"})
        assert wrong.json() == {"status": "ok"}
        full = httpx.get(f"{base}/healthz", headers={"X-API-Key": KEY}).json()
        assert full["documents"] == 3 and "version" in full and full["in_flight"] == 0

    async def remote() -> dict[str, Any]:  # no key configured: loopback clients see all
        transport = httpx.ASGITransport(app=create_app(crag, info=info), client=("192.0.2.7", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://gate") as client:
            answer: dict[str, Any] = (await client.get("/healthz")).json()
            return answer

    assert asyncio.run(remote()) == {"status": "ok"}
    with serving(create_app(crag, info=info)) as base:
        assert httpx.get(f"{base}/healthz").json()["documents"] == 3


# -- streams -------------------------------------------------------------------------------


class SlowStages:
    """A retriever that answers after ``delay`` seconds (so a stream can be left)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def asearch(self, query: str, k: int) -> list[Chunk]:
        await asyncio.sleep(self.delay)
        return CHUNKS[:k]


def test_an_abandoned_stream_is_logged_as_aborted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="crag_heuristic")
    slow = CRAG(SlowStages(0.5), Evaluator(), cache=False)
    with serving(create_app(slow, ServeSettings(request_timeout=30))) as base:
        with httpx.stream("POST", f"{base}/v1/stream", json={"query": "roads"}) as response:
            assert response.status_code == 200  # headers sent; leave before any stage
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _access(caplog, "/v1/stream"):
            time.sleep(0.05)
        finished = httpx.post(f"{base}/v1/stream", json={"query": "roads"})
        assert finished.text.count("event: done") == 1
    events = _access(caplog, "/v1/stream")
    assert [(e.status, e.error) for e in events] == [(200, "StreamAborted"), (200, None)]


def _access(caplog: pytest.LogCaptureFixture, route: str) -> list[Any]:
    return [r for r in caplog.records if r.getMessage() == "crag.http" and r.route == route]  # type: ignore[attr-defined]
