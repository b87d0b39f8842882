"""What a grader may answer, CallableGrader, and how grader calls fail."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from crag_heuristic import Chunk, ConfigError
from crag_heuristic._checks import check_query
from crag_heuristic._grading.graders import (
    acall_grader,
    call_grader,
    checked_grades,
    grader_fingerprint,
)
from crag_heuristic.grading import (
    AsyncGrader,
    CallableGrader,
    Grader,
    GraderError,
    GraderOutputError,
    GraderTimeout,
)

CHUNKS = [Chunk(id="a", text="bees dance"), Chunk(id="b", text="coffee beans")]
Q = check_query("q")  # the internal grader calls take a checked query


def by_keyword(query: str, texts: list[str]) -> list[float]:
    return [0.9 if "dance" in text else 0.2 for text in texts]


async def by_keyword_async(query: str, texts: list[str]) -> list[float]:
    return [0.8 if "dance" in text else 0.1 for text in texts]


def test_good_answers_pass_the_check() -> None:
    assert checked_grades([0, 1, 0.5], 3) == [0.0, 1.0, 0.5]
    assert checked_grades(np.array([0.25, 0.75], dtype=np.float32), 2) == [0.25, 0.75]
    assert checked_grades((x for x in [0.5]), 1) == [0.5]
    assert checked_grades([1.0000001, -0.0000001], 2) == [1.0, 0.0]  # rounding is clipped


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([0.5], "1 grade"),
        ([0.5, 0.5, 0.5], "3 grade"),
        ([0.5, math.nan], "not finite"),
        ([0.5, math.inf], "not finite"),
        ([0.5, 1.5], "outside"),
        ([-0.5, 0.5], "outside"),
        ([0.5, "0.5"], "not a number"),
        ([0.5, None], "not a number"),
        ([0.5, True], "not a number"),
        ([0.5, 1j], "not a number"),
        (None, "not a sequence"),
        (0.5, "not a sequence"),
        ("0.5", "not a sequence"),
    ],
)
def test_bad_answers_are_output_errors(answer: object, message: str) -> None:
    with pytest.raises(GraderOutputError, match=message) as caught:
        checked_grades(answer, 2, grader="g")
    assert caught.value.grader == "g" and isinstance(caught.value, GraderError)


def test_callable_grader_sync_and_async() -> None:
    grader = CallableGrader(by_keyword)
    assert isinstance(grader, Grader) and isinstance(grader, AsyncGrader)
    assert grader.fingerprint == "callable:test_graders.by_keyword"
    assert grader.grade(Q, CHUNKS) == [0.9, 0.2]
    assert asyncio.run(grader.agrade(Q, CHUNKS)) == [0.9, 0.2]  # in a worker thread
    both = CallableGrader(by_keyword, afn=by_keyword_async, name="kw-v1")
    assert both.grade(Q, CHUNKS) == [0.9, 0.2]
    assert asyncio.run(both.agrade(Q, CHUNKS)) == [0.8, 0.1]
    only_async = CallableGrader(by_keyword_async, name="kw-async")
    assert asyncio.run(only_async.agrade(Q, CHUNKS)) == [0.8, 0.1]
    with pytest.raises(GraderError, match="async-only"):
        only_async.grade(Q, CHUNKS)


def test_callable_grader_needs_a_stable_name() -> None:
    with pytest.raises(ConfigError, match="not a stable name"):
        CallableGrader(lambda q, t: [0.5] * len(t))
    assert CallableGrader(lambda q, t: [0.5] * len(t), name="half").fingerprint == "half"
    with pytest.raises(ConfigError):
        CallableGrader("not callable")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CallableGrader(by_keyword, afn=by_keyword)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        CallableGrader(by_keyword, name=" ")


def test_fingerprints() -> None:
    class Plain:
        def grade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
            return [0.5] * len(chunks)

    class Method(Plain):
        def fingerprint(self) -> str:
            return "method-v2"

    class Empty(Plain):
        fingerprint = ""

    assert grader_fingerprint(Plain()) == "test_fingerprints.<locals>.Plain"
    assert grader_fingerprint(Method()) == "method-v2"
    with pytest.raises(ConfigError):
        grader_fingerprint(Empty())


class Raising:
    fingerprint = "raising"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def grade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
        raise self.error


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_sync_calls_turn_failures_into_grader_errors(timeout: float | None) -> None:
    error = call_grader(Raising(RuntimeError("boom")), Q, CHUNKS, "raising", timeout)
    assert type(error) is GraderError and "RuntimeError: boom" in str(error)
    timed = call_grader(Raising(TimeoutError("slow")), Q, CHUNKS, "raising", timeout)
    assert isinstance(timed, GraderTimeout)

    class ReadTimeout(Exception):  # named like httpx's
        pass

    assert isinstance(call_grader(Raising(ReadTimeout()), Q, CHUNKS, "r", timeout), GraderTimeout)
    mine = GraderOutputError("mine")
    assert call_grader(Raising(mine), Q, CHUNKS, "raising", timeout) is mine
    assert call_grader(CallableGrader(by_keyword), Q, CHUNKS, "kw", timeout) == [0.9, 0.2]


def test_a_sync_call_past_its_timeout_is_abandoned() -> None:
    release = threading.Event()

    def slow(query: str, texts: list[str]) -> list[float]:
        release.wait(30)
        return [0.5] * len(texts)

    # the grader answers only once released: an answer here means the call waited for it
    outcome = call_grader(CallableGrader(slow, name="slow"), Q, CHUNKS, "slow", 0.05)
    release.set()
    assert isinstance(outcome, GraderTimeout) and "0.05 s" in str(outcome)


def test_async_calls_turn_failures_into_grader_errors() -> None:
    async def run() -> list[object]:
        async def hang(query: str, texts: list[str]) -> list[float]:
            await asyncio.sleep(10)
            return []

        return [
            await acall_grader(Raising(ValueError("bad")), Q, CHUNKS, "r", 1.0),
            await acall_grader(CallableGrader(hang, name="hang"), Q, CHUNKS, "h", 0.05),
            await acall_grader(CallableGrader(by_keyword_async, name="a"), Q, CHUNKS, "a", None),
            await acall_grader(object(), Q, CHUNKS, "nothing", None),
        ]

    raised, timed, fine, broken = asyncio.run(run())
    assert type(raised) is GraderError and "ValueError: bad" in str(raised)
    assert isinstance(timed, GraderTimeout)
    assert fine == [0.8, 0.1]
    assert isinstance(broken, GraderError)
    assert isinstance(call_grader(object(), Q, CHUNKS, "nothing"), GraderError)


def test_importing_the_cascade_loads_no_model_library() -> None:
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, crag_heuristic, crag_heuristic.grading; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert not loaded & {"torch", "sentence_transformers", "transformers", "sklearn"}
