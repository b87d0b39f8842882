"""Timing in one run: calls alternated case by case, and their p50 / p99.

Speed is a ratio against a baseline timed in the same run: :func:`alternated`
calls every case once a round, the order rotated round by round, so that drift
in the machine's load hits every case alike; :func:`percentiles` sums samples
up as p50, p99, mean and count. (The fixed background load the benchmark scripts
run each ratio under, ``background_load``, is the test kit's: the library starts no
process.)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping


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
