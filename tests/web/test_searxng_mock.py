"""SearxngClient against httpx.MockTransport: the answers a real server rarely gives.

Each scenario runs sync and async (``mode``). The real server is exercised in
test_searxng_real.py; these add retries, odd bodies and transport failures.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest

from crag_heuristic import (
    Chunk,
    CircuitOpenError,
    ConfigError,
    InputError,
    InvalidQueryError,
    ScoreKind,
    WebSearchError,
    WebSearchFormatDisabled,
    WebSearchHTTPError,
    WebSearchRateLimited,
    WebSearchResponseError,
    WebSearchTimeout,
)
from crag_heuristic._exceptions import WebSearchConnectionError, WebSearchEnginesFailed
from crag_heuristic._protocols import AsyncWebSearcher, WebSearcher
from crag_heuristic.web import CircuitBreaker, CircuitState, SearxngClient, WebResults

BASE = "http://searx.test"
Step = httpx.Response | Exception | Callable[[httpx.Request], Any]


class Script:
    """Serves its steps in order (the last one repeats) and records requests."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> Any:
        self.requests.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):  # a fresh copy: a response is read once
            return httpx.Response(step.status_code, headers=step.headers, content=step.content)
        return step(request)


def answer(results: list[Any] | None = None, **extra: Any) -> httpx.Response:
    payload = {
        "query": "q",
        "results": results if results is not None else [],
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }
    payload.update(extra)
    return httpx.Response(200, json=payload)


def result(
    url: str, title: str = "Title", content: str = "Some content", **extra: Any
) -> dict[str, Any]:
    return {
        "url": url,
        "title": title,
        "content": content,
        "engine": "wiki",
        "engines": ["wiki"],
        "score": 1.5,
        "category": "general",
        **extra,
    }


class Harness:
    def __init__(self, script: Script, mode: str, **options: Any) -> None:
        self.script = script
        self.mode = mode
        self.sleeps: list[float] = []
        transport = httpx.MockTransport(script)

        async def async_sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        self.web = SearxngClient(
            BASE,
            client=httpx.Client(transport=transport),
            async_client=httpx.AsyncClient(transport=transport),
            sleep=self.sleeps.append,
            async_sleep=async_sleep,
            rng=random.Random(7),
            **options,
        )

    def search(self, query: str = "solar power", max_results: int = 5) -> list[Chunk]:
        if self.mode == "sync":
            return self.web.search(query, max_results)
        return asyncio.run(self.web.asearch(query, max_results))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def harness(mode: str, *steps: Step, **options: Any) -> Harness:
    return Harness(Script(*steps), mode, **options)


# -- answers with results -------------------------------------------------------------------


def test_results_become_web_chunks(mode: str) -> None:
    h = harness(
        mode,
        answer(
            [
                result(
                    "https://a.org/x",
                    "Solar <b>power</b>",
                    "Panels &amp; sun",
                    publishedDate="2024-05-01T00:00:00",
                ),
                result("https://b.org/y", "Wind", "Turbines", score=0.5, engines=["wiki", "ddg"]),
            ]
        ),
    )
    chunks = h.search("solar power")
    assert isinstance(chunks, WebResults)
    assert [c.source for c in chunks] == ["https://a.org/x", "https://b.org/y"]
    first = chunks[0]
    assert first.text == "Solar power\nPanels & sun"
    assert first.score == 1.5
    assert first.score_kind is ScoreKind.WEB
    assert first.id.startswith("web:") and len(first.id) == 20
    assert dict(first.metadata) == {
        "engine": "wiki",
        "engines": ["wiki"],
        "published_date": "2024-05-01T00:00:00",
        "position": 1,
        "title": "Solar power",
        "category": "general",
        "query": "solar power",
    }
    assert chunks[1].metadata["position"] == 2
    assert chunks[1].metadata["engines"] == ["wiki", "ddg"]
    info = chunks.info
    assert (info.status_code, info.received, info.returned, info.retries) == (200, 2, 2, 0)
    assert not info.partial


