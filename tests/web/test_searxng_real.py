"""SearxngClient against a real SearXNG fed by the loopback fixture engine.

The servers are session-scoped (conftest.py); each test programs its own
queries on the fixture engine. ``slow`` marks the tests that wait on a timeout.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qsl

import httpx
import pytest
from crag_testkit import FixtureEngine, FixtureReply, SearxngServer, fixture_item

from crag_heuristic import (
    CircuitOpenError,
    ScoreKind,
    WebSearchFormatDisabled,
    WebSearchResponseError,
    WebSearchTimeout,
)
from crag_heuristic._exceptions import WebSearchEnginesFailed
from crag_heuristic.web import CircuitBreaker, CircuitState, SearxngClient, WebResults

CLIENT_TIMEOUT = 10.0  # well above the servers' engine timeout (conftest.py)

SOLAR = [
    fixture_item(
        "https://energy.example.org/solar?utm_source=newsletter",
        "How <b>solar panels</b> work",
        "Photovoltaic cells turn sunlight into electricity &amp; heat.",
    ),
    fixture_item("https://www.energy.example.org/solar/", "Solar, again", "The same page."),
    fixture_item("https://wiki.example.org/Wind_power", "Wind power", "Turbines convert wind."),
]


def test_results_come_back_as_web_chunks(
    client: SearxngClient, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.program("solar panels", FixtureReply(items=SOLAR))
    chunks = client.search("solar panels")
    assert [c.source for c in chunks] == [
        "https://energy.example.org/solar?utm_source=newsletter",
        "https://wiki.example.org/Wind_power",
    ]
    first = chunks[0]
    assert first.score_kind is ScoreKind.WEB
    assert first.text == (
        "How solar panels work\nPhotovoltaic cells turn sunlight into electricity & heat."
    )
    assert first.id.startswith("web:")
    assert first.score is not None and first.score > 0
    assert first.metadata["engine"] == "fixture"
    assert first.metadata["engines"] == ["fixture"]
    assert first.metadata["published_date"] is None
    assert first.metadata["query"] == "solar panels"
    assert [c.metadata["position"] for c in chunks] == [1, 2]
    assert isinstance(chunks, WebResults)
    assert chunks.info.received == 3
    assert chunks.info.duplicates == 1  # www. + trailing slash + tracking parameter
    assert chunks.info.unresponsive_engines == ()
    assert ("fixture", "solar panels") in fixture_engine.requests


def test_chunk_ids_are_stable_across_calls(
    client: SearxngClient, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.program("stable ids", FixtureReply(items=SOLAR))
    assert [c.id for c in client.search("stable ids")] == [
        c.id for c in client.search("stable ids")
    ]


def test_max_results_caps_a_real_answer(
    client: SearxngClient, fixture_engine: FixtureEngine
) -> None:
    items = [fixture_item(f"https://site{i}.example.org/", f"Page {i}", "text") for i in range(8)]
    fixture_engine.program("many pages", FixtureReply(items=items))
    assert len(client.search("many pages", max_results=3)) == 3


def test_empty_results_are_an_empty_list(
    client: SearxngClient, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.program("nothing at all", FixtureReply(items=[]))
    chunks = client.search("nothing at all")
    assert chunks == []
    assert isinstance(chunks, WebResults) and chunks.info.status_code == 200


@pytest.mark.parametrize(
    "reply",
    [FixtureReply(status=500), FixtureReply(body=b"this is not json {")],
    ids=["http-500", "garbage"],
)
def test_failing_engine_raises_engines_failed(
    client: SearxngClient, fixture_engine: FixtureEngine, reply: FixtureReply
) -> None:
    fixture_engine.program("broken engine", reply)
    with pytest.raises(WebSearchEnginesFailed) as info:
        client.search("broken engine")
    assert info.value.engines == ("fixture",)
    assert info.value.reasons[0]  # the instance's (translated) message


def test_one_engine_failing_gives_a_partial_answer(
    searxng_two_engines: SearxngServer, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.program("half broken", FixtureReply(items=SOLAR[2:]), engine="fixture")
    fixture_engine.program("half broken", FixtureReply(status=500), engine="backup")
    with SearxngClient(searxng_two_engines.url, timeout=CLIENT_TIMEOUT) as web:
        chunks = web.search("half broken")
    assert [c.source for c in chunks] == ["https://wiki.example.org/Wind_power"]
    assert isinstance(chunks, WebResults)
    assert chunks.info.partial
    assert [name for name, _ in chunks.info.unresponsive_engines] == ["backup"]


def test_engines_option_selects_engines(
    searxng_two_engines: SearxngServer, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.program("only backup", FixtureReply(items=SOLAR[2:]))
    with SearxngClient(searxng_two_engines.url, timeout=CLIENT_TIMEOUT, engines=["backup"]) as web:
        (chunk,) = web.search("only backup")
    assert chunk.metadata["engines"] == ["backup"]
    assert fixture_engine.requests == [("backup", "only backup")]


def test_json_disabled_says_how_to_enable_it(
    searxng_html_only: SearxngServer, fixture_engine: FixtureEngine
) -> None:
    with (
        SearxngClient(searxng_html_only.url, timeout=CLIENT_TIMEOUT) as web,
        pytest.raises(WebSearchFormatDisabled) as info,
    ):
        web.search("solar panels")
    assert info.value.status_code == 403
    assert "search: formats: [html, json]" in str(info.value)
    assert fixture_engine.requests == []  # refused before any engine ran


def test_the_html_page_is_not_taken_for_results(searxng: SearxngServer) -> None:
    # Without format=json (stripped on the way, as a meddling proxy might) the real
    # server answers 200 with its HTML page: an error, never an empty list.
    with (
        httpx.Client(transport=_StripFormat()) as raw,
        SearxngClient(searxng.url, client=raw, timeout=CLIENT_TIMEOUT) as web,
        pytest.raises(WebSearchResponseError, match="HTML"),
    ):
        web.search("solar panels")


class _StripFormat(httpx.HTTPTransport):
    """Sends the request to the real server without ``format=json`` (in its body)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        form = [(k, v) for k, v in parse_qsl(request.read().decode()) if k != "format"]
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        stripped = httpx.Request(request.method, request.url, headers=headers, data=dict(form))
        return super().handle_request(stripped)


