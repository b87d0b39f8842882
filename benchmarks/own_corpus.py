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
3. ``serve``: ``crag-heuristic serve --index DIR --port 0`` in a process of its own,
   and beside it the floor, a minimal Starlette app on the same uvicorn making the
   same library call and answer (``benchmarks/starlette_floor.py``); ``POST
   /v2/retrieve`` (k = 10) to each from this process over keep-alive connections,
   alternated query by query with ``CRAG.from_index_dir(DIR).retrieve(query, 10)``
   in this process, each query once on each side; throughput at 1 and 8 clients at
   once, rounds alternated between the two servers; the bytes of the answers (v2,
   its grades view, v1) against the chunks' texts.

``retrieve`` and ``serve`` run twice: idle (no load of the benchmark's own) and with
four busy processes of its own (``crag_testkit.background_load``); the report
says the load average of each.

The machine is shared with other jobs (its load average is recorded): read the
ratios, which compare calls made in the same run, alternated.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import testkit_path  # noqa: F401 - puts tests/support (crag_testkit) on sys.path
from crag_testkit import LOADS, background_load, crag_cli

from crag_heuristic import CRAG
from crag_heuristic.bench import alternated, percentiles

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "own_corpus"
FLOOR = ROOT / "benchmarks" / "starlette_floor.py"
GOAL_RETRIEVE_S = 1.0
GOAL_RETRIEVE_OVER_SAMPLE = 2.0
GOAL_INDEX_REST_S = 5.0
GOAL_SERVE_OVERHEAD_MS = 2.0
GOAL_OVER_FLOOR_MS = 0.3
GOAL_THROUGHPUT = 0.95
GOAL_BYTES = 1.2


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
            [*crag_cli(), "index", "--docs", str(data_dir / "corpus.jsonl"), "--out", str(out),
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
    own = [*crag_cli(), "retrieve", "--index", str(index), "--quiet", "--query"]
    sample = [*crag_cli(), "retrieve", "--quiet", "--query"]
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


class _Client:
    """One keep-alive HTTP/1.1 connection (the standard library's: less of the client's
    own time in each figure than httpx's); ``post`` answers (status, body bytes)."""

    def __init__(self, base: str) -> None:
        address = urlsplit(base)
        self.connection = http.client.HTTPConnection(
            address.hostname or "127.0.0.1", address.port, timeout=60
        )

    def post(self, path: str, data: dict[str, Any]) -> tuple[int, bytes]:
        body = json.dumps(data).encode("utf-8")
        self.connection.request(
            "POST", path, body=body, headers={"Content-Type": "application/json"}
        )
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()


def _started(command: list[str], env: dict[str, str], said: str, log: Path) -> tuple[Any, str]:
    """A server process and its base URL (from the stderr line holding ``said``). Its
    stderr goes to the file ``log`` (read after: a pipe drained by a thread of this
    process would take the client's interpreter from it at every access event)."""
    with log.open("w") as sink:
        server = subprocess.Popen(command, stderr=sink, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        found = [line for line in log.read_text().splitlines() if said in line]
        if found:
            return server, found[0].split(said)[1].split()[0]
        time.sleep(0.05)
    server.kill()
    raise RuntimeError(f"{shlex.join(command)} did not start: {log.read_text()[-500:]}")


def _throughput(base: str, queries: list[str], concurrency: int, requests: int) -> float:
    """Requests a second: ``requests`` ``POST /v2/retrieve`` (k = 10) by ``concurrency``
    clients at once, each on its own connection, each request as soon as the last
    answered."""
    clients = [_Client(base) for _ in range(concurrency)]
    counter = iter(range(requests))
    lock = threading.Lock()
    failed: list[int] = []

    def work(client: _Client) -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            status, _ = client.post("/v2/retrieve", {"query": queries[i % len(queries)], "k": 10})
            if status != 200:
                failed.append(status)

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    for client in clients:
        client.close()
    if failed:
        raise RuntimeError(f"{len(failed)} requests failed: {sorted(set(failed))}")
    return requests / seconds


def serve_section(
    index: Path, queries: list[str], env: dict[str, str], concurrency: tuple[int, ...] = (1, 8)
) -> dict[str, Any]:
    """The service against its floor and the library, in the same run (see the module doc):
    p50 latency alternated query by query, throughput alternated round by round, and
    the bytes of the answers."""
    service_log, floor_log = index.parent / "service.log", index.parent / "floor.log"
    service, service_url = _started(
        [*crag_cli(), "serve", "--index", str(index), "--port", "0"], env, " on ", service_log
    )
    floor, floor_url = _started(
        [sys.executable, str(FLOOR), "--index", str(index), "--port", "0"],
        env,
        "floor on ",
        floor_log,
    )
    try:
        crag = CRAG.from_index_dir(index)
        clients = {"service_ms": _Client(service_url), "floor_ms": _Client(floor_url)}
        for query in queries[:10]:  # warm all three: the connections, the code paths
            for client in clients.values():
                client.post("/v2/retrieve", {"query": f"{query} warm", "k": 10})
            crag.retrieve(f"{query} warm", 10)

        def over_http(client: _Client) -> Callable[[int], object]:
            return lambda i: client.post("/v2/retrieve", {"query": queries[i], "k": 10})

        samples = alternated(
            {
                "service_ms": over_http(clients["service_ms"]),
                "floor_ms": over_http(clients["floor_ms"]),
                "library_ms": lambda i: crag.retrieve(queries[i], 10),
            },
            len(queries),
        )
        texts, sizes, sizes_v1, grades = [], [], [], []
        sizer = _Client(service_url)
        for query in queries[:50]:  # what the answers weigh, against the chunks' own texts
            result = crag.retrieve(query, 10)
            texts.append(sum(len(c.text.encode("utf-8")) for c in result.chunks))
            sizes.append(len(sizer.post("/v2/retrieve", {"query": query, "k": 10})[1]))
            sizes_v1.append(len(sizer.post("/v1/retrieve", {"query": query, "k": 10})[1]))
            view = {"query": query, "k": 10, "view": "grades"}
            grades.append(len(sizer.post("/v2/retrieve", view)[1]))
        sizer.close()
        rounds, per_round = 3, max(40, len(queries) // 3)
        throughput: dict[str, Any] = {}
        for level in concurrency:
            rates: dict[str, list[float]] = {"service": [], "floor": []}
            for r in range(rounds):  # alternated round by round, which first alternating
                order = [("service", service_url), ("floor", floor_url)]
                for name, base in order if r % 2 == 0 else order[::-1]:
                    rates[name].append(_throughput(base, queries, level, per_round))
            service_rps = statistics.median(rates["service"])
            floor_rps = statistics.median(rates["floor"])
            throughput[str(level)] = {
                "rounds": rounds, "requests_per_round": per_round,
                "service_rps": service_rps, "floor_rps": floor_rps,
                "service_over_floor": service_rps / floor_rps, "rates": rates,
            }  # fmt: skip
        for client in clients.values():
            client.close()
    finally:
        for process in (service, floor):
            process.terminate()
            process.wait(timeout=30)
    events = service_log.read_text()
    handled = [float(m) for m in re.findall(r" crag\.http .*? ms=([0-9.]+)", events)]
    out: dict[str, Any] = {"queries": len(queries), "k": 10}
    for name, values in samples.items():
        out[name] = percentiles([v / 1000.0 for v in values])
    out["server_ms"] = percentiles(handled[10 : 10 + len(queries)])  # the timed requests'
    out["service_minus_floor_p50_ms"] = out["service_ms"]["p50"] - out["floor_ms"]["p50"]
    out["service_minus_library_p50_ms"] = out["service_ms"]["p50"] - out["library_ms"]["p50"]
    out["floor_minus_library_p50_ms"] = out["floor_ms"]["p50"] - out["library_ms"]["p50"]
    paired = sorted(a - b for a, b in zip(samples["service_ms"], samples["floor_ms"], strict=True))
    out["service_minus_floor_paired_median_ms"] = paired[len(paired) // 2] / 1000.0
    out["throughput"] = throughput
    ratios = sorted(size / text for size, text in zip(sizes, texts, strict=True))
    out["answer_bytes"] = {
        "answers": len(sizes),
        "texts_bytes_p50": statistics.median(texts),
        "v2_bytes_p50": statistics.median(sizes),
        "v1_bytes_p50": statistics.median(sizes_v1),
        "grades_view_bytes_p50": statistics.median(grades),
        "v2_over_texts_median": ratios[len(ratios) // 2],
        "v1_over_texts_median": statistics.median(
            size / text for size, text in zip(sizes_v1, texts, strict=True)
        ),
    }
    return out


# -- the report -----------------------------------------------------------------------------


def goals(report: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(goal, measured, met) for each goal this benchmark measures (issues 27 and 34), the
    service's at each load."""
    index, retrieve = report["index"], report["retrieve"]
    rest = index["without_embedding_s"]["p50"]
    own = retrieve["index_dir_s"]["p50"]
    ratio = retrieve["index_dir_over_sample_p50"]
    out = [
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
    ]
    for at, serve in _serve_runs(report):
        over_library = serve["service_minus_library_p50_ms"]
        over_floor = serve["service_minus_floor_p50_ms"]
        rate = serve["throughput"]["8"]["service_over_floor"]
        weight = serve["answer_bytes"]["v2_over_texts_median"]
        out += [
            (
                f"serve ({at}): p50 over HTTP <= the library call + {GOAL_SERVE_OVERHEAD_MS:g} ms",
                f"{over_library:+.2f} ms",
                over_library <= GOAL_SERVE_OVERHEAD_MS,
            ),
            (
                f"serve ({at}): p50 <= the minimal Starlette app's + {GOAL_OVER_FLOOR_MS:g} ms",
                f"{over_floor:+.2f} ms",
                over_floor <= GOAL_OVER_FLOOR_MS,
            ),
            (
                f"serve ({at}): throughput at concurrency 8 >= {GOAL_THROUGHPUT:g}x the minimal "
                "app's",
                f"{rate:.2f}x",
                rate >= GOAL_THROUGHPUT,
            ),
            (
                f"serve ({at}): answer bytes (v2, k = 10) <= {GOAL_BYTES:g}x the chunks' texts",
                f"{weight:.2f}x",
                weight <= GOAL_BYTES,
            ),
        ]
    return out


def _serve_runs(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, the serve section) idle and loaded."""
    runs = [("idle", report["serve"])]
    loaded = report.get("loaded")
    if loaded:
        runs.append((f"load {loaded['load']['busy_processes']}", loaded["serve"]))
    return runs


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
    ]
    loaded = report.get("loaded")
    for at, retrieved in [("idle", retrieve)] + (
        [(f"load {loaded['load']['busy_processes']}", loaded["retrieve"])] if loaded else []
    ):
        lines += _retrieve_lines(at, index, retrieved)
    for at, serve in _serve_runs(report):
        lines += _serve_lines(at, serve)
    return "\n".join(lines) + "\n"


def _retrieve_lines(at: str, index: dict[str, Any], retrieve: dict[str, Any]) -> list[str]:
    return [
        "",
        f"## retrieve, a process each, {at} ({retrieve['runs']} runs each, alternated; s)",
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
    ]


def _serve_lines(at: str, serve: dict[str, Any]) -> list[str]:
    weight = serve["answer_bytes"]
    lines = [
        "",
        f"## serve, {at} ({serve['queries']} queries, k = {serve['k']}, alternated; ms)",
        "",
        "| call | p50 / p99 ms |",
        "|---|---:|",
        f"| `POST /v2/retrieve` to `crag-heuristic serve --index DIR` (another process) | "
        f"{_cell(serve['service_ms'])} |",
        "| `POST /v2/retrieve` to the minimal Starlette app on the same uvicorn, the same "
        f"call and answer (`benchmarks/starlette_floor.py`, another process) | "
        f"{_cell(serve['floor_ms'])} |",
        f"| `CRAG.from_index_dir(DIR).retrieve(query, 10)` in this process | "
        f"{_cell(serve['library_ms'])} |",
        f"| the service's own time per request, arrival to answer (its `crag.http` events) | "
        f"{_cell(serve['server_ms'])} |",
        "",
        f"The service's p50 minus the minimal app's: {serve['service_minus_floor_p50_ms']:+.2f} "
        f"ms (median of the paired differences "
        f"{serve['service_minus_floor_paired_median_ms']:+.2f} ms); minus the library call's: "
        f"{serve['service_minus_library_p50_ms']:+.2f} ms (the minimal app's: "
        f"{serve['floor_minus_library_p50_ms']:+.2f} ms).",
        "",
        "Throughput (requests a second, `POST /v2/retrieve`, k = 10; each client on its own "
        "keep-alive connection, a request as soon as the last answered; the median of "
        "rounds alternated between the two servers):",
        "",
        "| clients at once | the service | the minimal app | service / app |",
        "|---:|---:|---:|---:|",
    ]
    for level, row in serve["throughput"].items():
        lines.append(
            f"| {level} | {row['service_rps']:.0f} | {row['floor_rps']:.0f} | "
            f"{row['service_over_floor']:.2f}x |"
        )
    lines += [
        "",
        f"An answer's bytes (k = 10, median of {weight['answers']} queries): `/v2/retrieve` "
        f'{weight["v2_bytes_p50"]:,.0f} (its `"view": "grades"`: '
        f"{weight['grades_view_bytes_p50']:,.0f}), `/v1/retrieve` {weight['v1_bytes_p50']:,.0f}, "
        f"against {weight['texts_bytes_p50']:,.0f} bytes of the chunks' texts: "
        f"{weight['v2_over_texts_median']:.2f}x and {weight['v1_over_texts_median']:.2f}x.",
    ]
    return lines


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
        serve_queries = _queries(args.data_dir, args.serve_queries)
        for load in LOADS:  # idle, then with busy processes of this benchmark's own
            with background_load(load) as said:
                retrieved = retrieve_section(index, queries, sample_queries, env)
                served = serve_section(index, serve_queries, env)
            if load == 0:
                report["retrieve"], report["serve"] = retrieved, served
                report["idle"] = {"load": said}
            else:
                report["loaded"] = {"load": said, "retrieve": retrieved, "serve": served}
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
