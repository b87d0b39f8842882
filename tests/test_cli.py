from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK, read_chunks


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