@pytest.mark.slow
def test_a_server_slower_than_the_client_times_out(
    searxng: SearxngServer, fixture_engine: FixtureEngine
) -> None:
    # The engine takes 1.5 s, within the server's engine timeout (2 s), but the
    # client gives up after 0.5 s.
    fixture_engine.program("slow answer", FixtureReply(items=SOLAR, delay=1.5))
    started = time.monotonic()
    with (
        SearxngClient(searxng.url, timeout=0.5, max_retries=2) as web,
        pytest.raises(WebSearchTimeout),
    ):
        web.search("slow answer")
    assert time.monotonic() - started < 30  # bounded: timeouts are not retried


@pytest.mark.slow
def test_an_engine_slower_than_its_timeout_is_unresponsive(
    searxng: SearxngServer, client: SearxngClient, fixture_engine: FixtureEngine
) -> None:
    # The server waits its engine timeout, then answers 200 with the engine unresponsive.
    delay = searxng.engine_timeout + 3
    fixture_engine.program("too slow engine", FixtureReply(items=SOLAR, delay=delay))
    with pytest.raises(WebSearchEnginesFailed) as info:
        client.search("too slow engine")
    assert info.value.engines == ("fixture",)


async def test_async_and_sync_give_the_same_chunks(
    client: SearxngClient, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.program("same either way", FixtureReply(items=SOLAR))
    synced = await asyncio.to_thread(client.search, "same either way")
    awaited = await client.asearch("same either way")
    async with httpx.AsyncClient() as pooled:
        injected = SearxngClient(client.url.removesuffix("/search"), async_client=pooled)
        awaited_pooled = await injected.asearch("same either way")
    assert len(synced) == 2
    assert awaited == synced
    assert awaited_pooled == synced


async def test_concurrent_async_searches(
    client: SearxngClient, fixture_engine: FixtureEngine
) -> None:
    for i in range(4):
        fixture_engine.program(f"parallel {i}", FixtureReply(items=SOLAR[i % 3 : i % 3 + 1]))
    answers = await asyncio.gather(*(client.asearch(f"parallel {i}") for i in range(4)))
    assert [a[0].source for a in answers] == [SOLAR[i % 3]["link"] for i in range(4)]


def test_breaker_opens_on_a_failing_engine_and_spares_the_server(
    searxng: SearxngServer, fixture_engine: FixtureEngine
) -> None:
    fixture_engine.program("always failing", FixtureReply(status=500))
    breaker = CircuitBreaker(failure_threshold=2, cooldown=600.0)
    with SearxngClient(searxng.url, timeout=CLIENT_TIMEOUT, breaker=breaker) as web:
        for _ in range(2):
            with pytest.raises(WebSearchEnginesFailed):
                web.search("always failing")
        assert breaker.state is CircuitState.OPEN
        seen = len(fixture_engine.requests)
        with pytest.raises(CircuitOpenError):
            web.search("always failing")
    assert len(fixture_engine.requests) == seen


def test_server_lifecycle_leaves_nothing_behind(
    searxng_python: Path, fixture_engine: FixtureEngine
) -> None:
    server = SearxngServer(searxng_python, fixture_engine.url, engine_timeout=1.0)
    with server:
        process = server._process
        assert process is not None and server.running
        folder = server._folder
        assert folder is not None and (folder / "settings.yml").is_file()
        with urllib.request.urlopen(server.url + "/healthz", timeout=5) as answer:
            assert answer.status == 200
    assert process.poll() is not None
    assert not folder.exists()
    assert not server.running