def test_implements_the_web_searcher_protocols() -> None:
    web = SearxngClient(BASE)
    assert isinstance(web, WebSearcher)
    assert isinstance(web, AsyncWebSearcher)


def test_request_shape(mode: str) -> None:
    h = harness(mode, answer(), categories=["general"], engines="wiki,ddg", language="en")
    h.search("  solar power ")
    request = h.script.requests[0]
    assert request.method == "POST"  # the query in the body: httpx logs the URL
    assert request.url.path == "/search" and not request.url.query
    assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert dict(parse_qsl(request.content.decode())) == {
        "q": "solar power",
        "format": "json",
        "categories": "general",
        "engines": "wiki,ddg",
        "language": "en",
    }
    assert "text/html" in request.headers["Accept"]
    assert "application/json" in request.headers["Accept"]
    assert request.headers["Accept-Language"]
    assert not request.headers["User-Agent"].startswith("python-httpx")


@pytest.mark.parametrize(
    ("base_url", "endpoint"),
    [
        ("http://searx.test", "http://searx.test/search"),
        ("http://searx.test/", "http://searx.test/search"),
        ("https://example.org/searx/", "https://example.org/searx/search"),
        ("https://example.org/search", "https://example.org/search"),
    ],
)
def test_endpoint(base_url: str, endpoint: str) -> None:
    assert SearxngClient(base_url).url == endpoint


@pytest.mark.parametrize(
    "base_url", ["searx.test", "ftp://searx.test", "", "http://", 5, "http://a.org/?q=1"]
)
def test_bad_base_url(base_url: Any) -> None:
    with pytest.raises(ConfigError) as info:
        SearxngClient(base_url)
    assert info.value.field == "base_url"


def test_options_override_the_config() -> None:
    from crag_heuristic.web import SearxngConfig

    web = SearxngClient(BASE, config=SearxngConfig(timeout=4.0, language="de"), max_retries=0)
    assert (web.config.timeout, web.config.language, web.config.max_retries) == (4.0, "de", 0)
    with pytest.raises(ConfigError) as info:
        SearxngClient(BASE, timeout=-1)
    assert info.value.field == "timeout"


def test_empty_answer_is_an_empty_list(mode: str) -> None:
    h = harness(mode, answer([]))
    chunks = h.search()
    assert chunks == []
    assert isinstance(chunks, WebResults) and chunks.info.received == 0


