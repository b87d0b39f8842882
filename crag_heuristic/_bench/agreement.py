"""Benchmark 2: does the per-chunk grade agree with people, and with LLM graders?

Needs a collection with graded judgments for a pool of passages per query and
``llm_judgments/*.tsv`` label sets for the same pairs (``../shared/data/llmjudge``).

Each query's judged pool is graded as one retrieved list (sorted by the
MiniLM cosine), so list-relative evidence (``similarity_z``,
``lexical_contrast``) is available as it is for any retrieval. Relevant means
grade >= the collection's ``relevant_min`` (2 for graded sets).

Protocol (2-fold by query): the queries are split in two halves; on one half
the chunk stage is fitted on the human labels and the kappa-maximising band
is chosen; the other half is graded with them; then the halves swap. The
pooled out-of-fold verdicts give Cohen's kappa against the humans and against
every LLM label set. The split is fixed (sorted query ids, alternating) and
also repeated over random splits to show the spread. Baselines on the same
protocol: the MiniLM cosine alone (a threshold), and the profile as shipped
(only its band refitted); the LLM graders need no fitting.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from .._calibration.gate import GateExample, fit_chunk_stage, kappa_band
from .._config import EvaluatorConfig, ModelConfig
from .._evaluator.evaluator import Evaluator
from .._optional import requires
from .data import read_qrels
from .pipeline import Prepared
from .retrievals import chunks_of


def kappa(a: Any, b: Any) -> float:
    """Cohen's kappa of two binary labelings."""
    with requires("bench", "the benchmark harness"):
        from sklearn.metrics import cohen_kappa_score

    return float(cohen_kappa_score(np.asarray(a, dtype=int), np.asarray(b, dtype=int)))


def judged_pools(prepared: Prepared) -> tuple[list[GateExample], dict[tuple[str, str], int]]:
    """One example per judged query: its pool sorted by cosine; and the human grades."""
    collection = prepared.collection
    qrels = collection.qrels["test"]
    vectors = prepared.vectors({q: collection.queries[q] for q in qrels if q in collection.queries})
    position = {d: i for i, d in enumerate(collection.doc_ids)}
    examples = []
    grades = {}
    for qid in sorted(vectors):
        judged = [d for d in qrels[qid] if d in position]
        sims = collection.doc_vectors[[position[d] for d in judged]] @ vectors[qid]  # type: ignore[index]
        hits = sorted(zip(judged, (float(s) for s in sims), strict=True), key=lambda h: -h[1])
        relevant = frozenset(d for d in judged if qrels[qid][d] >= collection.relevant_min)
        examples.append(
            GateExample(
                qid, "natural", collection.queries[qid], chunks_of(collection, hits), relevant
            )
        )
        grades.update({(qid, d): qrels[qid][d] for d in judged})
    return examples, grades


def query_folds(qids: list[str], rng: random.Random | None) -> list[set[str]]:
    """Two halves of the query ids: sorted and alternating (``rng``: shuffled first)."""
    ordered = sorted(qids) if rng is None else rng.sample(sorted(qids), len(qids))
    return [set(ordered[0::2]), set(ordered[1::2])]


def fitted_chunk_scores(
    prepared: Prepared,
    profile: EvaluatorConfig,
    examples: list[GateExample],
    train_ids: set[str],
) -> np.ndarray:
    """P(chunk relevant) of every pair (in ``examples`` order) from the profile
    with its chunk stage fitted on the human labels of the ``train_ids`` queries."""
    stage = fit_chunk_stage(
        [ex for ex in examples if ex.group in train_ids],
        base=profile.replace(model=None),
        corpus_stats=prepared.stats,
    ).stage
    fitted = Evaluator(
        profile.replace(model=ModelConfig(chunk=stage, set=profile.model.set))
        if profile.model
        else profile.replace(model=ModelConfig(chunk=stage)),
        analyzer=prepared.analyzer,
    )
    return np.array(
        [
            g.score
            for ex in examples
            for g in fitted.evaluate(ex.query, ex.chunks, prepared.stats).chunks
        ]
    )


