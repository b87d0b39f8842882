"""Benchmark 1: does the gate detect failed retrievals?

Labels: a retrieval failed at k when none of its top k documents is relevant.
Two sets of retrievals are graded together: the natural test queries and
their leave-relevant-out probes. Every gate is scored by the ROC-AUC of its
score for "failed" (a higher score must mean a better retrieval), against
baselines computed on the same retrievals:

* the seed design as written (substring keyword test, see ``baselines``) and
  seed 004's design (the mean top-3 similarity and the query's term coverage);
* the ``synapse`` profile on this library's whole-token signals;
* query-performance predictors without parameters (:data:`BASELINES`): the
  top-1 similarity, the mean top-k similarity, the score gap (top-1 minus
  k-th), NQC and WIG (both against the query's mean similarity to the whole
  corpus, computed exactly from the corpus centroid), the first and the best
  chunk's BM25 over the query's idf mass, and keyword coverage;
* where the folder has LLM label sets (``llm_judgments/*.tsv``), each label
  set used as a gate: a list scores the number of its chunks the LLM grades
  relevant (:func:`llm_gate_scores`).

A probe is a corpus gap: what a predictor reads of the corpus beyond the list
is read from the corpus without the query's relevant documents (the centroid
of a probe's NQC and WIG leaves them out), or a probe would give away what it
lacks.

Natural-only AUCs are reported where a collection has at least
:data:`MIN_NATURAL_FAILURES` failed natural retrievals (``None`` below that).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._calibration.auc import failure_auc
from .._calibration.gate import GateExample
from .._config import EvaluatorConfig
from .._evaluator.evaluator import Evaluator
from .baselines import mean_score, nqc, score_gap, seed004, seed_design, top1, wig
from .data import read_qrels
from .pipeline import Prepared, labels_for, retrievals_for

BASELINES = (
    "seed design (as written)",
    "seed 004 design",
    "top-1 score",
    "mean top-k score",
    "score gap (top-1 - top-k)",
    "NQC",
    "WIG",
    "top-1 BM25 / idf mass",
    "max BM25 / idf mass",
    "keyword coverage",
)
"""The simple baselines every gate is held against (same retrievals, same run; none
has a parameter fitted to labels)."""
MIN_NATURAL_FAILURES = 5
"""Fewer failed natural retrievals than this: the natural-only AUC is not reported."""


@dataclass
class FailureResult:
    """Scores per gate, labels, and the summary numbers."""

    retrievals: list[GateExample]
    scores: dict[str, np.ndarray]
    verdicts: dict[str, list[str]]
    summary: dict[str, Any]


def natural_auc(failed: np.ndarray, natural: np.ndarray, score: np.ndarray) -> float | None:
    """The AUC over natural retrievals alone; ``None`` with fewer than
    :data:`MIN_NATURAL_FAILURES` failed ones."""
    if (failed & natural).sum() < MIN_NATURAL_FAILURES:
        return None
    return failure_auc(failed[natural], score[natural])


def rate(hits: np.ndarray, among: np.ndarray) -> float | None:
    """The share of ``among`` that ``hits`` holds; ``None`` when ``among`` is empty
    (nothing to measure: never printed as 0)."""
    count = int(among.sum())
    return float((hits & among).sum() / count) if count else None


def verdict_table(verdicts: list[str], failed: np.ndarray, natural: np.ndarray) -> dict[str, Any]:
    """Counts per verdict of good natural / failed natural / probe retrievals, and the
    rates (``None`` where a rate has nothing to measure, e.g. no fast path at all)."""
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
    good_natural = natural & ~failed
    return {
        "counts": rows,
        "fast_path_precision": rate(~failed, fast),
        "failure_recall": rate(~fast, failed),
        "share_relevant": float(fast.mean()),
        "probes_in_irrelevant": rate(irrelevant, ~natural),
        "good_natural_in_irrelevant": rate(irrelevant, good_natural),
        "good_natural_fast_path": rate(fast, good_natural),
        "natural_fast_path_precision": rate(~failed, fast & natural),
        "natural_failure_recall": rate(~fast, failed & natural),
    }


def failure_section(
    prepared: Prepared, profiles: dict[str, EvaluatorConfig], k: int, split: str = "test"
) -> FailureResult:
    """Grade natural + probe retrievals with every profile and baseline."""
    collection = prepared.collection
    retrievals = retrievals_for(prepared, labels_for(collection, "qrels", split), k)
    failed = np.array([r.failed for r in retrievals])
    natural = np.array([r.kind == "natural" for r in retrievals])

    scores: dict[str, np.ndarray] = {}
    verdicts: dict[str, list[str]] = {}
    timings: dict[str, float] = {}
    for name, config in profiles.items():
        evaluator = Evaluator(config, analyzer=prepared.analyzer)
        started = time.perf_counter()
        evaluations = [
            evaluator.evaluate(r.query, r.chunks, prepared.stats)
            for r in prepared.loops(retrievals, name)
        ]
        timings[name] = (time.perf_counter() - started) / len(retrievals) * 1e3
        scores[name] = np.array([e.score for e in evaluations])
        verdicts[name] = [e.verdict.value for e in evaluations]
    scores.update(baseline_scores(prepared, retrievals))
    llm = llm_gate_scores(prepared, retrievals)
    scores.update({f"LLM as gate: {name}": v for name, v in llm.items()})
    summary: dict[str, Any] = {
        "split": split,
        "k": k,
        "retrievals": len(retrievals),
        "natural": int(natural.sum()),
        "probes": int((~natural).sum()),
        "natural_failed": int((failed & natural).sum()),
        "auc": {
            name: {
                "natural+probes": failure_auc(failed, s),
                "natural": natural_auc(failed, natural, s),
            }
            for name, s in scores.items()
        },
        "llm_label_sets": sorted(llm),
        "verdicts": {name: verdict_table(v, failed, natural) for name, v in verdicts.items()},
        "evaluator_ms_per_retrieval": timings,
    }
    return FailureResult(retrievals=retrievals, scores=scores, verdicts=verdicts, summary=summary)


def _corpus_scores(prepared: Prepared, retrievals: list[GateExample]) -> np.ndarray:
    """Each retrieval's query . corpus centroid: its mean similarity to the corpus it
    searched (a probe's corpus lacks the query's relevant documents)."""
    collection = prepared.collection
    docs = np.asarray(collection.doc_vectors, dtype=np.float64)
    total = docs.sum(axis=0)
    position = prepared.index.position
    vectors = prepared.vectors({r.group: r.query for r in retrievals})
    out = []
    for r in retrievals:
        query = np.asarray(vectors[r.group], dtype=np.float64)
        removed = [position[d] for d in r.relevant if d in position] if r.kind == "probe" else []
        centroid = (total - docs[removed].sum(axis=0)) / (len(docs) - len(removed))
        out.append(float(query @ centroid))
    return np.array(out)


def baseline_scores(prepared: Prepared, retrievals: list[GateExample]) -> dict[str, np.ndarray]:
    """Every :data:`BASELINES` predictor's score per retrieval (higher: better)."""
    sims = [[c.score or 0.0 for c in r.chunks] for r in retrievals]
    corpus = _corpus_scores(prepared, retrievals)
    lexical = Evaluator(
        EvaluatorConfig.from_profile("synapse"), analyzer=prepared.analyzer, all_evidence=True
    )
    features = [
        lexical.evaluate(r.query, r.chunks, prepared.stats).details["features"] for r in retrievals
    ]
    unweighted = Evaluator(  # seed 004 counts the query's terms, not their idf
        EvaluatorConfig.from_profile("synapse").replace(keyword={"use_idf": False}),
        analyzer=prepared.analyzer,
        all_evidence=True,
    )
    coverage = [
        unweighted.evaluate(r.query, r.chunks, prepared.stats).details["features"][
            "keyword_coverage"
        ]
        for r in retrievals
    ]
    values = {
        "seed design (as written)": [
            seed_design(r.query, [c.text for c in r.chunks], s, [c.id for c in r.chunks])
            for r, s in zip(retrievals, sims, strict=True)
        ],
        "seed 004 design": [seed004(s, c) for s, c in zip(sims, coverage, strict=True)],
        "top-1 score": [top1(s) for s in sims],
        "mean top-k score": [mean_score(s) for s in sims],
        "score gap (top-1 - top-k)": [score_gap(s) for s in sims],
        "NQC": [nqc(s, c) for s, c in zip(sims, corpus, strict=True)],
        "WIG": [wig(s, c) for s, c in zip(sims, corpus, strict=True)],
        "top-1 BM25 / idf mass": [f["bm25_top"] for f in features],
        "max BM25 / idf mass": [f["bm25_max"] for f in features],
        "keyword coverage": [f["keyword_coverage"] for f in features],
    }
    assert tuple(values) == BASELINES
    return {name: np.array(v, dtype=float) for name, v in values.items()}


def llm_gate_scores(prepared: Prepared, retrievals: list[GateExample]) -> dict[str, np.ndarray]:
    """Each LLM label set of the folder used as a gate: per retrieval, how many of
    its chunks the label set grades relevant (>= the folder's ``relevant_min``; a
    pair it did not grade counts as not relevant). Empty without label sets."""
    folder = prepared.collection.path / "llm_judgments"
    if not folder.is_dir():
        return {}
    threshold = prepared.collection.relevant_min
    out = {}
    for path in sorted(folder.glob("*.tsv")):
        labels = read_qrels(path)
        out[path.stem] = np.array(
            [
                sum(labels.get(r.group, {}).get(c.id, 0) >= threshold for c in r.chunks)
                for r in retrievals
            ],
            dtype=float,
        )
    return out
