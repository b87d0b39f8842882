"""A circuit breaker: stop calling a web service that keeps failing.

The classic three-state machine (Nygard, *Release It!*, 2007)::

    CLOSED --(failure_threshold consecutive failures within `window` s)--> OPEN
              or, with `failure_rate` set (a sliding window, as resilience4j's):
           --(at least failure_threshold failures in the last `window` s, and
              failures / calls in that window >= failure_rate)--------------> OPEN
    OPEN   --(`cooldown` s later, the next call is let through as a trial)--> HALF_OPEN
    HALF_OPEN --(the trial succeeds)--> CLOSED
    HALF_OPEN --(the trial fails)-----> OPEN (a new cool-down)

While OPEN, :meth:`CircuitBreaker.acquire` raises
:class:`~crag_heuristic.CircuitOpenError` at once, with ``retry_after`` the
seconds left, so a dead search engine costs nothing per query. In HALF_OPEN
exactly one call (the trial) is let through; the others are refused until it
reports. A trial that never reports (a cancelled task, a bug) stops blocking
after one more ``cooldown``.

Calls report with the ticket :meth:`acquire` gave them. An outcome reported
under an older ticket, by a call that started before the state changed, is
ignored: a slow call that started while CLOSED cannot close a circuit that
opened in the meantime. :meth:`release` reports a call that neither
succeeded nor failed (cancelled): it only frees the trial slot.

The consecutive mode (the default) opens on a short streak, which many
concurrent callers produce even when most calls succeed (one slow engine
fails every call in flight at once); the rate mode opens only when the
service fails a share of its calls, whatever the interleaving.

Which errors count as failures is the caller's decision; the SearXNG client's
choice is documented in :mod:`crag_heuristic._web.searxng`.

Thread-safe: one lock, held for a few operations and never across I/O or an
``await``, so the breaker is shared safely by threads and by asyncio tasks.
The clock is injectable (``clock=``, monotonic seconds) for tests.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from .._checks import is_finite_number
from .._exceptions import CircuitOpenError, ConfigError
from .._logging import get_logger
from .._protocols import EventLogger


class CircuitState(str, enum.Enum):
    """The state of a :class:`CircuitBreaker`."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


def _check_positive(name: str, value: object, *, integer: bool = False) -> None:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ConfigError(name, value, "must be " + ("an integer" if integer else "a number"))
    if not is_finite_number(value) or value <= 0:
        raise ConfigError(name, value, "must be finite and > 0")


