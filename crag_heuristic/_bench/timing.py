"""Timing in one run: calls alternated case by case, and their p50 / p99.

Speed is a ratio against a baseline timed in the same run: :func:`alternated`
calls every case once a round, the order rotated round by round, so that drift
in the machine's load hits every case alike; :func:`percentiles` sums samples
up as p50, p99, mean and count. :func:`background_load` runs a fixed load of
busy processes while a block runs, so that every ratio is measured idle and
loaded alike.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping


def percentiles(samples: list[float]) -> dict[str, float]:
    """``p50``, ``p99`` (inclusive quantiles), ``mean`` and ``n`` of ``samples``
    (in whatever unit they are)."""
    ordered = sorted(samples)
    q = (
        statistics.quantiles(ordered, n=100, method="inclusive")
        if len(ordered) > 1
        else ordered * 99
    )
    return {"p50": q[49], "p99": q[98], "mean": statistics.fmean(ordered), "n": len(ordered)}


def alternated(
    cases: Mapping[str, Callable[[int], object]], iterations: int
) -> dict[str, list[float]]:
    """Each case once per round, the order rotated round by round; microseconds.

    ``cases`` maps a name to a function of the round's number; returns each
    name's ``iterations`` samples, in microseconds of ``time.perf_counter_ns``.
    """
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(iterations):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter_ns()
            cases[name](i)
            samples[name].append((time.perf_counter_ns() - start) / 1000.0)
    return samples


LOADS = (0, 4)
"""The machine loads a benchmark reports each ratio at: idle (only what else runs) and
with four busy processes of its own (:func:`background_load`)."""


@contextlib.contextmanager
def background_load(processes: int) -> Iterator[dict[str, object]]:
    """``processes`` busy processes (each a Python loop that never sleeps, at the
    normal priority) while the block runs: a fixed load of the benchmark's own, on
    top of whatever else the machine runs. Yields what a report says of it:
    ``{"busy_processes", "load_average"}`` (the 1-minute average as the block
    began, after half a second's start); the processes are killed after.
    """
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 0:
        raise ValueError(f"processes must be an integer >= 0, got {processes!r}")
    quiet = subprocess.DEVNULL
    busy = [sys.executable, "-c", "while True: pass"]
    started = [
        subprocess.Popen(busy, stdin=quiet, stdout=quiet, stderr=quiet) for _ in range(processes)
    ]
    try:
        if started:
            time.sleep(0.5)  # running before the first timing
        yield {"busy_processes": processes, "load_average": os.getloadavg()[0]}
    finally:
        for process in started:
            process.kill()
        for process in started:
            process.wait()
