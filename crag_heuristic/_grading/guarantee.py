"""Escalation with a statistical guarantee: a set cascade's band chosen by Learn-then-Test.

A set cascade (:class:`~crag_heuristic._grading.lists.SetEscalation`) sends a list
to the expensive grader when the gate's set probability ``s`` lies in a band, and
lets the gate decide the others alone. Which band keeps the gate's own decisions
safe enough is a question about the user's traffic and grader, answered here from
``n`` lists the grader labelled (``g = 1`` good: the grader finds an answer in it;
``g = 0`` failed) by **Learn then Test** (Angelopoulos, Bates, Candès, Jordan and Lei,
2021: risk control by multiple testing), with **fixed-sequence testing** (the
hypotheses tested in a fixed order, each at level ``delta``, stopping at the
first that is not rejected; Bauer, 1991), as Trust or Escalate (Jung, Brahman and
Choi, ICLR 2025) does for a cheap and a strong LLM judge. Two targets:

``recall``
    The gate passes a list alone when ``s > high`` (the fast path without the
    grader); every other list goes to the grader. The risk is the share of
    *failed* lists that pass alone::

        R(high) = P(s > high | g = 0)                 (at most eps: failure recall >= 1 - eps)

``agreement``
    Outside the band ``[low, high]`` the gate decides alone: good above
    ``high``, failed below ``low``; inside, the grader decides. The risk is the
    share of *all* lists where the gate decided alone and the grader would
    have decided otherwise::

        R(low, high) = P(s > high, g = 0) + P(s < low, g = 1)

The path is fixed before any label is read, strictest first: for ``recall``
``high`` from 1 down to 0 in steps of 1/1000; for ``agreement`` bands centred on
``centre`` (the gate's own relevant threshold) in log-odds, ``logit(low), logit(high) =
logit(centre) -/+ w``, ``w`` from 15 down to 0 in steps of 0.01. Along it the risk
can only grow. At each step, with ``m`` the lists the risk counts over (the failed
ones for ``recall``, all for ``agreement``) and ``x`` the violations among them, the
null hypothesis ``R > eps`` is rejected when its exact binomial p-value::

    p = P(Binomial(m, eps) <= x)

is at most ``delta``; the band is the last one rejected. Then, for lists
exchangeable with the labelled ones, ``P(R(band) > eps) <= delta``. For ``recall``
the test is conditional on the number of failed lists (given it, their scores
are a sample of the failed lists' scores), so it holds as stated.

**A window.** The risk above is the traffic's: the rate over many future lists.
The realised rate over the next ``W`` lists counted is noisier. With ``window = W``
the guarantee is on it: ``P(X_W > eps * W) <= delta`` for ``X_W`` the violations
among the next ``W``. Exchangeability makes it exact: given the violations ``T``
among the ``m`` labelled and the ``W`` next lists together, the labelled ones hold
a hypergeometric share of them, so with ``b = floor(eps * W) + 1`` the p-value::

    p = P(Hypergeometric(draws m from m + W with x + b marked) <= x)

(``x`` the labelled violations) is valid for the null ``X_W >= b`` (``T >= x + b``
there, and the tail only grows with ``T``), and fixed-sequence testing goes on as
before. It is the guarantee to ask for when a week of traffic, not the long run,
must keep the bound; as ``W`` grows it becomes the binomial test.

Too few labels: with ``m`` lists even no violation cannot reject the first
hypothesis when ``(1 - eps) ** m > delta``, that is when ``m < ln(delta) /
ln(1 - eps)`` (22 failed lists for ``eps = delta = 0.1``; 45 for ``eps = 0.05``).
Then :func:`guaranteed_band` refuses (:class:`~crag_heuristic.InsufficientLabelsError`
says how many are needed), never a vacuous band.

:func:`binomial_cdf` and :func:`binomial_upper` (the Clopper-Pearson bound) are
exact and need nothing beyond the standard library.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from .._checks import as_real
from .._config import Guarantee, _check_number
from .._evaluator.model import sigmoid
from .._exceptions import ConfigError, InsufficientLabelsError
from .escalation import logit

Target = Literal["recall", "agreement"]
TARGETS: tuple[str, ...] = ("recall", "agreement")
RECALL_STEPS = 1000
"""The recall path: ``high = j / RECALL_STEPS`` for ``j`` from ``RECALL_STEPS`` down to 0."""
AGREEMENT_WIDTHS = tuple(round(15.0 - 0.01 * i, 2) for i in range(1501))
"""The agreement path: half-widths in log-odds, widest first."""


def binomial_cdf(k: int, n: int, p: float) -> float:
    """``P(Binomial(n, p) <= k)``, exact (a sum of terms in log space).

    Raises:
        ConfigError: ``k`` or ``n`` not an integer, ``n`` negative, ``p`` outside [0, 1].
    """
    _check_number("k", k, integer=True)
    _check_number("n", n, low=0, integer=True)
    _check_number("p", p, low=0.0, high=1.0)
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p == 0.0:
        return 1.0
    if p == 1.0:
        return 0.0
    log_p, log_q, log_n = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    logs = [
        log_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
        for i in range(k + 1)
    ]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


def _check_bound_args(k: int, n: int, delta: float) -> None:
    _check_number("k", k, low=0, integer=True)
    _check_number("n", n, low=0, integer=True)
    _check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)


def binomial_upper(k: int, n: int, delta: float) -> float:
    """The one-sided Clopper-Pearson upper bound on a rate with ``k`` events in ``n``
    trials at confidence ``1 - delta``: the ``p`` with ``P(Binomial(n, p) <= k) = delta``
    (1 when ``k >= n``; found by bisection to 1e-12)."""
    _check_bound_args(k, n, delta)
    if n <= 0 or k >= n:
        return 1.0
    low, high = k / n, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if binomial_cdf(k, n, mid) > delta:
            low = mid
        else:
            high = mid
    return high


def binomial_lower(k: int, n: int, delta: float) -> float:
    """The one-sided Clopper-Pearson lower bound at confidence ``1 - delta``: the ``p``
    with ``P(Binomial(n, p) >= k) = delta`` (0 when ``k == 0``)."""
    _check_bound_args(k, n, delta)
    if n <= 0 or k <= 0:
        return 0.0
    low, high = 0.0, k / n
    for _ in range(60):
        mid = (low + high) / 2
        if 1.0 - binomial_cdf(k - 1, n, mid) < delta:
            low = mid
        else:
            high = mid
    return low


def list_decision(grades: Iterable[float], threshold: float = 0.5) -> bool:
    """The grader's decision on a list: good when it grades one of its chunks at least
    ``threshold`` (the decision a band is chosen on, a monitor counts and a grade log
    records: one definition)."""
    return any(g >= threshold for g in grades)


def hypergeometric_cdf(x: int, total: int, marked: int, drawn: int) -> float:
    """``P(X <= x)`` for ``X`` the marked items among ``drawn`` drawn without replacement
    from ``total`` of which ``marked`` are marked; exact (log space)."""
    low, high = max(0, drawn - (total - marked)), min(drawn, marked)
    if x < low:
        return 0.0
    if x >= high:
        return 1.0

    def log_choose(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    denominator = log_choose(total, drawn)
    logs = [
        log_choose(marked, i) + log_choose(total - marked, drawn - i) - denominator
        for i in range(low, x + 1)
    ]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


def window_p_value(violations: int, counted: int, eps: float, window: int) -> float:
    """The p-value of "the next ``window`` lists counted hold more than ``eps * window``
    violations" given ``violations`` among ``counted`` labelled ones (module doc):
    ``P(X <= violations)`` for ``X`` hypergeometric, ``counted`` drawn from
    ``counted + window`` of which ``violations + b`` are marked, ``b = floor(eps *
    window) + 1`` (at most ``window``)."""
    b = min(window, math.floor(eps * window + 1e-9) + 1)
    return hypergeometric_cdf(violations, counted + window, violations + b, counted)


def window_labels_needed(eps: float, delta: float, window: int) -> int:
    """The fewest lists counted for which no violation certifies a window's ``eps`` at
    ``delta``; raises :class:`~crag_heuristic.InsufficientLabelsError` where none
    does below a million."""
    low, high = 1, 1
    while window_p_value(0, high, eps, window) > delta:
        high *= 2
        if high > 1_000_000:
            raise InsufficientLabelsError(
                f"no sample certifies {eps:g} over a window of {window} at delta {delta:g}",
                needed=1_000_000,
                have=0,
            )
    while low < high:
        mid = (low + high) // 2
        if window_p_value(0, mid, eps, window) <= delta:
            high = mid
        else:
            low = mid + 1
    return low


def labels_needed(eps: float, delta: float) -> int:
    """The fewest lists the risk counts over for which no violation certifies ``eps``
    at ``delta``: the smallest ``m`` with ``P(Binomial(m, eps) <= 0) = (1 - eps) ** m <=
    delta``, found with the p-value the test itself computes (a closed form rounds
    differently at the boundary)."""
    m = max(1, math.floor(math.log(delta) / math.log1p(-eps)) - 1)
    while binomial_cdf(0, m, eps) > delta:
        m += 1
    while m > 1 and binomial_cdf(0, m - 1, eps) <= delta:
        m -= 1
    return m


def _check(target: str, eps: float, delta: float) -> None:
    if target not in TARGETS:
        raise ConfigError("target", target, f"must be one of {', '.join(TARGETS)}")
    for name, value in (("eps", eps), ("delta", delta)):
        _check_number(name, value, low=0.0, high=1.0, low_open=True, high_open=True)


def _label(value: object) -> bool:
    """A grader's decision: a bool, or 0 / 1 (of any integer kind); anything else is
    refused (a graded 0.3 or a string "0" is not a decision)."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer) and value in (0, 1):
        return bool(value)
    raise ConfigError("good", value, "must be True / False (or 1 / 0): the grader's decision")


