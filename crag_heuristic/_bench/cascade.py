"""Benchmark: the cascade's agreement with people against the share escalated.

Needs what the agreement section needs (graded judgments for a pool of
passages per query and ``llm_judgments/*.tsv`` label sets for the same
pairs). Each recorded LLM label set plays the expensive grader: its label is
its answer (grade >= the collection's ``relevant_min`` -> 1.0, else 0.0; a
pair it did not label -> 0.0).

Protocol, as the agreement section's (its pieces are reused): the queries are
split in two halves by sorted id; the gate's chunk stage is fitted on one
half's human labels and the kappa-maximising band ``t`` is chosen there;
the other half is graded, then the halves swap. On the graded half the
escalation policy (:func:`crag_heuristic._grading.escalation.rank_uncertain`, the one the
cascade runs) picks the chunks to escalate; an escalated pair takes the
grader's label, any other the gate's ``p > t``. The pooled out-of-fold
decisions give Cohen's kappa against people, against the share of pairs
escalated. Two policies are swept:

``band``    every chunk within ``|logit p - logit t| <= w`` (no budget); the
            widths ``w`` are the training half's distance quantiles for shares
            0, 2.5, ..., 100 %, so the test half's share is what it comes to;
``budget``  every chunk a candidate (band ``[0, 1]``); at most
            ``floor(b * n)`` per query list, the closest to ``t`` first,
            ``b`` = 0, 2.5, ..., 100 %.

A third curve, ``oracle``, is a reference, not a policy: it escalates the
gate's wrong decisions first (in a seeded random order, then the right ones),
as a gate that knew where it errs would. Far above the policies' curves, it
says that the cascade is limited by how well the gate's confidence points at
its own errors, not by the grader. (It is not a strict bound: a policy can
by chance pick more of the pairs where the grader is right.)

The table reads each curve at 10, 20, 30 and 50 % escalated (linear
interpolation between sweep points) and the smallest share at which it
reaches kappa 0.40.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._calibration.gate import kappa_band
from .._config import EvaluatorConfig
from .._grading.escalation import rank_uncertain
from .agreement import fitted_chunk_scores, judged_pools, kappa, query_folds
from .data import read_qrels
from .pipeline import Prepared

GOAL_KAPPA = 0.40
"""The issue's goal: kappa >= 0.40 ..."""
GOAL_SHARE = 0.30
"""... with at most 30 % of the pairs escalated."""
READ_AT = (0.1, 0.2, 0.3, 0.5)
"""The shares the table reads each curve at."""
POLICIES = ("band", "budget")
"""The two escalation policies swept (see the module doc)."""
CURVES = (*POLICIES, "oracle")
"""The curves per grader: the two policies and the reference."""
_STEPS = np.linspace(0.0, 1.0, 41)


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-9, 1 - 1e-9)
    out: np.ndarray = np.log(q / (1 - q))
    return out


def _sigmoid(z: float) -> float:
    return 0.0 if z == -math.inf else 1.0 if z == math.inf else 1.0 / (1.0 + math.exp(-z))


def _escalated(
    lists: list[np.ndarray], probs: np.ndarray, t: float, *, low: float, high: float, budget: float
) -> np.ndarray:
    """The pairs the policy escalates, as a mask over ``probs`` (``lists``: each
    query's positions)."""
    mask = np.zeros(len(probs), dtype=bool)
    for positions in lists:
        _, chosen = rank_uncertain(
            probs[positions].tolist(), low=low, high=high, threshold=t, budget=budget
        )
        mask[positions[chosen]] = True
    return mask


def share_for(shares: list[float], kappas: list[float], target: float) -> float | None:
    """The smallest share at which the curve reaches ``target`` (linear between
    sweep points), or ``None`` when it never does."""
    for i, k in enumerate(kappas):
        if k >= target:
            if i == 0 or kappas[i - 1] >= target:
                return shares[i]
            s0, s1, k0 = shares[i - 1], shares[i], kappas[i - 1]
            return s0 + (s1 - s0) * (target - k0) / (k - k0)
    return None


def _read(shares: list[float], kappas: list[float], at: float) -> float | None:
    if not shares or at > shares[-1] + 1e-9:
        return None
    order = np.argsort(shares, kind="stable")
    return float(np.interp(at, np.asarray(shares)[order], np.asarray(kappas)[order]))


