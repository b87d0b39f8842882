"""Sync calls that may be given up, on a bounded set of threads.

Python cannot stop a thread. A call that must not hang its caller (a user's
retriever, web searcher, cache, expander, grader or parents lookup) runs in a
worker thread, and the caller waits at most ``timeout`` seconds for it: past
that, the caller goes on and the call is abandoned. It runs on until it
returns, its late answer (or exception) is dropped, and its thread is busy
until then.

:class:`Workers` is the router's pool of such threads, owned by the router and
closed with it:

* at most ``size`` threads, ever: a call that finds every thread busy waits
  in a queue within its own timeout, and is refused (:data:`EXHAUSTED`, which
  the callers turn into their stage's typed error) if none comes free; so 500
  calls that time out leave at most ``size`` threads behind, never 500;
* one kind of call (``"web"``, ``"retriever"`` ...) holds at most ``share`` of
  the threads (half, by default): hung web calls cannot take the threads a
  healthy query's retrieval needs;
* threads are made on demand and end after ``idle`` seconds without work, or
  at :meth:`Workers.close` (a thread held by a call that never returns ends
  when it does; a later call makes new threads as needed);
* :meth:`Workers.call` is for sync callers, :meth:`Workers.acall` for async
  ones: unlike ``asyncio.to_thread``, a hung call holds none of the event
  loop's executor threads (six hung calls used to take all of them on a
  2-core host, and every later ``to_thread`` on that loop waited), nor keeps
  ``asyncio.run`` from returning. Threads are daemons: they never keep the
  process alive at exit.

A part that bounds its own calls (an in-process index, the in-process cache, a
Redis cache with socket timeouts) says so with a true ``bounded`` attribute
(:func:`is_bounded`): a sync caller calls it in its own thread, at no cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any

from ._exceptions import ConfigError


class Abandoned:
    """The outcome of a call that did not finish within its timeout."""

    __slots__ = ()


class Exhausted:
    """The outcome of a call that never started: every thread it could use was
    held, for its whole timeout, by calls that had not returned."""

    __slots__ = ()


ABANDONED = Abandoned()
EXHAUSTED = Exhausted()

_QUEUED, _RUNNING, _DONE, _DROPPED = range(4)


def is_bounded(part: Any) -> bool:
    """Whether ``part`` bounds its own calls (a true ``bounded`` attribute, or a
    plain mapping): a sync caller may call it in its own thread."""
    return getattr(part, "bounded", False) is True or isinstance(part, Mapping)


class _Job:
    """One call: its function, its kind, who is told of its outcome (``notify``, an async
    caller) and ``done``, a lock held until it has an outcome (a sync caller waits on it)."""

    __slots__ = ("done", "fn", "kind", "notify", "outcome", "state")

    def __init__(self, fn: Callable[[], Any], kind: str, notify: Callable[[Any], None] | None):
        self.fn = fn
        self.kind = kind
        self.notify = notify
        self.state = _QUEUED
        self.outcome: Any = None
        self.done = threading.Lock()
        self.done.acquire()

    def wait(self, timeout: float | None) -> bool:
        """Whether the call finished within ``timeout`` seconds (``None``: no limit)."""
        return self.done.acquire(timeout=-1 if timeout is None else max(timeout, 0.0))


class _Thread:
    """One worker thread's hand-over: ``job``, given under the pool's lock, and ``wake``,
    a lock held while it has nothing to do (released to hand it a job, or to end it)."""

    __slots__ = ("job", "wake")

    def __init__(self, job: _Job | None) -> None:
        self.job = job
        self.wake = threading.Lock()
        self.wake.acquire()


class Workers:
    """A bounded pool of daemon threads for calls that may be given up (see the
    module docstring).

    A call is handed straight to an idle thread: the one that went idle last (its
    caches, and an OpenMP team a model started on it, still warm), woken by a lock of
    its own; the caller waits on the call's own lock. One wake-up each way and no
    condition variable: about 20 microseconds on an idle machine.

    Args:
        size: the most threads at once (>= 1).
        share: the largest fraction of them one kind of call may hold (at least
            one thread).
        idle: seconds a thread waits for work before it ends.
        name: the threads' name prefix.

    Raises:
        ConfigError: a bad argument.
    """

    def __init__(
        self, size: int = 8, *, share: float = 0.5, idle: float = 30.0, name: str = "crag-worker"
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError("size", size, "must be an integer >= 1")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise ConfigError("share", share, "must be a number in (0, 1]")
        self.size = size
        self.cap = max(1, math.floor(size * share))  # threads one kind may hold
        self._idle_seconds = idle
        self._name = name
        self._lock = threading.Lock()
        self._queue: deque[_Job] = deque()  # calls that found no thread they could take
        self._idle: list[_Thread] = []  # the last to go idle last
        self._busy: Counter[str] = Counter()
        self._threads = 0
        self._started = 0
        self._closing = False

    def __repr__(self) -> str:
        return (
            f"Workers(size={self.size}, threads={self._threads}, busy={sum(self._busy.values())})"
        )

    @property
    def threads(self) -> int:
        """How many of the pool's threads are alive now."""
        return self._threads

    # -- calls ------------------------------------------------------------------------

    def call(self, fn: Callable[[], Any], timeout: float, kind: str) -> Any:
        """``fn()`` on a worker thread, waited for at most ``timeout`` seconds: its
        value, the exception it raised (returned, not raised), :data:`ABANDONED`
        (started, not finished in time) or :data:`EXHAUSTED` (never started)."""
        job = _Job(fn, kind, None)
        self._submit(job)
        if job.wait(timeout):
            return job.outcome
        return self._give_up(job)

    async def acall(self, fn: Callable[[], Any], timeout: float | None, kind: str) -> Any:
        """:meth:`call` for a coroutine (``None``: no timeout): the event loop is
        never blocked, and none of its executor threads is used."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(outcome: Any) -> None:
            if not future.done():  # not given up meanwhile
                future.set_result(outcome)

        def notify(outcome: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(settle, outcome)

        job = _Job(fn, kind, notify)
        self._submit(job)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:  # TimeoutError on 3.11+, distinct on 3.10
            return self._give_up(job)
        except BaseException:  # the caller was cancelled: the call is given up too
            self._give_up(job)
            raise

    def close(self) -> None:
        """End the idle threads now, and each busy one when its call returns (a
        later call starts threads again)."""
        with self._lock:
            self._closing = True
            idle, self._idle = self._idle, []
            for thread in idle:  # woken with no job: it ends
                thread.wake.release()

    # -- the pool ---------------------------------------------------------------------

    def _submit(self, job: _Job) -> None:
        with self._lock:
            self._closing = False
            if self._busy[job.kind] >= self.cap:
                self._queue.append(job)  # its kind holds its share: it waits its turn
            elif self._idle:
                self._run(job)
                thread = self._idle.pop()
                thread.job = job
                thread.wake.release()
            elif self._threads < self.size:
                self._run(job)
                self._threads += 1
                self._started += 1
                try:
                    threading.Thread(
                        target=self._work,
                        args=(_Thread(job),),
                        name=f"{self._name}-{self._started}",
                        daemon=True,
                    ).start()
                except RuntimeError:  # the system refused a thread: the job waits its turn
                    self._threads -= 1
                    self._busy[job.kind] -= 1
                    job.state = _QUEUED
                    self._queue.append(job)
            else:
                self._queue.append(job)

    def _run(self, job: _Job) -> None:
        """Count ``job`` as running (under the lock)."""
        job.state = _RUNNING
        self._busy[job.kind] += 1

    def _give_up(self, job: _Job) -> Any:
        with self._lock:
            if job.state == _DONE:  # finished as the wait ended
                return job.outcome
            if job.state == _QUEUED:
                self._queue.remove(job)
                job.state = _DROPPED
                return EXHAUSTED
            job.state = _DROPPED  # running: its late outcome is dropped
            return ABANDONED

    def _take(self) -> _Job | None:
        """The first queued job whose kind holds fewer than ``cap`` threads, counted as
        running (under the lock)."""
        for job in self._queue:
            if self._busy[job.kind] < self.cap:
                self._queue.remove(job)
                self._run(job)
                return job
        return None

    def _work(self, me: _Thread) -> None:
        """A worker thread: run the job handed over, then any queued one it may take, then
        wait idle for the next hand-over (or end: idle too long, or the pool closed)."""
        lock = self._lock
        while True:
            job = me.job
            if job is not None:
                try:
                    outcome = job.fn()
                except BaseException as exc:  # noqa: BLE001 - returned to the caller, typed there
                    outcome = exc
                with lock:
                    self._busy[job.kind] -= 1
                    finished = job.state == _RUNNING  # else given up: its outcome dropped
                    if finished:
                        job.state = _DONE
                        job.outcome = outcome
                    me.job = self._take()
                if finished:
                    job.done.release()
                    if job.notify is not None:
                        job.notify(outcome)
                if me.job is not None:
                    continue
            with lock:
                if self._closing:
                    self._threads -= 1
                    return
                self._idle.append(me)
            if not me.wake.acquire(timeout=self._idle_seconds):
                with lock:
                    if me in self._idle:  # idle too long, and nobody handed it a job
                        self._idle.remove(me)
                        self._threads -= 1
                        return
                me.wake.acquire()  # a job (or the close) was handed over as the wait ended
