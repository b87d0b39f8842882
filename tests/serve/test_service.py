"""The gate service over real sockets: uvicorn in a thread (``serving``), a real HTTP
client, the bundled sample's index directory; the command in a process of its own."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crag_heuristic import CRAG, Chunk, Evaluator, RetrieverError
from crag_heuristic._serve.answers import BOOKKEEPING
from crag_heuristic.index import IndexDirectory
from crag_heuristic.metrics import PrometheusMetrics
from crag_heuristic.serve import (
    VIEWS,
    ServeSettings,
    create_app,
    evaluation_answer,
    result_answer,
    serving,
)
from crag_heuristic.testing import ListRetriever

KEY = "k" * 20
MINE = (
    Chunk(id="mine-1", text="Honeybees dance to show the way to flowers.", score=0.8,
          score_kind="cosine"),
    Chunk(id="mine-2", text="Espresso is brewed under pressure.", score=0.3, score_kind="cosine"),
)  # fmt: skip


@pytest.fixture(scope="module")
def crag(built: IndexDirectory) -> CRAG:
    return CRAG.from_index_dir(built.path, cache=False, metrics=PrometheusMetrics())


@pytest.fixture(scope="module")
def url(crag: CRAG) -> Iterator[str]:
    with serving(create_app(crag, ServeSettings(max_k=20, max_query_chars=100))) as base:
        yield base


def _stable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("timings_ms", "cache_hit")}


def _error(response: httpx.Response, status: int, name: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["error"] == name and body["status"] == status, body
    assert body["request_id"] == response.headers["x-request-id"]
    return body


def test_retrieve_answers_what_the_library_answers(url: str, crag: CRAG) -> None:
    query = "How do honeybees communicate where flowers are?"
    response = httpx.post(f"{url}/v1/retrieve", json={"query": query, "k": 3})
    assert response.status_code == 200 and len(response.headers["x-request-id"]) == 32
    assert _stable(response.json()) == _stable(crag.retrieve(query, 3).to_dict())
    own = httpx.post(
        f"{url}/v1/retrieve", json={"query": query}, headers={"X-Request-ID": "trace-17_a"}
    )
    assert own.headers["x-request-id"] == "trace-17_a"
    assert len(own.json()["chunks"]) == crag.config.k  # the router's default k
    # options: router settings for this request alone
    off = httpx.post(
        f"{url}/v1/retrieve",
        json={"query": "Which chess openings suit beginners?", "options": {"max_retries": 0}},
    ).json()
    assert off["strategy"] == "none" and off["retries"] == 0
    assert crag.config.max_retries == 2


def test_evaluate_grades_the_callers_own_chunks(url: str, crag: CRAG) -> None:
    chunks = list(MINE)
    body = {"query": "bee dance", "chunks": [c.to_dict() for c in chunks]}
    answer = httpx.post(f"{url}/v1/evaluate", json=body)
    assert answer.status_code == 200
    expected = crag.evaluator.evaluate("bee dance", chunks, crag.corpus_stats())
    assert answer.json() == json.loads(json.dumps(expected.to_dict()))
    refined = httpx.post(
        f"{url}/v1/evaluate", json={**body, "options": {"refine": True, "token_budget": 20}}
    ).json()
    assert refined["refinement"]["chunks"] and refined["verdict"] == expected.verdict.value
    bad = httpx.post(f"{url}/v1/evaluate", json={"query": "x", "chunks": [{"id": "a"}]})
    attributes = _error(bad, 400, "InvalidChunkError")["attributes"]
    assert attributes == {"field": "text", "index": 0, "chunk_id": "a"}


def read_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    events, name = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: ") and name is not None:
            events.append((name, json.loads(line[len("data: ") :])))
            name = None
    return events


def test_stream_sends_the_stages_as_server_sent_events(url: str, crag: CRAG) -> None:
    query = "Which chess openings are best for beginners?"
    with httpx.stream("POST", f"{url}/v1/stream", json={"query": query, "k": 3}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    names = [name for name, _ in events]
    assert names[:2] == ["retrieved", "evaluated"] and names[-1] == "done"
    assert _stable(events[-1][1]["result"]) == _stable(crag.retrieve(query, 3).to_dict())
    blank = httpx.post(f"{url}/v1/stream", json={"query": " "})  # refused before streaming
    _error(blank, 400, "InvalidQueryError")


@pytest.mark.parametrize(
    ("body", "name", "says"),
    [
        (b"{not json", "InputError", "not JSON"),
        (b"[1, 2]", "InputError", "a JSON object"),
        (b"\xff\xfe", "InputError", "not UTF-8"),
        (b"[" * 70 + b"]" * 70, "InputError", "nests deeper"),
        (b'{"a":' * 65 + b"1" + b"}" * 65, "InputError", "nests deeper"),
        (b'{"a":' * 64 + b"1" + b"}" * 64, "InputError", "unknown key 'a'"),  # 64 levels: read
        (json.dumps({"query": "x", "extra": 1}).encode(), "InputError", "unknown key 'extra'"),
        (json.dumps({"k": 3}).encode(), "InputError", "needs a 'query'"),
        (json.dumps({"query": "  "}).encode(), "InvalidQueryError", "empty or whitespace"),
        (json.dumps({"query": 7}).encode(), "InvalidQueryError", "must be a string"),
        (json.dumps({"query": "x", "k": 0}).encode(), "InputError", "[1, 20]"),
        (json.dumps({"query": "x", "k": 21}).encode(), "InputError", "[1, 20]"),
        (json.dumps({"query": "x", "k": True}).encode(), "InputError", "[1, 20]"),
        (json.dumps({"query": "x" * 101}).encode(), "InputError", "100 at most"),
        (json.dumps({"query": "x", "options": {"web_ttl": 1}}).encode(), "InputError", "'web_ttl'"),
        (json.dumps({"query": "x", "options": {"gate_k": 21}}).encode(), "InputError", "gate_k"),
        (json.dumps({"query": "x", "options": {"max_retries": -1}}).encode(), "ConfigError", "max_retries"),
        (json.dumps({"query": "x", "options": []}).encode(), "InputError", "an object"),
    ],
)  # fmt: skip
def test_bad_bodies_are_typed_json_errors(url: str, body: bytes, name: str, says: str) -> None:
    response = httpx.post(f"{url}/v1/retrieve", content=body)
    assert says in _error(response, 400, name)["message"]


def test_the_limits_hold_at_their_bounds(url: str) -> None:
    assert httpx.post(f"{url}/v1/retrieve", json={"query": "x" * 100, "k": 20}).status_code == 200
    assert httpx.post(f"{url}/v1/retrieve", json={"query": "x" * 100, "k": 1}).status_code == 200
    limit = ServeSettings().max_body_bytes
    padding = {"query": "bees", "k": 1, "options": {}}
    body = json.dumps(padding).encode()
    fits = body[:-1] + b" " * (limit - len(body)) + b"}"
    assert len(fits) == limit and httpx.post(f"{url}/v1/retrieve", content=fits).status_code == 200
    over = fits[:-1] + b" }"
    error = _error(httpx.post(f"{url}/v1/retrieve", content=over), 413, "RequestTooLargeError")
    assert error["attributes"] == {"limit": limit}

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield over[: limit // 2]
        yield over[limit // 2 :]

    _error(httpx.post(f"{url}/v1/retrieve", content=chunked()), 413, "RequestTooLargeError")
    _error(httpx.get(f"{url}/v1/retrieve"), 405, "ServiceError")
    _error(httpx.post(f"{url}/v3/retrieve", json={}), 404, "ServiceError")


def test_the_service_errors_pickle_whole() -> None:
    import pickle

    from crag_heuristic.serve import (
        OverloadedError,
        RequestTimeoutError,
        RequestTooLargeError,
        ServiceError,
        UnauthorizedError,
    )

    for error in (
        ServiceError("no route", status=404),
        UnauthorizedError("no key", status=403),
        RequestTooLargeError("big", limit=1024),
        OverloadedError("busy", retry_after=2.0),
        RequestTimeoutError("late", timeout=0.5),
    ):
        again = pickle.loads(pickle.dumps(error))
        assert (type(again), str(again), vars(again)) == (type(error), str(error), vars(error))


def test_health_and_metrics(url: str) -> None:
    health = httpx.get(f"{url}/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    httpx.post(f"{url}/v1/retrieve", json={"query": "roman roads"})
    text = httpx.get(f"{url}/metrics").text
    assert 'crag_http_requests_total{error="",route="/v1/retrieve",status="200"}' in text
    assert "crag_decisions_total" in text and "crag_http_in_flight" in text  # the router's too


def test_metrics_without_their_extra_say_which_to_install(
    crag: CRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in sys.modules if n.split(".")[0] == "prometheus_client"]:
        monkeypatch.setitem(sys.modules, name, None)
    bare = CRAG(crag.retriever, crag.evaluator, cache=False)  # no PrometheusMetrics
    with serving(create_app(bare)) as base:
        missing = _error(httpx.get(f"{base}/metrics"), 501, "MissingDependencyError")
        assert "pip install 'crag-heuristic[metrics]'" in missing["message"]
        assert httpx.post(f"{base}/v1/retrieve", json={"query": "x"}).status_code == 200


def test_api_keys_are_checked_and_loopback_is_the_default(crag: CRAG) -> None:
    app = create_app(crag, ServeSettings(api_keys=(KEY, "another-key-of-20ch")))
    body = {"query": "roman roads", "k": 1}
    with serving(app) as base:
        _error(httpx.post(f"{base}/v1/retrieve", json=body), 401, "UnauthorizedError")
        wrong = httpx.post(f"{base}/v1/retrieve", json=body, headers={"X-API-Key": KEY + "x"})
        assert KEY not in _error(wrong, 401, "UnauthorizedError")["message"]
        for key in (KEY, "another-key-of-20ch"):
            ok = httpx.post(f"{base}/v1/retrieve", json=body, headers={"X-API-Key": key})
            assert ok.status_code == 200
        assert httpx.get(f"{base}/healthz").status_code == 200  # for load balancers
        _error(httpx.get(f"{base}/metrics"), 401, "UnauthorizedError")
    assert "k" * 20 not in repr(ServeSettings(api_keys=(KEY,)))

    async def from_elsewhere(app: Any) -> httpx.Response:  # a client of another host
        transport = httpx.ASGITransport(app=app, client=("192.0.2.7", 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://gate") as client:
            return await client.post("/v1/retrieve", json=body)

    _error(asyncio.run(from_elsewhere(create_app(crag))), 403, "UnauthorizedError")


class SlowRetriever:
    """A retriever that takes ``delay`` seconds (or raises, with ``fail``)."""

    def __init__(self, delay: float, fail: bool = False) -> None:
        self.delay, self.fail = delay, fail
        self.inner = ListRetriever([Chunk(id="a", text="Roman roads", score=0.9,
                                          score_kind="cosine")])  # fmt: skip

    def search(self, query: str, k: int) -> list[Chunk]:
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("index offline")
        return self.inner.search(query, k)


def test_slots_timeouts_and_a_failed_retrieval_are_typed(tmp_path: Path) -> None:
    slow = CRAG(SlowRetriever(0.6), Evaluator(), cache=False)
    one = ServeSettings(max_concurrency=1, max_queue=0, request_timeout=5)
    with serving(create_app(slow, one)) as base:
        answers: list[httpx.Response] = []
        threads = [
            threading.Thread(
                target=lambda: answers.append(
                    httpx.post(f"{base}/v1/retrieve", json={"query": "roads"}, timeout=10)
                )
            )
            for _ in range(2)
        ]
        for thread in threads:
            thread.start()
            time.sleep(0.2)
        for thread in threads:
            thread.join()
        assert sorted(a.status_code for a in answers) == [200, 503]
        refused = next(a for a in answers if a.status_code == 503)
        assert _error(refused, 503, "OverloadedError") and refused.headers["retry-after"] == "1"
    short = ServeSettings(request_timeout=0.2)
    with serving(create_app(slow, short)) as base:
        late = httpx.post(f"{base}/v1/retrieve", json={"query": "roads"})
        assert _error(late, 504, "RequestTimeoutError")["attributes"] == {"timeout": 0.2}
        with httpx.stream("POST", f"{base}/v1/stream", json={"query": "roads"}) as response:
            events = read_events(response)
        assert [name for name, _ in events] == ["error"]
        assert events[0][1]["error"] == "RequestTimeoutError"
    broken = CRAG(SlowRetriever(0.0, fail=True), Evaluator(), cache=False)
    with serving(create_app(broken)) as base:
        failed = httpx.post(f"{base}/v1/retrieve", json={"query": "roads"})
        assert "index offline" in _error(failed, 502, "RetrieverError")["message"]
        assert RetrieverError.__name__ == "RetrieverError"


def test_a_request_in_flight_finishes_when_the_server_stops() -> None:
    """Graceful shutdown: told to stop while a request is at work, the server stops
    taking connections and lets that request finish before it exits."""
    slow = CRAG(SlowRetriever(0.8), Evaluator(), cache=False)
    answers: list[httpx.Response] = []
    with serving(create_app(slow)) as base:
        thread = threading.Thread(
            target=lambda: answers.append(httpx.post(f"{base}/v1/retrieve", json={"query": "x"}))
        )
        thread.start()
        time.sleep(0.3)
    # the block's end stopped the server (and waited for it): the request was answered
    thread.join(timeout=10)
    assert [a.status_code for a in answers] == [200]
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{base}/v1/retrieve", json={"query": "x"})


def _access_events(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    """The ``crag.http`` events, once ``count`` of them came (each is logged after its
    answer is sent: off the request's path)."""
    deadline = time.monotonic() + 10
    while True:
        events = [r for r in caplog.records if r.getMessage() == "crag.http"]
        if len(events) >= count or time.monotonic() > deadline:
            return events
        time.sleep(0.01)


def test_access_events_never_hold_the_query(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="crag_heuristic")
    secret = "my very private question about zebras"
    httpx.post(f"{url}/v1/retrieve", json={"query": secret, "k": 2})
    httpx.post(f"{url}/v1/retrieve", json={"query": secret, "k": 99})
    events = _access_events(caplog, 2)
    assert [(e.status, e.error, e.route) for e in events] == [  # type: ignore[attr-defined]
        (200, None, "/v1/retrieve"), (400, "InputError", "/v1/retrieve"),
    ]  # fmt: skip
    assert all(secret not in str(vars(r)) for r in caplog.records)
    assert events[0].chunks == 2 and events[0].bytes_in > 0 < events[0].bytes_out  # type: ignore[attr-defined]


def test_the_command_serves_until_sigterm(built: IndexDirectory, tmp_path: Path) -> None:
    """``crag-heuristic serve`` in a process of its own: it says where it listens, answers,
    logs one event a request, and stops on SIGTERM (exit 0) once its request is done."""
    keys = tmp_path / "keys"
    keys.write_text(f"# the service's keys\n{KEY}\n")
    env = {**os.environ, "CRAG_HEURISTIC_API_KEYS": "second-key-of-20-chars"}
    command = [sys.executable, "-m", "crag_heuristic", "serve", "--index", str(built.path)]
    with subprocess.Popen(
        [*command, "--port", "0", "--api-key-file", str(keys), "--host", "127.0.0.1"],
        stderr=subprocess.PIPE, text=True, env=env,
    ) as process:  # fmt: skip
        logged = _serve_then_stop(process)
    assert logged.count(" crag.http ") == 2 and "roman" not in logged and "state=stopped" in logged
    refused = subprocess.run(
        [*command, "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True,
        timeout=60, env={k: v for k, v in os.environ.items() if k != "CRAG_HEURISTIC_API_KEYS"},
    )  # fmt: skip
    assert refused.returncode == 2 and "127.0.0.1 only" in refused.stderr


def _serve_then_stop(process: subprocess.Popen[str]) -> str:
    """Two keyed requests to the command's server, then SIGTERM; its stderr after."""
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # after the start-up event, where it listens
        while line and "documents on http" not in line:
            line = process.stderr.readline()
        assert "documents on http://127.0.0.1:" in line and "2 API key(s)" in line, line
        base = line.split(" on ")[1].split()[0]
        for key in (KEY, "second-key-of-20-chars"):
            answer = httpx.post(
                f"{base}/v1/retrieve", json={"query": "roman roads"}, headers={"X-API-Key": key}
            )
            assert answer.status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        return process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# -- v2: each chunk's text once; the JSON's bytes ------------------------------------------

PARTIAL = "How do honeybees communicate the distance to food?"  # corrected: fused with BM25


def _texts(data: Any) -> list[str]:
    """Every string of ``data`` longer than 60 characters (a chunk's text, say)."""
    if isinstance(data, dict):
        return [t for value in data.values() for t in _texts(value)]
    if isinstance(data, list):
        return [t for value in data for t in _texts(value)]
    return [data] if isinstance(data, str) and len(data) > 60 else []


@pytest.mark.parametrize("query", [PARTIAL, "Which chess openings suit beginners?"])
def test_a_v2_answer_carries_each_text_once(url: str, crag: CRAG, query: str) -> None:
    result = crag.retrieve(query, 5)
    answer = httpx.post(f"{url}/v2/retrieve", json={"query": query, "k": 5}).json()
    v1 = httpx.post(f"{url}/v1/retrieve", json={"query": query, "k": 5}).json()
    texts = [chunk.text for chunk in result.chunks]
    found = _texts(answer)
    assert sorted(t for t in found if t in texts) == sorted(texts)  # each final text, once
    assert all(found.count(text) == 1 for text in texts)
    assert sum(v1_text in texts for v1_text in _texts(v1)) > len(texts)  # v1 repeats them
    assert [c["id"] for c in answer["chunks"]] == [c.id for c in result.chunks]
    grades = {g.chunk_id: g for g in result.evaluation.chunks}
    for chunk, entry in zip(result.chunks, answer["chunks"], strict=True):
        whole = chunk.to_dict()  # v2: the fields set, the document's own metadata
        whole["metadata"] = {k: v for k, v in whole["metadata"].items() if k not in BOOKKEEPING}
        assert {k: v for k, v in entry.items() if k != "grade"} == {
            k: v for k, v in whole.items() if v not in (None, {})
        }
        grade = grades[chunk.id]
        assert entry["grade"] == {"score": grade.score, "verdict": grade.verdict.value}
    assert answer["retrieved"] == [chunk.id for chunk in result.retrieved]
    assert answer["evaluation"] == {
        "verdict": result.evaluation.verdict.value,
        "score": result.evaluation.score,
        "signals": result.evaluation.signals.as_dict(),
        "reasoning": result.evaluation.reasoning,
        "profile": result.evaluation.profile,
    }
    assert answer["initial_evaluation"] == {
        "verdict": result.initial_evaluation.verdict.value,
        "score": result.initial_evaluation.score,
    }
    same = ("verdict", "strategy", "corrected", "retries", "notes", "failures", "counts")
    assert {k: answer[k] for k in same} == {k: v1[k] for k in same}


def test_the_grades_view_holds_no_text(url: str, crag: CRAG) -> None:
    answer = httpx.post(
        f"{url}/v2/retrieve", json={"query": PARTIAL, "k": 5, "view": "grades"}
    ).json()
    result = crag.retrieve(PARTIAL, 5)
    assert _texts(answer) == [] and answer["evaluation"].keys() == {"verdict", "score"}
    assert [set(c) for c in answer["chunks"]] == [{"id", "score", "grade"}] * len(result.chunks)
    expected = json.loads(json.dumps(result_answer(result, "grades")))
    assert {k: v for k, v in answer.items() if k != "timings_ms"} == {
        k: v for k, v in expected.items() if k != "timings_ms"
    }
    assert set(VIEWS) == {"chunks", "grades"}


def test_v2_evaluate_and_stream(url: str, crag: CRAG) -> None:
    chunks = list(MINE)
    body = {"query": "bee dance", "chunks": [c.to_dict() for c in chunks]}
    answer = httpx.post(f"{url}/v2/evaluate", json=body).json()
    evaluation = crag.evaluator.evaluate("bee dance", chunks, crag.corpus_stats())
    assert answer == json.loads(json.dumps(evaluation_answer(evaluation)))
    assert [c["id"] for c in answer["chunks"]] == ["mine-1", "mine-2"]
    grades = httpx.post(f"{url}/v2/evaluate", json={**body, "view": "grades"}).json()
    assert set(grades) == {"verdict", "score", "chunks"}
    refined = httpx.post(
        f"{url}/v2/evaluate", json={**body, "options": {"refine": True, "token_budget": 20}}
    ).json()
    assert refined["refinement"]["tokens"] <= 20 and "chunks" not in refined["refinement"]
    with httpx.stream("POST", f"{url}/v2/stream", json={"query": PARTIAL, "k": 5}) as response:
        events = read_events(response)
    assert events[-1][0] == "done"
    expected = json.loads(json.dumps(result_answer(crag.retrieve(PARTIAL, 5))))
    got = events[-1][1]["result"]
    assert {k: v for k, v in got.items() if k != "timings_ms"} == {
        k: v for k, v in expected.items() if k != "timings_ms"
    }


def test_a_bad_view_is_refused_and_v1_takes_none(url: str) -> None:
    for route in ("/v2/retrieve", "/v2/stream"):
        bad = httpx.post(f"{url}{route}", json={"query": "bees", "view": "texts"})
        assert bad.status_code == 400 and "view must be one of chunks, grades" in bad.text
    old = httpx.post(f"{url}/v1/retrieve", json={"query": "bees", "view": "grades"})
    assert old.status_code == 400 and "unknown key 'view'" in old.text
    with pytest.raises(ValueError, match="view must be one of"):
        result_answer(None, "texts")  # type: ignore[arg-type]


def _answers(crag: CRAG) -> list[Any]:
    result = crag.retrieve(PARTIAL, 5)
    return [
        result.to_dict(),
        result_answer(result),
        result_answer(result, "grades"),
        evaluation_answer(result.evaluation),
        {"non-ascii": "naïve café – “quoted” ±3 µm", "tiny": 1e-05, "big": 1.5e300, "n": -7},
        {1: "an integer key", "nested": [{"x": None, "y": True}]},
    ]


def test_orjson_and_the_standard_library_write_the_same_json(
    crag: CRAG, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crag_heuristic._serve import answers

    pytest.importorskip("orjson")
    data = _answers(crag)
    answers._encoder.cache_clear()
    fast = [answers.encode(item) for item in data]
    monkeypatch.setitem(sys.modules, "orjson", None)  # as without it
    answers._encoder.cache_clear()
    try:
        slow = [answers.encode(item) for item in data]
        assert answers._encoder() is answers._stdlib
    finally:
        monkeypatch.undo()
        answers._encoder.cache_clear()
    assert answers._encoder() is not answers._stdlib
    for quick, plain in zip(fast, slow, strict=True):
        assert json.loads(quick) == json.loads(plain)
        assert quick.decode("utf-8") and b"\\u" not in quick and b"\\u" not in plain  # UTF-8
    huge = {"past 64 bits": 2**70}  # orjson refuses it: the standard library writes it
    assert json.loads(answers.encode(huge)) == huge


def test_the_access_event_is_logged_after_the_answer(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crag_heuristic")
    before = len([r for r in caplog.records if r.getMessage() == "crag.http"])
    started = time.monotonic()
    httpx.post(f"{url}/v2/retrieve", json={"query": "roman roads", "k": 2})
    while time.monotonic() - started < 10:
        events = [r for r in caplog.records if r.getMessage() == "crag.http"]
        if len(events) > before:
            break
        time.sleep(0.01)
    event = events[-1]
    assert (event.route, event.status, event.chunks) == ("/v2/retrieve", 200, 2)  # type: ignore[attr-defined]
    assert event.ms > 0 and event.bytes_out > 0  # type: ignore[attr-defined]
