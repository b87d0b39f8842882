"""Benchmark: the set-level cascade, failure AUC against the share of lists escalated.

Needs LLM label sets (``llm_judgments/*.tsv``). The retrievals are the
failure benchmark's (natural test retrievals + leave-relevant-out probes,
k = 10). Each label set plays the expensive grader of a
:class:`~crag_heuristic.grading.SetEscalation`: its answer for a chunk is its
grade over the scale's top (a 0-3 label of 2 answers 0.67; a pair it did not
grade: 0). Used alone as a gate, a label set scores a list by how many of its
chunks it grades relevant (>= the folder's ``relevant_min``).

Protocol (2-fold by query, as the chunk cascade's): the queries are split in
two halves (sorted ids, alternating; a query's natural retrieval and its
probe stay together). On one half the policy is set for each target share
``s`` of lists: the band holding ``s`` of that half's lists nearest the
pointer's centre (:meth:`SetEscalation.for_share`), and the ``combine`` and
``trust`` among :data:`COMBINE` x :data:`TRUSTS` with the best AUC on that
half; the other half is scored with it (the library's own
:func:`~crag_heuristic._grading.lists.escalated_set_score`); then the halves
swap. AUC of the pooled out-of-fold scores. Pointers, i.e.
where the uncertain band is centred:

``threshold``  the gate's relevant band (what ``SetEscalation()`` does by default)
``youden``     the score that best separates good from failed lists on the
               training half (Youden's J): the lists the gate confuses most

A third curve, ``oracle``, is a reference, not a policy: it escalates first
the lists the gate ranks most wrongly (a failed list above the most good
ones, a good list below the most failed ones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._calibration.auc import failure_auc
from .._grading.lists import COMBINE, SetEscalation, escalated_set_score
from .._optional import requires
from .data import read_qrels
from .failure import llm_gate_scores
from .pipeline import Prepared

READ_AT = (0.1, 0.2, 0.3, 0.5)
"""The shares of lists the table reads each curve at."""
POINTERS = ("threshold", "youden")
TRUSTS: tuple[float | None, ...] = (None, 1.0, 2.0, 4.0)
"""The ``trust`` values tried on each training half (``None``: the grader decides)."""
_SHARES = np.linspace(0.0, 1.0, 21)


def _halves(groups: list[str]) -> list[np.ndarray]:
    ordered = sorted(set(groups))
    first = set(ordered[0::2])
    mask = np.array([g in first for g in groups])
    return [mask, ~mask]


def _youden(scores: np.ndarray, failed: np.ndarray) -> float:
    """The score threshold of the highest (true positive rate - false positive rate)."""
    with requires("bench", "the benchmark harness"):
        from sklearn.metrics import roc_curve

    if failed.all() or not failed.any():
        return float(np.median(scores))
    fpr, tpr, thresholds = roc_curve(~failed, scores)
    best = int(np.argmax(tpr - fpr))
    return float(min(1.0, max(0.0, float(thresholds[best]))))


def _escalate(
    gate: np.ndarray, grades: list[list[float]], mask: np.ndarray, policy: SetEscalation
) -> np.ndarray:
    out: np.ndarray = gate.copy()
    for i in np.flatnonzero(mask):
        out[i] = escalated_set_score(float(gate[i]), grades[i], policy)
    return out


_POLICIES = [SetEscalation(combine=c, trust=t) for c in COMBINE for t in TRUSTS]


def _answers(prepared: Prepared, retrievals: list[Any], name: str) -> list[list[float]]:
    """A label set's answers per chunk: its grade over the scale's top."""
    labels = read_qrels(prepared.collection.path / "llm_judgments" / f"{name}.tsv")
    top = max((g for q in labels.values() for g in q.values()), default=1) or 1
    return [[labels.get(r.group, {}).get(c.id, 0) / top for c in r.chunks] for r in retrievals]


def _best_rule(
    gate: np.ndarray,
    answers: list[list[float]],
    failed: np.ndarray,
    train: np.ndarray,
    mask: np.ndarray,
) -> SetEscalation:
    """The combine and trust of :data:`_POLICIES` with the best AUC on ``train``
    (the first on ties)."""
    best, best_auc = _POLICIES[0], -1.0
    for rule in _POLICIES:
        value = failure_auc(failed[train], _escalate(gate, answers, mask, rule)[train])
        if value is not None and value > best_auc + 1e-12:
            best, best_auc = rule, value
    return best


def _in_band(gate: np.ndarray, policy: SetEscalation) -> np.ndarray:
    assert policy.band is not None
    low, high = policy.band
    return (gate >= low) & (gate <= high)


def _oracle_order(gate: np.ndarray, failed: np.ndarray, seed: int) -> np.ndarray:
    """Lists by how many pairs the gate orders wrongly through them, most first."""
    good = ~failed
    wrong = np.zeros(len(gate))
    wrong[failed] = [(gate[good] < s).sum() for s in gate[failed]]
    wrong[good] = [(gate[failed] > s).sum() for s in gate[good]]
    jitter = np.random.default_rng(seed).random(len(gate))
    order: np.ndarray = np.lexsort((jitter, -wrong))
    return order


def set_cascade_section(
    prepared: Prepared,
    retrievals: list[Any],
    gate: np.ndarray,
    relevant_band: float,
    *,
    gate_name: str,
    seed: int = 0,
) -> dict[str, Any] | None:
    """The curves of the module doc for the gate's P(good) ``gate`` on
    ``retrievals`` (``relevant_band``: its relevant threshold); ``None``
    without LLM label sets."""
    collection = prepared.collection
    folder = collection.path / "llm_judgments"
    if not folder.is_dir():
        return None
    counts = llm_gate_scores(prepared, retrievals)
    if not counts:
        return None
    failed = np.array([r.failed for r in retrievals])
    natural = np.array([r.kind == "natural" for r in retrievals])
    groups = [r.group for r in retrievals]
    halves = _halves(groups)
    alone = {name: failure_auc(failed, c) for name, c in counts.items()}
    graders: dict[str, Any] = {}
    for name in counts:
        answers = _answers(prepared, retrievals, name)
        row: dict[str, Any] = {"auc_alone": alone[name], "curves": {}, "at": {}}
        for pointer in POINTERS:
            aucs, shares, trusts = [], [], []
            for share in _SHARES:
                scores = gate.copy()
                escalated = np.zeros(len(gate), dtype=bool)
                chosen_trust = []
                for train, test in ((halves[0], halves[1]), (halves[1], halves[0])):
                    centre = (
                        relevant_band
                        if pointer == "threshold"
                        else _youden(gate[train], failed[train])
                    )
                    policy = SetEscalation.for_share(gate[train], float(share), around=centre)
                    if share == 0.0:
                        continue
                    train_mask = train & _in_band(gate, policy)

                    rule = _best_rule(gate, answers, failed, train, train_mask)
                    chosen_trust.append(f"{rule.combine}, trust {rule.trust}")
                    test_mask = test & _in_band(gate, policy)
                    scores[test_mask] = _escalate(gate, answers, test_mask, rule)[test_mask]
                    escalated |= test_mask
                aucs.append(failure_auc(failed, scores))
                shares.append(float(escalated.mean()))
                trusts.append(chosen_trust)
            row["curves"][pointer] = {
                "target": [round(float(s), 4) for s in _SHARES],
                "share": [round(s, 6) for s in shares],
                "auc": [None if a is None else round(a, 6) for a in aucs],
                "rule": trusts,
            }
            row["at"][pointer] = {f"{at:.2f}": _read(shares, aucs, at) for at in READ_AT}
        order = _oracle_order(gate, failed, seed)
        oracle_aucs, oracle_shares = [], []
        for share in _SHARES:
            mask = np.zeros(len(gate), dtype=bool)
            mask[order[: round(share * len(gate))]] = True
            oracle_aucs.append(failure_auc(failed, _escalate(gate, answers, mask, SetEscalation())))
            oracle_shares.append(float(mask.mean()))
        row["curves"]["oracle"] = {
            "share": [round(s, 6) for s in oracle_shares],
            "auc": [None if a is None else round(a, 6) for a in oracle_aucs],
        }
        row["at"]["oracle"] = {f"{at:.2f}": _read(oracle_shares, oracle_aucs, at) for at in READ_AT}
        graders[name] = row
    values = [a for a in alone.values() if a is not None]
    best_name = max(alone, key=lambda n: alone[n] or 0.0)
    median = float(np.median(values))
    at30 = {p: graders[best_name]["at"][p]["0.30"] for p in POINTERS}
    at20_median = {
        p: float(np.median([g["at"][p]["0.20"] or 0.0 for g in graders.values()])) for p in POINTERS
    }
    return {
        "gate": gate_name,
        "retrievals": len(retrievals),
        "natural": int(natural.sum()),
        "gate_auc": failure_auc(failed, gate),
        "relevant_band": relevant_band,
        "label_sets": len(counts),
        "median_llm_as_gate_auc": median,
        "best_llm_as_gate_auc": alone[best_name],
        "best_label_set": best_name,
        "cascade_auc_at_30pct": at30,
        "median_label_set_cascade_auc_at_20pct": at20_median,
        "goals": {
            "best label set: cascade >= it alone at <= 30 % escalated": any(
                (v or 0.0) >= (alone[best_name] or 0.0) for v in at30.values()
            ),
            "median label set: cascade >= the median alone at <= 20 %": any(
                v >= median for v in at20_median.values()
            ),
        },
        "graders": graders,
    }


def _read(shares: list[float], aucs: list[float | None], at: float) -> float | None:
    points = [(s, a) for s, a in zip(shares, aucs, strict=True) if a is not None]
    if not points or at > max(s for s, _ in points) + 1e-9:
        return None
    xs, ys = zip(*sorted(points), strict=True)
    return float(np.interp(at, xs, ys))
