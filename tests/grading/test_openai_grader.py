"""OpenAIGrader against a real OpenAI-compatible server on 127.0.0.1.

The server (crag_testkit.OpenAIServer: Starlette under uvicorn, its own process,
started once for the module) answers from labels this module records, and fails
as a test programs it: 429 with Retry-After, 500, slow, truncated, malformed,
wrong counts, fenced JSON, yes / no text. Without Starlette or uvicorn the module
skips, except under CI (``CI`` set), where it fails; a server that does not start
fails everywhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crag_testkit import (
    STYLES,
    OpenAIServer,
    OpenAIServerUnavailable,
    ServerReply,
    started_or_skip,
    write_recording,
)

from crag_heuristic import CRAG, Chunk, ConfigError, MemoryCache, ScoreKind
from crag_heuristic.grading import (
    Cascade,
    Graded,
    GraderConnectionError,
    GraderError,
    GraderHTTPError,
    GraderOutputError,
    GraderTimeout,
    OpenAIGrader,
    Prompt,
    RecordedGrader,
    SetEscalation,
)
from crag_heuristic.retrievers import BM25Retriever

KEY = "sk-test-0123456789abcdef"
QUERIES = {
    "q1": "How do foraging bees tell each other where flowers are?",
    "q2": "Which conditions does coffee need to grow well?",
}
CORPUS = {
    "dance": "Honeybees perform a waggle dance whose angle and length tell nestmates the "
    "direction and distance of flowers.",
    "scent": "Foraging bees carry the scent of the flowers they visited back to the hive.",
    "wax": "Worker bees secrete wax from glands on their abdomen to build comb.",
    "altitude": "Arabica coffee grows best at high altitudes with steady rainfall and mild "
    "temperatures.",
    "price": "Coffee prices rose sharply on commodity markets last winter.",
}
LABELS = {"q1": {"dance": 3, "scent": 2, "wax": 0}, "q2": {"altitude": 3, "price": 1}}
BEES = [
    Chunk(id=i, text=CORPUS[i], score=0.5, score_kind=ScoreKind.COSINE)
    for i in ("dance", "scent", "wax")
]
EXPECTED = [1.0, 1.0, 0.0]  # 3, 2, 0 with "yes" from 2


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recording")
    return write_recording(folder, queries=QUERIES, corpus=CORPUS, labels=LABELS)


@pytest.fixture(scope="module")
def server_once(recording: Path) -> Iterator[OpenAIServer]:
    server = OpenAIServer(recording, labels="judge", api_key=KEY)
    started_or_skip(server, "the test kit's chat-completions server", OpenAIServerUnavailable)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(server_once: OpenAIServer) -> Iterator[OpenAIServer]:
    """The module's server, its queue, counts and default reset after each test."""
    yield server_once
    server_once.reset()


def grader_for(server: OpenAIServer, **options: Any) -> OpenAIGrader:
    settings: dict[str, Any] = {
        "base_url": server.url,
        "model": "judge",
        "api_key": KEY,
        "timeout": 5.0,
        "backoff": 0.001,
        "backoff_max": 0.01,
        "rng": random.Random(7),
        **options,
    }
    return OpenAIGrader(**settings)


# -- one request per list -------------------------------------------------------------------


def test_one_request_grades_a_whole_list(server: OpenAIServer) -> None:
    with grader_for(server) as grader:
        answer = grader.grade(QUERIES["q1"], BEES)
    assert isinstance(answer, Graded) and list(answer) == EXPECTED
    stats = server.stats()
    assert stats["requests"] == 1
    [seen] = stats["seen"]
    assert seen == {
        "model": "judge",
        "authorization": f"Bearer {KEY}",
        "passages": 3,
        "query": "q1",
        "response_format": "json_schema",  # structured output, asked for by default
    }
    usage = answer.usage
    assert (usage.requests, usage.retries) == (1, 0)
    assert (usage.prompt_tokens, usage.completion_tokens) == (
        stats["prompt_tokens"],
        stats["completion_tokens"],
    )
    assert usage.prompt_tokens > 0 and usage.ms > 0
    assert grader.usage == usage  # the running total


