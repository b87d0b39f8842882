"""The long commands show their stages on a terminal, and nothing elsewhere or with --quiet:
calibrate --self on an index directory, stats on a docs file (bench: tests/bench)."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic._cli import main


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def stages(text: str, command: str) -> list[str]:
    """The stages whose line ended ("... done in N s"), in order."""
    lines = [line.split("\r")[-1] for line in text.split("\n")]
    prefix = f"crag-heuristic {command}: "
    ended = [
        line[len(prefix) :].split(" done in ")[0]
        for line in lines
        if line.startswith(prefix) and " done in " in line
    ]
    return [re.sub(r" [\d,]+/[\d,]+ \(\d+ %\)$", "", stage) for stage in ended]


def run(argv: list[str], monkeypatch: pytest.MonkeyPatch, *, terminal: bool) -> str:
    stderr: Any = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    assert main(argv, out=io.StringIO()) == 0
    return str(stderr.getvalue())


def test_calibrate_self_names_its_stages_on_a_terminal_only(
    built: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["calibrate", "--self", "--index", str(built.path), "--queries", "60"]
    shown = run([*argv, "--out", str(tmp_path / "a.toml")], monkeypatch, terminal=True)
    assert stages(shown, "calibrate") == [
        "loading the index",
        "loading its parts",
        "simulating queries",
        "searching the simulated queries",
        "fitting the gate",
    ]
    assert "searching the simulated queries 0/" in shown  # counted as it goes


def test_stats_names_its_stages_unless_quiet_or_piped(
    docs_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "s.npz"
    argv = ["stats", "--docs", str(docs_file), "--out", str(out)]
    shown = run(argv, monkeypatch, terminal=True)
    assert stages(shown, "stats") == ["counting the documents (local engine)", f"writing {out}"]
    quiet = run([*argv, "--quiet"], monkeypatch, terminal=True)
    piped = run(argv, monkeypatch, terminal=False)
    assert "crag-heuristic stats:" not in quiet + piped
