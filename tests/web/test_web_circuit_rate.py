"""The circuit breaker's failure-rate mode, on hand-computed sequences.

Consecutive mode (the default, unchanged): ``failure_threshold`` failures in a
row within ``window`` seconds open the circuit. Rate mode (``failure_rate``
set): it opens when, among the outcomes of the last ``window`` seconds, there
are at least ``failure_threshold`` failures and they make up at least
``failure_rate`` of the calls; a success no longer wipes the count. Under
concurrency a few failures in a row are common even when most calls succeed;
a rate does not open for them.
"""

from __future__ import annotations

import pytest

from crag_heuristic import CircuitOpenError, ConfigError
from crag_heuristic.web import CircuitBreaker, CircuitState


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def play(breaker: CircuitBreaker, clock: FakeClock, sequence: str, at: float | None = None) -> str:
    """Report ``S``/``F`` outcomes (at time ``at`` when given); the states after each."""
    states = []
    for outcome in sequence:
        if at is not None:
            clock.now = at
        ticket = breaker.acquire()
        if outcome == "S":
            breaker.record_success(ticket)
        else:
            breaker.record_failure(ticket)
        states.append("o" if breaker.state is CircuitState.OPEN else "c")
    return "".join(states)


def consecutive(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(failure_threshold=3, window=10.0, cooldown=30.0, clock=clock)


def rate(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(
        failure_threshold=3, failure_rate=0.5, window=10.0, cooldown=30.0, clock=clock
    )


def test_consecutive_mode_is_unchanged() -> None:
    clock = FakeClock()
    assert play(consecutive(clock), clock, "FFSFFF") == "ccccco"
    assert consecutive(clock).failure_rate is None


def test_consecutive_failures_outside_the_window_are_forgotten() -> None:
    clock = FakeClock()
    breaker = consecutive(clock)
    assert play(breaker, clock, "F", at=0.0) + play(breaker, clock, "F", at=5.0) == "cc"
    assert play(breaker, clock, "F", at=11.0) == "c"  # the one at 0 s is 11 s old: 2 left
    assert breaker.failures == 2
    assert play(breaker, clock, "F", at=12.0) == "o"


def test_the_burst_that_opens_a_consecutive_breaker_leaves_a_rate_breaker_closed() -> None:
    # 12 calls, 4 failures (33 %), three of them in a row
    sequence = "SSSSFSSSSFFF"
    clock = FakeClock()
    assert play(consecutive(clock), clock, sequence).endswith("o")
    clock = FakeClock()
    breaker = rate(clock)
    assert play(breaker, clock, sequence) == "c" * 12
    assert breaker.failures == 4  # successes do not wipe the count in rate mode


def test_rate_mode_opens_at_the_rate_with_enough_failures() -> None:
    clock = FakeClock()
    # S S F F: 2 failures < 3; S S F F S F: 3 failures of 6 = 0.5 -> open
    assert play(rate(clock), clock, "SSFFSF") == "ccccco"
    clock = FakeClock()
    # 4 successes then 3 failures: 3/7 = 0.43 < 0.5; a 4th: 4/8 = 0.5 -> open
    assert play(rate(clock), clock, "SSSSFFFF") == "ccccccco"
    clock = FakeClock()
    # F F: 100 % but only 2 failures: closed
    assert play(rate(clock), clock, "FF") == "cc"


def test_rate_mode_forgets_outcomes_older_than_the_window() -> None:
    clock = FakeClock()
    breaker = rate(clock)
    play(breaker, clock, "S", at=0.0)
    play(breaker, clock, "S", at=1.0)
    play(breaker, clock, "S", at=2.0)
    # at 11 s the success of 0 s is gone (11 s old), those of 1 s and 2 s stay:
    # S S F F F -> 3 failures of 5 = 0.6 >= 0.5: open on the third failure
    assert play(breaker, clock, "FFF", at=11.0) == "cco"
    with pytest.raises(CircuitOpenError, match="3 failures, 60% of the calls in the last 10 s"):
        breaker.acquire()


def test_rate_mode_half_open_trial_as_before() -> None:
    clock = FakeClock()
    breaker = rate(clock)
    play(breaker, clock, "FFF")
    assert breaker.state is CircuitState.OPEN
    clock.now += 30.0
    assert play(breaker, clock, "S") == "c"
    assert breaker.failures == 0  # a closed circuit starts a fresh window


@pytest.mark.parametrize("value", [0, 0.0, -0.1, 1.5, float("nan"), True, "half"])
def test_failure_rate_is_validated(value: object) -> None:
    with pytest.raises(ConfigError, match="failure_rate"):
        CircuitBreaker(failure_rate=value)  # type: ignore[arg-type]