def agreement_section(
    prepared: Prepared, profile: EvaluatorConfig, *, repeats: int = 20, seed: int = 0
) -> dict[str, Any] | None:
    """Per-chunk kappa vs humans and LLM graders; ``None`` without LLM label sets.

    ``repeats`` random 2-fold splits by query give the spread of the kappas
    (each refits the chunk stage twice: 20 for the reports, a few for tests;
    0 reports the fixed split alone).
    """
    folder = prepared.collection.path / "llm_judgments"
    if not folder.exists() or "test" not in prepared.collection.qrels:
        return None
    examples, grades = judged_pools(prepared)
    keys = [(ex.group, c.id) for ex in examples for c in ex.chunks]
    human = np.array([grades[key] >= prepared.collection.relevant_min for key in keys])
    cosine = np.array([c.score or 0.0 for ex in examples for c in ex.chunks])
    qids = [ex.group for ex in examples]
    shipped = Evaluator(profile, analyzer=prepared.analyzer)
    started = time.perf_counter()
    shipped_scores = np.array(
        [
            g.score
            for ex in examples
            for g in shipped.evaluate(ex.query, ex.chunks, prepared.stats).chunks
        ]
    )
    per_passage_ms = (time.perf_counter() - started) / len(keys) * 1e3

    def two_fold(rng: random.Random | None) -> dict[str, np.ndarray]:
        out = {name: np.zeros(len(keys), dtype=bool) for name in ("fitted", "shipped", "cosine")}
        key_fold = np.array([k[0] for k in keys])
        for train_ids, test_ids in (lambda f: [(f[0], f[1]), (f[1], f[0])])(query_folds(qids, rng)):
            train = np.isin(key_fold, list(train_ids))
            test = np.isin(key_fold, list(test_ids))
            scores = fitted_chunk_scores(prepared, profile, examples, train_ids)
            for name, values in (
                ("fitted", scores),
                ("shipped", shipped_scores),
                ("cosine", cosine),
            ):
                band, _ = kappa_band(values[train], human[train])
                out[name][test] = values[test] > band
        return out

    fixed = two_fold(None)
    rng = random.Random(seed)
    spread = {name: [] for name in fixed}  # type: dict[str, list[float]]
    for _ in range(repeats):
        for name, verdicts in two_fold(rng).items():
            spread[name].append(kappa(human, verdicts))

    llm: dict[str, dict[str, float]] = {}
    for path in sorted(folder.glob("*.tsv")):
        labels = read_qrels(path)
        theirs = np.array(
            [labels.get(q, {}).get(d, 0) >= prepared.collection.relevant_min for q, d in keys]
        )
        llm[path.stem] = {
            "kappa_vs_human": kappa(human, theirs),
            "accuracy_vs_human": float((human == theirs).mean()),
            "kappa_ours_vs_it": kappa(theirs, fixed["fitted"]),
        }
    llm_kappas = sorted(v["kappa_vs_human"] for v in llm.values())
    return {
        "random_splits": repeats,
        "pairs": len(keys),
        "queries": len(examples),
        "relevant_share": float(human.mean()),
        "kappa_vs_human": {
            name: {
                "fixed_split": kappa(human, verdicts),
                "random_splits_mean": float(np.mean(spread[name])) if repeats else None,
                "random_splits_sd": float(np.std(spread[name])) if repeats else None,
            }
            for name, verdicts in fixed.items()
        },
        "llm_graders": llm,
        "llm_kappa_median": float(np.median(llm_kappas)) if llm_kappas else None,
        "llm_kappa_best": float(max(llm_kappas)) if llm_kappas else None,
        "llm_beaten_by_ours": int(sum(k < kappa(human, fixed["fitted"]) for k in llm_kappas)),
        "evaluator_ms_per_passage": per_passage_ms,
    }
