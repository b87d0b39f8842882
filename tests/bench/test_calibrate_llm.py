"""``crag-heuristic calibrate --grader openai:...`` against the test kit's real chat server
(crag_testkit.OpenAIServer, its own process, over a socket), answering from the sample
folder's judgments: lists that fail, a server killed mid-run and the run resumed, a
server that refuses structured output, one that echoes the rubric, /v1/models with and
without the model, the label budget said before paying, labels of one class. Without
Starlette or uvicorn the module skips, except under CI, where it fails."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crag_testkit import (
    OpenAIServer,
    OpenAIServerUnavailable,
    ServerReply,
    started_or_skip,
    write_recording,
)

from crag_heuristic import EvaluatorConfig
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK, EXIT_SERVICE
from crag_heuristic._grading.prompts import RUBRIC
from crag_heuristic.grading import JsonlGradeLog

KEY = "sk-calibrate-0123456789"
K = 4  # passages per list: the rubric's four lines echoed read as four numbers
LOOSE = ("--guarantee", "agreement:0.5")  # 4 labelled lists suffice


def _jsonl(path: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {str(r["_id"]): r for r in rows}


@pytest.fixture(scope="module")
def recording(beir_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder's test questions, its documents as the harness shows them (title and
    text) and its test judgments (2: relevant), recorded for the chat server; a third
    of the questions judged unanswered by every document (a grader with failed lists)."""
    queries, docs = _jsonl(beir_folder / "queries.jsonl"), _jsonl(beir_folder / "corpus.jsonl")
    labels: dict[str, dict[str, int]] = {}
    for line in (beir_folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        query, doc, grade = line.split("\t")
        labels.setdefault(query, {})[doc] = int(grade)
    for query in sorted(labels)[::3]:
        labels[query] = dict.fromkeys(labels[query], 0)
    return write_recording(
        tmp_path_factory.mktemp("calibrate-recording"),
        queries={q: queries[q]["text"] for q in labels},
        corpus={d: f"{r['title']} {r['text']}" for d, r in docs.items()},
        labels=labels,
    )


def _start(recording: Path, port: int | None = None) -> OpenAIServer:
    server = OpenAIServer(recording, api_key=KEY, port=port)
    return started_or_skip(
        server, "the test kit's chat-completions server", OpenAIServerUnavailable
    )


@pytest.fixture(scope="module")
def server_once(recording: Path) -> Iterator[OpenAIServer]:
    server = _start(recording)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(server_once: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    monkeypatch.setenv("CRAG_LLM_API_KEY", KEY)
    yield server_once
    server_once.reset()


@pytest.fixture(scope="module")
def questions(recording: Path) -> dict[str, str]:
    return {q: r["text"] for q, r in _jsonl(recording / "queries.jsonl").items()}


def _run(
    server: OpenAIServer, folder: Path, out: Path, *extra: str, spec: str = ""
) -> tuple[int, dict[str, Any]]:
    if "--guarantee" not in extra:  # a band on every label (a gate refit costs seconds here)
        extra = (*extra, "--guarantee", "agreement:0.3")
    args = [
        "calibrate", "--grader", f"openai:judge@{server.url}?max_retries=0{spec}",
        "--data-dir", f"{folder}:test", "--no-encode", "--k", str(K), "--out", str(out), *extra,
    ]  # fmt: skip
    stdout = io.StringIO()
    code = main(args, out=stdout)
    return code, json.loads(stdout.getvalue()) if stdout.getvalue() else {}


def _no_query_text(texts: list[str], questions: dict[str, str]) -> None:
    for text in texts:
        for question in questions.values():
            assert question not in text


def test_failed_lists_are_skipped_counted_and_graded_on_the_next_run(
    server: OpenAIServer,
    beir_folder: Path,
    tmp_path: Path,
    questions: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="crag_heuristic")
    failing, echoing = sorted(questions)[:2]
    echo = RUBRIC.system.split("\n", 1)[1]  # the rubric, echoed back: four "grades"
    server.configure(
        by_query={failing: ServerReply(status=500), echoing: ServerReply(content=echo)}
    )
    out = tmp_path / "mine.toml"
    code, report = _run(server, beir_folder, out, spec="&prompt=rubric")
    assert code == EXIT_SERVICE  # a profile, from the lists the grader labelled
    labelling = report["labelling"]
    assert (labelling["labelled"], labelling["graded"], labelling["failed"]) == (16, 16, 2)
    assert labelling["failures"] == {"GraderHTTPError": 1, "GraderOutputError": 1}
    assert sorted(labelling["failed_queries"]) == sorted([failing, echoing])
    assert "echo the prompt" in labelling["failure_messages"]["GraderOutputError"]
    assert report["lists"] == 16 and report["grade_log"] == str(tmp_path / "mine.grades.jsonl")
    assert EvaluatorConfig.from_file(out).name == "mine"
    assert "# WARNING: 2 failed (1 GraderHTTPError, 1 GraderOutputError) of 18" in out.read_text()
    log = JsonlGradeLog(tmp_path / "mine.grades.jsonl")
    logged = {r["query_id"] for r in log.records()}
    assert len(logged) == 16 and not logged & {failing, echoing}
    err = capsys.readouterr().err
    assert "2 failed" in err and KEY not in err
    events = [r for r in caplog.records if r.getMessage() == "crag.calibrate.list_failed"]
    assert sorted(r.__dict__["query_id"] for r in events) == sorted([failing, echoing])
    _no_query_text(
        [err, caplog.text, (tmp_path / "mine.grades.jsonl").read_text(), json.dumps(report)],
        questions,
    )
    # the server answers again: only the two lists are asked for, the rest resumed
    server.reset()
    code, report = _run(server, beir_folder, out, spec="&prompt=rubric")
    assert code == EXIT_OK
    assert report["labelling"] == {
        "labelled": 18, "resumed": 16, "graded": 2, "failed": 0, "not_graded": 0,
    }  # fmt: skip
    assert sorted(s["query"] for s in server.stats()["seen"]) == sorted([failing, echoing])
    assert report["lists"] == 18 and "WARNING" not in out.read_text()


def test_a_server_killed_mid_run_is_survived_and_the_run_resumes(
    recording: Path, beir_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRAG_LLM_API_KEY", KEY)
    server = _start(recording)
    port = server.port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    out = tmp_path / "killed.toml"
    try:
        server.configure(exit_after=5)  # the process dies on the sixth request
        code, report = _run(server, beir_folder, out, *LOOSE, "--stop-after-failures", "2")
        assert not server.running
    finally:
        server.stop()
    assert code == EXIT_SERVICE
    labelling = report["labelling"]
    assert (labelling["graded"], labelling["failed"], labelling["not_graded"]) == (5, 2, 11)
    assert labelling["failures"] == {"GraderConnectionError": 2}
    assert "in a row" in labelling["stopped"]
    assert len(list(JsonlGradeLog(tmp_path / "killed.grades.jsonl").records())) == 5
    # the server is back on its port (the grader's fingerprint holds it): 13 lists to go
    server = _start(recording, port=port)
    try:
        code, report = _run(server, beir_folder, out, *LOOSE, "--stop-after-failures", "2")
        assert server.stats()["requests"] == 13
    finally:
        server.stop()
    assert code == EXIT_OK and report["labelling"]["resumed"] == 5
    assert len(list(JsonlGradeLog(tmp_path / "killed.grades.jsonl").records())) == 18


def test_a_server_refusing_structured_output_is_asked_without_it(
    server: OpenAIServer, beir_folder: Path, tmp_path: Path
) -> None:
    server.configure(refuse_schema=True)
    code, report = _run(server, beir_folder, tmp_path / "new" / "plain.toml")
    assert code == EXIT_OK and report["labelling"]["labelled"] == 18
    assert (tmp_path / "new" / "plain.grades.jsonl").exists()  # beside --out, its folder made
    seen = [s["response_format"] for s in server.stats()["seen"]]
    assert seen == ["json_schema"] + [None] * 18  # refused once, remembered after


def test_the_model_is_checked_before_anything_is_paid_for(
    server: OpenAIServer, beir_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.configure(models=["SmolLM2-135M-Instruct", "qwen2.5:0.5b"])
    code, _ = _run(server, beir_folder, tmp_path / "wrong.toml")
    assert code == EXIT_BAD_INPUT and server.stats()["requests"] == 0
    err = capsys.readouterr().err
    assert "'SmolLM2-135M-Instruct', 'qwen2.5:0.5b'" in err and "GET /models" in err
    assert not (tmp_path / "wrong.toml").exists()
    code, _ = _run(server, beir_folder, tmp_path / "anyway.toml", "--no-model-check")
    assert code == EXIT_OK and server.stats()["requests"] == 18
    server.configure(models=["judge"])
    assert _run(server, beir_folder, tmp_path / "listed.toml")[0] == EXIT_OK


def test_the_label_budget_is_said_before_grading_and_refused_early(
    server: OpenAIServer, beir_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "recall.toml"
    code, _ = _run(server, beir_folder, out, "--guarantee", "recall:0.1")
    assert code == EXIT_BAD_INPUT and server.stats()["requests"] == 0
    err = capsys.readouterr().err
    assert "not graded" in err and "needs at least 22 failed lists" in err
    assert "--grade-anyway" in err and not out.exists()
    # graded all the same: too few failed lists after all, the labels kept for later
    code, _ = _run(server, beir_folder, out, "--guarantee", "recall:0.1", "--grade-anyway")
    assert code == EXIT_BAD_INPUT and server.stats()["requests"] == 18
    err = capsys.readouterr().err
    assert "labels: a recall band" in err and "the 18 labels are kept in" in err
    assert len(list(JsonlGradeLog(tmp_path / "recall.grades.jsonl").records())) == 18


def test_labels_of_one_class_are_warned_of(
    server: OpenAIServer, beir_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.configure(relevant_min=0)  # a grader that says "yes" to every passage
    out = tmp_path / "yes.toml"
    code, _ = _run(server, beir_folder, out)
    assert code == EXIT_OK
    assert "all 18 lists good" in capsys.readouterr().err
    assert "# WARNING: the grader labelled all 18 lists good" in out.read_text()


def test_the_graders_settings_come_from_the_spec_and_a_file(
    server: OpenAIServer, beir_folder: Path, tmp_path: Path
) -> None:
    settings = tmp_path / "grader.toml"
    settings.write_text(
        'prompt = "rubric"\nmax_tokens = 64\nmax_passage_chars = 2000\n[extra_body]\nseed = 5\n'
    )
    out = tmp_path / "set.toml"
    code, report = _run(
        server, beir_folder, out, "--grader-config", str(settings), spec="&timeout=60"
    )
    assert code == EXIT_OK
    grader = report["grader"]
    assert "prompt=rubric@v1" in grader and "max_tokens=64" in grader
    assert "passage_chars=2000" in grader and "extra=" in grader and "schema=" in grader
    for bad in ("timout = 5\n", "max_tokens = 64\n"):  # unknown; given twice (spec and file)
        settings.write_text(bad)
        code, _ = _run(
            server, beir_folder, out, "--grader-config", str(settings), spec="&max_tokens=32"
        )
        assert code == EXIT_BAD_INPUT
    base = ["calibrate", "--data-dir", f"{beir_folder}:test", "--no-encode", "--out", str(out)]
    assert main([*base, "--grade-anyway"]) == EXIT_BAD_INPUT  # options of --grader alone
    assert main([*base, "--grader", "qrels", "--grader-config", str(settings)]) == (EXIT_BAD_INPUT)
