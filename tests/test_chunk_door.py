"""Chunks that bypassed their own checks are caught at the evaluator's door.

A :class:`Chunk` validates itself on construction, but Python lets a caller
around that: ``object.__setattr__`` on a frozen instance, ``object.__new__``
without ``__init__``, a pickle made elsewhere (unpickling sets the fields
with ``object.__setattr__``), ``dataclasses.replace`` with bad values. The
evaluator (and the router, on what a retriever returns) checks every chunk's
state again, cheaply, so such a chunk is an :class:`InvalidChunkError`, never
an untyped error deep inside. 2,000 seeded cases, well under a second.
"""

from __future__ import annotations

import asyncio
import copyreg
import dataclasses
import math
import pickle
import random
from collections.abc import Callable
from typing import Any

import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    CragError,
    Evaluator,
    EvaluatorConfig,
    InvalidChunkError,
    RetrieverError,
    ScoreKind,
)
from crag_heuristic.testing import ListRetriever

FIELDS = ("id", "text", "score", "score_kind", "source", "metadata", "parent_id", "sentence_score")
GOOD: dict[str, Any] = {
    "id": "x1",
    "text": "Honeybees dance to show the hive where the flowers are.",
    "score": 0.61,
    "score_kind": ScoreKind.COSINE,
    "source": "bees.md",
    "metadata": {"page": 3},
    "parent_id": None,
    "sentence_score": None,
}
VALUES: dict[str, list[Any]] = {
    "id": [None, 0, 7.5, "", "   ", b"x1", ["a"], ("t",), "x1", "other"],
    "text": [None, b"bytes", 12, "", "fine text about bees", "\ud800 lone surrogate", ["a"]],
    "score": [None, math.nan, math.inf, -math.inf, "0.5", -3.0, 2.0, True, 1 + 2j, object(),
              0.5, 7, -1e-9],
    "score_kind": ["cosine", None, 3, "nope", ScoreKind.L2, ScoreKind.PROBABILITY,
                   ScoreKind.RRF, ScoreKind.BM25, ScoreKind.SQUARED_L2],
    "source": [None, 5, "s.md", b"x", ["s"]],
    "metadata": [None, [], {"a": 1}, "text", 3, {1: object()}],
    "parent_id": [None, 3, "p", b"p"],
    "sentence_score": [None, 0.7, -1.0, 1.5, math.nan, "0.5", True, 7],
}  # fmt: skip
QUERY = "how do honeybees show where the flowers are?"


def _good_chunk(i: int) -> Chunk:
    return Chunk(id=f"g{i}", text=f"Bees visit flowers {i} times a day.", score=0.4,
                 score_kind=ScoreKind.COSINE, source=f"g{i}.md")  # fmt: skip


def _bad_values(rng: random.Random) -> dict[str, Any]:
    values = dict(GOOD)
    for name in rng.sample(FIELDS, rng.randint(1, 3)):
        values[name] = rng.choice(VALUES[name])
    return values


class _Pickled:
    """Pickles as a Chunk whose state was never checked (a payload from elsewhere)."""

    def __init__(self, state: list[Any]) -> None:
        self.state = state

    def __reduce__(self) -> Any:
        return (copyreg._reconstructor, (Chunk, object, None), self.state)  # type: ignore[attr-defined]


def build(route: str, rng: random.Random) -> Any:
    """A chunk made by ``route`` with one to three bad (or odd) field values."""
    values = _bad_values(rng)
    if route == "setattr":
        chunk = Chunk(**GOOD)
        for name, value in values.items():
            object.__setattr__(chunk, name, value)
        return chunk
    if route == "new":
        chunk = object.__new__(Chunk)
        for name, value in values.items():
            if rng.random() > 0.1:  # sometimes a field is never set at all
                object.__setattr__(chunk, name, value)
        return chunk
    if route == "pickle":
        state = [values[name] for name in FIELDS]
        if rng.random() < 0.1:
            state = state[: rng.randint(0, len(FIELDS) - 1)]
        return pickle.loads(pickle.dumps(_Pickled(state)))
    assert route == "replace"
    return dataclasses.replace(Chunk(**GOOD), **values)


ROUTES = ("setattr", "new", "pickle", "replace")