def _checked(scores: Sequence[float], good: Sequence[bool]) -> tuple[list[float], list[bool]]:
    for name, values in (("scores", scores), ("good", good)):
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise ConfigError(name, values, "must be a sequence")
    s = [as_real(v) for v in scores]
    g = [_label(v) for v in good]
    if len(s) != len(g):
        raise ConfigError("good", len(g), f"must label every score ({len(s)})")
    for raw, v in zip(scores, s, strict=True):
        if v is None or not (math.isfinite(v) and 0.0 <= v <= 1.0):
            raise ConfigError("scores", raw, "must be probabilities in [0, 1]")
    return [float(v) for v in s], g  # type: ignore[arg-type]


def _path(target: str, centre: float) -> list[tuple[float, float]]:
    """The bands along the fixed path, strictest first (module doc)."""
    if target == "recall":
        return [(0.0, j / RECALL_STEPS) for j in range(RECALL_STEPS, -1, -1)]
    middle = logit(centre)
    return [
        (0.0 if w >= 15.0 else sigmoid(middle - w), 1.0 if w >= 15.0 else sigmoid(middle + w))
        for w in AGREEMENT_WIDTHS
    ]


def band_risk(
    target: str, band: tuple[float, float], scores: Sequence[float], good: Sequence[bool]
) -> tuple[int, int]:
    """``(violations, counted)`` of ``band`` on labelled lists (module doc): for
    ``recall`` the failed lists above the band out of the failed ones; for
    ``agreement`` the lists decided alone against the grader out of all."""
    return _Labelled(scores, good).risk(target, band)


