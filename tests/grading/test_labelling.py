"""Labels for a calibration: kept as they arrive, resumed, failures counted, and the
budget a guarantee needs, by hand (the command line over a real chat server:
tests/bench/test_calibrate_llm.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from crag_heuristic import Chunk, ConfigError, Evaluation, EvaluatorConfig, ScoreKind
from crag_heuristic._evaluator.evaluator import Evaluator
from crag_heuristic._grading.labelling import (
    label_budget,
    label_lists,
    list_key,
    logged_grades,
    resumed_grades,
)
from crag_heuristic.grading import (
    GraderOutputError,
    GraderTimeout,
    JsonlGradeLog,
    audited_labels,
)


@dataclass(frozen=True)
class Listed:
    group: str
    query: str
    chunks: tuple[Chunk, ...]


def _lists(n: int) -> list[Listed]:
    return [
        Listed(
            group=f"q{i}",
            query=f"what is topic number {i}?",
            chunks=tuple(
                Chunk(
                    id=f"d{i}-{j}",
                    text=f"topic {i} passage {j}",
                    score=0.5,
                    score_kind=ScoreKind.COSINE,
                )
                for j in range(3)
            ),
        )
        for i in range(n)
    ]


class Picky:
    """A grader that fails on some queries (by their number) and counts its calls."""

    fingerprint = "picky:v1"

    def __init__(self, failing: dict[int, Exception] | None = None) -> None:
        self.failing = failing or {}
        self.calls: list[str] = []

    def grade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
        number = int(query.split()[-1].rstrip("?"))
        self.calls.append(query)
        if number in self.failing:
            raise self.failing[number]
        return [1.0 if number % 3 == 0 and j == 0 else 0.0 for j in range(len(chunks))]


def _gates(lists: Sequence[Listed]) -> list[Evaluation]:
    evaluator = Evaluator(EvaluatorConfig())
    return [evaluator.evaluate(ex.query, ex.chunks) for ex in lists]


def test_the_budget_by_hand() -> None:
    # recall 0.1 at delta 0.1: 22 failed lists ((1 - 0.1) ** 22 = 0.098 <= 0.1 < 0.9 ** 21)
    budget = label_budget([0.9] * 200, target="recall", eps=0.1, delta=0.1)
    assert (budget.needed, budget.lists, budget.lists_needed) == (22, 200, 220)
    assert budget.expected == pytest.approx(20.0) and not budget.enough
    assert "needs at least 22 failed lists" in budget.describe()
    assert "about 220 lists to label" in budget.describe()
    # two lists labelled failed count as failed, not as 0.1 each: 20 - 0.2 + 2
    budget = label_budget(
        [0.9] * 200, target="recall", eps=0.1, delta=0.1, known={0: False, 1: False}
    )
    assert budget.expected == pytest.approx(21.8)
    budget = label_budget([0.5] * 50, target="recall", eps=0.1, delta=0.1)
    assert budget.enough and budget.expected == pytest.approx(25.0)
    # agreement counts every list; a window needs more (the window's own count)
    assert label_budget([0.5] * 21, target="agreement", eps=0.1, delta=0.1).enough is False
    assert label_budget([0.5] * 22, target="agreement", eps=0.1, delta=0.1).enough is True
    wide = label_budget([0.5] * 22, target="agreement", eps=0.1, delta=0.1, window=100)
    assert wide.needed > 22 and not wide.enough
    # the gate sure that every list is good: no number of lists reaches it
    never = label_budget([1.0] * 10, target="recall", eps=0.1, delta=0.1)
    assert never.lists_needed is None and "no number of lists" in never.describe()
    with pytest.raises(ConfigError):
        label_budget([0.5], target="precision", eps=0.1, delta=0.1)


def test_labels_are_kept_as_they_arrive_and_a_run_resumes(tmp_path: Path) -> None:
    lists = _lists(12)
    gates = _gates(lists)
    log = JsonlGradeLog(tmp_path / "grades.jsonl")
    picky = Picky({4: GraderTimeout("no answer within 5 s"), 7: RuntimeError("bug")})
    made = label_lists(lists, picky, log=log, gates=gates, profile="p1", seed=3)
    assert (made.graded, made.resumed, len(made.grades), made.not_graded) == (10, 0, 10, 0)
    assert [(f.query_id, f.error) for f in sorted(made.failures, key=lambda f: f.query_id)] == [
        ("q4", "GraderTimeout"),
        ("q7", "GraderError"),  # a grader's own exception, typed
    ]
    assert not made.complete and len(picky.calls) == 12
    assert picky.calls != [ex.query for ex in lists]  # a seeded random order
    records = list(log.records())
    assert len(records) == 10 and {r["query_id"] for r in records} == {
        f"q{i}" for i in range(12) if i not in (4, 7)
    }
    text = (tmp_path / "grades.jsonl").read_text()
    assert "topic number" not in text  # the query's SHA-256, never its text
    record = records[0]
    assert record["source"] == "calibrate" and record["audited"] is True
    assert record["grader"] == "picky:v1" and record["profile"] == "p1"
    assert record["list"] == list_key(lists[int(record["query_id"][1:])].chunks)
    # the records are a grade log's: the monitor's reader takes them (the band's labels)
    scores, good, grader = audited_labels(records)
    assert len(scores) == 10 and grader == "picky:v1"
    assert sum(good) == sum(1 for r in records if int(r["query_id"][1:]) % 3 == 0)
    summary = made.summary()
    assert summary["failures"] == {"GraderError": 1, "GraderTimeout": 1}
    assert sorted(summary["failed_queries"]) == ["q4", "q7"]
    assert "no answer within 5 s" in summary["failure_messages"]["GraderTimeout"]
    # the next run grades only what the log does not hold
    again = Picky()
    made = label_lists(lists, again, log=log, gates=gates)
    assert (made.resumed, made.graded, made.complete) == (10, 2, True)
    assert sorted(again.calls) == sorted([lists[4].query, lists[7].query])
    assert len(list(log.records())) == 12


def test_a_grader_that_is_gone_stops_the_run(tmp_path: Path) -> None:
    lists = _lists(10)
    gone = Picky({i: GraderTimeout("gone") for i in range(10)})
    made = label_lists(lists, gone, stop_after=3, seed=None)
    assert len(gone.calls) == 3 and made.not_graded == 7 and made.stopped is not None
    assert any("7 never tried" in w for w in made.warnings())
    made = label_lists(lists, gone, stop_after=None)
    assert len(made.failures) == 10 and made.stopped is None


def test_labels_of_one_class_are_warned_of() -> None:
    lists = [ex for ex in _lists(9) if int(ex.group[1:]) % 3]  # none of them good
    made = label_lists(lists, Picky())
    [warning] = made.warnings()
    assert "all 6 lists failed" in warning and "one class" in warning
    assert label_lists(_lists(9), Picky()).warnings() == ()


def test_only_sound_records_of_the_same_grader_are_reused(tmp_path: Path) -> None:
    lists = _lists(3)
    log = JsonlGradeLog(tmp_path / "grades.jsonl")
    label_lists(lists, Picky(), log=log, gates=_gates(lists))
    good = list(log.records())
    assert len(logged_grades(good, "picky:v1")) == 3
    assert logged_grades(good, "another:v1") == {}
    forged = [
        {**good[0], "grades": [2.0, 0.0, 0.0]},  # outside [0, 1]
        {**good[1], "grades": [True, False, False]},  # not numbers
        {**good[2], "grades": [1.0, 0.0]},  # not one per chunk
        {**good[0], "list": list_key(lists[0].chunks[:1])},  # other chunks: no list matches
        {"v": 1, "grader": "picky:v1", "query": "x"},  # a monitor's record, or anything
        "not even a record",
    ]
    known = logged_grades(forged, "picky:v1")  # type: ignore[arg-type]
    assert len(known) == 1  # the one with other chunks' digest, filed under it
    assert resumed_grades(lists, forged, "picky:v1") == {}  # type: ignore[arg-type]
    # a list whose chunks changed (another index, another text) is graded again
    changed = [Listed(group=ex.group, query=ex.query, chunks=ex.chunks[:2]) for ex in lists]
    assert resumed_grades(changed, good, "picky:v1") == {}
    # a cut last line (a run killed mid-write) is skipped, the rest resumed
    with (tmp_path / "grades.jsonl").open("a") as handle:
        handle.write(json.dumps(good[0])[:40])
    assert len(resumed_grades(lists, log.records(), "picky:v1")) == 3


def test_a_log_needs_the_gate_view_and_a_bad_answer_is_a_failure(tmp_path: Path) -> None:
    lists = _lists(2)
    with pytest.raises(ValueError, match="gates"):
        label_lists(lists, Picky(), log=JsonlGradeLog(tmp_path / "grades.jsonl"))

    class Short:
        fingerprint = "short:v1"

        def grade(self, query: str, chunks: Sequence[Chunk]) -> list[float]:
            return [1.0]  # one grade for three chunks

    made = label_lists(lists, Short())
    assert {f.error for f in made.failures} == {GraderOutputError.__name__}