class CircuitBreaker:
    """Opens after repeated failures, then lets one trial call through.

    Args:
        failure_threshold: consecutive failures that open the circuit (with
            ``failure_rate``: the fewest failures in the window that may open it).
        window: the failures must fall within this many seconds; older ones
            are forgotten (a failure a day does not open the circuit).
        failure_rate: ``None`` (default) for the consecutive mode; a share in
            (0, 1] for the rate mode: the circuit opens when the failures among
            the outcomes of the last ``window`` seconds reach this share (and
            ``failure_threshold`` in number). A success does not reset them.
        cooldown: seconds the circuit stays open before a trial call.
        name: a label for errors and logs.
        clock: monotonic time in seconds (``time.monotonic``); inject a fake
            one in tests.
        logger: a structlog logger for the ``crag.circuit`` event (``circuit``,
            ``previous``, ``state``) logged at INFO on every state change, after
            the lock is released (default: the stdlib-backed
            ``"crag_heuristic"`` logger).

    Raises:
        ConfigError: a bad argument, naming it.
    """

    def __init__(
        self,
        *,
        failure_threshold: int = 5,
        window: float = 60.0,
        cooldown: float = 30.0,
        failure_rate: float | None = None,
        name: str = "web_search",
        clock: Callable[[], float] = time.monotonic,
        logger: EventLogger | None = None,
    ) -> None:
        _check_positive("failure_threshold", failure_threshold, integer=True)
        _check_positive("window", window)
        _check_positive("cooldown", cooldown)
        if failure_rate is not None:
            _check_positive("failure_rate", failure_rate)
            if failure_rate > 1:
                raise ConfigError("failure_rate", failure_rate, "must be a share in (0, 1]")
        self.failure_rate = None if failure_rate is None else float(failure_rate)
        self.failure_threshold = failure_threshold
        self.window = float(window)
        self.cooldown = float(cooldown)
        self.name = name
        if not callable(clock):
            raise ConfigError("clock", clock, "must be a callable returning seconds")
        self._clock = clock
        self._log: EventLogger = logger if logger is not None else get_logger()
        self._lock = threading.Lock()
        self._state = CircuitState.CLOSED
        self._epoch = 0
        self._failures: deque[float] = deque()  # failure times (both modes)
        self._successes: deque[float] = deque()  # success times (rate mode only)
        self._opened_at = 0.0
        self._opened_because = f"{failure_threshold} consecutive failures"
        self._trial_started: float | None = None
        self._changes: list[tuple[str, str]] = []

    def __repr__(self) -> str:
        return f"CircuitBreaker(name={self.name!r}, state={self.state.value!r})"

    @property
    def state(self) -> CircuitState:
        """The current state (OPEN reads as HALF_OPEN once the cool-down is over)."""
        with self._lock:
            if self._state is CircuitState.OPEN and self._cooled_down(self._clock()):
                return CircuitState.HALF_OPEN
            return self._state

    @property
    def failures(self) -> int:
        """Failures counted towards opening (within the window): consecutive ones,
        or in rate mode all of them."""
        with self._lock:
            self._forget_old(self._clock())
            return len(self._failures)

    def acquire(self) -> int:
        """Ask to make a call: returns a ticket for reporting its outcome.

        Raises:
            CircuitOpenError: the circuit is open (``retry_after`` = seconds
                left of the cool-down), or half-open with the trial call still
                out (``retry_after`` = the cool-down, an upper bound).
        """
        with self._changing():
            now = self._clock()
            if self._state is CircuitState.CLOSED:
                return self._epoch
            if self._state is CircuitState.OPEN:
                if not self._cooled_down(now):
                    left = self._opened_at + self.cooldown - now
                    raise self._refusal(max(0.0, left), "open")
                self._move(CircuitState.HALF_OPEN)
            elif self._trial_started is not None and now - self._trial_started < self.cooldown:
                raise self._refusal(self.cooldown, "half-open, a trial call is out")
            self._trial_started = now
            return self._epoch

    def record_success(self, ticket: int) -> None:
        """Report that the call holding ``ticket`` succeeded."""
        with self._changing():
            if ticket != self._epoch:
                return
            if self._state is CircuitState.HALF_OPEN:
                self._clear()
                self._move(CircuitState.CLOSED)
            elif self.failure_rate is None:
                self._failures.clear()
            else:
                now = self._clock()
                self._successes.append(now)
                self._forget_old(now)

    def record_failure(self, ticket: int) -> None:
        """Report that the call holding ``ticket`` failed."""
        with self._changing():
            if ticket != self._epoch:
                return
            now = self._clock()
            if self._state is CircuitState.HALF_OPEN:
                self._open(now)
                return
            self._failures.append(now)
            self._forget_old(now)
            if self._should_open():
                self._open(now)

    def release(self, ticket: int) -> None:
        """Report a call that neither succeeded nor failed: free the trial slot."""
        with self._lock:
            if ticket == self._epoch and self._state is CircuitState.HALF_OPEN:
                self._trial_started = None

    def reset(self) -> None:
        """Close the circuit and forget every failure."""
        with self._changing():
            self._clear()
            if self._state is not CircuitState.CLOSED:
                self._move(CircuitState.CLOSED)

    # -- internals ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the lock; log the state changes made under it once it is released."""
        try:
            with self._lock:
                yield
        finally:
            with self._lock:
                changes, self._changes = self._changes, []
            for previous, state in changes:
                self._log.info("crag.circuit", circuit=self.name, previous=previous, state=state)

    # the methods below are called with the lock held

    def _cooled_down(self, now: float) -> bool:
        return now - self._opened_at >= self.cooldown

    def _forget_old(self, now: float) -> None:
        for times in (self._failures, self._successes):
            while times and now - times[0] > self.window:
                times.popleft()

    def _should_open(self) -> bool:
        failures = len(self._failures)
        if failures < self.failure_threshold:
            return False
        if self.failure_rate is None:
            return True
        return failures / (failures + len(self._successes)) >= self.failure_rate

    def _clear(self) -> None:
        self._failures.clear()
        self._successes.clear()

    def _open(self, now: float) -> None:
        self._opened_at = now
        self._opened_because = self._reason()
        self._clear()
        self._move(CircuitState.OPEN)

    def _reason(self) -> str:
        failures = len(self._failures)
        if self.failure_rate is None:
            return f"{failures} consecutive failures"
        share = failures / (failures + len(self._successes))
        return f"{failures} failures, {share:.0%} of the calls in the last {self.window:g} s"

    def _move(self, state: CircuitState) -> None:
        self._changes.append((self._state.value, state.value))
        self._state = state
        self._epoch += 1
        self._trial_started = None

    def _refusal(self, retry_after: float, why: str) -> CircuitOpenError:
        return CircuitOpenError(
            f"circuit {self.name!r} is {why}: calls suspended after "
            f"{self._opened_because}; retry in {retry_after:.1f} s",
            retry_after=retry_after,
        )
