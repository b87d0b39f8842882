"""A stream of traffic replayed through a cascade: what it costs in grader calls and what
it keeps of its guarantee, list by list.

A user's traffic arrives one list at a time. :func:`replay` sends a sequence of lists
(their gate evidence, :class:`~crag_heuristic._calibration.learning.ListView`, and the
grader's chunk grades) through a :class:`~crag_heuristic._calibration.learning.LearningCascade`
exactly as the router does: a snapshot per list, the list escalated when its set
probability lies in the snapshot's band or its query is audited, the grader's answer
handed back (:meth:`~crag_heuristic._calibration.learning.LearningCascade.learn`).
:func:`replay_static` does the same for a band chosen once, by
:func:`~crag_heuristic._grading.guarantee.guaranteed_band`, on the first ``n`` lists (all
graded), and kept.

:func:`stream_rows` replays one folder's lists in ``orders`` seeded random orders and
reports, per (predictor, grader, target, eps, delta):

``calls``
    the share of the stream's lists sent to the grader (mean over orders);
``calls_last_400``
    the same over the stream's last ``last`` lists (the cost once it has learnt);
``recall``
    the realised failure recall: failed lists (by the grader's decision) sent to the
    grader over failed lists (mean over orders);
``window_recall_min``
    the lowest realised failure recall over any ``window`` consecutive lists holding a
    failed one (mean over orders);
``violations``
    the share of orders whose realised recall over the stream is below ``1 - eps``;
``orders``
    how many orders.

Predictors: ``always`` (every list graded), ``learning`` (the cascade),
``static`` (the shipped gate's band from the first ``n`` labels), ``top-1`` (the top
cosine's band from the first ``n`` labels).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._exceptions import InsufficientLabelsError
from .._grading.guarantee import guaranteed_band, list_decision
from .._grading.lists import audited
from .learning import Learning, LearningCascade, ListView


@dataclass(frozen=True)
class StreamTrace:
    """One replayed stream: per list in stream order, whether it went to the grader
    and whether it failed (the grader found no answer in it)."""

    escalated: np.ndarray
    failed: np.ndarray

    def calls(self, last: int | None = None) -> float:
        """The share of lists sent to the grader (over the last ``last`` only)."""
        part = self.escalated if last is None else self.escalated[-last:]
        return float(part.mean()) if len(part) else 0.0

    def recall(self) -> float | None:
        """Failed lists sent to the grader over failed lists (``None``: none failed)."""
        failed = int(self.failed.sum())
        return None if not failed else float((self.escalated & self.failed).sum() / failed)

    def window_recall_min(self, window: int) -> float | None:
        """The lowest realised recall over ``window`` consecutive lists holding a failure."""
        caught = np.concatenate([[0], np.cumsum(self.escalated & self.failed)])
        failed = np.concatenate([[0], np.cumsum(self.failed)])
        width = min(window, len(self.failed))
        lows = []
        for start in range(len(self.failed) - width + 1):
            f = failed[start + width] - failed[start]
            if f:
                lows.append((caught[start + width] - caught[start]) / f)
        return float(min(lows)) if lows else None


def replay(
    learner: LearningCascade,
    views: Sequence[ListView],
    grades: Sequence[Mapping[str, float]],
    order: Sequence[int],
) -> StreamTrace:
    """Send ``views`` (with the grader's chunk ``grades`` of each) through ``learner``
    in ``order``, as the router would (module doc)."""
    escalated = np.zeros(len(order), dtype=bool)
    failed = np.zeros(len(order), dtype=bool)
    for step, i in enumerate(order):
        snapshot = learner.snapshot()
        view = replace(views[i], score=learner.score(views[i], snapshot.model))
        band = snapshot.escalation.band or (0.0, 1.0)
        audit = audited(view.query, snapshot.escalation)
        escalate = band[0] <= view.score <= band[1] or audit
        learner.learn(
            view, snapshot, audited=audit, graded=escalate, grades=grades[i] if escalate else None
        )
        escalated[step] = escalate
        failed[step] = not list_decision(grades[i].values())
    learner.wait()
    return StreamTrace(escalated, failed)


def replay_static(
    scores: Sequence[float],
    good: Sequence[bool],
    order: Sequence[int],
    *,
    n: int,
    target: str = "recall",
    eps: float = 0.1,
    delta: float = 0.1,
    centre: float = 0.5,
) -> StreamTrace:
    """The first ``n`` lists of ``order`` all graded; then the band chosen on them by
    Learn-then-Test (every list graded when too few labels), kept to the end."""
    s = np.asarray(scores, dtype=float)[list(order)]
    g = np.asarray(good, dtype=bool)[list(order)]
    escalated = np.ones(len(order), dtype=bool)
    try:
        band = guaranteed_band(
            s[:n].tolist(),
            g[:n].tolist(),
            target=target,  # type: ignore[arg-type]
            eps=eps,
            delta=delta,
            centre=centre,
        ).band
    except InsufficientLabelsError:
        band = (0.0, 1.0)
    escalated[n:] = (s[n:] >= band[0]) & (s[n:] <= band[1])
    return StreamTrace(escalated, ~g)


def _row(traces: Sequence[StreamTrace], eps: float, last: int, window: int) -> dict[str, Any]:
    recalls = [r for t in traces if (r := t.recall()) is not None]
    windows = [w for t in traces if (w := t.window_recall_min(window)) is not None]
    return {
        "calls": float(np.mean([t.calls() for t in traces])),
        f"calls_last_{last}": float(np.mean([t.calls(last) for t in traces])),
        "recall": float(np.mean(recalls)) if recalls else None,
        "window_recall_min": float(np.mean(windows)) if windows else None,
        "violations": float(np.mean([r < 1.0 - eps for r in recalls])) if recalls else None,
        "orders": len(traces),
    }


def stream_rows(
    views: Sequence[ListView],
    graders: Mapping[str, Sequence[Mapping[str, float]]],
    *,
    gate: Any = None,
    targets: Sequence[tuple[str, float]] = (("recall", 0.1),),
    delta: float = 0.1,
    orders: int = 20,
    seed: int = 0,
    last: int = 400,
    window: int = 200,
    settings: Callable[[str, float], Learning] | None = None,
    progress: Callable[[Any, str], Any] | None = None,
) -> list[dict[str, Any]]:
    """The rows of the module doc, for each grader (its chunk grades of every list)
    and each (target, eps). ``settings(target, eps)`` makes the cascade's settings
    (default: :class:`Learning` with those and ``delta``); the static bands take
    ``explore`` labels, the learning cascade's exploration."""
    rows: list[dict[str, Any]] = []
    rng = np.random.default_rng(seed)
    permutations = [rng.permutation(len(views)).tolist() for _ in range(orders)]
    top = [float(v.features.get("similarity_top") or 0.0) for v in views]
    for grader, grades in graders.items():
        good = [list_decision(g.values()) for g in grades]
        for target, eps in targets:
            chosen = (
                settings(target, eps)
                if settings is not None
                else Learning(target=target, eps=eps, delta=delta)  # type: ignore[arg-type]
            )
            traces: dict[str, list[StreamTrace]] = {
                "always": [],
                "learning": [],
                "static": [],
                "top-1": [],
            }
            loop = permutations if progress is None else progress(permutations, f"stream {grader}")
            for order in loop:
                learner = LearningCascade(gate, settings=chosen, background=False)
                learner.bind(grader)
                trace = replay(learner, views, grades, order)
                traces["learning"].append(trace)
                traces["always"].append(StreamTrace(np.ones(len(order), dtype=bool), trace.failed))
                shipped = [learner.score(v, 0) for v in views]
                for name, scores in (("static", shipped), ("top-1", top)):
                    traces[name].append(
                        replay_static(
                            scores,
                            good,
                            order,
                            n=chosen.explore,
                            target=target,
                            eps=eps,
                            delta=chosen.delta,
                            centre=learner.gate.thresholds.relevant,
                        )
                    )
            for predictor, runs in traces.items():
                rows.append(
                    {
                        "predictor": predictor,
                        "grader": grader,
                        "target": target,
                        "eps": eps,
                        "delta": chosen.delta,
                        "n": len(views),
                        **_row(runs, eps, last, window),
                    }
                )
    return rows
