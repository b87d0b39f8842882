"""A band certified as labels arrive: Learn-then-Test with anytime-valid tests by betting.

:func:`~crag_heuristic._grading.guarantee.guaranteed_band` chooses a band once, on a
fixed set of ``n`` labelled lists. A cascade that learns from its grader labels lists
one at a time and wants to know, after each, which band it may use: testing the
fixed-sample p-value again after every label would look at the data again and again
and lose the guarantee. Here each hypothesis of the band path holds a **test by
betting** (Shafer, 2021; Waudby-Smith and Ramdas, *Estimating means of bounded random
variables by betting*, JRSS B 2024): a wealth that starts at 1 and is multiplied,
at every list the risk counts, by::

    K_t = K_{t-1} * (1 + lambda_t * (eps - v_t))

where ``v_t`` is 1 when the list is a violation of the band (``recall``: a failed
list above ``high``; ``agreement``: a list decided alone against the grader) and 0
otherwise, and ``lambda_t`` in ``[0, 1 / (1 - eps))`` is chosen from the lists
*before* this one (predictable). When the band's risk is above ``eps`` (the null),
``E[1 + lambda (eps - v)] <= 1`` and the wealth is a non-negative supermartingale;
by Ville's inequality (1939) ``P(sup_t K_t >= 1 / delta) <= delta``. So a band whose
wealth ever reaches ``1 / delta`` is rejected for good, at whatever time the
labels are read, as often as one likes. The path and fixed-sequence testing are
those of :mod:`~crag_heuristic._grading.guarantee` (strictest band first; the band in
force is the last of the rejected prefix), so for lists exchangeable with the
counted ones ``P(R(band) > eps) <= delta`` holds at every time at once.

The bet (a Kelly bet on a plug-in estimate, the "predictable plug-in" of
Waudby-Smith and Ramdas)::

    r_t = violations_{t-1} / (counted_{t-1} + 1)
    lambda_t = min(CAP / (1 - eps), max(0, (eps - r_t) / (eps * (1 - eps))))

With no violation the wealth grows by ``1 + CAP * eps / (1 - eps)`` a list: ``CAP
= 0.9`` certifies the first band after ``ceil(ln(1 / delta) / ln(1 + 0.9 eps / (1 -
eps)))`` counted lists (25 for ``eps = delta = 0.1``; the fixed-sample test needs 22),
and a single violation keeps a tenth of the wealth instead of none.

**What may be counted.** The lists must be a sample of the traffic that does not
depend on the gate's scores or the grader's answers (an audit: the lists the cascade
sends to the grader whatever the gate thinks), and the scores must come from a gate
fixed before the list was labelled: a list escalated *because* the gate was unsure
of it is not such a sample, and a gate refitted on a list cannot be certified on it.
:class:`~crag_heuristic._calibration.learning.LearningCascade` keeps to both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._config import _check_number
from .._exceptions import ConfigError
from .guarantee import TARGETS, Target, _path

CAP = 0.9
"""The largest bet, as a share of the most the wealth can stake (module doc)."""


def first_band_after(eps: float, delta: float) -> int:
    """Counted lists without a violation before the first band of the path is
    certified (module doc)."""
    return math.ceil(math.log(1.0 / delta) / math.log1p(CAP * eps / (1.0 - eps)) - 1e-12)


@dataclass(frozen=True, slots=True)
class BettingStatus:
    """Where a :class:`BettingCertificate` stands.

    Attributes:
        band: the certified band (``None``: none yet).
        counted: lists the risk counted (failed ones for ``recall``, all for
            ``agreement``).
        violations: violations of ``band`` among them (0 without a band).
        needed: counted lists without a violation still needed before a first
            band (0 once there is one).
    """

    band: tuple[float, float] | None
    counted: int
    violations: int
    needed: int


class BettingCertificate:
    """The anytime-valid band of the module doc, for one gate's scores.

    Args:
        target: ``"recall"`` or ``"agreement"``.
        eps: the risk bound, in (0, 1).
        delta: the probability the bound may fail, in (0, 1).
        centre: where the agreement path's bands are centred (ignored for recall).

    Raises:
        ConfigError: a bad target, ``eps``, ``delta`` or ``centre``.
    """

    def __init__(
        self,
        *,
        target: Target = "recall",
        eps: float = 0.1,
        delta: float = 0.1,
        centre: float = 0.5,
    ) -> None:
        if target not in TARGETS:
            raise ConfigError("target", target, f"must be one of {', '.join(TARGETS)}")
        for name, value in (("eps", eps), ("delta", delta), ("centre", centre)):
            _check_number(name, value, low=0.0, high=1.0, low_open=True, high_open=True)
        self.target: Target = target
        self.eps = float(eps)
        self.delta = float(delta)
        self.centre = float(centre)
        path = _path(target, centre)
        self._low = np.array([b[0] for b in path])
        self._high = np.array([b[1] for b in path])
        self._log_wealth = np.zeros(len(path))
        self._violations = np.zeros(len(path), dtype=np.int64)
        self._rejected = np.zeros(len(path), dtype=bool)
        self._counted = 0
        self._threshold = math.log(1.0 / self.delta)

    def __repr__(self) -> str:
        return (
            f"BettingCertificate({self.target} {self.eps:g} at delta {self.delta:g}, "
            f"counted={self._counted}, band={self.band})"
        )

    def observe(self, score: float, good: bool) -> None:
        """One list of the sample: the gate's set probability ``score`` and the grader's
        decision ``good`` (a list ``recall`` does not count changes nothing)."""
        if self.target == "recall" and good:
            return
        above = score > self._high
        if self.target == "recall":
            violation = above
        else:
            violation = (above & (not good)) | ((score < self._low) & good)
        eps = self.eps
        estimate = self._violations / (self._counted + 1.0)
        bet = np.minimum(CAP / (1.0 - eps), np.maximum(0.0, (eps - estimate) / (eps * (1 - eps))))
        self._log_wealth += np.log1p(bet * (eps - violation))
        self._violations += violation
        self._counted += 1
        self._rejected |= self._log_wealth >= self._threshold

    @property
    def band(self) -> tuple[float, float] | None:
        """The last band of the path whose hypothesis and every stricter one's were
        rejected (``None``: not even the first)."""
        if not self._rejected[0]:
            return None
        last = (
            len(self._rejected) - 1 if self._rejected.all() else int(np.argmin(self._rejected)) - 1
        )
        return float(self._low[last]), float(self._high[last])

    def status(self) -> BettingStatus:
        band = self.band
        if band is None:  # the first band is never violated: its wealth grows each list
            first = first_band_after(self.eps, self.delta)
            return BettingStatus(
                band=None, counted=self._counted, violations=0, needed=max(1, first - self._counted)
            )
        index = int(np.flatnonzero((self._low == band[0]) & (self._high == band[1]))[0])
        return BettingStatus(
            band=band,
            counted=self._counted,
            violations=int(self._violations[index]),
            needed=0,
        )
