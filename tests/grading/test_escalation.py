"""The escalation policy: validation, the uncertainty order by hand, selection on an
evaluation, and the cascaded evaluation without a set recompute."""

from __future__ import annotations

import dataclasses
import math

import pytest
from cascade_helpers import CHUNKS, CONFIG

from crag_heuristic import ConfigError, Evaluator, EvaluatorConfig, Verdict
from crag_heuristic._checks import check_query
from crag_heuristic._grading.escalation import (
    Escalation,
    cascaded_evaluation,
    rank_uncertain,
    select,
)

TEXT = check_query("text")  # the internal cascade steps take a checked query


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_uncertain_chunks_by_hand() -> None:
    probs = [0.9, 0.3, 0.5, 0.05, 0.25]
    # band [0.1, 0.8] keeps positions 1, 2, 4; distances to logit(0.4) = -0.405:
    # 0.3 -> 0.442, 0.5 -> 0.405, 0.25 -> 0.693; budget 0.4 of 5 -> 2 chunks
    assert abs(logit(0.3) - logit(0.4)) == pytest.approx(0.4418, abs=1e-4)
    candidates, chosen = rank_uncertain(probs, low=0.1, high=0.8, threshold=0.4, budget=0.4)
    assert (candidates, chosen) == (3, [2, 1])
    assert rank_uncertain(probs, low=0.1, high=0.8, threshold=0.4, budget=1.0)[1] == [2, 1, 4]
    assert rank_uncertain(probs, low=0.0, high=1.0, threshold=0.4, budget=1.0, max_chunks=1) == (
        5,
        [2],
    )
    # ties keep the list order; the band is inclusive
    assert rank_uncertain([0.5, 0.5], low=0.5, high=0.5, threshold=0.5, budget=1.0) == (2, [0, 1])


@pytest.mark.parametrize(("budget", "n", "cap"), [(0.3, 10, 3), (0.29, 10, 2), (0.1, 5, 0)])
def test_the_budget_is_a_floor_share_of_the_list(budget: float, n: int, cap: int) -> None:
    _, chosen = rank_uncertain([0.5] * n, low=0, high=1, threshold=0.5, budget=budget)
    assert len(chosen) == cap


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"band": (0.6, 0.4)}, "band"),
        ({"band": (0.1,)}, "band"),
        ({"band": (-0.1, 0.4)}, "band.low"),
        ({"budget": 1.5}, "budget"),
        ({"budget": math.nan}, "budget"),
        ({"max_chunks": -1}, "max_chunks"),
        ({"timeout": 0}, "timeout"),
        ({"recompute_set": "yes"}, "recompute_set"),
        ({"grade_ttl": 0}, "grade_ttl"),
    ],
)
def test_bad_escalations_name_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Escalation(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_escalation_from_a_dict() -> None:
    assert Escalation.from_dict({"band": [0.1, 0.9], "budget": 0.5}) == Escalation(
        band=(0.1, 0.9), budget=0.5
    )
    with pytest.raises(ConfigError, match="unknown field"):
        Escalation.from_dict({"budjet": 0.5})
    with pytest.raises(TypeError):
        Escalation(None)  # type: ignore[call-arg]  # keyword-only
    with pytest.raises(AttributeError):
        Escalation().budget = 1.0  # type: ignore[misc]  # frozen


def test_the_default_band_is_the_gates_partial_band_for_chunks() -> None:
    gate = Evaluator(CONFIG).evaluate("text", CHUNKS)  # 1/2, 2/3, 3/4; bands 0.55 / 0.7
    choice = select(gate, Escalation(budget=1.0), CONFIG)
    assert choice.band == (0.55, 0.7) and choice.threshold == 0.7
    assert (choice.candidates, choice.chosen) == (1, ("b",))
    assert choice.gate_scores == {"b": pytest.approx(2 / 3)}
    wide = select(gate, Escalation(band=(0.0, 1.0), budget=2 / 3), CONFIG)
    # distances to logit(0.7) = 0.847: 3/4 -> 0.252, 2/3 -> 0.154, 1/2 -> 0.847
    assert wide.chosen == ("b", "c")


def test_an_evaluation_without_recorded_bands_uses_the_config() -> None:
    gate = Evaluator(CONFIG).evaluate("text", CHUNKS)
    details = {k: v for k, v in gate.details.items() if k != "chunk_bands"}
    older = dataclasses.replace(gate, details=details)  # e.g. cached by an older release
    other = CONFIG.replace(chunk_thresholds={"relevant": 0.8, "partial": 0.6})
    assert select(older, Escalation(budget=1.0), other).band == (0.6, 0.8)


def test_without_a_set_recompute_only_the_chunk_grades_change() -> None:
    evaluator = Evaluator(CONFIG)
    gate = evaluator.evaluate("text", CHUNKS)
    kept = cascaded_evaluation(
        evaluator, TEXT, CHUNKS, None, gate, {"c": 0.1}, Escalation(recompute_set=False)
    )
    assert kept.score == gate.score and kept.verdict is gate.verdict
    assert kept.chunks[2].score == 0.1 and kept.chunks[2].verdict is Verdict.IRRELEVANT
    assert kept.chunks[:2] == gate.chunks[:2]
    assert kept.details["external_grades"] == {"c": 0.1}
    redone = cascaded_evaluation(evaluator, TEXT, CHUNKS, None, gate, {"c": 0.1}, Escalation())
    assert redone.score == pytest.approx(1 / (1 + math.exp(-4 / 3)))
    assert cascaded_evaluation(evaluator, TEXT, CHUNKS, None, gate, {}, Escalation()) is gate


def test_selection_on_no_chunks() -> None:
    gate = Evaluator(EvaluatorConfig()).evaluate("text", [])
    choice = select(gate, Escalation(), EvaluatorConfig())
    assert choice.chosen == () and choice.total == 0