async def test_async_grades_agree_with_the_recorded_labels(
    server: OpenAIServer, recording: Path
) -> None:
    recorded = RecordedGrader.from_file(recording / "llm_judgments" / "judge.tsv", queries=QUERIES)
    async with grader_for(server) as grader:
        for query_id, chunk_ids in (
            ("q1", ["wax", "dance", "scent"]),
            ("q2", ["price", "altitude"]),
        ):
            chunks = [
                Chunk(id=i, text=CORPUS[i], score=0.5, score_kind="cosine") for i in chunk_ids
            ]
            answer = await grader.agrade(QUERIES[query_id], chunks)
            assert list(answer) == recorded.grade(QUERIES[query_id], chunks)
    assert server.stats()["requests"] == 2
    assert grader.usage.requests == 2


def test_chunk_mode_sends_one_request_per_passage(server: OpenAIServer) -> None:
    server.configure(default=ServerReply(style="json_single"))
    with grader_for(server, mode="chunk") as grader:
        assert list(grader.grade(QUERIES["q1"], BEES)) == EXPECTED
        answer = asyncio.run(grader.agrade(QUERIES["q1"], BEES))
    assert list(answer) == EXPECTED and answer.usage.requests == 3
    seen = server.stats()["seen"]
    assert len(seen) == 6 and {s["passages"] for s in seen} == {1}


def test_an_empty_list_sends_nothing(server: OpenAIServer) -> None:
    with grader_for(server) as grader:
        answer = grader.grade(QUERIES["q1"], [])
    assert list(answer) == [] and answer.usage.requests == 0
    assert server.stats()["requests"] == 0


@pytest.mark.parametrize("style", [s for s in STYLES if s != "json_single"])
def test_every_answer_style_reads_the_same(server: OpenAIServer, style: str) -> None:
    server.program(ServerReply(style=style))
    with grader_for(server) as grader:
        answer = list(grader.grade(QUERIES["q1"], BEES))
    if style == "json_numbers":  # score / 3, three decimals
        assert answer == pytest.approx([1.0, 0.667, 0.0])
    elif style == "json_0_3":  # the recorded scores, read on the 0-3 scale
        assert answer == pytest.approx([1.0, 2 / 3, 0.0])
    else:
        assert answer == EXPECTED


# -- faults -------------------------------------------------------------------------------------


def test_429_and_500_are_retried_with_their_count(server: OpenAIServer) -> None:
    server.program(
        ServerReply(status=429, headers={"Retry-After": "0"}),
        ServerReply(status=503),
    )
    with grader_for(server, max_retries=2) as grader:
        answer = grader.grade(QUERIES["q1"], BEES)
    assert list(answer) == EXPECTED
    assert (answer.usage.requests, answer.usage.retries) == (3, 2)
    assert server.stats()["requests"] == 3


async def test_retries_run_out_into_a_typed_error_with_its_usage(server: OpenAIServer) -> None:
    server.configure(default=ServerReply(status=429, headers={"Retry-After": "0"}))
    grader = grader_for(server, max_retries=2)
    with pytest.raises(GraderHTTPError) as info:
        await grader.agrade(QUERIES["q1"], BEES)
    error = info.value
    assert error.status_code == 429 and error.retry_after == 0.0
    assert "answered 429 (rate limited) (after 2 retries)" in str(error)
    assert error.usage is not None and (error.usage.requests, error.usage.retries) == (3, 2)
    assert error.grader == grader.fingerprint
    assert server.stats()["requests"] == 3


def test_a_server_error_without_retries_fails_at_once(server: OpenAIServer) -> None:
    server.program(ServerReply(status=500))
    with grader_for(server, max_retries=0) as grader, pytest.raises(GraderHTTPError) as info:
        grader.grade(QUERIES["q1"], BEES)
    assert info.value.status_code == 500 and "after" not in str(info.value)
    assert server.stats()["requests"] == 1


