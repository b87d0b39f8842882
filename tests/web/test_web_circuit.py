"""The circuit breaker's state machine, on a fake clock."""

from __future__ import annotations

import threading

import pytest

from crag_heuristic import CircuitOpenError, ConfigError
from crag_heuristic.web import CircuitBreaker, CircuitState


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def breaker(clock: FakeClock) -> CircuitBreaker:
    return CircuitBreaker(failure_threshold=3, window=60.0, cooldown=30.0, clock=clock)


def fail(breaker: CircuitBreaker, times: int = 1) -> None:
    for _ in range(times):
        breaker.record_failure(breaker.acquire())


def test_starts_closed_and_lets_calls_through(breaker: CircuitBreaker) -> None:
    assert breaker.state is CircuitState.CLOSED
    breaker.record_success(breaker.acquire())
    assert breaker.state is CircuitState.CLOSED


def test_opens_after_threshold_consecutive_failures(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    assert breaker.state is CircuitState.CLOSED
    assert breaker.failures == 2
    fail(breaker)
    assert breaker.state is CircuitState.OPEN


def test_a_success_resets_the_streak(breaker: CircuitBreaker) -> None:
    fail(breaker, 2)
    breaker.record_success(breaker.acquire())
    fail(breaker, 2)
    assert breaker.state is CircuitState.CLOSED
    assert breaker.failures == 2


def test_failures_older_than_the_window_are_forgotten(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 2)  # at t=0
    clock.advance(61)
    fail(breaker)  # the first two are 61 s old: only this one counts
    assert breaker.state is CircuitState.CLOSED
    assert breaker.failures == 1


def test_open_refuses_with_the_time_left(breaker: CircuitBreaker, clock: FakeClock) -> None:
    fail(breaker, 3)
    clock.advance(10)
    with pytest.raises(CircuitOpenError) as info:
        breaker.acquire()
    assert info.value.retry_after == pytest.approx(20.0)
    assert "3 consecutive failures" in str(info.value)


def test_half_open_after_cooldown_lets_one_trial_through(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 3)
    clock.advance(30)
    assert breaker.state is CircuitState.HALF_OPEN
    ticket = breaker.acquire()
    with pytest.raises(CircuitOpenError) as info:  # a second caller while the trial is out
        breaker.acquire()
    assert info.value.retry_after == pytest.approx(30.0)
    breaker.record_success(ticket)
    assert breaker.state is CircuitState.CLOSED
    breaker.record_success(breaker.acquire())


def test_failed_trial_reopens_for_a_new_cooldown(breaker: CircuitBreaker, clock: FakeClock) -> None:
    fail(breaker, 3)
    clock.advance(30)
    breaker.record_failure(breaker.acquire())  # one failure suffices in half-open
    assert breaker.state is CircuitState.OPEN
    clock.advance(29)
    with pytest.raises(CircuitOpenError) as info:
        breaker.acquire()
    assert info.value.retry_after == pytest.approx(1.0)
    clock.advance(1)
    assert breaker.state is CircuitState.HALF_OPEN


def test_release_frees_the_trial_slot(breaker: CircuitBreaker, clock: FakeClock) -> None:
    fail(breaker, 3)
    clock.advance(30)
    breaker.release(breaker.acquire())  # e.g. the trial was cancelled
    assert breaker.state is CircuitState.HALF_OPEN
    breaker.record_success(breaker.acquire())
    assert breaker.state is CircuitState.CLOSED


def test_a_trial_that_never_reports_stops_blocking_after_a_cooldown(
    breaker: CircuitBreaker, clock: FakeClock
) -> None:
    fail(breaker, 3)
    clock.advance(30)
    breaker.acquire()  # lost
    clock.advance(30)
    breaker.record_success(breaker.acquire())
    assert breaker.state is CircuitState.CLOSED


def test_stale_outcomes_are_ignored(breaker: CircuitBreaker, clock: FakeClock) -> None:
    slow_call = breaker.acquire()  # starts while closed
    fail(breaker, 3)  # others open the circuit meanwhile
    breaker.record_success(slow_call)  # must not close it
    assert breaker.state is CircuitState.OPEN
    clock.advance(30)
    trial = breaker.acquire()
    breaker.record_failure(slow_call)  # nor re-open a half-open one
    assert breaker.state is CircuitState.HALF_OPEN
    breaker.record_success(trial)
    assert breaker.state is CircuitState.CLOSED


def test_reset_closes(breaker: CircuitBreaker) -> None:
    fail(breaker, 3)
    breaker.reset()
    assert breaker.state is CircuitState.CLOSED
    assert breaker.failures == 0
    breaker.acquire()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("failure_threshold", 0),
        ("failure_threshold", 2.5),
        ("failure_threshold", True),
        ("window", 0),
        ("window", float("inf")),
        ("cooldown", -1.0),
        ("cooldown", "30"),
    ],
)
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        CircuitBreaker(**{field: value})  # type: ignore[arg-type]
    assert info.value.field == field


def test_threads_open_it_exactly_once_and_refuse_afterwards(clock: FakeClock) -> None:
    breaker = CircuitBreaker(failure_threshold=50, window=60.0, cooldown=30.0, clock=clock)
    refused = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            try:
                ticket = breaker.acquire()
            except CircuitOpenError:
                with lock:
                    refused.append(1)
                continue
            breaker.record_failure(ticket)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert breaker.state is CircuitState.OPEN
    # 160 calls; at most 50 failures were recorded before it opened, the rest were refused.
    assert len(refused) >= 160 - 50 - 8
