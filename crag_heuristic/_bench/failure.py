"""Benchmark 1: does the gate detect failed retrievals?

Labels: a retrieval failed at k when none of its top k documents is relevant.
Two sets of retrievals are graded together: the natural test queries and
their leave-relevant-out probes. Every gate is scored by the ROC-AUC of its
score for "failed" (a higher score must mean a better retrieval), against
baselines computed on the same retrievals:

* the seed design as written (substring keyword test, see ``_baselines``);
* the ``synapse`` profile on this library's whole-token signals;
* the top-1 similarity, the score gap (top-1 minus k-th) and NQC (the
  standard deviation of the top-k scores over the query's mean similarity
  to the whole corpus, computed exactly from the corpus centroid).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._baselines import nqc, score_gap, seed_design, top1
from .._calibrate import GateExample
from .._config import EvaluatorConfig
from .._evaluator import Evaluator
from .pipeline import Prepared, labels_for, progress, retrievals_for

__all__ = ["BASELINES", "FailureResult", "failure_section", "verdict_table"]

BASELINES = ("seed design (as written)", "top-1 score", "score gap (top-1 - top-k)", "NQC")
"""The simple baselines every gate is held against (same retrievals, same run)."""


@dataclass
class FailureResult:
    """Scores per gate, labels, and the summary numbers."""

    retrievals: list[GateExample]
    scores: dict[str, np.ndarray]
    verdicts: dict[str, list[str]]
    summary: dict[str, Any]


def _auc(failed: np.ndarray, score: np.ndarray) -> float | None:
    """ROC-AUC of a high score for "not failed"; ``None`` when one class is absent."""
    from sklearn.metrics import roc_auc_score

    if failed.all() or not failed.any():
        return None
    return float(roc_auc_score(failed, -score))


def verdict_table(verdicts: list[str], failed: np.ndarray, natural: np.ndarray) -> dict[str, Any]:
    """Counts per verdict of good natural / failed natural / probe retrievals, and the rates."""
    v = np.array(verdicts)
    rows = {}
    for name in ("relevant", "partial", "irrelevant"):
        here = v == name
        rows[name] = {
            "good": int((here & ~failed).sum()),
            "failed_natural": int((here & failed & natural).sum()),
            "probe": int((here & ~natural).sum()),
        }
    fast = v == "relevant"
    irrelevant = v == "irrelevant"
    return {
        "counts": rows,
        "fast_path_precision": float((fast & ~failed).sum() / max(fast.sum(), 1)),
        "failure_recall": float((failed & ~fast).sum() / max(failed.sum(), 1)),
        "share_relevant": float(fast.mean()),
        "probes_in_irrelevant": float(irrelevant[~natural].mean()) if (~natural).any() else None,
        "good_natural_in_irrelevant": float(irrelevant[natural & ~failed].mean()),
        "good_natural_fast_path": float(fast[natural & ~failed].mean()),
        "natural_fast_path_precision": float(
            (fast & ~failed & natural).sum() / max((fast & natural).sum(), 1)
        ),
        "natural_failure_recall": float(
            (failed & natural & ~fast).sum() / max((failed & natural).sum(), 1)
        ),
    }


def failure_section(
    prepared: Prepared, profiles: dict[str, EvaluatorConfig], k: int, split: str = "test"
) -> FailureResult:
    """Grade natural + probe retrievals with every profile and baseline."""
    collection = prepared.collection
    retrievals = retrievals_for(prepared, labels_for(collection, "qrels", split), k)
    failed = np.array([r.failed for r in retrievals])
    natural = np.array([r.kind == "natural" for r in retrievals])
    centroid = np.asarray(collection.doc_vectors, dtype=np.float64).mean(axis=0)
    vectors = prepared.vectors({r.group: r.query for r in retrievals})

    scores: dict[str, np.ndarray] = {}
    verdicts: dict[str, list[str]] = {}
    timings: dict[str, float] = {}
    for name, config in profiles.items():
        evaluator = Evaluator(config, analyzer=prepared.analyzer)
        started = time.perf_counter()
        evaluations = [
            evaluator.evaluate(r.query, r.chunks, prepared.stats)
            for r in progress(retrievals, name)
        ]
        timings[name] = (time.perf_counter() - started) / len(retrievals) * 1e3
        scores[name] = np.array([e.score for e in evaluations])
        verdicts[name] = [e.verdict.value for e in evaluations]
    sims = [[c.score or 0.0 for c in r.chunks] for r in retrievals]
    seed_name, top1_name, gap_name, nqc_name = BASELINES
    scores[seed_name] = np.array(
        [
            seed_design(r.query, [c.text for c in r.chunks], s, [c.id for c in r.chunks])
            for r, s in zip(retrievals, sims, strict=True)
        ]
    )
    scores[top1_name] = np.array([top1(s) for s in sims])
    scores[gap_name] = np.array([score_gap(s) for s in sims])
    scores[nqc_name] = np.array(
        [nqc(s, float(vectors[r.group] @ centroid)) for r, s in zip(retrievals, sims, strict=True)]
    )
    summary: dict[str, Any] = {
        "split": split,
        "k": k,
        "retrievals": len(retrievals),
        "natural": int(natural.sum()),
        "probes": int((~natural).sum()),
        "natural_failed": int((failed & natural).sum()),
        "auc": {
            name: {
                "natural+probes": _auc(failed, s),
                "natural": _auc(failed[natural], s[natural]),
            }
            for name, s in scores.items()
        },
        "verdicts": {name: verdict_table(v, failed, natural) for name, v in verdicts.items()},
        "evaluator_ms_per_retrieval": timings,
    }
    return FailureResult(retrievals=retrievals, scores=scores, verdicts=verdicts, summary=summary)
