"""A sync call that may be given up: run in a daemon thread, abandoned after a timeout.

Python cannot stop a thread. :func:`call_within` runs the call in a daemon
thread and waits at most ``timeout`` seconds for it: past that, the caller
goes on and the call is abandoned: it runs on until it returns, and its late
answer (or exception) is dropped. Being a daemon, the thread does not keep
the process alive at exit. This is how a sync caller bounds a user's part
that may hang (a cascade's grader, a retriever). :func:`acall_within` is the
same for an async caller: unlike ``asyncio.to_thread``, a hung call does not
hold one of the event loop's executor threads (a few hung calls would
exhaust them, and every later ``to_thread`` would wait), nor keep
``asyncio.run`` from returning.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any


class Abandoned:
    """The outcome of a call that did not finish within its timeout."""

    __slots__ = ()


ABANDONED = Abandoned()


def call_within(fn: Callable[[], Any], timeout: float, name: str) -> Any:
    """``fn()`` run in a daemon thread named ``name``: its value, the ``Exception``
    it raised (returned, not raised), or :data:`ABANDONED` when it has not
    finished within ``timeout`` seconds."""
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:  # noqa: BLE001 - returned to the caller, who types it
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    if not done.wait(timeout) or not outcome:  # not finished (or died of a BaseException)
        return ABANDONED
    return outcome[0]


async def acall_within(fn: Callable[[], Any], timeout: float, name: str) -> Any:
    """:func:`call_within` for a coroutine: ``fn()`` in a daemon thread, awaited at
    most ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Any) -> None:
        if not future.done():  # not given up meanwhile
            future.set_result(outcome)

    def run() -> None:
        try:
            outcome = fn()
        except Exception as exc:  # noqa: BLE001 - returned to the caller, who types it
            outcome = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        return await asyncio.wait_for(future, timeout)
    except asyncio.TimeoutError:  # TimeoutError on 3.11+, distinct on 3.10
        return ABANDONED
