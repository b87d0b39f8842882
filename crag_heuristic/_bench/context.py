"""Benchmark: what reaches the generator? The final context of each method.

For each judged query, the context a RAG system would send to its LLM:

* ``top-k``: the bare dense top ``k``, whole chunks;
* ``always-hybrid``: dense + BM25 RRF on every query, top ``k``, whole chunks;
* ``router``: the CRAG router's final chunks (its defaults, web off), after
  knowledge refinement within the token budget (sentence strips, as
  ``RouterConfig(refine=True)`` does: when no strip passes, the chunks are cut
  to the budget and the router says so);
* the same refinement applied to ``top-k`` and ``always-hybrid`` (``, refined``);
* ``gate filter``: the top ``k`` keeping the chunks the gate grades at least
  PARTIAL on their own (the per-chunk grading of CRAG, no correction);
* where ``llm_judgments/`` exists, the top ``k`` filtered by each recorded LLM
  grader: the passages it grades at least the collection's relevance threshold
  (a passage it did not grade counts as not kept).

Measures, per method, over the queries (all have a relevant document):

* evidence recall: the share of queries whose context holds a relevant
  document, or a strip of one (a strip need not hold the answer itself);
* context precision: the share of the context's tokens that come from
  relevant documents (queries with an empty context left out; their number is
  reported);
* tokens sent: estimated as the evaluator does (words x
  ``length.tokens_per_word``);
* the abstention signal: a method's flag of a failed retrieval (the router:
  its final verdict is IRRELEVANT, or refinement kept no strip on its score; a filter:
  it kept nothing) against the truth "the context holds no relevant
  document": precision and recall of the flag.

The curves trade evidence recall for tokens: ``top-k`` over k = 1 .. ``k``,
the refined methods over token budgets; the LLM graders are points.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._config import EvaluatorConfig, RouterConfig
from .._evaluator.evaluator import Evaluator
from .._expansion.fusion import reciprocal_rank_fusion
from .._router.router import CRAG
from .._types import Chunk, Evaluation, Verdict
from .data import read_qrels
from .pipeline import Prepared, SplitRun

BUDGETS = (64, 128, 256, 512, 1024)


@dataclass
class _Context:
    """One query's context: its chunks (whole or refined) and the method's flag."""

    chunks: list[Chunk]
    flagged: bool | None = None  # None: the method raises no flag


def _summary(
    contexts: dict[str, _Context],
    relevant: dict[str, set[str]],
    tokens: Callable[[str], float],
) -> dict[str, Any]:
    hits, precisions, sent = [], [], []
    empty = 0
    flag_tp = flag_fp = flag_fn = 0
    has_flag = False
    for qid, context in contexts.items():
        per_chunk = [tokens(chunk.text) for chunk in context.chunks]
        total = sum(per_chunk)
        good = sum(
            t for t, c in zip(per_chunk, context.chunks, strict=True) if c.id in relevant[qid]
        )
        hit = any(c.id in relevant[qid] for c in context.chunks)
        hits.append(hit)
        sent.append(total)
        if context.chunks and total > 0:
            precisions.append(good / total)
        else:
            empty += 1
        if context.flagged is not None:
            has_flag = True
            missed = not hit
            flag_tp += int(context.flagged and missed)
            flag_fp += int(context.flagged and not missed)
            flag_fn += int(not context.flagged and missed)
    out: dict[str, Any] = {
        "queries": len(contexts),
        "evidence_recall": sum(hits) / len(hits),
        "context_precision": statistics.fmean(precisions) if precisions else None,
        "tokens_mean": statistics.fmean(sent),
        "tokens_p50": statistics.median(sent),
        "empty_contexts": empty,
        "abstention": None,
    }
    if has_flag:
        flagged = flag_tp + flag_fp
        misses = flag_tp + flag_fn
        out["abstention"] = {
            "flagged": flagged,
            "missed_evidence": misses,
            "precision": flag_tp / flagged if flagged else None,
            "recall": flag_tp / misses if misses else None,
        }
    return out


def _refined(
    evaluator: Evaluator, query: str, chunks: Sequence[Chunk], stats: Any, budget: int
) -> tuple[list[Chunk], bool]:
    """Refinement as the router does it: (chunks, whether no strip passed on its score:
    the chunks then cut to the budget)."""
    if not chunks:
        return [], True
    refinement = evaluator.refine(query, chunks, stats, token_budget=budget)
    return list(refinement.chunks), refinement.cut


def _failed(evaluation: Evaluation) -> bool:
    return evaluation.verdict is Verdict.IRRELEVANT


def context_section(
    prepared: Prepared,
    profile: EvaluatorConfig,
    *,
    k: int = 10,
    budget: int = 512,
    budgets: Sequence[int] = BUDGETS,
    split: str = "test",
) -> dict[str, Any]:
    """Each method's context per query, summarised (see the module doc)."""
    setup = SplitRun.of(prepared, profile, split)
    collection = prepared.collection
    qids = setup.qids
    texts = setup.texts
    relevant = setup.relevant
    dense = setup.dense
    bm25 = setup.bm25
    evaluator = setup.evaluator
    stats = prepared.stats
    per_word = evaluator.config.length.tokens_per_word

    def tokens(text: str) -> float:
        return prepared.analyzer.analyze(text).n_tokens * per_word

    crag = CRAG(dense, evaluator, lexical=bm25, cache=False, config=RouterConfig(k=k))
    top = dict(zip(qids, dense.search_many([texts[q] for q in qids], k), strict=True))
    hybrid = {
        q: reciprocal_rank_fusion([top[q], bm25.search(texts[q], k)], keep_scores=True)[:k]
        for q in qids
    }
    routed = {q: crag.retrieve(texts[q], k) for q in prepared.loops(qids, "router")}
    first = {q: routed[q].initial_evaluation for q in qids}

    def refined(runs: dict[str, list[Chunk]], size: int, flag: bool) -> dict[str, _Context]:
        out = {}
        for q in qids:
            chunks, empty = _refined(evaluator, texts[q], runs[q], stats, size)
            flagged = (empty or _failed(routed[q].evaluation)) if flag else None
            out[q] = _Context(chunks, flagged)
        return out

    router_chunks = {q: list(routed[q].chunks) for q in qids}
    methods: dict[str, dict[str, _Context]] = {
        "top-k": {q: _Context(list(top[q])) for q in qids},
        "top-k, refined": refined(top, budget, False),
        "always-hybrid": {q: _Context(list(hybrid[q])) for q in qids},
        "always-hybrid, refined": refined(hybrid, budget, False),
        "router": refined(router_chunks, budget, True),
        "router, unrefined": {
            q: _Context(router_chunks[q], _failed(routed[q].evaluation)) for q in qids
        },
        "gate filter (chunks >= PARTIAL)": {},
    }
    for q in qids:
        keep = set(first[q].kept_ids(Verdict.PARTIAL))
        kept = [c for c in top[q] if c.id in keep]
        methods["gate filter (chunks >= PARTIAL)"][q] = _Context(kept, not kept)
    summary = {name: _summary(c, relevant, tokens) for name, c in methods.items()}

    curves: dict[str, list[dict[str, float]]] = {"top-k": []}
    for size in range(1, k + 1):
        row = _summary({q: _Context(list(top[q][:size])) for q in qids}, relevant, tokens)
        curves["top-k"].append(
            {"k": size, "tokens": row["tokens_mean"], "recall": row["evidence_recall"]}
        )
    for name, runs, flag in (
        ("top-k, refined", top, False),
        ("always-hybrid, refined", hybrid, False),
        ("router", router_chunks, True),
    ):
        curves[name] = []
        for size in budgets:
            row = _summary(refined(runs, size, flag), relevant, tokens)
            curves[name].append(
                {"budget": size, "tokens": row["tokens_mean"], "recall": row["evidence_recall"]}
            )

    graders: dict[str, Any] = {}
    folder = collection.path / "llm_judgments"
    if folder.exists():
        for path in sorted(folder.glob("*.tsv")):
            labels = read_qrels(path)
            contexts = {}
            for q in qids:
                grades = labels.get(q, {})
                kept = [c for c in top[q] if grades.get(c.id, 0) >= collection.relevant_min]
                contexts[q] = _Context(kept, not kept)
            graders[path.stem] = _summary(contexts, relevant, tokens)

    routes: dict[str, int] = {}
    for result in routed.values():
        routes[result.strategy.value] = routes.get(result.strategy.value, 0) + 1
    return {
        "split": split,
        "queries": len(qids),
        "k": k,
        "token_budget": budget,
        "routes": routes,
        "methods": summary,
        "curves": curves,
        "llm_graders": graders,
    }