def test_fuzzed_chunks_get_typed_errors_or_work() -> None:
    rng = random.Random(20261123)
    evaluators = [Evaluator(), Evaluator(EvaluatorConfig.from_profile("synapse"))]
    outcomes = {"worked": 0, "rejected": 0}
    untyped: list[str] = []
    for case in range(2000):
        route = ROUTES[case % len(ROUTES)]
        try:
            bad = build(route, rng)
        except CragError:  # dataclasses.replace runs __post_init__: rejected at once
            outcomes["rejected"] += 1
            continue
        chunks = [_good_chunk(0), _good_chunk(1)]
        chunks.insert(rng.randint(0, 2), bad)
        evaluator = evaluators[case % 2]
        try:
            evaluator.evaluate(QUERY, chunks)
            evaluator.refine(QUERY, chunks)
        except CragError:
            outcomes["rejected"] += 1
        except Exception as exc:
            untyped.append(f"{route} {bad_repr(bad)}: {type(exc).__name__}: {exc}")
        else:
            outcomes["worked"] += 1
    assert untyped == [], f"{len(untyped)} untyped errors, e.g. {untyped[:5]}"
    assert outcomes["rejected"] > 1000 and outcomes["worked"] > 0


def bad_repr(chunk: Any) -> str:
    return repr({name: getattr(chunk, name, "<unset>") for name in FIELDS})[:200]


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("text", b"bytes", "must be a string"),
        ("score", math.nan, "finite"),
        ("score_kind", "nope", "must be one of"),
        ("id", None, "non-empty string"),
        ("metadata", None, "mapping"),
    ],
)
def test_a_tampered_chunk_names_its_field_and_position(name: str, value: Any, reason: str) -> None:
    bad = Chunk(**GOOD)
    object.__setattr__(bad, name, value)
    with pytest.raises(InvalidChunkError, match=reason) as info:
        Evaluator().evaluate(QUERY, [_good_chunk(0), bad])
    assert info.value.field == name and info.value.index == 1


def test_a_chunk_built_without_init_is_rejected() -> None:
    with pytest.raises(InvalidChunkError, match="not set") as info:
        Evaluator().evaluate(QUERY, [object.__new__(Chunk)])
    assert info.value.index == 0


def test_a_state_the_constructor_never_stores_is_rejected() -> None:
    """The constructor turns "cosine" into ScoreKind.COSINE and 1 into 1.0; a chunk
    holding the raw values was changed after construction."""
    for name, value in (("score_kind", "cosine"), ("score", 1)):
        chunk = Chunk(**GOOD)
        object.__setattr__(chunk, name, value)
        with pytest.raises(InvalidChunkError, match="set after construction") as info:
            Evaluator().evaluate(QUERY, [chunk])
        assert info.value.field == name


def test_subclasses_of_str_and_float_still_pass() -> None:
    class Text(str):
        pass

    chunk = Chunk(**GOOD)
    object.__setattr__(chunk, "text", Text("bees dance"))
    object.__setattr__(chunk, "score", np_float(0.5))
    assert Evaluator().evaluate(QUERY, [chunk]).chunks[0].similarity == 0.5


def np_float(value: float) -> float:
    np = pytest.importorskip("numpy")
    return np.float64(value)  # type: ignore[no-any-return]


def test_unpickling_runs_the_constructors_checks() -> None:
    chunk = Chunk(**GOOD)
    assert pickle.loads(pickle.dumps(chunk)) == chunk
    state = [GOOD[name] for name in FIELDS]
    state[FIELDS.index("score")] = math.nan
    with pytest.raises(InvalidChunkError, match="finite"):
        pickle.loads(pickle.dumps(_Pickled(state)))
    with pytest.raises(InvalidChunkError, match="8 fields"):
        pickle.loads(pickle.dumps(_Pickled(state[:3])))


def test_a_retriever_returning_a_tampered_chunk_is_a_retriever_error() -> None:
    bad = Chunk(**GOOD)
    object.__setattr__(bad, "text", None)
    crag = CRAG(ListRetriever([_good_chunk(0), bad]), Evaluator())
    runs: list[Callable[[], Any]] = [
        lambda: crag.retrieve(QUERY, 2),
        lambda: asyncio.run(crag.aretrieve(QUERY, 2)),
    ]
    for run in runs:
        with pytest.raises(RetrieverError, match=r"invalid chunk at position 1.*text"):
            run()
