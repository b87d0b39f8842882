"""What a user sees on a corpus of their own: index it, retrieve from it, serve it.

    python benchmarks/own_corpus.py [--data-dir ../shared/data/scifact]
        [--index-runs 2] [--retrieve-runs 20] [--serve-queries 300]
        [--out benchmarks/results/own_corpus]

On a BEIR folder's ``corpus.jsonl`` (SciFact: 5,183 documents), as the command
line runs it, every command a process of its own timed from outside (wall
clock around it), each figure a p50 / p99 or a ratio measured in the same run:

1. ``index``: ``crag-heuristic index --docs corpus.jsonl --out DIR`` (the LSA
   embedder), ``--index-runs`` times; the command's own stage times (its JSON
   summary) give the embedding's own time (fitting the LSA projection and
   embedding the documents) and the gate's self-calibration; the rest is the
   process's time without them.
2. ``retrieve``: ``crag-heuristic retrieve --index DIR --query Q`` against
   ``crag-heuristic retrieve --query Q`` (the bundled sample), alternated run by
   run (which goes first alternating too), ``--retrieve-runs`` each, the
   collection's queries in turn; two warm-up runs each first. The processes run
   with their bytecode cached (``PYTHONPYCACHEPREFIX`` a folder of the run's,
   ``PYTHONDONTWRITEBYTECODE`` unset), as an installed package has it.
3. ``serve``: ``crag-heuristic serve --index DIR --port 0`` in a process of its
   own; ``POST /v1/retrieve`` (k = 10) from this process over one keep-alive
   connection (httpx) against ``CRAG.from_index_dir(DIR).retrieve(query, 10)``
   in this process, alternated query by query, each query once on each side
   (neither router's cache has seen it).

The machine is shared with other jobs (its load average is recorded): read the
ratios, which compare calls made in the same run, alternated.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from crag_heuristic import CRAG
from crag_heuristic.bench import percentiles
from crag_heuristic.serve import create_app, serving

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "own_corpus"
GOAL_RETRIEVE_S = 1.0
GOAL_RETRIEVE_OVER_SAMPLE = 2.0
GOAL_INDEX_REST_S = 5.0
GOAL_SERVE_OVERHEAD_MS = 2.0


def _command() -> list[str]:
    script = shutil.which("crag-heuristic")
    return [script] if script else [sys.executable, "-m", "crag_heuristic"]


def _environment(cache: Path) -> dict[str, str]:
    """This process's environment, bytecode cached under ``cache``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr[-500:]}")
    return seconds, done.stdout


def _queries(data_dir: Path, n: int) -> list[str]:
    lines = (data_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines if line.strip()]
    return [texts[i % len(texts)] for i in range(n)]


# -- 1. index -------------------------------------------------------------------------------


def index_section(data_dir: Path, out: Path, runs: int, env: dict[str, str]) -> dict[str, Any]:
    """``crag-heuristic index`` whole processes; the embedding's own time apart."""
    wall, own, rest, stages, calibrating = [], [], [], [], []
    for _ in range(runs):
        seconds, stdout = _timed(
            [*_command(), "index", "--docs", str(data_dir / "corpus.jsonl"), "--out", str(out),
             "--quiet"],
            env,
        )  # fmt: skip
        summary = json.loads(stdout)
        embedding = summary["seconds"]["fitting"] + summary["seconds"]["embedding"]
        gate = summary["seconds"].get("calibrating", 0.0)  # the gate's self-calibration
        wall.append(seconds)
        own.append(embedding)
        calibrating.append(gate)
        rest.append(seconds - embedding - gate)
        stages.append(summary["seconds"])
    return {
        "runs": runs,
        "documents": summary["documents"],
        "bytes": summary["bytes"],
        "process_s": percentiles(wall),
        "embedding_s": percentiles(own),
        "calibrating_s": percentiles(calibrating),
        "without_embedding_s": percentiles(rest),
        "stages_s": stages,
    }


# -- 2. retrieve ----------------------------------------------------------------------------


