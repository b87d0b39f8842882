"""A long command that needs an extra says so before it starts: exit 2, the extra named.

Each case makes one module missing (``sys.modules[name] = None``, as
tests/test_optional_dependencies.py does) and runs the command in process: it must
fail at once, with nothing written, where it used to run for seconds and then report
the retriever failing on every simulated query.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT


def missing(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    for name in [module, *(n for n in sys.modules if n.startswith(f"{module}."))]:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize(
    ("module", "argv", "extra", "says"),
    [
        ("matplotlib", ["bench"], "bench", "crag-heuristic bench needs 'matplotlib'"),
        ("torch", ["bench"], "bench", "--no-self-calibration does without"),
        ("torch", ["calibrate", "--self"], "bench", "simulated queries on a --data-dir folder"),
        ("sentence_transformers", ["calibrate", "--self"], "bench", "MiniLM encodes them"),
        ("sklearn", ["calibrate", "--self"], "calibrate", "fitting a gate"),
        ("scipy", ["calibrate"], "calibrate", "fitting a gate"),
    ],
)
def test_a_missing_extra_is_named_before_any_work(
    module: str,
    argv: list[str],
    extra: str,
    says: str,
    beir_folder: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    missing(monkeypatch, module)
    out = tmp_path / "out"
    code = main([*argv, "--data-dir", str(beir_folder), "--out", str(out)], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT, err
    assert f"pip install 'crag-heuristic[{extra}]'" in err and says in err
    assert not out.exists()
