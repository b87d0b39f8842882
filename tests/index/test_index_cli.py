"""``crag-heuristic index`` and the commands that take ``--index DIR``; the progress line."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import Evaluator
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK, read_chunks
from crag_heuristic._cli.progress import Progress
from crag_heuristic.index import IndexDirectory


def run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return main(argv, out=out), out.getvalue()


def test_evaluate_reads_the_statistics_of_the_index(built: IndexDirectory, tmp_path: Path) -> None:
    chunks = tmp_path / "chunks.jsonl"
    retrieved = IndexDirectory.load(built.path).retriever().search("queen honeybee colony", 3)
    chunks.write_text("\n".join(json.dumps(c.to_dict()) for c in retrieved))
    code, out = run(
        ["evaluate", "-q", "queen honeybee colony", "-c", str(chunks), "--index", str(built.path)]
    )
    assert code == EXIT_OK
    expected = Evaluator().evaluate(
        "queen honeybee colony", read_chunks(chunks), built.corpus_stats
    )
    assert json.loads(out) == json.loads(json.dumps(expected.to_dict()))
    assert json.loads(out)["details"]["idf_weighted"] is True
    code, _ = run(["evaluate", "-q", "x", "-c", str(chunks), "--index", str(chunks)])
    assert code == EXIT_BAD_INPUT  # a file is not an index directory


def test_a_directory_that_does_not_match_exits_2_saying_why(
    built: IndexDirectory, tmp_path: Path, capsys: Any
) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(built.path, changed)
    data = bytearray((changed / "stats.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte changed, the size the same
    (changed / "stats.npz").write_bytes(bytes(data))
    code, out = run(["retrieve", "-q", "bees", "--index", str(changed)])
    assert (code, out) == (EXIT_BAD_INPUT, "")
    err = capsys.readouterr().err
    assert (
        "index directory" in err and "stats.npz of another SHA-256" in err and "rebuild it" in err
    )
    for extra in (["--docs", "d.jsonl"], ["--normalized", "yes"]):
        code, _ = run(["retrieve", "-q", "bees", "--index", str(built.path), *extra])
        assert code == EXIT_BAD_INPUT
        assert "does not go with an index directory" in capsys.readouterr().err
    # --embedder names the directory's embedder: "lsa" is its, another spec is not
    assert run(["retrieve", "-q", "bees", "--index", str(built.path), "--embedder", "lsa"])[0] == 0
    capsys.readouterr()
    code, _ = run(["retrieve", "-q", "bees", "--index", str(built.path), "--embedder", "x:y"])
    assert (
        code == EXIT_BAD_INPUT and "embedder is 'a saved LSA projection'" in capsys.readouterr().err
    )
    code, _ = run(["calibrate", "--index", str(built.path), "--out", str(tmp_path / "p.toml")])
    assert code == EXIT_BAD_INPUT and "goes with --self" in capsys.readouterr().err


def test_retrieve_from_an_index_directory_in_a_process_of_its_own(built: IndexDirectory) -> None:
    """The whole command, as a user runs it: no scikit-learn, nothing refitted."""
    code = (
        "import io, sys\n"
        "from crag_heuristic._cli import main\n"
        "out = io.StringIO()\n"
        f"code = main(['retrieve', '-q', 'queen honeybee colony', '--index', {str(built.path)!r}],"
        " out=out)\n"
        "print(code, 'sklearn' in sys.modules, out.getvalue())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    status, sklearn, result = done.stdout.split(" ", 2)
    assert (status, sklearn) == ("0", "False"), done.stderr
    assert json.loads(result)["retrieved"][0]["id"].startswith("honeybees-")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_names_the_stage_on_a_terminal_only() -> None:
    screen = _Terminal()
    progress = Progress("crag-heuristic index", stream=screen, interval=0.0)
    progress("embedding", 0, 5183)
    progress("embedding", 5183, 5183)
    with progress.stage("writing"):
        pass
    progress.close()
    lines = [line.split("\r")[-1] for line in screen.getvalue().split("\n") if line]
    assert lines[0].startswith("crag-heuristic index: embedding 5,183/5,183 (100 %) done in")
    assert lines[1].startswith("crag-heuristic index: writing done in")
    assert set(progress.seconds) == {"embedding", "writing"}
    assert "\r" in screen.getvalue() and "0/5,183 (0 %)" in screen.getvalue()
    piped = io.StringIO()  # not a terminal: nothing
    quiet = Progress("x", stream=piped)
    quiet("embedding", 1, 2)
    quiet.close()
    assert piped.getvalue() == "" and not quiet.enabled
    assert not Progress("x", stream=_Terminal(), enabled=False).enabled  # --quiet
    screen = _Terminal()
    failing = Progress("x", stream=screen)

    def fail() -> None:
        with failing:
            failing("loading", 0, None)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail()
    assert "loading failed after" in screen.getvalue()


def test_every_long_command_takes_quiet() -> None:
    from crag_heuristic._cli import build_parser

    parser = build_parser()
    for argv in (
        ["index", "--docs", "d", "--out", "o"],
        ["retrieve", "-q", "x"],
        ["evaluate", "-q", "x", "-c", "f"],
        ["stats", "--docs", "d", "--out", "o"],
        ["bench", "--data-dir", "d"],
        ["calibrate", "--self", "--data-dir", "d", "--out", "o"],
    ):
        assert parser.parse_args([*argv, "--quiet"]).quiet is True
        assert parser.parse_args(argv).quiet is False


def test_a_long_stage_s_clock_moves_without_a_count() -> None:
    """A step with nothing to count (fitting) still shows its time going on: the line is
    rewritten by the progress's own thread until the stage ends."""
    screen = _Terminal()
    progress = Progress("crag-heuristic calibrate", stream=screen, tick=0.01)
    progress("fitting the gate")
    deadline = time.monotonic() + 60  # a bound on waiting, not a timing claim
    while screen.getvalue().count("\r") < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    progress.close()
    rewrites = [part for part in screen.getvalue().split("\r") if part]
    assert len(rewrites) >= 3 and all("fitting the gate" in part for part in rewrites)
    assert rewrites[-1].startswith("crag-heuristic calibrate: fitting the gate done in")
    after = screen.getvalue()
    time.sleep(0.05)
    assert screen.getvalue() == after  # closed: the thread has stopped