def cascade_section(
    prepared: Prepared, profile: EvaluatorConfig, *, seed: int = 0
) -> dict[str, Any] | None:
    """Kappa vs people against the share escalated, per LLM label set; ``None``
    without LLM label sets."""
    collection = prepared.collection
    folder = collection.path / "llm_judgments"
    if not folder.exists() or "test" not in collection.qrels:
        return None
    examples, grades = judged_pools(prepared)
    keys = [(ex.group, c.id) for ex in examples for c in ex.chunks]
    human = np.array([grades[key] >= collection.relevant_min for key in keys])
    key_query = np.array([q for q, _ in keys])
    qids = [ex.group for ex in examples]

    # out-of-fold gate probabilities, each pair's band t (fitted on the other half),
    # and per sweep step the pairs each policy escalates
    probs = np.zeros(len(keys))
    band_of = np.zeros(len(keys))
    masks = {policy: np.zeros((len(_STEPS), len(keys)), dtype=bool) for policy in POLICIES}
    halves = query_folds(qids, None)
    for train_ids, test_ids in ((halves[0], halves[1]), (halves[1], halves[0])):
        train = np.isin(key_query, list(train_ids))
        test = np.isin(key_query, list(test_ids))
        scores = fitted_chunk_scores(prepared, profile, examples, train_ids)
        t, _ = kappa_band(scores[train], human[train])
        t = float(min(max(t, 1e-6), 1 - 1e-6))
        probs[test], band_of[test] = scores[test], t
        train_distance = np.abs(_logit(scores[train]) - _logit(np.array(t)))
        lists = [np.flatnonzero(key_query == q) for q in sorted(test_ids)]
        for i, step in enumerate(_STEPS):
            if step > 0:
                w = float(np.quantile(train_distance, step)) if step < 1 else math.inf
                z = float(_logit(np.array(t)))
                masks["band"][i] |= _escalated(
                    lists, scores, t, low=_sigmoid(z - w), high=_sigmoid(z + w), budget=1.0
                )
            masks["budget"][i] |= _escalated(lists, scores, t, low=0.0, high=1.0, budget=step)

    gate = probs > band_of
    # the reference: the gate's wrong decisions first, each group in a seeded random order
    wrong_first = np.lexsort((np.random.default_rng(seed).random(len(keys)), gate == human))
    masks["oracle"] = np.zeros((len(_STEPS), len(keys)), dtype=bool)
    for i, step in enumerate(_STEPS):
        masks["oracle"][i, wrong_first[: int(step * len(keys) + 0.5)]] = True
    graders: dict[str, Any] = {}
    for path in sorted(folder.glob("*.tsv")):
        labels = read_qrels(path)
        theirs = np.array([labels.get(q, {}).get(d, 0) >= collection.relevant_min for q, d in keys])
        row: dict[str, Any] = {"kappa_alone": kappa(human, theirs), "curves": {}, "at": {}}
        for policy in CURVES:
            shares = [float(mask.mean()) for mask in masks[policy]]
            kappas = [kappa(human, np.where(mask, theirs, gate)) for mask in masks[policy]]
            row["curves"][policy] = {  # rounded: 33 label sets x 3 curves x 41 points
                "step": [round(x, 6) for x in _STEPS.tolist()],
                "share": [round(x, 6) for x in shares],
                "kappa": [round(x, 6) for x in kappas],
            }
            row["at"][policy] = {f"{at:.2f}": _read(shares, kappas, at) for at in READ_AT}
            row.setdefault("share_for_goal", {})[policy] = share_for(shares, kappas, GOAL_KAPPA)
        graders[path.stem] = row

    strong = sorted(n for n, r in graders.items() if r["kappa_alone"] >= GOAL_KAPPA)
    met_by = sorted(
        (name, policy)
        for name in strong
        for policy, at in graders[name]["at"].items()
        if policy in POLICIES and (at[f"{GOAL_SHARE:.2f}"] or 0.0) >= GOAL_KAPPA
    )
    return {
        "pairs": len(keys),
        "queries": len(examples),
        "relevant_share": float(human.mean()),
        "gate_kappa": kappa(human, gate),
        "gate_error_rate": float((gate != human).mean()),
        "gate_band_per_half": sorted({float(b) for b in band_of}),
        "graders": graders,
        "goal": {
            "kappa": GOAL_KAPPA,
            "max_share": GOAL_SHARE,
            "graders_at_or_above_goal_alone": strong,
            "met_by": [f"{name} ({policy})" for name, policy in met_by],
            "met": bool(met_by),
        },
    }
