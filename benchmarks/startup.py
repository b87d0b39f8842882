"""How long ``crag-heuristic`` takes to start and answer: whole processes, timed from outside.

    python benchmarks/startup.py --out benchmarks/results/startup    # startup.json + startup.md

``crag-heuristic retrieve`` on the bundled sample (the README's first command,
without ``--pretty``) against ``python -c pass`` (the interpreter's own start-up,
the yardstick), run in turn (A B A B ...) after a warm-up of each, so that a
drift of the machine's speed moves both. Each run is one child process: wall
seconds from a monotonic clock read just before it starts and just after it is
reaped, user + system CPU seconds and its peak resident memory from the
operating system's accounting of the finished child (``os.wait4``). Every
figure is printed as min, median and max: quote the median; a wide spread says
the machine was noisy (the load average is recorded). The command's output is
thrown away; its exit code must be 0.

Also recorded: which heavy modules the command imports (none should be).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import testkit_path  # noqa: F401 - puts tests/support (crag_testkit) on sys.path
from crag_testkit import crag_cli

QUERY = "How do honeybees tell each other where food is?"
HEAVY = ("structlog", "rich", "httpx", "dask", "distributed", "sklearn", "torch", "redis")


def commands() -> dict[str, list[str]]:
    """The two commands timed: the CLI (its installed script, else ``-m``) and the yardstick."""
    return {
        "retrieve": [*crag_cli(), "retrieve", "--query", QUERY],
        "python": [sys.executable, "-c", "pass"],
    }


def run_once(command: Sequence[str]) -> dict[str, float]:
    """One run of ``command``: wall seconds, CPU seconds and peak memory (MiB) of the child."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mib": usage.ru_maxrss / 1024.0,  # Linux: kilobytes
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def heavy_modules(cli: Sequence[str]) -> list[str]:
    """The heavy modules a ``retrieve`` on the sample imports, run in a child process."""
    probe = (
        "import contextlib, io, runpy, sys\n"
        f"sys.argv = ['crag-heuristic', 'retrieve', '--query', {QUERY!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    runpy.run_module('crag_heuristic', run_name='__main__')\n"
        f"print(','.join(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    return out.split(",") if out else []


def measure(runs: int, warmup: int) -> dict[str, Any]:
    """``runs`` alternated runs of each command after ``warmup`` of each."""
    cases = commands()
    for _ in range(warmup):
        for command in cases.values():
            run_once(command)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    ratios = []
    for _ in range(runs):
        pair = {name: run_once(command) for name, command in cases.items()}
        for name, sample in pair.items():
            samples[name].append(sample)
        ratios.append(pair["retrieve"]["wall_s"] / pair["python"]["wall_s"])
    return {
        "runs": runs,
        "warmup": warmup,
        "commands": {name: [Path(c[0]).name, *c[1:]] for name, c in cases.items()},
        **{
            name: {key: spread([s[key] for s in rows]) for key in ("wall_s", "cpu_s", "peak_mib")}
            for name, rows in samples.items()
        },
        "retrieve_over_python_wall": spread(ratios),
        "heavy_modules_imported": heavy_modules(cases["retrieve"]),
    }


def to_markdown(report: dict[str, Any]) -> str:
    def row(name: str, label: str) -> str:
        cells = [
            f"{report[name][key]['min']:.3f} / {report[name][key]['median']:.3f} / "
            f"{report[name][key]['max']:.3f}"
            for key in ("wall_s", "cpu_s")
        ]
        peak = report[name]["peak_mib"]
        return f"| {label} | {cells[0]} | {cells[1]} | {peak['median']:.0f} |"

    ratio = report["retrieve_over_python_wall"]
    heavy = ", ".join(report["heavy_modules_imported"]) or "none"
    return "\n".join(
        [
            "# Start-up: the command line, whole processes",
            "",
            f"`python benchmarks/startup.py` ({report['runs']} runs of each command, in turn, "
            f"after {report['warmup']} of each); Python {report['python_version']} on "
            f"{report['cpus']} CPUs, load average {report['load_average_start'][0]:.2f} at the "
            f"start and {report['load_average_end'][0]:.2f} at the end.",
            "",
            "| command | wall s (min / median / max) | CPU s (min / median / max) | peak MiB |",
            "|---|---|---|---:|",
            row("retrieve", f'`crag-heuristic retrieve --query "{QUERY}"`'),
            row("python", "`python -c pass`"),
            "",
            f"Ratio of wall times, run by run: {ratio['median']:.1f} x (min {ratio['min']:.1f}, "
            f"max {ratio['max']:.1f}). Heavy modules the command imported ({', '.join(HEAVY)}): "
            f"{heavy}.",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, help="write startup.json and startup.md into this folder"
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {
        "benchmark": "startup",
        "python_version": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_start": os.getloadavg(),
    }
    report.update(measure(args.runs, args.warmup))
    report["load_average_end"] = os.getloadavg()
    markdown = to_markdown(report)
    print(markdown)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "startup.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / "startup.md").write_text(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
