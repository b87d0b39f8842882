"""Learn-then-Test bands: exact binomial tails by hand, the fixed sequence, refusals,
and the guarantee checked on fresh samples."""

from __future__ import annotations

import math
import pickle
from typing import Any, Literal

import numpy as np
import pytest

from crag_heuristic import ConfigError, EvaluatorConfig
from crag_heuristic._grading.guarantee import band_risk, labels_needed
from crag_heuristic.config import Guarantee
from crag_heuristic.grading import (
    InsufficientLabelsError,
    SetEscalation,
    binomial_cdf,
    binomial_lower,
    binomial_upper,
    guaranteed_band,
)


def test_binomial_cdf_by_hand() -> None:
    assert binomial_cdf(1, 3, 0.5) == pytest.approx(4 / 8)  # (1 + 3) / 2^3
    assert binomial_cdf(0, 4, 0.1) == pytest.approx(0.9**4)
    assert binomial_cdf(2, 5, 0.2) == pytest.approx(0.8**5 + 5 * 0.2 * 0.8**4 + 10 * 0.04 * 0.8**3)
    assert binomial_cdf(-1, 5, 0.2) == 0.0
    assert binomial_cdf(5, 5, 0.2) == 1.0
    assert binomial_cdf(2, 5, 0.0) == 1.0 and binomial_cdf(2, 5, 1.0) == 0.0
    with pytest.raises(ConfigError):
        binomial_cdf(1, 5, 1.5)


def test_clopper_pearson_bounds_by_hand() -> None:
    # no event in 22 trials: (1 - u)^22 = 0.1
    assert binomial_upper(0, 22, 0.1) == pytest.approx(1 - 0.1 ** (1 / 22), abs=1e-9)
    assert binomial_cdf(3, 40, binomial_upper(3, 40, 0.05)) == pytest.approx(0.05, abs=1e-9)
    low = binomial_lower(5, 20, 0.1)
    assert 1 - binomial_cdf(4, 20, low) == pytest.approx(0.1, abs=1e-9)
    assert binomial_lower(0, 20, 0.1) == 0.0 and binomial_upper(20, 20, 0.1) == 1.0


def test_labels_needed_by_hand() -> None:
    # (1 - eps)^m <= delta: 0.9^22 = 0.0985 <= 0.1 < 0.9^21 = 0.1094
    assert labels_needed(0.1, 0.1) == 22
    assert labels_needed(0.05, 0.1) == 45  # 0.95^45 = 0.0994 < 0.1 < 0.95^44 = 0.1047
    assert labels_needed(0.1, 0.05) == 29


def _recall_data(failed: list[float], good: list[float]) -> tuple[list[float], list[bool]]:
    return failed + good, [False] * len(failed) + [True] * len(good)


def test_recall_needs_enough_failed_lists_and_says_how_many() -> None:
    failed = [0.1 + 0.01 * i for i in range(21)]
    scores, good = _recall_data(failed, [0.9] * 100)
    with pytest.raises(InsufficientLabelsError) as caught:
        guaranteed_band(scores, good, target="recall", eps=0.1, delta=0.1)
    assert caught.value.needed == 22 and caught.value.have == 21
    assert "22" in str(caught.value)
    # one more failed list: accepted (the boundary is >=, not >)
    scores, good = _recall_data([*failed, 0.05], [0.9] * 100)
    assert guaranteed_band(scores, good, target="recall", eps=0.1, delta=0.1).counted == 22


def test_recall_band_by_hand() -> None:
    """22 failed lists: one violation is already too many (P(Bin(22, 0.1) <= 1) =
    0.339 > 0.1), so the band must keep every failed list: its top is the first grid
    step at or above the highest failed score, 0.7234 -> 0.724."""
    failed = [0.1 + 0.02 * i for i in range(21)] + [0.7234]
    good = [0.5, 0.72, 0.724, 0.7241, 0.8, 0.9, 0.95, 0.99]
    scores, labels = _recall_data(failed, good)
    band = guaranteed_band(scores, labels, target="recall", eps=0.1, delta=0.1)
    assert band.band == (0.0, 0.724)
    assert band.violations == 0 and band.counted == 22 and band.n == 30
    # inside [0, 0.724]: the 22 failed and 0.5, 0.72, 0.724
    assert band.escalated == pytest.approx(25 / 30)
    assert band.saved == pytest.approx(5 / 30)
    assert band.risk_bound == pytest.approx(binomial_upper(0, 22, 0.1))
    assert band_risk("recall", band.band, scores, labels) == (0, 22)


