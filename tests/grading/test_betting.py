"""The anytime-valid band: hand-computed wealth, the edge of a band, validity by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crag_heuristic._exceptions import ConfigError
from crag_heuristic._grading.betting import CAP, BettingCertificate, first_band_after


def test_the_first_band_needs_25_failed_lists_at_eps_and_delta_a_tenth() -> None:
    # each failed list without a violation multiplies the wealth by 1 + 0.9 * 0.1 / 0.9 = 1.1;
    # 1.1 ** 24 = 9.85 < 10 <= 1.1 ** 25 = 10.83
    assert first_band_after(0.1, 0.1) == 25
    assert 1.1**24 < 10 <= 1.1**25
    cert = BettingCertificate(target="recall", eps=0.1, delta=0.1)
    for _ in range(24):
        cert.observe(0.0, good=False)
    assert cert.status().band is None
    assert cert.status().needed == 1
    cert.observe(0.0, good=False)
    assert cert.band == (0.0, 0.0)  # no failed list above any band: the loosest holds
    assert cert.status().needed == 0


def test_good_lists_change_nothing_for_recall() -> None:
    cert = BettingCertificate(target="recall", eps=0.1, delta=0.1)
    for _ in range(100):
        cert.observe(0.99, good=True)
    assert cert.status().counted == 0 and cert.band is None


def test_a_list_exactly_at_the_band_edge_is_escalated_not_a_violation() -> None:
    cert = BettingCertificate(target="recall", eps=0.1, delta=0.1)
    for _ in range(25):
        cert.observe(0.5, good=False)
    # at high = 0.5 a list scored 0.5 goes to the grader: no violation, certified;
    # at high = 0.499 it passes alone: the first such list bets everything the bet
    # allows (lambda = 1) and keeps a tenth, then the estimate (1/2) is above eps: no bet
    assert cert.band == (0.0, 0.5)
    assert cert.status().violations == 0


def test_wealth_after_one_violation_by_hand() -> None:
    eps, delta = 0.1, 0.1
    cert = BettingCertificate(target="recall", eps=eps, delta=delta)
    cert.observe(0.9, good=False)  # a violation of every band with high < 0.9
    # bet of the first list: min(CAP / (1 - eps), (eps - 0) / (eps (1 - eps))) = CAP / 0.9 = 1
    # wealth of a violated band: 1 + 1 * (0.1 - 1) = 0.1
    violated = cert._log_wealth[cert._high < 0.9]
    assert np.allclose(violated, math.log(1 - CAP))
    kept = cert._log_wealth[cert._high >= 0.9]
    assert np.allclose(kept, math.log(1 + CAP * eps / (1 - eps)))
    # the next bet on a violated band: estimate 1 / 2 > eps: nothing staked
    cert.observe(0.0, good=False)
    assert np.allclose(cert._log_wealth[cert._high < 0.0], math.log(1 - CAP))


def test_a_band_is_rejected_for_good_once_its_wealth_reached_one_over_delta() -> None:
    cert = BettingCertificate(target="recall", eps=0.1, delta=0.1)
    for _ in range(25):
        cert.observe(0.2, good=False)
    assert cert.band == (0.0, 0.2)
    for _ in range(10):  # violations of every band below 0.9 now: the wealth falls
        cert.observe(0.9, good=False)
    assert cert.band == (0.0, 0.2)  # Ville: rejected at some time is rejected


def test_agreement_counts_every_list_by_hand() -> None:
    cert = BettingCertificate(target="agreement", eps=0.1, delta=0.1, centre=0.5)
    # a good list scored 0.9 and a failed one scored 0.1: the gate decides both right
    # outside a narrow band; 25 lists without a violation certify the narrowest band
    # that holds them inside or on their side
    for i in range(26):
        cert.observe(0.9 if i % 2 else 0.1, good=bool(i % 2))
    band = cert.band
    assert band is not None and band[0] >= 0.1 - 1e-9 and band[1] <= 0.9 + 1e-9
    assert cert.status().counted == 26


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"target": "precision"}, "target"),
        ({"eps": 0.0}, "eps"),
        ({"delta": 1.0}, "delta"),
        ({"centre": 1.5}, "centre"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        BettingCertificate(**kwargs)  # type: ignore[arg-type]


def test_the_guarantee_holds_at_every_time_at_once() -> None:
    """Failed lists' scores uniform on [0, 1]: the recall risk of high is 1 - high, so a
    band with high < 0.9 breaks eps = 0.1. Over 300 seeded streams of 200 failed lists,
    a band below 0.9 is ever certified in at most delta of them (plus binomial noise:
    300 draws at 0.1 exceed 0.15 with probability below 0.3 %)."""
    eps, delta, runs = 0.1, 0.1, 300
    rng = np.random.default_rng(7)
    broken = 0
    for _ in range(runs):
        cert = BettingCertificate(target="recall", eps=eps, delta=delta)
        ever = False
        for score in rng.random(200):
            cert.observe(float(score), good=False)
            band = cert.band
            ever = ever or (band is not None and band[1] < 0.9 - 1e-12)
        broken += ever
    assert broken / runs <= 0.15
