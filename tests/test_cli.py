from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import DEFAULT_PROFILE, available_profiles
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK, read_chunks
from crag_heuristic._text.corpus import write_npz


def write_chunks(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def chunks_file(tmp_path: Path) -> Path:
    return write_chunks(
        tmp_path / "chunks.jsonl",
        [
            {
                "id": "a",
                "text": "Solar panels convert sunlight. Their efficiency is about twenty percent.",
                "score": 0.8,
                "score_kind": "cosine",
                "source": "s1",
            },
            {"id": "b", "text": "Wind turbines spin in the wind.", "score": 0.4, "source": "s2"},
        ],
    )


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = main(argv, out=out)
    return code, out.getvalue()


def test_evaluate_prints_the_evaluation(chunks_file: Path) -> None:
    code, out = run(
        [
            "evaluate",
            "-q",
            "solar panel efficiency",
            "-c",
            str(chunks_file),
            "--score-kind",
            "cosine",
            "--profile",
            "synapse",
        ]
    )
    assert code == EXIT_OK
    data = json.loads(out)
    assert data["verdict"] == "partial"
    assert data["score"] == pytest.approx(0.696)
    assert [c["chunk_id"] for c in data["chunks"]] == ["a", "b"]


def test_profile_set_and_refine(chunks_file: Path) -> None:
    code, out = run(
        [
            "evaluate",
            "-q",
            "solar panel efficiency",
            "-c",
            str(chunks_file),
            "--score-kind",
            "cosine",
            "--profile",
            "crag",
            "--set",
            "thresholds.relevant=0.6",
            "--refine",
            "--token-budget",
            "50",
        ]
    )
    data = json.loads(out)
    assert code == EXIT_OK and data["verdict"] == "relevant" and data["profile"] == "crag+overrides"
    assert data["refinement"]["token_budget"] == 50


def test_config_file(chunks_file: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('profile = "crag"\n')
    code, out = run(["evaluate", "-q", "solar", "-c", str(chunks_file), "--config", str(config)])
    assert code == EXIT_OK and json.loads(out)["profile"] == "crag"


@pytest.mark.parametrize(
    ("rows_or_bytes", "extra", "message"),
    [
        (b'{"id": "a", "text": "x"}\n{not json}\n', [], "chunks.jsonl:2: invalid JSON"),
        (b'{"id": "a", "text": "\xff"}\n', [], "not valid UTF-8"),
        (b'{"id": "a", "text": "x", "score": "NaN"}\n', [], "chunks.jsonl:1"),
        (b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', [], "duplicate"),
        (b'{"id": "a", "text": "x"}\n', ["--profile", "nope"], "unknown profile"),
        (b'{"id": "a", "text": "x"}\n', ["--set", "thresholds.relevant=2"], "thresholds.relevant"),
        (b'{"id": "a", "text": "x"}\n', ["--set", "oops"], "key=value"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rows_or_bytes: bytes,
    extra: list[str],
    message: str,
) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_bytes(rows_or_bytes)
    code, _ = run(["evaluate", "-q", "solar", "-c", str(path), *extra])
    assert code == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def test_missing_file_and_blank_query(
    chunks_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["evaluate", "-q", "x", "-c", "/nonexistent.jsonl"])[0] == EXIT_BAD_INPUT
    assert run(["evaluate", "-q", "  ", "-c", str(chunks_file)])[0] == EXIT_BAD_INPUT
    assert "invalid query" in capsys.readouterr().err


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == EXIT_BAD_INPUT
    assert "evaluate" in capsys.readouterr().err


def test_internal_errors_exit_1(
    monkeypatch: pytest.MonkeyPatch, chunks_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from crag_heuristic import Evaluator

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(Evaluator, "evaluate", boom)
    assert run(["evaluate", "-q", "x", "-c", str(chunks_file)])[0] == 1
    assert "internal error: bug" in capsys.readouterr().err


def test_read_chunks_accepts_a_json_array(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('[{"id": "a", "text": "x"}, {"_id": 2, "text": "y", "title": "T"}]')
    chunks = read_chunks(path, default_kind=None)
    assert [c.id for c in chunks] == ["a", "2"] and chunks[1].text == "T\ny"


def test_module_entry_point_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "crag_heuristic", "evaluate", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--chunks" in result.stdout and "exit codes" in result.stdout


def test_profiles_command() -> None:
    code, out = run(["profiles"])
    assert code == EXIT_OK and "synapse" in out.split()
    assert out.splitlines().count(f"{DEFAULT_PROFILE}  (the default)") == 1
    assert len(out.splitlines()) == len(available_profiles())
    code, out = run(["profiles", "crag"])
    assert json.loads(out)["thresholds"] == {"relevant": 0.7, "partial": 0.3}


def test_retrieve_imports_nothing_it_does_not_use() -> None:
    """The command line's start: no structlog (with its dev console and rich), no web
    client, no Dask, no scikit-learn, unless the command needs them."""
    code = (
        "import io, sys\n"
        "from crag_heuristic._cli import main\n"
        "code = main(['retrieve', '--query', 'How do honeybees dance?'], out=io.StringIO())\n"
        "unused = sorted({m.split('.')[0] for m in sys.modules} & {'structlog', 'rich', "
        "'httpx', 'httpcore', 'dask', 'distributed', 'sklearn', 'scipy', 'torch', "
        "'prometheus_client', 'redis'})\n"
        "print(code, ','.join(unused))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0"], done.stdout + done.stderr


def test_evaluate_pretty_is_a_table_like_retrieve_pretty(chunks_file: Path) -> None:
    argv = ["evaluate", "-q", "solar panel efficiency", "-c", str(chunks_file), "--pretty"]
    code, out = run([*argv, "--refine"])
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[1].startswith("verdict    ") and lines[3].startswith("refined    ")
    header = next(line.split() for line in lines if line.split()[:2] == ["#", "chunk"])
    assert header == ["#", "chunk", "score", "kind", "grade", "text"]
    rows = [line.split() for line in lines if line[:2].strip().isdigit()]
    assert [row[1:4] for row in rows] == [["a", "0.800", "cosine"], ["b", "0.400", "unknown"]]


def test_retrieve_pretty_labels_each_score_with_its_kind() -> None:
    """A corrected list fuses BM25 results into the dense ones: each row says which."""
    code, out = run(["retrieve", "-q", "Who first climbed Mount Everest?", "--pretty"])
    assert code == EXIT_OK
    rows = [line.split() for line in out.splitlines() if line[:2].strip().isdigit()]
    kinds = {row[4] for row in rows}  # rank, id, rrf, score, kind
    assert kinds == {"cosine", "bm25"}, out
    assert "scores     cosine" not in out and "retriever  cosine" in out


@pytest.mark.parametrize("option", [["--embedder", "lsa"], ["--normalized", "yes"]])
def test_options_that_would_do_nothing_are_refused(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run(["retrieve", "-q", "bees", *option])  # the bundled sample's are fixed
    assert code == EXIT_BAD_INPUT
    assert f"{option[0]} go(es) with --index FILE.faiss" in capsys.readouterr().err


def test_an_output_file_follows_the_umask_and_its_missing_folders_are_made(
    tmp_path: Path,
) -> None:
    import numpy as np

    previous = os.umask(0o027)
    try:
        path = write_npz(tmp_path / "a" / "b" / "s.npz", {"x": np.arange(3)})
    finally:
        os.umask(previous)
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o640  # not mkstemp's 0600
    assert [p.name for p in path.parent.iterdir()] == ["s.npz"]  # no temporary file left


def test_an_events_fields_read_as_json_writes_them() -> None:
    """The access log's key=value fields (``crag-heuristic serve``, ``--verbose``): numbers,
    null and booleans as JSON writes them (written without it: a tenth of its cost)."""
    import json
    import logging

    from crag_heuristic._cli.verbose import EventFormatter, fields_text

    values: list[Any] = [0, -5, 2**70, 1.5, 1e-05, 1e300, 0.1 + 0.2, float("nan"), None, True]
    values += [False, [1, "a"], {"b": None}, "plain", "with space", 'a "quote"']
    for value in values:
        expected = value if isinstance(value, str) and value.isalpha() else json.dumps(value)
        assert fields_text({"v": value}) == f"v={expected}"
    record = logging.LogRecord("crag_heuristic", logging.INFO, "", 0, "crag.http", (), None)
    record.__dict__.update(status=200, error=None, ms=1.25)
    assert EventFormatter().format(record).endswith("crag.http status=200 error=null ms=1.25")