class _Labelled:
    """Labelled scores sorted by class, for counting violations by bisection."""

    def __init__(self, scores: Sequence[float], good: Sequence[bool]) -> None:
        self.n = len(scores)
        self.failed = sorted(s for s, g in zip(scores, good, strict=True) if not g)
        self.good = sorted(s for s, g in zip(scores, good, strict=True) if g)

    def risk(self, target: str, band: tuple[float, float]) -> tuple[int, int]:
        low, high = band
        passed_failed = len(self.failed) - bisect.bisect_right(self.failed, high)
        if target == "recall":
            return passed_failed, len(self.failed)
        return passed_failed + bisect.bisect_left(self.good, low), self.n


def guaranteed_band(
    scores: Sequence[float],
    good: Sequence[bool],
    *,
    target: Target = "recall",
    eps: float = 0.1,
    delta: float = 0.1,
    centre: float = 0.5,
    window: int | None = None,
    grader: str = "",
    labels: str = "",
) -> Guarantee:
    """The band of the module doc for ``eps`` at ``delta``, from the gate's set
    probabilities ``scores`` and the grader's labels ``good`` of the same lists.

    With ``window``, the guarantee is on the realised risk of the next ``window``
    lists the risk counts over (failed lists for ``recall``; any for
    ``agreement``), drawn like the labelled ones, rather than on the risk of the
    traffic they come from (module doc, "A window").

    Args:
        scores: the gate's P(good retrieval) of each labelled list.
        good: the grader's decision for each: ``True`` when it finds an answer.
        target: ``"recall"`` or ``"agreement"``.
        eps: the risk bound, in (0, 1).
        delta: the probability the bound may fail, in (0, 1).
        centre: where the agreement path's bands are centred (the gate's
            relevant threshold); ignored for ``recall``.
        window: a guarantee on the realised risk over that many future lists
            counted (``None``: on the traffic's risk).
        grader, labels: recorded (the grader's fingerprint; how the lists were made).

    Raises:
        ConfigError: a bad target, ``eps``, ``delta``, ``centre`` or score, or
            labels that do not match the scores.
        InsufficientLabelsError: too few lists counted for ``eps`` at ``delta``
            (its ``needed`` and ``have`` say how many).
    """
    _check(target, eps, delta)
    if target == "agreement":
        _check_number("centre", centre, low=0.0, high=1.0, low_open=True, high_open=True)
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, int) or window < 1
    ):
        raise ConfigError("window", window, "must be a positive integer or None")
    s, g = _checked(scores, good)
    counted = len(s) if target == "agreement" else sum(not v for v in g)
    needed = (
        labels_needed(eps, delta) if window is None else window_labels_needed(eps, delta, window)
    )
    if counted < needed:
        what = "failed lists" if target == "recall" else "labelled lists"
        over = "" if window is None else f" over a window of {window}"
        raise InsufficientLabelsError(
            f"the {target} guarantee of {eps:g}{over} at delta {delta:g} needs at least {needed} "
            f"{what} graded by the grader; got {counted}",
            needed=needed,
            have=counted,
        )
    labelled = _Labelled(s, g)
    chosen: tuple[float, float] | None = None
    chosen_violations = 0
    p_values: dict[int, float] = {}
    for band in _path(target, centre):
        violations, m = labelled.risk(target, band)
        if violations not in p_values:
            p_values[violations] = (
                binomial_cdf(violations, m, eps)
                if window is None
                else window_p_value(violations, m, eps, window)
            )
        if p_values[violations] > delta:
            break
        chosen, chosen_violations = band, violations
    if chosen is None:  # cannot happen with enough labels: the first band has no violation
        raise InsufficientLabelsError(
            f"no band certifies {target} {eps:g} at delta {delta:g}", needed=needed, have=counted
        )
    inside = sum(chosen[0] <= v <= chosen[1] for v in s)
    return Guarantee(
        target=target,
        eps=float(eps),
        delta=float(delta),
        band=chosen,
        n=len(s),
        counted=counted,
        violations=chosen_violations,
        risk=chosen_violations / counted,
        risk_bound=binomial_upper(chosen_violations, counted, delta),
        escalated=inside / len(s),
        centre=None if target == "recall" else float(centre),
        window=window,
        grader=grader,
        labels=labels,
    )