def test_retry_after_is_honoured_and_capped(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waits between retries, as the grader asks for them (its sleep recorded: no
    wall-clock bound a loaded machine could miss)."""
    waits: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)  # the module the grader sleeps with
    server.program(ServerReply(status=429, headers={"Retry-After": "0.2"}))
    with grader_for(server, backoff=0.001, backoff_max=0.35) as grader:
        assert list(grader.grade(QUERIES["q1"], BEES)) == EXPECTED
        assert waits == [0.2]  # the server's Retry-After, not the 1 ms backoff
        server.program(ServerReply(status=429, headers={"retry-after-ms": "120000"}))
        assert list(grader.grade(QUERIES["q1"], BEES)) == EXPECTED
        assert waits[1:] == [0.35]  # 120 s capped at backoff_max


def test_a_client_error_is_not_retried(server: OpenAIServer) -> None:
    server.program(ServerReply(status=404))
    with grader_for(server, max_retries=3) as grader, pytest.raises(GraderHTTPError) as info:
        grader.grade(QUERIES["q1"], BEES)
    assert info.value.status_code == 404 and "check base_url" in str(info.value)
    assert server.stats()["requests"] == 1


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_slow_answer_is_a_timeout_not_retried(server: OpenAIServer, run: str) -> None:
    server.program(ServerReply(delay=2.0))
    grader = grader_for(server, timeout=0.25, max_retries=2)

    def call() -> Any:
        if run == "sync":
            with grader:
                return grader.grade(QUERIES["q1"], BEES)
        return asyncio.run(grader.agrade(QUERIES["q1"], BEES))

    with pytest.raises(GraderTimeout) as info:
        call()
    assert "no answer within 0.25 s (ReadTimeout)" in str(info.value)
    assert info.value.usage is not None and info.value.usage.requests == 1
    assert server.stats()["requests"] == 1


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (ServerReply(truncate=True), "not valid JSON (cut short?); the server cut the answer"),
        (ServerReply(content="I cannot grade these passages."), "neither JSON nor a verdict"),
        (ServerReply(count_delta=-1), "holds 2 grade(s) for 3 passage(s)"),
        (ServerReply(count_delta=1), "holds 4 grade(s) for 3 passage(s)"),
        (ServerReply(content='{"grades": ["yes", "maybe", "no"]}'), "grade 1 is a string"),
        (ServerReply(content='{"grades": [9, 0, 0]}'), "grade 0 is 9"),
        (ServerReply(body='{"choices": [{"message": '), "a body that is not JSON"),
        (ServerReply(body='{"choices": []}'), "no answer text (finish_reason=None)"),
    ],
    ids=["truncated", "malformed", "too-few", "too-many", "no-verdict", "off-scale",
         "body-cut", "no-choice"],
)  # fmt: skip
def test_an_unusable_answer_is_a_typed_output_error(
    server: OpenAIServer, reply: ServerReply, says: str
) -> None:
    server.program(reply)
    with grader_for(server) as grader, pytest.raises(GraderOutputError) as info:
        grader.grade(QUERIES["q1"], BEES)
    assert says in str(info.value)
    assert info.value.usage is not None and info.value.usage.requests == 1  # never retried
    assert server.stats()["requests"] == 1


def test_a_closed_port_is_a_connection_error_after_the_retries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nobody listens
    grader = OpenAIGrader(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, backoff=0.001,
        backoff_max=0.002, timeout=2.0,
    )  # fmt: skip
    with grader, pytest.raises(GraderConnectionError) as info:
        grader.grade("q", BEES)
    assert "connection failed (after 2 retries) (ConnectError)" in str(info.value)
    assert info.value.usage is not None and info.value.usage.requests == 3
    assert isinstance(info.value.__cause__, Exception)


# -- the concurrency limit --------------------------------------------------------------------


async def test_async_calls_stay_within_the_concurrency_limit(server: OpenAIServer) -> None:
    server.configure(default=ServerReply(delay=0.15))
    async with grader_for(server, max_concurrency=2) as grader:
        answers = await asyncio.gather(*(grader.agrade(QUERIES["q1"], BEES) for _ in range(5)))
    assert all(list(a) == EXPECTED for a in answers)
    stats = server.stats()  # within the limit, however the tasks were scheduled
    assert stats["requests"] == 5 and 1 <= stats["max_in_flight"] <= 2


def test_sync_calls_from_threads_and_chunk_mode_stay_within_it(server: OpenAIServer) -> None:
    server.configure(default=ServerReply(delay=0.15, style="json_single"))
    with grader_for(server, max_concurrency=2, mode="chunk") as grader:
        assert list(grader.grade(QUERIES["q1"], BEES)) == EXPECTED  # 3 passages, 2 at a time
        assert server.stats()["max_in_flight"] <= 2
        answers: list[Any] = []

        def grade() -> None:
            try:
                answers.append(list(grader.grade(QUERIES["q1"], BEES[:1])))
            except Exception as exc:
                answers.append(exc)

        threads = [threading.Thread(target=grade) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert answers == [EXPECTED[:1]] * 4
    stats = server.stats()  # within the limit, however the threads were scheduled
    assert stats["requests"] == 7 and 1 <= stats["max_in_flight"] <= 2


# -- the cascade, end to end ------------------------------------------------------------------


def _crag(server: OpenAIServer, grader: OpenAIGrader) -> CRAG:
    documents = [
        Chunk(id=i, text=t, score=None, score_kind=ScoreKind.UNKNOWN) for i, t in CORPUS.items()
    ]
    return CRAG(
        BM25Retriever(documents),
        expander=False,
        cache=MemoryCache(),
        grader=grader,
        escalation=SetEscalation(band=(0.0, 1.0)),
    )


def test_the_router_asks_once_per_list_sync_and_async(server: OpenAIServer) -> None:
    grader = grader_for(server)
    crag = _crag(server, grader)
    with grader:
        first = crag.retrieve(QUERIES["q1"], 3)
        report = first.cascade
        assert report is not None and report.level == "set" and report.error is None
        assert report.usage is not None and report.usage.requests == 1
        assert report.usage.tokens == report.usage.prompt_tokens + report.usage.completion_tokens
        assert report.usage.tokens > 0
        expected = {i: 1.0 if LABELS["q1"].get(i, 0) >= 2 else 0.0 for i in report.escalated}
        assert dict(report.grades) == expected and len(expected) == 3
        assert server.stats()["requests"] == 1
        data = json.loads(json.dumps(first.to_dict()))
        assert data["cascade"]["usage"]["requests"] == 1
        again = asyncio.run(crag.aretrieve(QUERIES["q1"], 3))  # cached answers: no request
        assert again.cascade is not None and set(again.cascade.cache_hits) == set(expected)
        assert again.cascade.usage is None and server.stats()["requests"] == 1
        other = asyncio.run(crag.aretrieve(QUERIES["q2"], 3))
    assert other.cascade is not None and other.cascade.usage is not None
    assert other.cascade.usage.requests == 1 and server.stats()["requests"] == 2
    assert other.cascade.grades["altitude"] == 1.0 and other.cascade.grades["price"] == 0.0


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_bad_answer_in_the_router_is_a_typed_failure_on_the_result(
    server: OpenAIServer, run: str
) -> None:
    server.program(ServerReply(count_delta=-1))
    with grader_for(server) as grader:
        crag = _crag(server, grader)
        if run == "sync":
            result = crag.retrieve(QUERIES["q1"], 3)
        else:
            result = asyncio.run(crag.aretrieve(QUERIES["q1"], 3))
    assert result.grader_error is not None
    assert result.grader_error.startswith("GraderOutputError: cannot read the model's answer")
    [failure] = [f for f in result.failures if f.stage.value == "grader"]
    assert isinstance(failure.error, GraderOutputError)
    report = result.cascade
    assert report is not None and report.failure == failure and not report.applied
    assert report.usage is not None and report.usage.requests == 1  # the failed call's cost
    assert report.verdict is report.gate_verdict  # the gate's verdict stands


async def test_cascade_without_the_router_reports_usage_both_ways(server: OpenAIServer) -> None:
    async with grader_for(server) as grader:
        cascade = Cascade(grader=grader, escalation=SetEscalation(band=(0.0, 1.0)))
        first = await cascade.aevaluate(QUERIES["q1"], BEES)
        second = await asyncio.to_thread(cascade.evaluate, QUERIES["q1"], BEES)
    for result in (first, second):
        assert result.report.usage is not None and result.report.usage.requests == 1
        assert dict(result.report.grades) == dict(
            zip(["dance", "scent", "wax"], EXPECTED, strict=True)
        )
    assert server.stats()["requests"] == 2


# -- identity and secrets -----------------------------------------------------------------------


def test_the_fingerprint_names_what_changes_answers_never_the_key(server: OpenAIServer) -> None:
    base = grader_for(server)
    assert KEY not in base.fingerprint and base.fingerprint.startswith(
        f"openai-chat:127.0.0.1:{server.url.rsplit(':', 1)[1]}|model=judge|prompt=binary@v1:"
    )
    assert grader_for(server, api_key="sk-another-key").fingerprint == base.fingerprint
    assert grader_for(server, timeout=9.0, max_retries=0).fingerprint == base.fingerprint
    mine = Prompt(name="binary", version=2, system="", list_template="{query} {passages}",
                  single_template="{query} {passage}")  # fmt: skip
    changed = [
        grader_for(server, model="judge-2"),
        grader_for(server, prompt="rubric"),
        grader_for(server, prompt=mine),
        grader_for(server, mode="chunk"),
        grader_for(server, temperature=0.7),
        grader_for(server, temperature=None),
        grader_for(server, max_tokens=64),
        grader_for(server, max_passage_chars=500),
        grader_for(server, extra_body={"seed": 1}),
        grader_for(server, structured=False),
        grader_for(server, base_url="http://localhost:11434/v1"),
        grader_for(server, base_url=server.url + "/other"),
    ]
    prints = {g.fingerprint for g in changed}
    assert len(prints) == len(changed) and base.fingerprint not in prints
    assert "prompt=binary@v2:" in changed[2].fingerprint
    assert grader_for(server, base_url=server.url + "/chat/completions").fingerprint == (
        base.fingerprint
    )


def test_no_credential_in_any_log_line_repr_error_or_result(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("httpx", "httpcore", "crag_heuristic"):
        caplog.set_level(logging.DEBUG, logger=name)
    header_secret = "azure-header-secret-42"
    grader = grader_for(server, headers={"X-Api-Key": header_secret}, max_retries=1)
    texts: list[str] = [repr(grader), grader.fingerprint, str(grader.usage)]
    server.program(
        ServerReply(status=500),  # retried: a retry event
        ServerReply(),
        ServerReply(status=400, echo_authorization=True),  # a server that echoes the key
        ServerReply(truncate=True),
    )
    with grader:
        grader.grade(QUERIES["q1"], BEES)
        for _ in range(2):
            with pytest.raises(GraderError) as info:
                grader.grade(QUERIES["q1"], BEES)
            texts += [str(info.value), repr(info.value)]
        result = _crag(server, grader).retrieve(QUERIES["q2"], 3)
    wrong = grader_for(server, api_key="sk-wrong-key-000")  # the server echoes it in its 401
    with wrong, pytest.raises(GraderHTTPError) as refused:
        wrong.grade(QUERIES["q1"], BEES)
    assert refused.value.status_code == 401 and "check api_key" in str(refused.value)
    texts += [str(refused.value), json.dumps(result.to_dict(), default=str)]
    assert "(you sent Bearer ***)" in texts[3]  # the echoed header masked
    records = caplog.records
    assert any(r.name == "httpx" and "HTTP Request: POST" in r.getMessage() for r in records)
    assert any(r.name.startswith("httpcore") for r in records)
    events = [r for r in records if r.name == "crag_heuristic"]
    assert {r.getMessage() for r in events} >= {"crag.llm_grade", "crag.llm_grade.retry"}
    texts += [r.getMessage() for r in records] + [repr(vars(r)) for r in records]
    for text in texts:
        for secret in (KEY, "sk-wrong-key-000", header_secret):
            assert secret not in text
    for record in events:  # the query's words stay out of the library's events
        assert "foraging" not in repr(vars(record)) and "coffee" not in repr(vars(record))


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"base_url": "http://user:sk-secret-in-url@127.0.0.1:9/v1"}, "base_url"),
        ({"base_url": "http://127.0.0.1:9/v1?api-key=sk-secret-in-url"}, "base_url"),
        ({"base_url": "ftp://127.0.0.1/v1"}, "base_url"),
        ({"base_url": "http://127.0.0.1:99999/v1"}, "base_url"),
        ({"api_key": "sk-secret in url"}, "api_key"),
        ({"api_key": ""}, "api_key"),
        ({"headers": {"api-key": "sk-secret-in-url\n"}}, "headers['api-key']"),
        ({"model": ""}, "model"),
        ({"mode": "batch"}, "mode"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"timeout": 0}, "timeout"),
        ({"backoff": 2.0, "backoff_max": 1.0}, "backoff_max"),
        ({"extra_body": {"messages": []}}, "extra_body"),
        ({"extra_body": {"x": object()}}, "extra_body"),
        ({"client": object()}, "client"),
    ],
)
def test_a_bad_option_is_refused_without_showing_a_secret(
    options: dict[str, Any], field: str
) -> None:
    settings = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **options}
    with pytest.raises(ConfigError) as info:
        OpenAIGrader(**settings)
    assert info.value.field == field
    assert "sk-secret" not in str(info.value) and "sk-secret" not in repr(info.value.value)


async def test_an_async_grader_serves_one_loop_after_another(server: OpenAIServer) -> None:
    """Outside ``async with`` each call has its own connection: ``asyncio.run`` per
    call (a new loop each time) works, and nothing is left open."""
    grader = grader_for(server)
    answers = await asyncio.to_thread(
        lambda: [asyncio.run(grader.agrade(QUERIES["q1"], BEES)) for _ in range(2)]
    )
    assert [list(a) for a in answers] == [EXPECTED, EXPECTED]
    async with grader:  # pooled on this loop, closed at the end
        assert list(await grader.agrade(QUERIES["q1"], BEES)) == EXPECTED
    assert server.stats()["requests"] == 3


@pytest.mark.parametrize(
    ("status", "retried"),
    [(408, True), (429, True), (500, True), (599, True), (400, False), (401, False), (499, False)],
)
def test_which_statuses_are_retried(server: OpenAIServer, status: int, retried: bool) -> None:
    server.program(ServerReply(status=status))
    with grader_for(server, max_retries=1) as grader:
        if retried:
            assert list(grader.grade(QUERIES["q1"], BEES)) == EXPECTED
        else:
            with pytest.raises(GraderHTTPError) as info:
                grader.grade(QUERIES["q1"], BEES)
            assert info.value.status_code == status
    assert server.stats()["requests"] == (2 if retried else 1)


@pytest.mark.parametrize("run", ["sync", "async"])
def test_chunk_mode_fails_as_a_whole_when_one_passage_fails(server: OpenAIServer, run: str) -> None:
    server.configure(default=ServerReply(style="json_single"))
    server.program(ServerReply(style="json_single"), ServerReply(status=404))
    grader = grader_for(server, mode="chunk", max_concurrency=3)

    def call() -> Any:
        with grader:
            if run == "sync":
                return grader.grade(QUERIES["q1"], BEES)
            return asyncio.run(grader.agrade(QUERIES["q1"], BEES))

    with pytest.raises(GraderHTTPError) as info:
        call()
    assert info.value.status_code == 404
    assert info.value.usage is not None and info.value.usage.requests == 3
    assert server.stats()["requests"] == 3


def test_the_request_carries_the_settings_and_cuts_long_passages() -> None:
    """What goes on the wire (an httpx mock transport records it: the body's
    fields are an edge the recorded server does not look at)."""
    import httpx

    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        body = {"choices": [{"message": {"content": '{"grades": ["yes"]}'}}]}
        return httpx.Response(200, json=body)

    options: dict[str, Any] = {"base_url": "https://llm.example/v1/", "model": "m", "api_key": KEY}
    transport = httpx.MockTransport(answer)
    with OpenAIGrader(
        **options,
        max_passage_chars=12,
        max_tokens=32,
        extra_body={"seed": 7},
        headers={"X-Team": "search"},
        client=httpx.Client(transport=transport),
    ) as grader:
        answer_ = grader.grade("Why dance?", BEES[:1])
    assert list(answer_) == [1.0] and answer_.usage.tokens == 0  # no usage in the answer
    [request] = sent
    assert str(request.url) == "https://llm.example/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["x-team"] == "search"
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.content)
    assert {k: body[k] for k in ("model", "temperature", "max_tokens", "seed")} == {
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 32,
        "seed": 7,
    }
    user = body["messages"][-1]["content"]
    assert f"[1] {BEES[0].text[:12]}\n" in user and BEES[0].text[:13] not in user
    with OpenAIGrader(
        **options, temperature=None, client=httpx.Client(transport=transport)
    ) as grader:
        grader.grade("Why dance?", BEES[:1])
    assert "temperature" not in json.loads(sent[-1].content)
    assert "max_tokens" not in json.loads(sent[-1].content)


# -- structured output, the model's name, settings from a spec ----------------------------------


def test_structured_output_asks_for_a_schema_of_exactly_n_grades() -> None:
    """The response_format on the wire (OpenAI's nested json_schema form, which
    llama.cpp's server reads at json_schema.schema)."""
    import httpx

    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        user = sent[-1]["messages"][-1]["content"]
        n = sum(c.text in user for c in BEES)
        text = json.dumps({"grades": ["yes"] + ["no"] * (n - 1)} if n > 1 else {"grade": 0.5})
        return httpx.Response(200, json={"choices": [{"message": {"content": text}}]})

    client = httpx.Client(transport=httpx.MockTransport(answer))
    options: dict[str, Any] = {"base_url": "https://llm.example/v1", "model": "m", "client": client}
    with OpenAIGrader(**options) as grader:
        assert list(grader.grade("Why dance?", BEES)) == [1.0, 0.0, 0.0]
        assert grader.structured_output is True
    shape = sent[-1]["response_format"]
    assert shape["type"] == "json_schema" and shape["json_schema"]["strict"] is True
    schema = shape["json_schema"]["schema"]
    assert schema["required"] == ["grades"] and schema["additionalProperties"] is False
    grades = schema["properties"]["grades"]
    assert (grades["minItems"], grades["maxItems"]) == (3, 3)
    assert grades["items"] == {"type": "string", "enum": ["yes", "no"]}
    with OpenAIGrader(**options, prompt="rubric", mode="chunk", max_concurrency=1) as grader:
        grader.grade("Why dance?", BEES[:1])
    rubric = sent[-1]["response_format"]["json_schema"]["schema"]
    assert rubric["properties"] == {"grade": {"type": "number", "minimum": 0, "maximum": 1}}
    # off, or shaped by the user's own extra_body: no schema of ours
    with OpenAIGrader(**options, structured=False) as grader:
        grader.grade("Why dance?", BEES)
    assert "response_format" not in sent[-1]
    own = {"grammar": 'root ::= "{}"'}
    with OpenAIGrader(**options, extra_body=own) as grader:
        grader.grade("Why dance?", BEES)
        assert grader.structured_output is None
    assert "response_format" not in sent[-1] and sent[-1]["grammar"] == own["grammar"]
    mine = Prompt(name="mine", version=1, system="", list_template="{query} {passages}",
                  single_template="{query} {passage}")  # fmt: skip
    with OpenAIGrader(**options, prompt=mine) as grader:  # no grade_schema: free text
        grader.grade("Why dance?", BEES)
    assert "response_format" not in sent[-1]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_a_server_refusing_structured_output_is_asked_without_it_once(
    server: OpenAIServer, caplog: pytest.LogCaptureFixture, run: str
) -> None:
    caplog.set_level(logging.WARNING, logger="crag_heuristic")
    server.configure(refuse_schema=True)
    grader = grader_for(server)
    with grader:
        if run == "sync":
            first = grader.grade(QUERIES["q1"], BEES)
            second = grader.grade(QUERIES["q1"], BEES)
        else:
            first, second = asyncio.run(_two_async_grades(grader))
    assert list(first) == list(second) == EXPECTED
    assert first.usage.requests == 2 and first.usage.retries == 0  # refused, then asked again
    assert second.usage.requests == 1  # remembered: no schema asked for again
    assert [s["response_format"] for s in server.stats()["seen"]] == ["json_schema", None, None]
    assert grader.structured_output is False
    said = [r for r in caplog.records if "unstructured" in r.getMessage()]
    assert len(said) == 1  # once per grader


async def _two_async_grades(grader: OpenAIGrader) -> tuple[Graded, Graded]:
    async with grader:
        return (
            await grader.agrade(QUERIES["q1"], BEES),
            await grader.agrade(QUERIES["q1"], BEES),
        )


def test_a_400_after_a_structured_answer_is_not_taken_for_a_refusal(
    server: OpenAIServer,
) -> None:
    with grader_for(server) as grader:
        grader.grade(QUERIES["q1"], BEES)  # answered under the schema
        server.configure(refuse_schema=True)
        with pytest.raises(GraderHTTPError, match="structured=False turns that off") as info:
            grader.grade(QUERIES["q1"], BEES)
    assert info.value.status_code == 400 and info.value.usage is not None
    assert info.value.usage.requests == 1 and grader.structured_output is True


def test_an_echoed_rubric_over_the_wire_is_an_output_error(server: OpenAIServer) -> None:
    from crag_heuristic._grading.prompts import RUBRIC

    echo = RUBRIC.system.split("\n", 1)[1]  # the four rubric lines (and the last one)
    four = [*BEES, Chunk(id="x", text=CORPUS["price"], score=0.1, score_kind=ScoreKind.COSINE)]
    server.program(ServerReply(content=echo), ServerReply(content="1.0 = it is on the question's "
                                                                  "topic ..."))  # fmt: skip
    with grader_for(server, prompt="rubric") as grader:
        with pytest.raises(GraderOutputError, match="echo the prompt"):
            grader.grade(QUERIES["q1"], four)
        with pytest.raises(GraderOutputError, match="echo the prompt"):
            grader.grade(QUERIES["q1"], four[:1])


@pytest.mark.parametrize("run", ["sync", "async"])
def test_the_model_is_checked_against_the_servers_list(server: OpenAIServer, run: str) -> None:
    def check(grader: OpenAIGrader) -> tuple[str, ...] | None:
        with grader:
            return grader.check_model() if run == "sync" else asyncio.run(grader.acheck_model())

    # no /v1/models route (404): the server is taken at its word
    assert check(grader_for(server)) is None
    server.configure(models=["judge", "other"])
    assert check(grader_for(server)) == ("judge", "other")
    server.configure(models=["llama3.2:latest", "../models/SmolLM2-135M-Instruct.gguf"])
    assert check(grader_for(server, model="llama3.2")) is not None  # Ollama's :latest
    assert check(grader_for(server, model="SmolLM2-135M-Instruct.gguf")) is not None  # a path
    with pytest.raises(ConfigError, match=r"'llama3.2:latest', '\.\./models/SmolLM2") as info:
        check(grader_for(server, model="judge"))
    assert info.value.field == "model"
    with pytest.raises(GraderHTTPError, match="401"):
        check(grader_for(server, api_key="sk-wrong-key"))
    assert server.stats()["requests"] == 0  # no chat request was paid for


def test_a_grader_from_a_spec_takes_its_settings() -> None:
    grader = OpenAIGrader.from_spec(
        "openai:smol@http://127.0.0.1:8080/v1?timeout=60&max_tokens=64&prompt=rubric"
        "&max_passage_chars=900&structured=false&temperature=none",
        api_key=KEY,
        extra_body={"seed": 3},
    )
    assert (grader.model, grader.url, grader.timeout, grader.max_tokens) == (
        "smol", "http://127.0.0.1:8080/v1", 60.0, 64,
    )  # fmt: skip
    assert (grader.prompt.name, grader.max_passage_chars, grader.structured) == (
        "rubric",
        900,
        False,
    )
    assert grader.temperature is None and "extra=" in grader.fingerprint
    plain = OpenAIGrader.from_spec("judge@https://llm.example/v1")  # the prefix may go
    assert plain.timeout == 30.0 and plain.structured is True
    custom = OpenAIGrader.from_spec(
        "openai:m@http://h/v1",
        prompt={"name": "mine", "version": 2, "system": "", "list_template": "{query} {passages}",
                "single_template": "{query} {passage}", "grade_schema": {"type": "boolean"}},
    )  # fmt: skip
    assert custom.prompt.id == "mine@v2" and custom.prompt.response_schema(None) is not None


@pytest.mark.parametrize(
    ("spec", "settings", "says"),
    [
        ("openai:m", {}, "openai:MODEL@BASE_URL"),
        ("openai:m@ftp://h/v1", {}, "openai:MODEL@BASE_URL"),
        ("openai:m@http://h/v1?timout=5", {}, "did you mean 'timeout'"),
        ("openai:m@http://h/v1?timeout=5&timeout=6", {}, "given twice"),
        ("openai:m@http://h/v1?timeout=soon", {}, "seconds"),
        ("openai:m@http://h/v1?structured=maybe", {}, "true or false"),
        ("openai:m@http://h/v1?timeout=-1", {}, "timeout"),
        ("openai:m@http://h/v1?timeout=5", {"timeout": 6}, "given twice"),
        ("openai:m@http://h/v1", {"base_url": "http://x"}, "unknown setting"),
        ("openai:m@http://h/v1", {"prompt": {"name": "x"}}, "needs version"),
        ("openai:m@http://h/v1", {"prompt": {"nme": "x"}}, "did you mean 'name'"),
    ],
)
def test_a_bad_spec_is_refused_naming_what(spec: str, settings: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        OpenAIGrader.from_spec(spec, **settings)
