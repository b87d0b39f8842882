"""Benchmark 3: does the router's correction improve the ranking?

nDCG@10 and Recall@100 (pytrec_eval: the trec_eval bindings BEIR reports
with) of the bare dense retriever against the CRAG router on the same
queries: the router, with the library's defaults, grades the top ``gate_k``
(10) chunks of a 100-deep retrieval; RELEVANT keeps the list as is; PARTIAL
corrects it (by default: the dense ranking fused, with RRF, with a BM25
ranking; the defaults were chosen on training data by
``python -m research.corrections``); IRRELEVANT would go to the web, which is off
here, so it falls back to the same correction. The per-route breakdown shows
that the fast path loses nothing (it returns the bare list) and what the
corrected queries gain. For reference: the router with synonym or PRF
expansion on the BM25 side, BM25 alone, and the dense + BM25 fusion applied
to every query.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np

from .._config import EvaluatorConfig
from .._expansion.expander import SynonymExpander
from .._expansion.fusion import reciprocal_rank_fusion
from .._expansion.prf import PRFExpander
from .._optional import requires
from .._router.router import CRAG
from .._types import Chunk
from .pipeline import Prepared, SplitRun

BARE = "dense (bare)"
"""The bare dense list: its key among a report's runs and references."""
HYBRID = "dense + BM25 RRF, every query"
"""The always-hybrid reference: its key among a report's runs and references."""


def ranking_metrics(
    qrels: dict[str, dict[str, int]], runs: dict[str, list[Chunk]]
) -> dict[str, Any]:
    """Per-query nDCG@10 and Recall@100 of ``runs`` (query id -> its ranked chunks) against
    ``qrels`` (query id -> document id -> grade), with pytrec_eval (trec_eval, as BEIR
    reports): ``{"ndcg@10": {query id: value}, "recall@100": {...}}``."""
    with requires("bench", "the benchmark harness"):
        import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
    run = {
        q: {c.id: float(len(chunks) - i) for i, c in enumerate(chunks)}
        for q, chunks in runs.items()
    }
    scores = evaluator.evaluate(run)
    return {
        "ndcg@10": {q: float(scores.get(q, {}).get("ndcg_cut_10", 0.0)) for q in runs},
        "recall@100": {q: float(scores.get(q, {}).get("recall_100", 0.0)) for q in runs},
    }


def _mean(values: dict[str, float], subset: list[str] | None = None) -> float | None:
    keys = list(values) if subset is None else subset
    return float(np.mean([values[k] for k in keys])) if keys else None


def quality_section(
    prepared: Prepared, profile: EvaluatorConfig, split: str = "test"
) -> dict[str, Any]:
    """Bare dense vs the CRAG router (and references), per query and per route."""
    setup = SplitRun.of(prepared, profile, split)
    qids = setup.qids
    texts = setup.texts
    qrels = setup.qrels
    dense = setup.dense
    bm25 = setup.bm25
    evaluator = setup.evaluator

    def router(expander: Any = None, **config: Any) -> CRAG:
        """The router with the library's defaults (``expander=None``: its default)
        but for the depths; ``config`` overrides."""
        return CRAG(
            dense,
            evaluator,
            expander=expander,
            lexical=bm25,
            cache=False,
            config={"k": 100, "gate_k": 10, "fetch_k": 100, **config},
        )

    bare = {q: dense.search(texts[q], 100) for q in qids}
    lexical = {q: bm25.search(texts[q], 100) for q in qids}
    fused_all = {
        q: reciprocal_rank_fusion([bare[q], lexical[q]], keep_scores=True)[:100] for q in qids
    }

    async def run_router(crag: CRAG, label: str) -> dict[str, Any]:
        results = {}
        for q in prepared.loops(qids, label):
            results[q] = await crag.aretrieve(texts[q], 100)
        return results

    # the router as it ships (its defaults were chosen on training data by
    # python -m research.corrections), and the expanders it was chosen over
    synonyms = SynonymExpander(analyzer=prepared.analyzer)
    shipped = router()
    routed_expander, default = shipped.expander, shipped.config
    routed = asyncio.run(run_router(shipped, "router"))
    alternatives = {
        "CRAG router, synonym expansion (BM25 side)": router(synonyms, expand_on="lexical"),
        "CRAG router, PRF expansion (BM25 side)": router(PRFExpander(), expand_on="lexical"),
    }
    runs = {BARE: bare, "CRAG router": {q: list(r.chunks) for q, r in routed.items()}}
    for label, crag in alternatives.items():
        results = asyncio.run(run_router(crag, label))
        runs[label] = {q: list(r.chunks) for q, r in results.items()}
    runs["BM25"] = lexical
    runs[HYBRID] = fused_all
    metrics = {name: ranking_metrics(qrels, run) for name, run in runs.items()}
    strategy = {q: r.strategy.value for q, r in routed.items()}
    verdict = {q: r.initial_evaluation.verdict.value for q, r in routed.items()}
    fast = [q for q in qids if strategy[q] == "none"]
    corrected = [q for q in qids if strategy[q] != "none"]
    unchanged_fast = sum([c.id for c in routed[q].chunks] == [c.id for c in bare[q]] for q in fast)
    return {
        "split": split,
        "queries": len(qids),
        "overall": {
            name: {"ndcg@10": _mean(m["ndcg@10"]), "recall@100": _mean(m["recall@100"])}
            for name, m in metrics.items()
        },
        "routes": dict(Counter(strategy.values())),
        "verdicts": dict(Counter(verdict.values())),
        "fast_path": {
            "queries": len(fast),
            "identical_to_bare": unchanged_fast,
            "ndcg@10_bare": _mean(metrics[BARE]["ndcg@10"], fast),
            "ndcg@10_router": _mean(metrics["CRAG router"]["ndcg@10"], fast),
        },
        "corrected": {
            "queries": len(corrected),
            "ndcg@10_bare": _mean(metrics[BARE]["ndcg@10"], corrected),
            "ndcg@10_router": _mean(metrics["CRAG router"]["ndcg@10"], corrected),
            "recall@100_bare": _mean(metrics[BARE]["recall@100"], corrected),
            "recall@100_router": _mean(metrics["CRAG router"]["recall@100"], corrected),
        },
        "expanded_queries": sum(bool(r.expanded_queries) for r in routed.values()),
        "router_config": {
            "expander": type(routed_expander).__name__ if routed_expander else None,
            "expand_on": default.expand_on,
            "fusion_weights": default.fusion_weights,
            "lexical_weight": default.lexical_weight,
        },
    }