def test_recall_allows_violations_when_the_binomial_test_does() -> None:
    """100 failed lists at eps = 0.1, delta = 0.1: P(Bin(100, 0.1) <= 5) = 0.058 and
    <= 6 is 0.117, so at most 5 failed lists may lie above the band."""
    assert binomial_cdf(5, 100, 0.1) < 0.1 < binomial_cdf(6, 100, 0.1)
    failed = [i / 1000 for i in range(100, 195)] + [0.80, 0.81, 0.82, 0.83, 0.84]
    good = [0.9] * 50
    scores, labels = _recall_data(failed, good)
    band = guaranteed_band(scores, labels, target="recall", eps=0.1, delta=0.1)
    # the fixed sequence runs down from 1: 5 violations from 0.799 down to 0.194,
    # a sixth at 0.193
    assert band.band == (0.0, 0.194)
    assert band.violations == 5


def test_a_p_value_equal_to_delta_rejects() -> None:
    """Fixed-sequence testing rejects a null whose p-value is at most delta, equal
    included. Three failed lists at eps = 1/2: P(Bin(3, 1/2) <= 1) = (1 + 3) / 8 = 1/2,
    <= 2: 7/8. With delta that very p-value (1/2 by hand; the test compares the float
    it computes, so delta is that float) one failed list may pass alone, not two: the
    band's top runs down to 0.4, where the list at 0.6 passes and the one at 0.4 (on
    the edge: the grader's) does not. A test of p < delta stops at 0.6."""
    delta = binomial_cdf(1, 3, 0.5)
    assert delta == pytest.approx(1 / 2) and binomial_cdf(2, 3, 0.5) == pytest.approx(7 / 8)
    scores, labels = _recall_data([0.2, 0.4, 0.6], [0.8, 0.9])
    band = guaranteed_band(scores, labels, target="recall", eps=0.5, delta=delta)
    assert band.band == (0.0, 0.4) and band.violations == 1 and band.counted == 3
    # the same over a window of 2 failed lists: b = floor(1/2 * 2) + 1 = 2, so one
    # labelled violation marks 3 of the 5 lists; 3 drawn hold at least one of them:
    # p = P(X <= 1) = P(X = 1) = C(3, 1) C(2, 2) / C(5, 3) = 3/10 (two: 1 - 4/10)
    from crag_heuristic._grading.guarantee import window_p_value

    at = window_p_value(1, 3, 0.5, 2)
    assert at == pytest.approx(3 / 10)
    band = guaranteed_band(scores, labels, target="recall", eps=0.5, delta=at, window=2)
    assert band.band == (0.0, 0.4) and band.violations == 1


def test_agreement_band_by_hand() -> None:
    """Separable lists centred on 0.5: the band shrinks to the centre, where the
    gate alone disagrees with nobody."""
    scores = [0.1 + 0.001 * i for i in range(50)] + [0.9 - 0.001 * i for i in range(50)]
    labels = [False] * 50 + [True] * 50
    band = guaranteed_band(scores, labels, target="agreement", eps=0.1, delta=0.1, centre=0.5)
    assert band.band == (0.5, 0.5) and band.violations == 0 and band.escalated == 0.0
    assert band.centre == 0.5
    # a list on the wrong side of the centre counts once the band stops covering it
    flipped = [*labels]
    flipped[0] = True  # a good list at 0.1
    assert band_risk("agreement", (0.5, 0.5), scores, flipped) == (1, 100)


def test_bad_arguments_are_config_errors() -> None:
    scores, labels = _recall_data([0.1] * 30, [0.9] * 30)
    kwargs: dict[str, Any]
    for kwargs in ({"target": "precision"}, {"eps": 0.0}, {"delta": 1.0}, {"eps": True}):
        with pytest.raises(ConfigError):
            guaranteed_band(scores, labels, **kwargs)
    with pytest.raises(ConfigError, match="label every score"):
        guaranteed_band(scores, labels[:-1])
    with pytest.raises(ConfigError, match="probabilities"):
        guaranteed_band([*scores[:-1], 1.5], labels)
    with pytest.raises(ConfigError, match="centre"):
        guaranteed_band(scores, labels, target="agreement", centre=1.0)