def retrieve_section(
    index: Path, queries: list[str], sample_queries: list[str], env: dict[str, str]
) -> dict[str, Any]:
    """``retrieve --index DIR`` against ``retrieve`` on the bundled sample, alternated."""
    own = [*_command(), "retrieve", "--index", str(index), "--quiet", "--query"]
    sample = [*_command(), "retrieve", "--quiet", "--query"]
    for i in range(2):  # warm the file cache and write the bytecode
        _timed([*own, queries[i]], env)
        _timed([*sample, sample_queries[i]], env)
    times: dict[str, list[float]] = {"index_dir_s": [], "sample_s": []}
    ratios = []
    for i, query in enumerate(queries):
        pair = [("index_dir_s", [*own, query]), ("sample_s", [*sample, sample_queries[i]])]
        seconds = {}
        for name, argv in pair if i % 2 == 0 else pair[::-1]:
            seconds[name] = _timed(argv, env)[0]
            times[name].append(seconds[name])
        ratios.append(seconds["index_dir_s"] / seconds["sample_s"])
    out: dict[str, Any] = {"runs": len(queries)}
    for name, values in times.items():
        out[name] = percentiles(values)
    out["index_dir_over_sample_p50"] = out["index_dir_s"]["p50"] / out["sample_s"]["p50"]
    out["index_dir_over_sample_median"] = sorted(ratios)[len(ratios) // 2]
    return out


# -- 3. serve -------------------------------------------------------------------------------


def serve_section(index: Path, queries: list[str], env: dict[str, str]) -> dict[str, Any]:
    """HTTP to ``crag-heuristic serve`` against the library call, alternated; the
    server's own time per request read from its access events (``crag.http ... ms=``)."""
    command = [*_command(), "serve", "--index", str(index), "--port", "0"]
    lines: list[str] = []
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) as server:
        try:
            assert server.stderr is not None
            line = server.stderr.readline()
            while line and " on http" not in line:
                line = server.stderr.readline()
            if not line:
                raise RuntimeError(f"{shlex.join(command)} did not start")
            base = line.split(" on ")[1].split()[0]
            stderr = server.stderr
            reader = threading.Thread(target=lambda: lines.extend(stderr), daemon=True)
            reader.start()  # drained as it comes: a full pipe would stall the server
            crag = CRAG.from_index_dir(index)
            times: dict[str, list[float]] = {"http_ms": [], "library_ms": []}
            with httpx.Client(base_url=base, timeout=30) as client:
                for query in queries[:5]:  # warm both: the connection, the code paths
                    client.post("/v1/retrieve", json={"query": f"{query} warm", "k": 10})
                    crag.retrieve(f"{query} warm", 10)

                def http(query: str) -> None:
                    response = client.post("/v1/retrieve", json={"query": query, "k": 10})
                    response.raise_for_status()
                    response.json()

                def library(query: str) -> None:
                    crag.retrieve(query, 10)

                calls = [("http_ms", http), ("library_ms", library)]
                for i, query in enumerate(queries):
                    for name, call in calls if i % 2 == 0 else calls[::-1]:
                        started = time.perf_counter()
                        call(query)
                        times[name].append((time.perf_counter() - started) * 1e3)
        finally:
            server.terminate()
            server.wait(timeout=30)
    in_thread = _in_thread(index, queries)
    handled = [float(m) for m in re.findall(r" crag\.http .*? ms=([0-9.]+)", "".join(lines))]
    out: dict[str, Any] = {"queries": len(queries), "k": 10}
    for name, values in times.items():
        out[name] = percentiles(values)
    out["server_ms"] = percentiles(handled[-len(queries) :])  # the timed requests' events
    out["in_thread"] = in_thread
    out["server_minus_library_p50_ms"] = out["server_ms"]["p50"] - out["library_ms"]["p50"]
    out["http_minus_server_p50_ms"] = out["http_ms"]["p50"] - out["server_ms"]["p50"]
    out["http_minus_library_p50_ms"] = out["http_ms"]["p50"] - out["library_ms"]["p50"]
    paired = sorted(h - x for h, x in zip(times["http_ms"], times["library_ms"], strict=True))
    out["paired_difference_median_ms"] = paired[len(paired) // 2]
    return out


def _in_thread(index: Path, queries: list[str]) -> dict[str, Any]:
    """The same alternation with the service in a thread of this process (``serving``):
    no other process to wake, the GIL shared."""
    crag, served = CRAG.from_index_dir(index), CRAG.from_index_dir(index)
    times: dict[str, list[float]] = {"http_ms": [], "library_ms": []}
    with serving(create_app(served)) as base, httpx.Client(base_url=base, timeout=30) as client:
        for query in queries[:5]:
            client.post("/v1/retrieve", json={"query": f"{query} warm", "k": 10})
            crag.retrieve(f"{query} warm", 10)
        for i, query in enumerate(queries):
            for name in ("http_ms", "library_ms")[:: 1 if i % 2 == 0 else -1]:
                started = time.perf_counter()
                if name == "http_ms":
                    client.post("/v1/retrieve", json={"query": query, "k": 10}).json()
                else:
                    crag.retrieve(query, 10)
                times[name].append((time.perf_counter() - started) * 1e3)
    out: dict[str, Any] = {name: percentiles(values) for name, values in times.items()}
    out["http_minus_library_p50_ms"] = out["http_ms"]["p50"] - out["library_ms"]["p50"]
    return out


# -- the report -----------------------------------------------------------------------------


def goals(report: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) for each goal of issue 27 this benchmark measures."""
    index, retrieve, serve = report["index"], report["retrieve"], report["serve"]
    rest = index["without_embedding_s"]["p50"]
    own = retrieve["index_dir_s"]["p50"]
    ratio = retrieve["index_dir_over_sample_p50"]
    overhead = serve["http_minus_library_p50_ms"]
    return [
        (
            f"index <= {GOAL_INDEX_REST_S:g} s plus the embedding's own time",
            f"{rest:.2f} s + {index['embedding_s']['p50']:.2f} s",
            rest <= GOAL_INDEX_REST_S,
        ),
        (f"retrieve --index DIR <= {GOAL_RETRIEVE_S:g} s per process", f"{own:.2f} s", own <= 1),
        (
            f"retrieve --index DIR <= {GOAL_RETRIEVE_OVER_SAMPLE:g}x the bundled sample's run",
            f"{ratio:.2f}x",
            ratio <= GOAL_RETRIEVE_OVER_SAMPLE,
        ),
        (
            f"serve: p50 over HTTP <= the library call + {GOAL_SERVE_OVERHEAD_MS:g} ms",
            f"+{overhead:.2f} ms",
            overhead <= GOAL_SERVE_OVERHEAD_MS,
        ),
    ]


def _cell(cell: dict[str, float], scale: float = 1.0, digits: int = 2) -> str:
    return f"{cell['p50'] * scale:.{digits}f} / {cell['p99'] * scale:.{digits}f}"


def to_markdown(report: dict[str, Any]) -> str:
    index, retrieve, serve = report["index"], report["retrieve"], report["serve"]
    start, end = report["load_average_start"], report["load_average_end"]
    lines = [
        f"# Own corpus: {report['collection']} ({index['documents']:,} documents)",
        "",
        f"`{report['command']}`",
        "",
        f"Python {report['python']}, {report['cpus']} CPUs shared with other jobs: load average "
        f"{start[0]:.1f} at the start, {end[0]:.1f} at the end. Whole processes timed from "
        "outside; every ratio compares runs of this benchmark, alternated.",
        "",
        "## Goals",
        "",
        "| goal | measured | |",
        "|---|---:|---|",
        *(
            f"| {goal} | {measured} | {'met' if ok else '**not met**'} |"
            for goal, measured, ok in goals(report)
        ),
        "",
        f"## index ({index['runs']} runs, s, p50 / p99)",
        "",
        "| | s |",
        "|---|---:|",
        f"| the whole process | {_cell(index['process_s'])} |",
        f"| the embedding's own (fitting LSA, embedding the documents) | "
        f"{_cell(index['embedding_s'])} |",
        f"| the gate's self-calibration (300 simulated queries) | "
        f"{_cell(index.get('calibrating_s', {'p50': 0.0, 'p99': 0.0}))} |",
        f"| the rest (reading, analysing once, BM25, statistics, writing) | "
        f"{_cell(index['without_embedding_s'])} |",
        "",
        f"The directory holds {index['bytes'] / 1e6:.1f} MB. The command's stages, last run: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in index["stages_s"][-1].items())
        + ".",
        "",
        f"## retrieve, a process each ({retrieve['runs']} runs each, alternated; s)",
        "",
        "| command | p50 / p99 s |",
        "|---|---:|",
        f"| `crag-heuristic retrieve --index DIR` ({index['documents']:,} documents) | "
        f"{_cell(retrieve['index_dir_s'])} |",
        f"| `crag-heuristic retrieve` (the bundled sample, 64 documents) | "
        f"{_cell(retrieve['sample_s'])} |",
        "",
        f"Ratio of the p50s {retrieve['index_dir_over_sample_p50']:.2f}x; median of the paired "
        f"runs' ratios {retrieve['index_dir_over_sample_median']:.2f}x.",
        "",
        f"## serve ({serve['queries']} queries, k = {serve['k']}, alternated; ms)",
        "",
        "| call | p50 / p99 ms |",
        "|---|---:|",
        f"| `POST /v1/retrieve` to `crag-heuristic serve --index DIR` (another process) | "
        f"{_cell(serve['http_ms'])} |",
        f"| `CRAG.from_index_dir(DIR).retrieve(query, 10)` in this process | "
        f"{_cell(serve['library_ms'])} |",
        f"| the server's own time per request, arrival to answer (its `crag.http` events) | "
        f"{_cell(serve['server_ms'])} |",
        "",
        f"p50 over HTTP minus the library's p50: {serve['http_minus_library_p50_ms']:+.2f} ms "
        f"(median of the paired differences {serve['paired_difference_median_ms']:+.2f} ms): "
        f"{serve['server_minus_library_p50_ms']:+.2f} ms in the server's process (reading "
        "the body, the async router, writing the JSON) and "
        f"{serve['http_minus_server_p50_ms']:+.2f} ms on the way (the client, the loopback "
        "socket, and waking the other process on the shared cores). With the service in a "
        "thread of the benchmark's process instead (`serving`: no other process to wake): "
        f"{_cell(serve['in_thread']['http_ms'])} ms over HTTP against "
        f"{_cell(serve['in_thread']['library_ms'])} ms, "
        f"{serve['in_thread']['http_minus_library_p50_ms']:+.2f} ms at the p50.",
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "own_corpus",
        "command": shlex.join(["python", "benchmarks/own_corpus.py", *args.argv]),
        "collection": args.data_dir.resolve().name,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="own-corpus-") as folder:
        work = Path(folder)
        env = _environment(work / "pycache")
        index = work / "index"
        report["index"] = index_section(args.data_dir, index, args.index_runs, env)
        queries = _queries(args.data_dir, args.retrieve_runs)
        samples = [q["text"] for q in _sample_queries()]
        sample_queries = [samples[i % len(samples)] for i in range(args.retrieve_runs)]
        report["retrieve"] = retrieve_section(index, queries, sample_queries, env)
        report["serve"] = serve_section(index, _queries(args.data_dir, args.serve_queries), env)
    report["load_average_end"] = os.getloadavg()
    report["goals"] = [{"goal": g, "measured": m, "met": ok} for g, m, ok in goals(report)]
    return report


def _sample_queries() -> list[dict[str, Any]]:
    from crag_heuristic.sample import load_sample_queries

    return load_sample_queries()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "scifact"
    )
    parser.add_argument("--index-runs", type=int, default=2)
    parser.add_argument("--retrieve-runs", type=int, default=20)
    parser.add_argument("--serve-queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    report = run(args)
    markdown = to_markdown(report)
    print(markdown)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "own_corpus.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "own_corpus.md").write_text(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