def test_partial_answer_returns_results_and_records_failed_engines(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness(
        mode,
        answer(
            [result("https://a.org/")],
            unresponsive_engines=[["ddg", "timeout"], ["brave", "HTTP error"]],
        ),
    )
    with caplog.at_level(logging.INFO, logger="crag_heuristic"):
        chunks = h.search()
    assert [c.source for c in chunks] == ["https://a.org/"]
    assert isinstance(chunks, WebResults)
    assert chunks.info.partial
    assert chunks.info.unresponsive_engines == (("ddg", "timeout"), ("brave", "HTTP error"))
    (event,) = web_events(caplog)
    assert event.unresponsive == ["ddg", "brave"]


def test_no_results_and_failed_engines_is_an_error(mode: str) -> None:
    h = harness(
        mode, answer([], unresponsive_engines=[["ddg", "timeout"], ["brave", "HTTP error"]])
    )
    with pytest.raises(WebSearchEnginesFailed) as info:
        h.search("solar")
    assert info.value.engines == ("ddg", "brave")
    assert info.value.reasons == ("timeout", "HTTP error")
    assert info.value.query == "solar"
    assert info.value.url == BASE + "/search"


def test_odd_unresponsive_shapes_are_tolerated(mode: str) -> None:
    h = harness(mode, answer([], unresponsive_engines=["ddg", ["brave"], [3, "x"], None]))
    with pytest.raises(WebSearchEnginesFailed) as info:
        h.search()
    assert info.value.engines == ("ddg", "brave")


def test_missing_and_odd_fields(mode: str) -> None:
    h = harness(
        mode,
        answer(
            [
                {"url": "https://a.org/1", "title": "Only title"},
                {
                    "url": "https://a.org/2",
                    "content": "only content",
                    "publishedDate": None,
                    "score": None,
                },
                {
                    "url": "https://a.org/3",
                    "title": "T",
                    "publishedDate": "last tuesday",
                    "score": "high",
                    "engines": "wiki",
                },
                {"url": "https://a.org/4", "title": 42, "content": ["x"], "publishedDate": "  "},
            ],
            number_of_results=1234,
        ),
    )
    chunks = h.search()
    assert [c.text for c in chunks] == ["Only title", "only content", "T"]
    assert [c.score for c in chunks] == [None, None, None]
    assert [c.metadata["published_date"] for c in chunks] == [None, None, "last tuesday"]
    assert [c.metadata["engine"] for c in chunks] == [None, None, None]
    assert chunks[2].metadata["engines"] == []
    assert isinstance(chunks, WebResults)
    assert chunks.info.skipped == 1  # no text at all
    assert chunks.info.number_of_results == 1234


def test_number_of_results_gone_is_none(mode: str) -> None:
    chunks = harness(mode, answer([result("https://a.org/")])).search()
    assert isinstance(chunks, WebResults)
    assert chunks.info.number_of_results is None


def test_nan_and_infinite_scores_become_none(mode: str) -> None:
    body = b'{"results": [{"url": "https://a.org/", "title": "A", "score": NaN}, {"url": "https://b.org/", "title": "B", "score": Infinity}]}'
    chunks = harness(mode, httpx.Response(200, content=body)).search()
    assert [c.score for c in chunks] == [None, None]


def test_duplicate_urls_keep_the_first_spelling(mode: str) -> None:
    h = harness(
        mode,
        answer(
            [
                result("https://www.a.org/page/?utm_source=feed", "First"),
                result("http://a.org/page", "Second"),
                result("https://a.org/page#comments", "Third"),
                result("https://a.org/page?fbclid=abc&gclid=def", "Fourth"),
                result("https://a.org/other", "Other"),
            ]
        ),
    )
    chunks = h.search()
    assert [c.metadata["title"] for c in chunks] == ["First", "Other"]
    assert chunks[0].source == "https://www.a.org/page/?utm_source=feed"
    assert [c.metadata["position"] for c in chunks] == [1, 2]
    assert isinstance(chunks, WebResults)
    assert chunks.info.duplicates == 3
    assert len({c.id for c in chunks}) == 2


def test_unusable_results_are_skipped(mode: str) -> None:
    h = harness(
        mode,
        answer(
            [
                "not an object",
                {"title": "no url"},
                {"url": "/relative", "title": "relative"},
                {"url": "", "title": "empty"},
                {"url": "https://a.org/", "title": "<b></b>", "content": "  "},
                result("https://ok.org/"),
            ]
        ),
    )
    chunks = h.search()
    assert [c.source for c in chunks] == ["https://ok.org/"]
    assert isinstance(chunks, WebResults)
    assert chunks.info.skipped == 5


def test_only_http_and_https_results_become_chunks(mode: str) -> None:
    """A result whose URL is file://, ftp://, javascript: ... is dropped and counted:
    a web chunk's source is a page a reader can open."""
    h = harness(
        mode,
        answer(
            [
                result("file:///etc/passwd"),
                result("ftp://files.example.org/a.txt"),
                result("javascript:alert(1)"),
                result("data:text/html,<b>x</b>"),
                result("HTTPS://Upper.example.org/page"),
                result("http://plain.example.org/"),
                {"url": "/relative", "title": "relative"},
            ]
        ),
    )
    chunks = h.search(max_results=10)
    assert isinstance(chunks, WebResults)
    assert [c.source for c in chunks] == [
        "HTTPS://Upper.example.org/page",
        "http://plain.example.org/",
    ]
    assert chunks.info.non_http == 4
    assert chunks.info.skipped == 1
    assert chunks.info.to_dict()["non_http"] == 4


def test_max_results(mode: str) -> None:
    h = harness(mode, answer([result(f"https://a.org/{i}") for i in range(10)]))
    chunks = h.search(max_results=3)
    assert [c.source for c in chunks] == ["https://a.org/0", "https://a.org/1", "https://a.org/2"]


def test_long_html_content_is_cleaned_and_capped(mode: str) -> None:
    content = "<div><p>" + "word &amp; <i>more</i> " * 5000 + "</p></div>"
    h = harness(
        mode, answer([result("https://a.org/", "A " * 400, content)]), max_content_chars=100
    )
    (chunk,) = h.search()
    title, body = chunk.text.split("\n")
    assert len(body) <= 100 and body.endswith("…")
    assert body.startswith("word & more word & more")
    assert "<" not in body and "&amp;" not in body
    assert len(title) <= 300


# -- retries --------------------------------------------------------------------------------


def test_429_is_retried_with_bounded_jittered_backoff_then_rate_limited(mode: str) -> None:
    h = harness(
        mode,
        httpx.Response(
            429, text="<html>Too Many Requests</html>", headers={"Content-Type": "text/html"}
        ),
        max_retries=2,
        backoff=0.5,
        jitter=0.5,
    )
    with pytest.raises(WebSearchRateLimited) as info:
        h.search()
    assert info.value.status_code == 429
    assert len(h.script.requests) == 3
    assert len(h.sleeps) == 2
    assert 0.25 <= h.sleeps[0] <= 0.5
    assert 0.5 <= h.sleeps[1] <= 1.0


def test_jitter_spreads_delays_within_bounds() -> None:
    delays = []
    for seed in range(40):
        h = Harness(Script(httpx.Response(429)), "sync", max_retries=1, backoff=1.0, jitter=0.5)
        h.web._rng = random.Random(seed)
        with pytest.raises(WebSearchRateLimited):
            h.search()
        delays.extend(h.sleeps)
    assert all(0.5 <= d <= 1.0 for d in delays)
    assert len({round(d, 6) for d in delays}) > 30  # not a constant


def test_429_then_success(mode: str) -> None:
    h = harness(mode, httpx.Response(429), answer([result("https://a.org/")]))
    chunks = h.search()
    assert len(chunks) == 1
    assert isinstance(chunks, WebResults) and chunks.info.retries == 1


def test_retry_after_header_is_honoured_up_to_the_cap(mode: str) -> None:
    h = harness(
        mode,
        httpx.Response(429, headers={"Retry-After": "3"}),
        httpx.Response(429, headers={"Retry-After": "600"}),
        answer(),
        backoff_max=5.0,
    )
    h.search()
    assert h.sleeps[0] == 3.0
    assert h.sleeps[1] == 5.0


def test_no_retries_when_max_retries_is_zero(mode: str) -> None:
    h = harness(mode, httpx.Response(503), max_retries=0)
    with pytest.raises(WebSearchHTTPError):
        h.search()
    assert len(h.script.requests) == 1 and h.sleeps == []


def test_5xx_is_retried_then_http_error(mode: str) -> None:
    h = harness(mode, httpx.Response(500, json={"error": "search error"}), max_retries=2)
    with pytest.raises(WebSearchHTTPError) as info:
        h.search()
    assert type(info.value) is WebSearchHTTPError
    assert info.value.status_code == 500
    assert "500 with an error message" in str(info.value)
    assert "search error" not in str(info.value)  # server text: it may echo the query
    assert info.value.detail == "search error"
    assert len(h.script.requests) == 3


def test_5xx_then_success(mode: str) -> None:
    h = harness(mode, httpx.Response(502), httpx.Response(503), answer([result("https://a.org/")]))
    chunks = h.search()
    assert len(chunks) == 1 and len(h.script.requests) == 3


# -- client errors and odd bodies (never retried) -------------------------------------------


def test_400_carries_the_instance_message_as_its_detail(mode: str) -> None:
    h = harness(mode, httpx.Response(400, json={"error": "No query solar power"}))
    with pytest.raises(WebSearchHTTPError) as info:
        h.search("solar power")
    assert info.value.status_code == 400
    assert info.value.detail == "No query solar power"
    assert "solar" not in str(info.value) and "HTTP 400" in str(info.value)
    assert len(h.script.requests) == 1


def test_403_says_how_to_enable_json(mode: str) -> None:
    h = harness(
        mode,
        httpx.Response(403, text="<html>Forbidden</html>", headers={"Content-Type": "text/html"}),
    )
    with pytest.raises(WebSearchFormatDisabled) as info:
        h.search()
    assert info.value.status_code == 403
    assert "formats: [html, json]" in str(info.value)
    assert "settings.yml" in str(info.value)
    assert len(h.script.requests) == 1


def test_redirect_is_not_followed(mode: str) -> None:
    h = harness(mode, httpx.Response(302, headers={"Location": "/"}))
    with pytest.raises(WebSearchHTTPError) as info:
        h.search()
    assert info.value.status_code == 302
    assert "redirect" in str(info.value) and "the same host" in str(info.value)


def test_a_redirect_target_shows_its_host_only(mode: str) -> None:
    target = "https://other.test/search?q=solar+power&token=t"
    h = harness(mode, httpx.Response(301, headers={"Location": target}))
    with pytest.raises(WebSearchHTTPError) as info:
        h.search("solar power")
    assert "to other.test;" in str(info.value) and "solar" not in str(info.value)
    assert info.value.detail == target


def test_404_hints_at_the_base_url(mode: str) -> None:
    with pytest.raises(WebSearchHTTPError) as info:
        harness(mode, httpx.Response(404)).search()
    assert info.value.status_code == 404
    assert "base_url" in str(info.value)


@pytest.mark.parametrize(
    ("response", "words"),
    [
        (
            httpx.Response(
                200,
                text="<!DOCTYPE html><html><body>results</body></html>",
                headers={"Content-Type": "text/html"},
            ),
            "HTML",
        ),
        (httpx.Response(200, text="  <html>no content type</html>"), "HTML"),
        (httpx.Response(200, text="plain words"), "of 11 bytes that is not JSON"),
        (httpx.Response(200, content=b""), "an empty body"),
        (httpx.Response(200, content=b"\xff\xfe\xfa garbage"), "that is not JSON"),
        (httpx.Response(200, content=b"[" * 100_000 + b"]" * 100_000), "that is not JSON"),
        (httpx.Response(200, json=[1, 2, 3]), "not an object"),
        (httpx.Response(200, json="a string"), "not an object"),
        (httpx.Response(200, json={"error": "nope"}), "'results'"),
        (httpx.Response(200, json={"results": {"url": "x"}}), "'results'"),
    ],
)
def test_unusable_200_bodies(mode: str, response: httpx.Response, words: str) -> None:
    h = harness(mode, response)
    with pytest.raises(WebSearchResponseError) as info:
        h.search()
    assert words in str(info.value)
    assert len(h.script.requests) == 1


# -- transport failures ---------------------------------------------------------------------


def test_connect_error_is_not_retried(mode: str) -> None:
    h = harness(mode, httpx.ConnectError("refused"))
    with pytest.raises(WebSearchConnectionError) as info:
        h.search()
    assert len(h.script.requests) == 1
    assert isinstance(info.value.__cause__, httpx.ConnectError)


@pytest.mark.parametrize(
    "exc", [httpx.ReadTimeout("slow"), httpx.ConnectTimeout("slow"), httpx.PoolTimeout("busy")]
)
def test_timeouts_are_not_retried(mode: str, exc: Exception) -> None:
    h = harness(mode, exc, timeout=1.5)
    with pytest.raises(WebSearchTimeout) as info:
        h.search()
    assert "1.5 s" in str(info.value)
    assert len(h.script.requests) == 1


def test_dropped_connections_are_retried(mode: str) -> None:
    h = harness(
        mode,
        httpx.RemoteProtocolError("peer closed"),
        httpx.ReadError("reset"),
        answer([result("https://a.org/")]),
    )
    assert len(h.search()) == 1
    assert len(h.script.requests) == 3

    h = harness(mode, httpx.RemoteProtocolError("peer closed"), max_retries=1)
    with pytest.raises(WebSearchConnectionError):
        h.search()
    assert len(h.script.requests) == 2


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.DecodingError("bad gzip"), WebSearchResponseError),
        (httpx.UnsupportedProtocol("gopher"), WebSearchConnectionError),
        (httpx.LocalProtocolError("bad header"), WebSearchConnectionError),
        (OSError("disk on fire"), WebSearchConnectionError),
    ],
)
def test_no_foreign_exception_escapes(
    mode: str, exc: Exception, kind: type[WebSearchError]
) -> None:
    with pytest.raises(kind) as info:
        harness(mode, exc, max_retries=0).search()
    assert not isinstance(info.value, httpx.HTTPError)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_real_connection_refused() -> None:
    with (
        SearxngClient(f"http://127.0.0.1:{closed_port()}", timeout=5) as web,
        pytest.raises(WebSearchConnectionError),
    ):
        web.search("solar")


