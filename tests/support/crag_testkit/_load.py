"""A fixed load of the benchmarks' own: busy processes while a block runs, so that every
ratio a benchmark reports is measured idle and loaded alike (``benchmarks/evaluator_micro.py``,
``benchmarks/own_corpus.py``). Dev tooling, not shipped: the library starts no process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

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
