"""Progress of a long command on stderr: which stage, how far, how long.

One line per stage, rewritten in place as the stage advances (and its clock
every second, so that a long step with no count to report still moves) and
ended with the stage's time::

    crag-heuristic index: embedding 2,048/5,183 (40 %) 3.1 s
    crag-heuristic index: embedding 5,183/5,183 (100 %) done in 7.6 s

Shown only where someone watches: when stderr is a terminal (never into a pipe,
a log file or a test's captured output), and never with ``--quiet``. Any long
command uses it the same way: :meth:`Progress.for_command` from its parsed
arguments, then the object as the library's progress callback
(``progress(stage, done, total)``, what ``IndexDirectory.build`` takes), or
``with progress.stage("loading the index"):`` around a step, or
:meth:`Progress.iterate` where the library takes a loop's progress as
``progress(items, description)`` (``calibrate_self``, the benchmark harness), and
:meth:`Progress.close` at the end (or ``with`` the object).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from types import TracebackType
from typing import TextIO, TypeVar

_T = TypeVar("_T")

_INTERVAL = 0.1  # seconds between two rewrites of a stage's line
_TICK = 1.0  # seconds between two rewrites of a stage's clock, when nothing else moves


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress on stderr (it is shown only on a terminal anyway)."""
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines on stderr (shown only when stderr is a terminal)",
    )


class Progress:
    """A command's progress line on ``stream`` (default stderr); see the module doc.

    Args:
        command: the command's name, the start of each line.
        stream: where to write (default ``sys.stderr``).
        enabled: show it (default: when ``stream`` is a terminal).
        interval: the least time between two rewrites of a line.
        tick: seconds between two rewrites of an open stage's clock (a thread that
            runs while the progress is shown, until :meth:`close`).
    """

    def __init__(
        self,
        command: str,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        interval: float = _INTERVAL,
        tick: float = _TICK,
    ) -> None:
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.interval = interval
        self._stage: str | None = None
        self._started = 0.0
        self._shown = 0.0
        self._last = ""
        self.seconds: dict[str, float] = {}  # each ended stage's time
        self._lock = threading.Lock()  # the ticker and the caller write the same line
        self._closed = threading.Event()
        self._tick = tick
        self._ticker: threading.Thread | None = None

    @classmethod
    def for_command(cls, args: argparse.Namespace, command: str) -> Progress:
        """The progress of ``command``, off with ``--quiet``."""
        return cls(f"crag-heuristic {command}", enabled=False if args.quiet else None)

    def __call__(self, stage: str, done: int = 0, total: int | None = None) -> None:
        """Report that ``stage`` has done ``done`` of ``total`` (``None``: unknown)."""
        with self._lock:
            now = time.perf_counter()
            if stage != self._stage:
                self._end()
                self._stage, self._started, self._shown = stage, now, 0.0
                self._start_ticker()
            elif now - self._shown < self.interval and done != total:
                return
            self._shown = now
            self._last = _counts(done, total)
            self._write(f"{self._last} {now - self._started:.1f} s", end="")

    def _start_ticker(self) -> None:
        if self.enabled and self._ticker is None and not self._closed.is_set():
            self._ticker = threading.Thread(target=self._ticking, name="crag-progress", daemon=True)
            self._ticker.start()

    def _ticking(self) -> None:
        """Rewrite the open stage's line with its clock, every ``tick`` seconds."""
        while not self._closed.wait(self._tick):
            with self._lock:
                now = time.perf_counter()
                if self._stage is not None and now - self._shown >= self._tick:
                    self._shown = now
                    self._write(f"{self._last} {now - self._started:.1f} s", end="")

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """A step of unknown length: shown when it starts, ended with its time."""
        self(name)
        try:
            yield
        finally:
            with self._lock:
                self._end()

    def iterate(self, items: Iterable[_T], description: str) -> Iterator[_T]:
        """``items``, one by one, each counted done in the stage ``description`` (of
        ``len(items)`` when it has a length)."""
        total = len(items) if isinstance(items, Sized) else None
        self(description, 0, total)
        for done, item in enumerate(items, 1):
            yield item
            self(description, done, total)

    def note(self, text: str) -> None:
        """End the current stage, then say ``text`` on a line of its own."""
        with self._lock:
            self._end()
        if self.enabled:
            self.stream.write(f"{self.command}: {text}\n")
            self.stream.flush()

    def close(self) -> None:
        """End the current stage's line (and stop the clock's thread)."""
        with self._lock:
            self._end()
        self._stop()

    def _stop(self) -> None:
        self._closed.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self._lock:
            self._end(failed=error is not None)
        self._stop()

    def _end(self, *, failed: bool = False) -> None:
        if self._stage is None:
            return
        seconds = time.perf_counter() - self._started
        self.seconds[self._stage] = seconds
        outcome = "failed after" if failed else "done in"
        self._write(f"{self._last} {outcome} {seconds:.1f} s".lstrip(), end="\n")
        self._stage, self._last = None, ""

    def _write(self, text: str, *, end: str) -> None:
        if not self.enabled or self._stage is None:
            return
        line = f"{self.command}: {self._stage} {text}".rstrip()
        self.stream.write(f"\r{line}\x1b[K{end}")
        self.stream.flush()


def _counts(done: int, total: int | None) -> str:
    if total is None:
        return f"{done:,}" if done else ""
    share = 100 * done // total if total else 100
    return f"{done:,}/{total:,} ({share} %)"
