"""`crag-heuristic retrieve` and `index` end to end on real FAISS files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import faiss
import pytest

from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK, EXIT_SERVICE
from crag_heuristic._sample import load_sample_corpus


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return main(argv, out=out), out.getvalue()


def test_retrieve_on_the_bundled_sample() -> None:
    code, out = run(["retrieve", "-q", "How much caffeine is in a cup of brewed coffee?"])
    assert code == EXIT_OK
    data = json.loads(out)
    assert data["verdict"] in {"relevant", "partial", "irrelevant"}
    assert data["chunks"][0]["id"].startswith("coffee-")
    assert data["chunks"][0]["score_kind"] == "cosine"
    assert set(data) >= {"strategy", "initial_evaluation", "timings_ms", "web_error", "notes"}


def test_pretty_table() -> None:
    code, out = run(["retrieve", "-q", "How were Roman roads built?", "--pretty", "--k", "3"])
    assert code == EXIT_OK
    assert out.startswith("query      How were Roman roads built?")
    assert "strategy" in out and "cosine: inner product of unit vectors" in out
    rows = [line for line in out.splitlines() if line[:2].strip().isdigit()]
    assert len(rows) == 3 and "rome-" in rows[0]


def _docs_file(tmp_path: Path) -> Path:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "\n".join(
            json.dumps({"id": c.id, "text": c.text, "source": c.source})
            for c in load_sample_corpus()
        ),
        encoding="utf-8",
    )
    return docs


def test_index_then_retrieve_on_user_files(tmp_path: Path, capsys: Any) -> None:
    docs = _docs_file(tmp_path)
    for metric in ("ip", "l2"):
        index = tmp_path / metric
        code, out = run(
            [
                "index",
                "--docs",
                str(docs),
                "--out",
                str(index),
                "--metric",
                metric,
                "--no-calibrate",
            ]
        )
        summary = json.loads(out)
        assert code == EXIT_OK and summary["documents"] == 64 and summary["metric"] == metric
        assert set(summary["seconds"]) == {
            "reading", "analysing", "fitting", "embedding", "writing", "total",
        }  # fmt: skip
        assert faiss.read_index(str(index / "vectors.faiss")).ntotal == 64
    results = {}
    query = ["retrieve", "-q", "queen honeybee colony", "--quiet"]
    for metric in ("ip", "l2"):
        code, out = run([*query, "--index", str(tmp_path / metric)])
        assert code == EXIT_OK
        results[metric] = json.loads(out)["retrieved"]
    # the same cosines whether FAISS returned inner products or squared L2 distances
    assert [c["id"] for c in results["ip"]] == [c["id"] for c in results["l2"]]
    for a, b in zip(results["ip"], results["l2"], strict=True):
        assert abs(a["score"] - b["score"]) < 1e-4
        assert (
            b["metadata"]["metric"] == "l2"
            and abs(b["metadata"]["raw_score"] - (2 - 2 * b["score"])) < 1e-4
        )
    capsys.readouterr()
    # the old form (a FAISS file of one's own with its docs) still works, refitting the
    # same LSA on every call: the same chunks as the index directory, and a note saying so
    vectors = str(tmp_path / "ip" / "vectors.faiss")
    code, out = run(
        ["retrieve", "-q", "queen honeybee colony", "--index", vectors, "--docs", str(docs)]
    )
    assert code == EXIT_OK
    old = json.loads(out)["retrieved"]
    assert [c["id"] for c in old] == [c["id"] for c in results["ip"]]
    assert [c["score"] for c in old] == pytest.approx([c["score"] for c in results["ip"]], abs=1e-5)
    assert "build an index directory once" in capsys.readouterr().err


def test_index_refuses_to_write_over_something_else(tmp_path: Path, capsys: Any) -> None:
    docs = _docs_file(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    (tmp_path / "file").write_text("mine")
    for out in ("notes", "file", "old.faiss"):
        code, _ = run(
            ["index", "--docs", str(docs), "--out", str(tmp_path / out), "--no-calibrate"]
        )
        assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "IndexDirectory" not in err and "holding other files" in err and "a file" in err
    assert "index writes a directory now" in err
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"
    # an index directory is replaced whole; nothing is left beside it
    again = ["index", "--docs", str(docs), "--out", str(tmp_path / "idx"), "--no-calibrate"]
    assert run(again)[0] == EXIT_OK
    assert run(again)[0] == EXIT_OK
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "file", "idx", "notes"]


def test_retrieve_bad_input(tmp_path: Path, capsys: object) -> None:
    assert run(["retrieve", "-q", "x", "--index", "missing.faiss"])[0] == EXIT_BAD_INPUT
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "text": "x"}\n')
    (tmp_path / "bad.faiss").write_bytes(b"not an index")
    assert (
        run(
            [
                "retrieve",
                "-q",
                "x",
                "--index",
                str(tmp_path / "bad.faiss"),
                "--docs",
                str(tmp_path / "docs.jsonl"),
            ]
        )[0]
        == EXIT_BAD_INPUT
    )
    assert (
        run(
            [
                "retrieve",
                "-q",
                "x",
                "--index",
                str(tmp_path / "bad.faiss"),
                "--docs",
                str(tmp_path / "docs.jsonl"),
                "--embedder",
                "nope",
            ]
        )[0]
        == EXIT_BAD_INPUT
    )


def test_console_script_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "crag_heuristic", "retrieve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--index" in result.stdout and "bundled sample" in result.stdout


def test_retrieve_with_a_real_redis_and_an_unreachable_searxng() -> None:
    from crag_testkit import RedisServer

    with RedisServer() as server:
        argv = [
            "retrieve",
            "-q",
            "Which chess openings are best for beginners?",
            "--redis",
            server.url,
            "--searxng",
            "http://127.0.0.1:9",
        ]
        code, out = run(argv)
        first = json.loads(out)
        second = json.loads(run(argv)[1])
    # a service failed (the web): exit 3, and the degraded result is still printed
    assert code == EXIT_SERVICE
    assert first["verdict"] in {"partial", "irrelevant"}
    assert first["web_error"] is not None and first["web_error"].startswith("WebSearch")
    assert first["cache_hit"] is False and second["cache_hit"] is True


def test_exit_codes_follow_the_documented_contract(capsys: Any) -> None:
    """0: everything asked for worked; 3: a service failed (here the web search: the
    result is printed all the same, with web_error); the help says so."""
    query = ["retrieve", "-q", "Which chess openings are best for beginners?"]
    code, out = run([*query, "--searxng", "http://127.0.0.1:9"])
    assert code == EXIT_SERVICE
    assert json.loads(out)["web_error"].startswith("WebSearchConnectionError")
    assert "the web search failed" in capsys.readouterr().err
    code, out = run([*query, "--pretty"])  # no web asked for: nothing failed
    assert code == EXIT_OK and "no web searcher configured" in out
    help_text = subprocess.run(
        [sys.executable, "-m", "crag_heuristic", "retrieve", "--help"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "3 a service failed" in help_text and "web_error" in help_text


def test_verbose_and_debug_are_accepted_after_the_sub_command() -> None:
    from crag_heuristic._cli import build_parser

    parser = build_parser()
    for argv in (
        ["-v", "--debug", "retrieve", "-q", "x"],
        ["retrieve", "-q", "x", "-v", "--debug"],
    ):
        args = parser.parse_args(argv)
        assert args.verbose is True and args.debug is True
    args = parser.parse_args(["retrieve", "-q", "x"])
    assert args.verbose is False and args.debug is False
    assert parser.parse_args(["--verbose", "evaluate", "-q", "x", "-c", "f"]).verbose is True


def test_verbose_prints_each_event_with_its_fields_as_it_happens() -> None:
    """--verbose: the library's events with their key-values (they used to show their
    names only) and the router's stage events in order; never the query's text."""
    query = "How were Roman roads built?"
    done = subprocess.run(
        [sys.executable, "-m", "crag_heuristic", "retrieve", "-q", query, "--k", "3", "-v"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == EXIT_OK, done.stderr
    lines = done.stderr.splitlines()
    retrieve = next(line for line in lines if " crag.retrieve " in line)
    assert "chunks=3 depth=3" in retrieve and "query_id=" in retrieve
    stages = [line.split("stage=")[1].split()[0] for line in lines if " crag.stage " in line]
    assert stages == ["retrieved", "evaluated", "done"]
    evaluated = next(line for line in lines if "stage=evaluated" in line)
    assert "verdict=relevant" in evaluated and 'grades="rome-4:relevant:' in evaluated
    # the stage lines arrive as the stages end: the retrieval before its evaluation
    assert lines.index(retrieve) < lines.index(evaluated)
    assert lines.index(next(x for x in lines if "stage=retrieved" in x)) < lines.index(
        next(x for x in lines if " crag.evaluate " in x)
    )
    assert "Roman roads" not in done.stderr
    assert json.loads(done.stdout)["verdict"] == "relevant"  # the result as without -v
