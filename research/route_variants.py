"""Benchmark: which correction pays? Route variants on one BEIR folder.

The router's first retrieval and its gate are the same in every variant; the
variants differ in what PARTIAL and IRRELEVANT do (web search off, so
IRRELEVANT falls back to the PARTIAL correction):

* the expander: the bundled synonyms, or none (the lexical retriever then
  runs the original query only: dense + BM25 RRF on the corrected queries);
* ``expand_on``: expanded queries re-embedded and sent to BM25 (``both``), or
  sent to BM25 only (``lexical``);
* the lexical rankings' RRF weight: fixed, from the gate's probability
  (``fusion_weights="gate"``), from the first retrieval's keyword overlap
  (``"keywords"``), or a fixed half.

For each: nDCG@10 and Recall@100 (pytrec_eval) on a 100-deep retrieval graded
on its top 10, per route (the first verdict) against the bare dense list,
whether fast-path lists stay identical, and the latency of the corrected path
against the bare retrieval in the same run: each timed with its own MiniLM
query encoding, a bare and a router call per query and variant, in
alternating order; the ratio compares the corrected queries' p50 with the
bare p50 of the same queries. The
references are the bare dense list and dense + BM25 RRF on every query.

Choosing among the variants is the caller's job (:mod:`research.corrections`):
on training queries only, never on the split it reports.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crag_heuristic import CRAG, BM25Retriever, Chunk, Evaluator, EvaluatorConfig, RouterConfig
from crag_heuristic.bench import (
    BARE,
    HYBRID,
    EncodingRetriever,
    HarnessRetriever,
    Prepared,
    SplitRun,
    percentiles,
    ranking_metrics,
)
from crag_heuristic.expansion import SynonymExpander, reciprocal_rank_fusion


@dataclass(frozen=True)
class Variant:
    """One way to correct: the expander (``synonyms`` or ``none``) and router settings."""

    name: str
    expander: str
    config: Mapping[str, Any] = field(default_factory=dict)
    lexical: bool = True

    def router(
        self, retriever: Any, evaluator: Evaluator, lexical: BM25Retriever, **config: Any
    ) -> CRAG:
        return CRAG(
            retriever,
            evaluator,
            expander=SynonymExpander(analyzer=evaluator.analyzer)
            if self.expander == "synonyms"
            else False,
            lexical=lexical if self.lexical else None,
            cache=False,
            config=RouterConfig(**{**self.config, **config}),
        )


def _variant(
    name: str, expander: str, expand_on: str, fusion: str, weight: float, lexical: bool = True
) -> Variant:
    """Every setting a variant depends on, explicit: none follows the library's defaults."""
    config = {"expand_on": expand_on, "fusion_weights": fusion, "lexical_weight": weight}
    return Variant(name, expander, config, lexical)


VARIANTS = (
    _variant(
        "synonyms, dense only (no lexical retriever)", "synonyms", "primary", "fixed", 1.0, False
    ),
    _variant("synonyms, dense + BM25 (expand_on=both)", "synonyms", "both", "fixed", 1.0),
    _variant("synonyms, BM25 only (expand_on=lexical)", "synonyms", "lexical", "fixed", 1.0),
    _variant("synonyms, BM25 only, gate weights", "synonyms", "lexical", "gate", 1.0),
    _variant("no expansion (dense + BM25 of the query)", "none", "lexical", "fixed", 1.0),
    _variant("no expansion, gate weights", "none", "lexical", "gate", 1.0),
    _variant("no expansion, keyword weights", "none", "lexical", "keywords", 1.0),
    _variant("no expansion, lexical weight 0.5", "none", "lexical", "fixed", 0.5),
    _variant("no expansion, lexical weight 2", "none", "lexical", "fixed", 2.0),
)


def _mean(values: dict[str, float], subset: list[str] | None = None) -> float | None:
    """The mean of ``values`` (over the keys ``subset``); ``None`` over no key."""
    keys = list(values) if subset is None else subset
    return float(np.mean([values[k] for k in keys])) if keys else None


def _routes(
    verdicts: Mapping[str, str],
    identical: Mapping[str, bool],
    bare: dict[str, float],
    routed: dict[str, float],
    hybrid: dict[str, float],
) -> dict[str, Any]:
    out = {}
    for verdict in ("relevant", "partial", "irrelevant"):
        qids = [q for q, v in verdicts.items() if v == verdict]
        before, after = _mean(bare, qids), _mean(routed, qids)
        out[verdict] = {
            "queries": len(qids),
            "ndcg@10_bare": before,
            "ndcg@10_hybrid": _mean(hybrid, qids),
            "ndcg@10": after,
            "delta": None if before is None or after is None else after - before,
            "identical_to_bare": sum(identical[q] for q in qids),
        }
    return out


