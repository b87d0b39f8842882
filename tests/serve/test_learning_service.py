"""``serve --grader ... --learn``: the learning cascade behind the service, with a real
OpenAI-protocol grader over sockets, its labels in a grade log that survives a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from crag_testkit import OpenAIServer, OpenAIServerUnavailable, write_recording

from crag_heuristic._sample import load_sample_corpus, load_sample_queries

KEY = "sk-learning-test"


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIServer]:
    """A chat server grading the sample's chunks by the sample's own labels."""
    queries = {q["_id"]: q["text"] for q in load_sample_queries()}
    corpus = {c.id: c.text for c in load_sample_corpus()}
    labels = {q["_id"]: dict.fromkeys(q["metadata"]["relevant"], 3) for q in load_sample_queries()}
    folder = write_recording(
        tmp_path_factory.mktemp("judge"), queries=queries, corpus=corpus, labels=labels
    )
    server = OpenAIServer(folder, labels="judge", api_key=KEY)
    try:
        server.start()
    except OpenAIServerUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the test kit's chat-completions server cannot start under CI: {exc}")
        pytest.skip(f"the test kit's chat-completions server cannot start: {exc}")
    with server:
        yield server


def _serve(judge: OpenAIServer, log: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "crag_heuristic", "serve", "--port", "0", "--quiet",
        "--grader", f"openai:judge@{judge.url}", "--learn", "--grade-log", str(log),
    ]  # fmt: skip
    env = {**os.environ, "CRAG_LLM_API_KEY": KEY}
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)


def _base(process: subprocess.Popen[str]) -> str:
    assert process.stderr is not None
    line = process.stderr.readline()
    while line and "documents on http" not in line:
        line = process.stderr.readline()
    assert "documents on http://127.0.0.1:" in line, line
    return line.split(" on ")[1].split()[0]


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()


def test_every_answer_is_kept_and_a_restart_goes_on_from_the_log(
    judge: OpenAIServer, tmp_path: Path
) -> None:
    log = tmp_path / "grades.jsonl"
    questions = [q["text"] for q in load_sample_queries()]
    process = _serve(judge, log)
    try:
        base = _base(process)
        for question in questions[:6]:
            answer = httpx.post(f"{base}/v1/retrieve", json={"query": question, "k": 3}, timeout=60)
            assert answer.status_code == 200
            learning = answer.json()["learning"]
            assert learning["exploring"] and learning["labelled"]
        status = httpx.get(f"{base}/v1/learning", timeout=30).json()
        assert status["labels"] == 6 and status["band"] is None
        assert "every list goes to the grader" in status["describe"]
    finally:
        _stop(process)
    assert len(log.read_text().splitlines()) == 6
    assert questions[0] not in log.read_text()  # digests, never the query text
    process = _serve(judge, log)
    try:
        base = _base(process)
        assert httpx.get(f"{base}/v1/learning", timeout=30).json()["labels"] == 6
        answer = httpx.post(f"{base}/v1/retrieve", json={"query": questions[6], "k": 3}, timeout=60)
        assert answer.json()["learning"]["labels"] == 7
        answer = httpx.post(f"{base}/v2/retrieve", json={"query": questions[7], "k": 3}, timeout=60)
        assert answer.json()["learning"]["labels"] == 8  # v2 answers carry the decision too
    finally:
        _stop(process)


def test_learning_flags_need_a_grader_and_learn(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "crag_heuristic", "serve", "--port", "0"]
    refused = subprocess.run(
        [*base, "--grader", "no_such_module:grader", "--learn"], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2 and "no_such_module" in refused.stderr
