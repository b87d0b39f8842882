"""The verdict bands: exact boundaries, and each constraint of the band fit (by hand)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crag_heuristic import Verdict
from crag_heuristic._bench.failure import verdict_table
from crag_heuristic._calibration.gate import _bands
from crag_heuristic._config import Thresholds
from crag_heuristic._evaluator.evaluator import verdict_for
from crag_heuristic._grading.lists import SetEscalation, select_list
from crag_heuristic._types import ChunkEvaluation, Evaluation, Signals


def test_a_score_exactly_at_a_band_falls_below_it() -> None:
    bands = Thresholds(relevant=0.5, partial=0.3)
    assert verdict_for(0.5, bands) is Verdict.PARTIAL  # RELEVANT only above 0.5
    assert verdict_for(np.nextafter(0.5, 1.0), bands) is Verdict.RELEVANT
    assert verdict_for(0.3, bands) is Verdict.IRRELEVANT  # PARTIAL only above 0.3
    assert verdict_for(np.nextafter(0.3, 1.0), bands) is Verdict.PARTIAL
    assert verdict_for(0.0, Thresholds(relevant=0.0, partial=0.0)) is Verdict.IRRELEVANT


# 30 natural retrievals, P(good) 0.01 ... 0.30: the 10 lowest failed, the 20 others good;
# 10 probes (failed by construction) scored high, 0.25 ... 0.34.
NATURAL = np.round(np.arange(1, 31) / 100, 2)
PROBES = np.round(np.arange(25, 35) / 100, 2)
P = np.concatenate([NATURAL, PROBES])
GOOD = np.concatenate([NATURAL >= 0.11, np.zeros(10, dtype=bool)])
IS_NATURAL = np.concatenate([np.ones(30, dtype=bool), np.zeros(10, dtype=bool)])


def test_the_fast_path_band_meets_both_targets_on_natural_precision() -> None:
    """precision >= 0.9 on natural retrievals alone holds from 0.08 up (22 fast, 2
    failed), but keeping half of all failed retrievals off the fast path needs 0.10
    (10 natural failures below it out of 20 failed). Measured over every retrieval,
    probes included, no band would reach 0.9 with 10 natural retrievals on it."""
    relevant, partial, met = _bands(
        P, GOOD, IS_NATURAL, target_precision=0.9, min_failure_recall=0.5, max_good_irrelevant=0.15
    )
    assert met and relevant == pytest.approx(0.10)
    assert partial == pytest.approx(0.10)  # the 15 % quantile of good ones, 0.1385, capped at it
    without_recall, _, _ = _bands(
        P, GOOD, IS_NATURAL, target_precision=0.9, min_failure_recall=0.0, max_good_irrelevant=0.15
    )
    assert without_recall == pytest.approx(0.08)


def test_unreachable_targets_are_said_and_the_partial_band_is_a_low_quantile() -> None:
    relevant, partial, met = _bands(
        P,
        GOOD,
        IS_NATURAL,
        target_precision=0.99,
        min_failure_recall=0.99,
        max_good_irrelevant=0.15,
    )
    assert not met
    assert relevant == pytest.approx(np.sort(P)[-11])  # the 11th best: 10 retrievals above it
    # 15 % of the 20 good natural retrievals (0.11 ... 0.30) fall below it, not 85 %
    assert partial == pytest.approx(0.11 + 0.15 * 19 * 0.01)
    assert partial < relevant


def test_precision_on_natural_traffic_leaves_the_probes_out() -> None:
    verdicts = ["relevant"] * 4 + ["irrelevant"] * 2 + ["relevant"] * 2
    failed = np.array([False, False, False, True, True, False, True, True])
    natural = np.array([True] * 6 + [False] * 2)  # two probes on the fast path
    table = verdict_table(verdicts, failed, natural)
    assert table["natural_fast_path_precision"] == pytest.approx(3 / 4)
    assert table["fast_path_precision"] == pytest.approx(3 / 6)
    assert table["good_natural_fast_path"] == pytest.approx(3 / 4)
    assert table["good_natural_in_irrelevant"] == pytest.approx(1 / 4)
    nothing = verdict_table(["irrelevant"] * 3, np.array([True, False, True]), np.ones(3, bool))
    assert nothing["natural_fast_path_precision"] is None  # no fast path: nothing to measure
    assert nothing["fast_path_precision"] is None


def _evaluation(score: float) -> Evaluation:
    """A graded list of one chunk whose set probability is ``score`` (bands 0.2 / 0.6)."""
    grade = ChunkEvaluation(
        chunk_id="a", score=0.5, verdict=Verdict.PARTIAL, signals=Signals(0.5, 0.5, 0.5, 0.5)
    )
    return Evaluation(
        verdict=Verdict.PARTIAL,
        score=score,
        signals=Signals(0.5, 0.5, 0.5, 0.5),
        chunks=(grade,),
        reasoning="",
        profile="t",
        details={"bands": {"relevant": 0.6, "partial": 0.2}},
    )


def test_the_set_escalation_band_is_inclusive() -> None:
    policy = SetEscalation()  # the gate's PARTIAL band, [0.2, 0.6]
    for score, uncertain in ((0.2, True), (0.6, True), (0.199, False), (0.601, False)):
        choice = select_list(_evaluation(score), policy)
        assert choice.candidates == (1 if uncertain else 0), score
        assert choice.chosen == (("a",) if uncertain else ())
    assert select_list(_evaluation(0.7), SetEscalation(band=(0.7, 0.9))).chosen == ("a",)
    assert dataclasses.replace(_evaluation(0.5), chunks=()).chunks == ()
    assert select_list(dataclasses.replace(_evaluation(0.5), chunks=()), policy).candidates == 0