async def test_real_connection_refused_async() -> None:
    web = SearxngClient(f"http://127.0.0.1:{closed_port()}", timeout=5)
    with pytest.raises(WebSearchConnectionError):
        await web.asearch("solar")


# -- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", None, 3])
def test_bad_query_is_rejected_before_the_network(mode: str, query: Any) -> None:
    h = harness(mode, answer())
    with pytest.raises(InvalidQueryError):
        h.search(query)
    assert h.script.requests == []


@pytest.mark.parametrize("max_results", [0, -1, 2.5, True])
def test_bad_max_results(mode: str, max_results: Any) -> None:
    with pytest.raises(InputError):
        harness(mode, answer()).search(max_results=max_results)


# -- circuit breaker ------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_and_then_calls_skip_the_network(mode: str) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=2, cooldown=30.0, clock=clock)
    h = harness(mode, httpx.Response(503), breaker=breaker, max_retries=1)
    for _ in range(2):
        with pytest.raises(WebSearchHTTPError):
            h.search()
    assert breaker.state is CircuitState.OPEN
    sent = len(h.script.requests)
    assert sent == 4  # 2 calls x (1 + 1 retry): one failure per call, not per attempt
    with pytest.raises(CircuitOpenError) as info:
        h.search("solar")
    assert info.value.retry_after == pytest.approx(30.0)
    assert info.value.query == "solar"
    assert len(h.script.requests) == sent

    clock.now = 30.0
    h.script.steps = [answer([result("https://a.org/")])]
    assert len(h.search()) == 1  # the trial call
    assert breaker.state is CircuitState.CLOSED