def _latency(
    prepared: Prepared,
    variants: Sequence[Variant],
    evaluator: Evaluator,
    bm25: BM25Retriever,
    queries: Sequence[str],
    known: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """Bare retrieval vs each variant's router, both encoding the query; interleaved."""
    retriever = EncodingRetriever(prepared, known)
    for query in queries[:5]:  # warm up the model and the index
        retriever.search(query, 10)
    routers = [v.router(retriever, evaluator, bm25, k=10, gate_k=10, fetch_k=100) for v in variants]
    bare: list[list[float]] = [[] for _ in variants]
    timed: list[list[tuple[float, bool]]] = [[] for _ in variants]

    def bare_call(query: str) -> float:
        started = time.perf_counter()
        retriever.search(query, 10)
        return (time.perf_counter() - started) * 1e3

    for number, query in enumerate(prepared.loops(queries, "latency")):
        for index, crag in enumerate(routers):
            first = bare_call(query) if number % 2 == 0 else None  # alternate the order
            started = time.perf_counter()
            result = crag.retrieve(query, 10)
            elapsed = (time.perf_counter() - started) * 1e3
            bare[index].append(first if first is not None else bare_call(query))
            timed[index].append((elapsed, result.strategy.value != "none"))
    out = {}
    for variant, base_ms, samples in zip(variants, bare, timed, strict=True):
        slow = [ms for ms, corrected in samples if corrected]
        slow_bare = [b for b, (_, corrected) in zip(base_ms, samples, strict=True) if corrected]
        quick = [ms for ms, corrected in samples if not corrected]
        row: dict[str, Any] = {
            "bare_p50_ms": statistics.median(base_ms),
            "queries": len(queries),
        }
        if slow:
            stats = percentiles(slow)
            row["corrected"] = stats
            row["bare_on_corrected_p50_ms"] = statistics.median(slow_bare)
            row["corrected_over_bare_p50"] = stats["p50"] / statistics.median(slow_bare)
        if quick:
            row["fast_path_over_bare_p50"] = percentiles(quick)["p50"] / row["bare_p50_ms"]
        out[variant.name] = row
    return out


def _encode_expansions(
    crag: CRAG,
    dense: HarnessRetriever,
    texts: dict[str, str],
    bare: dict[str, list[Chunk]],
    prepared: Prepared,
) -> None:
    """Encode every expanded query the router may re-embed, in one batch (one pass of
    MiniLM and one write of the vector cache instead of one per query)."""
    assert crag.expander is not None
    queries: set[str] = set()
    for qid, text in texts.items():
        expansion = crag.expander.expand(text, chunks=bare[qid][:10], corpus_stats=prepared.stats)
        queries.update(q for q in expansion.queries if q.strip() and q != text)
    dense.prime(sorted(queries))


def run_variants(
    prepared: Prepared,
    profile: EvaluatorConfig,
    split: str = "test",
    *,
    variants: Sequence[Variant] = VARIANTS,
    latency_queries: int = 100,
) -> dict[str, Any]:
    """Every variant and the references on ``split``'s judged queries (see module doc).

    ``latency_queries`` (0: none) queries are timed per variant, with MiniLM
    query encoding when the ``bench`` extra is there.
    """
    setup = SplitRun.of(prepared, profile, split)
    collection = prepared.collection
    qids = setup.qids
    texts = setup.texts
    qrels = setup.qrels
    dense = setup.dense
    bm25 = setup.bm25
    evaluator = setup.evaluator
    bare = dict(zip(qids, dense.search_many([texts[q] for q in qids], 100), strict=True))
    hybrid = {
        q: reciprocal_rank_fusion([bare[q], bm25.search(texts[q], 100)], keep_scores=True)[:100]
        for q in qids
    }
    bare_m, hybrid_m = ranking_metrics(qrels, bare), ranking_metrics(qrels, hybrid)
    out: dict[str, Any] = {
        "collection": collection.name,
        "split": split,
        "queries": len(qids),
        "references": {
            name: {"ndcg@10": _mean(m["ndcg@10"]), "recall@100": _mean(m["recall@100"])}
            for name, m in ((BARE, bare_m), (HYBRID, hybrid_m))
        },
        "variants": {},
    }
    verdicts: dict[str, str] | None = None
    for variant in variants:
        crag = variant.router(dense, evaluator, bm25, k=100, gate_k=10, fetch_k=100)
        if crag.expander is not None and (
            crag.config.expand_on != "lexical" or not variant.lexical
        ):
            _encode_expansions(crag, dense, texts, bare, prepared)
        results = {q: crag.retrieve(texts[q], 100) for q in prepared.loops(qids, variant.name)}
        run = {q: list(r.chunks) for q, r in results.items()}
        m = ranking_metrics(qrels, run)
        verdicts = {q: r.initial_evaluation.verdict.value for q, r in results.items()}
        identical = {q: [c.id for c in run[q]] == [c.id for c in bare[q]] for q in qids}
        out["variants"][variant.name] = {
            "expander": variant.expander,
            "config": dict(variant.config),
            "ndcg@10": _mean(m["ndcg@10"]),
            "recall@100": _mean(m["recall@100"]),
            "routes": _routes(
                verdicts, identical, bare_m["ndcg@10"], m["ndcg@10"], hybrid_m["ndcg@10"]
            ),
            "vs_hybrid_per_query": {
                "better": sum(m["ndcg@10"][q] > hybrid_m["ndcg@10"][q] + 1e-12 for q in qids),
                "worse": sum(m["ndcg@10"][q] < hybrid_m["ndcg@10"][q] - 1e-12 for q in qids),
            },
        }
    if verdicts is not None:
        counts: dict[str, int] = {}
        for verdict in verdicts.values():
            counts[verdict] = counts.get(verdict, 0) + 1
        out["verdicts"] = counts
    if latency_queries > 0:
        prepared.load_encoder()
        timed = qids[:latency_queries]
        vectors = prepared.vectors({q: texts[q] for q in timed})
        known = {texts[q]: vectors[q] for q in timed}
        out["query_encoder"] = prepared.query_encoder
        latency = _latency(prepared, variants, evaluator, bm25, [texts[q] for q in timed], known)
        for name, row in latency.items():
            out["variants"][name]["latency"] = row
    return out