def _population(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Lists whose gate scores overlap: 25 % failed (scores ~ Beta(2, 3)), good ones
    ~ Beta(4, 2)."""
    good = rng.random(n) >= 0.25
    scores = np.where(good, rng.beta(4, 2, n), rng.beta(2, 3, n))
    return scores, good


@pytest.mark.parametrize("target", ["recall", "agreement"])
def test_the_guarantee_holds_on_fresh_samples(target: Literal["recall", "agreement"]) -> None:
    """300 calibration samples of 400 lists each; each band's risk measured on
    200,000 fresh lists. The risk exceeds eps in at most delta of the samples (plus
    three standard errors of 300 draws); and the bands are not vacuous."""
    rng = np.random.default_rng(11)
    fresh_scores, fresh_good = _population(rng, 200_000)
    eps, delta, trials = 0.1, 0.1, 300
    over, saved = 0, []
    for _ in range(trials):
        scores, good = _population(rng, 400)
        band = guaranteed_band(
            scores.tolist(), good.tolist(), target=target, eps=eps, delta=delta, centre=0.6
        )
        low, high = band.band
        if target == "recall":
            risk = float((fresh_scores[~fresh_good] > high).mean())
        else:
            wrong = ((fresh_scores > high) & ~fresh_good) | ((fresh_scores < low) & fresh_good)
            risk = float(wrong.mean())
        over += risk > eps
        saved.append(band.saved)
    assert over / trials <= delta + 3 * math.sqrt(delta * (1 - delta) / trials)
    assert np.mean(saved) > 0.2  # the gate decides a fair share alone


def test_a_guarantee_is_config_and_pickles() -> None:
    scores, labels = _recall_data([0.1 + 0.01 * i for i in range(30)], [0.9] * 30)
    band = guaranteed_band(scores, labels, grader="llm:v1", labels="30 + 30 lists")
    assert isinstance(band, Guarantee) and band.grader == "llm:v1"
    assert "at most 0.1 of failed lists" in band.describe()
    assert pickle.loads(pickle.dumps(band)) == band
    error = InsufficientLabelsError("too few", needed=22, have=3)
    again = pickle.loads(pickle.dumps(error))
    assert (again.needed, again.have, str(again)) == (22, 3, "too few")
    with pytest.raises(ConfigError, match="band"):
        Guarantee(
            target="recall", eps=0.1, delta=0.1, band=(0.6, 0.2), n=1, counted=1,
            violations=0, risk=0.0, risk_bound=0.5, escalated=0.5,
        )  # fmt: skip


def test_a_set_escalation_takes_its_band_from_a_guarantee() -> None:
    scores, labels = _recall_data([0.1 + 0.01 * i for i in range(30)], [0.9] * 30)
    band = guaranteed_band(scores, labels)
    policy = SetEscalation.guaranteed(band, timeout=5.0)
    assert policy.band == band.band and policy.guarantee is band and policy.timeout == 5.0
    assert SetEscalation.guaranteed(EvaluatorConfig().replace(guarantee=band)).band == band.band
    with pytest.raises(ConfigError, match="no guarantee"):
        SetEscalation.guaranteed(EvaluatorConfig())
    with pytest.raises(ConfigError, match="differs"):
        SetEscalation(band=(0.2, 0.3), guarantee=band)
    # a guarantee changes no evaluation: the cache key's fingerprint ignores it
    assert (
        EvaluatorConfig().replace(guarantee=band).fingerprint() == EvaluatorConfig().fingerprint()
    )


def test_hypergeometric_cdf_by_hand() -> None:
    from crag_heuristic._grading.guarantee import hypergeometric_cdf

    # 10 items, 4 marked, 3 drawn: P(X = 0) = C(6,3)/C(10,3) = 20/120, P(X = 1) = 4*15/120
    assert hypergeometric_cdf(0, 10, 4, 3) == pytest.approx(20 / 120)
    assert hypergeometric_cdf(1, 10, 4, 3) == pytest.approx(80 / 120)
    assert hypergeometric_cdf(3, 10, 4, 3) == 1.0  # x at the largest possible
    assert hypergeometric_cdf(-1, 10, 4, 3) == 0.0
    # 5 items, 4 marked, 3 drawn: at least 2 marked are drawn
    assert hypergeometric_cdf(1, 5, 4, 3) == 0.0
    assert hypergeometric_cdf(2, 5, 4, 3) == pytest.approx(6 / 10)  # C(4,2) * C(1,1) / C(5,3)


def test_the_window_p_value_by_hand() -> None:
    """20 labelled lists with no violation, a window of 10 at eps 0.1: the window breaks
    the bound with b = floor(0.1 * 10) + 1 = 2 violations; p = P(none of the 2 among the
    20 labelled of 30) = C(28, 20) / C(30, 20)."""
    from crag_heuristic._grading.guarantee import window_labels_needed, window_p_value

    assert window_p_value(0, 20, 0.1, 10) == pytest.approx(math.comb(28, 20) / math.comb(30, 20))
    # one labelled violation: 3 marked of 30, at most one among the 20 drawn
    assert window_p_value(1, 20, 0.1, 10) == pytest.approx(
        (math.comb(27, 20) + 3 * math.comb(27, 19)) / math.comb(30, 20)
    )
    # b never exceeds the window
    assert window_p_value(0, 5, 0.9999999999, 1) == pytest.approx(1 / 6)
    needed = window_labels_needed(0.1, 0.1, 10)
    assert window_p_value(0, needed, 0.1, 10) <= 0.1 < window_p_value(0, needed - 1, 0.1, 10)


@pytest.mark.parametrize("target", ["recall", "agreement"])
def test_a_window_guarantee_holds_on_fresh_windows(target: Literal["recall", "agreement"]) -> None:
    """300 calibration samples of 400 lists; each band's realised risk on the next window
    of 300 lists counted exceeds eps in at most delta of them (plus three standard
    errors), which the same bands without the window do not promise."""
    rng = np.random.default_rng(5)
    window, over = 300, 0
    for _ in range(300):
        scores, good = _population(rng, 400)
        band = guaranteed_band(
            scores.tolist(), good.tolist(), target=target, eps=0.1, delta=0.1, centre=0.6,
            window=window,
        )  # fmt: skip
        assert band.window == window
        fresh, fresh_good = _population(rng, 3 * window)
        low, high = band.band
        if target == "recall":
            risk = float((fresh[~fresh_good][:window] > high).mean())
        else:
            s, g = fresh[:window], fresh_good[:window]
            risk = float((((s > high) & ~g) | ((s < low) & g)).mean())
        over += risk > 0.1
    assert over / 300 <= 0.1 + 3 * math.sqrt(0.09 / 300)


def test_the_band_edges_are_the_graders() -> None:
    """A score exactly on an edge is inside the band (the grader decides): no violation."""
    scores = [0.3, 0.6, 0.3, 0.6]
    good = [True, False, False, True]
    assert band_risk("agreement", (0.3, 0.6), scores, good) == (0, 4)
    assert band_risk("recall", (0.0, 0.6), scores, good) == (0, 2)
    assert band_risk("agreement", (0.31, 0.59), scores, good) == (2, 4)


def test_the_recall_path_reaches_zero() -> None:
    """Every failed list at 0 exactly: the last step of the path, high = 0, keeps them all
    in the band (inclusive) and lets every other list pass."""
    scores, labels = _recall_data([0.0] * 30, [0.5] * 10)
    band = guaranteed_band(scores, labels, target="recall", eps=0.1, delta=0.1)
    assert band.band == (0.0, 0.0) and band.escalated == pytest.approx(30 / 40)


def test_labels_needed_agrees_with_the_test_at_the_boundary() -> None:
    """(1 - 0.3)^2 = 0.49 in exact arithmetic, 0.49000000000000005 in floats: the count
    needed is the one the test's own p-value accepts."""
    assert binomial_cdf(0, 2, 0.3) > 0.49
    assert labels_needed(0.3, 0.49) == 3
    scores, labels = _recall_data([0.1, 0.2, 0.3], [0.9] * 5)
    assert guaranteed_band(scores, labels, eps=0.3, delta=0.49).counted == 3


def test_a_decision_is_a_bool_or_0_1() -> None:
    scores = [0.2] * 30 + [0.8] * 30
    mixed: list[Any] = [np.bool_(False)] * 30 + [1] * 30
    assert guaranteed_band(scores, mixed).n == 60
    for bad in ("0", 0.3, 2, None):
        labels: list[Any] = [bad] * 30 + [True] * 30
        with pytest.raises(ConfigError, match="decision"):
            guaranteed_band(scores, labels)
    with pytest.raises(ConfigError):
        binomial_cdf(1.5, 3, 0.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        binomial_upper(1, 10, float("nan"))