@pytest.mark.parametrize(
    "step",
    [
        httpx.ReadTimeout("slow"),
        httpx.ConnectError("refused"),
        httpx.Response(429),
        answer([], unresponsive_engines=[["ddg", "timeout"]]),
    ],
)
def test_what_counts_as_a_failure(mode: str, step: Step) -> None:
    breaker = CircuitBreaker(failure_threshold=1, clock=FakeClock())
    with pytest.raises(WebSearchError):
        harness(mode, step, breaker=breaker, max_retries=0).search()
    assert breaker.state is CircuitState.OPEN


@pytest.mark.parametrize(
    "step",
    [
        httpx.Response(403),
        httpx.Response(400, json={"error": "No query"}),
        httpx.Response(200, text="<html></html>"),
    ],
)
def test_misconfiguration_does_not_open_the_circuit(mode: str, step: Step) -> None:
    breaker = CircuitBreaker(failure_threshold=1, clock=FakeClock())
    h = harness(mode, step, breaker=breaker)
    for _ in range(3):
        with pytest.raises(WebSearchError) as info:
            h.search()
        assert not isinstance(info.value, CircuitOpenError)
    assert breaker.state is CircuitState.CLOSED


def test_a_403_closes_a_half_open_circuit(mode: str) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=10.0, clock=clock)
    h = harness(mode, httpx.ReadTimeout("slow"), httpx.Response(403), breaker=breaker)
    with pytest.raises(WebSearchTimeout):
        h.search()
    clock.now = 10.0
    with pytest.raises(WebSearchFormatDisabled):
        h.search()
    assert breaker.state is CircuitState.CLOSED


async def test_a_cancelled_trial_frees_the_slot() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(failure_threshold=1, cooldown=10.0, clock=clock)
    started = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.sleep(60)
        return answer()

    web = SearxngClient(
        BASE, async_client=httpx.AsyncClient(transport=httpx.MockTransport(hang)), breaker=breaker
    )
    breaker.record_failure(breaker.acquire())
    clock.now = 10.0
    task = asyncio.create_task(web.asearch("solar"))
    await started.wait()
    with pytest.raises(CircuitOpenError):  # the trial is out
        await web.asearch("solar")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert breaker.state is CircuitState.HALF_OPEN
    breaker.acquire()  # the slot is free again


# -- logging and lifetime -------------------------------------------------------------------


def web_events(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [r for r in caplog.records if r.getMessage() == "crag.searxng"]


def test_events_are_silent_by_default(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    h = harness(mode, httpx.Response(403))
    with (
        caplog.at_level(logging.WARNING, logger="crag_heuristic"),
        pytest.raises(WebSearchFormatDisabled),
    ):
        h.search()
    assert caplog.records == []


def test_one_event_per_call_with_its_fields(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    breaker = CircuitBreaker(clock=FakeClock())
    h = harness(mode, httpx.Response(429), answer([result("https://a.org/")]), breaker=breaker)
    with caplog.at_level(logging.DEBUG, logger="crag_heuristic"):
        h.search()
    (event,) = web_events(caplog)
    assert event.levelno == logging.INFO
    assert (event.status, event.results, event.retries, event.error, event.circuit) == (
        200,
        1,
        1,
        None,
        "closed",
    )
    assert event.duration_ms >= 0
    retries: list[Any] = [r for r in caplog.records if r.getMessage() == "crag.searxng.retry"]
    assert [(r.levelno, r.status, r.retry) for r in retries] == [(logging.DEBUG, 429, 1)]
    assert all("solar power" not in str(r.__dict__) for r in caplog.records)  # no query text


def test_failures_name_the_error_kind(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    h = harness(mode, httpx.Response(403))
    with (
        caplog.at_level(logging.INFO, logger="crag_heuristic"),
        pytest.raises(WebSearchFormatDisabled),
    ):
        h.search()
    (event,) = web_events(caplog)
    assert (event.status, event.error, event.results) == (403, "WebSearchFormatDisabled", 0)


def test_circuit_changes_are_logged(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    breaker = CircuitBreaker(failure_threshold=1, clock=FakeClock(), name="searxng")
    h = harness(mode, httpx.ConnectError("refused"), breaker=breaker)
    with caplog.at_level(logging.INFO, logger="crag_heuristic"):
        with pytest.raises(WebSearchConnectionError):
            h.search()
        with pytest.raises(CircuitOpenError):
            h.search()
    changes: list[Any] = [r for r in caplog.records if r.getMessage() == "crag.circuit"]
    (change,) = changes
    assert (change.circuit, change.previous, change.state) == ("searxng", "closed", "open")
    refused = web_events(caplog)[-1]
    assert (refused.error, refused.circuit) == ("CircuitOpenError", "open")


def test_close_closes_only_an_owned_client() -> None:
    script = Script(answer())
    injected = httpx.Client(transport=httpx.MockTransport(script))
    with SearxngClient(BASE, client=injected) as web:
        web.search("x")
    assert not injected.is_closed
    web.search("y")  # still the injected client after close()
    assert len(script.requests) == 2

    owned = SearxngClient(BASE)
    made = owned._sync_client()
    owned.close()
    assert made.is_closed
