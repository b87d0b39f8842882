"""Every number the README and docs/ quote, and the committed result file it comes from.

    python benchmarks/readme_numbers.py       # exit 1 (and a list) when a quote is stale

Each :class:`Quote` renders a phrase of the README from a results file under
``benchmarks/results/`` (``bash benchmarks/regenerate.sh`` rewrites them all,
then runs this check); the phrase must appear in the README verbatim (white
space aside). After a regeneration, a stale quote is printed with the text it
should now read. tests/test_readme_numbers.py runs the same check, so a README
number can neither drift from its report nor be typed in by hand.

Not covered: the numbers that describe the default profile's own fitting
(``809 claims``, its bands' targets), which come from the header of the
profile file that ``crag-heuristic calibrate`` wrote
(``crag_heuristic/profiles/<name>.toml``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crag_heuristic.bench import BASELINES, SHARED_COLLECTIONS

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
COLLECTIONS = SHARED_COLLECTIONS
FILES = {
    **{name: RESULTS / name / "results.json" for name in COLLECTIONS},
    "loco": RESULTS / "loco" / "loco.json",
    "self_calibration": RESULTS / "self_calibration" / "loco.json",
    "corrections": RESULTS / "corrections" / "results.json",
    "micro": RESULTS / "evaluator_micro.json",
    "startup": RESULTS / "startup" / "startup.json",
    "scale": RESULTS / "scale.json",
    "tokens": RESULTS / "tokens_check.json",
    "load": RESULTS / "load_faults" / "load_faults.json",
    "own": RESULTS / "own_corpus" / "own_corpus.json",
    "own_gate": RESULTS / "own_corpus_gate" / "own_corpus_gate.json",
    "serve_load": RESULTS / "serve_load" / "serve_load.json",
    "cascade": RESULTS / "llmjudge" / "results.json",
    "vs_ref": RESULTS / "evaluator_vs_ref.md",  # Markdown: read as {"text": ...}
    "arguana_calibrated": RESULTS / "guarantee_calibrated" / "birco-arguana" / "results.json",
    "stream": RESULTS / "stream" / "scifact.md",  # the ledger benchmarks/stream_variants.py wrote
    "stream_5pct": RESULTS / "stream" / "scifact-5pct.md",
}


LOCO = "nested gate"
SELF = "self-calibrated (no qrels)"
SENTENCES = "nested gate with sentence evidence (opt-in)"
LR = "LR(top-1, max BM25)"
ORACLE = "best simple predictor here (oracle)"
FIXED = "best simple predictor, chosen on the others"
TOP1 = "top-1 score"
SEED004 = "seed 004 design"
SEED = "seed design (as written)"
GAP = "score gap (top-1 - top-k)"


def f(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def thousands(value: int) -> str:
    return f"{value:,}"


@dataclass(frozen=True)
class Quote:
    """A README phrase made from one results file."""

    source: str  # a key of FILES
    render: Callable[[dict[str, Any]], str]

    def text(self, data: dict[str, Any]) -> str:
        return self.render(data)


def _s(r: dict[str, Any]) -> dict[str, Any]:
    sections: dict[str, Any] = r["sections"]
    return sections


def _auc(r: dict[str, Any], name: str, which: str = "natural+probes") -> str:
    return f(_s(r)["failure"]["auc"][name][which])


def _ndcg(r: dict[str, Any], name: str, measure: str = "ndcg@10") -> str:
    return f(_s(r)["quality"]["overall"][name][measure], 4 if measure == "ndcg@10" else 3)


def _micro(r: dict[str, Any], k: int, column: str) -> float:
    row = next(row for row in r["results"] if row["k"] == k)
    return float(row[column]["p50"]) / 1000.0


def _micro_speed(r: dict[str, Any]) -> str:
    corpus10, web10 = _micro(r, 10, "cold_corpus_us"), _micro(r, 10, "cold_web_us")
    corpus1000 = _micro(r, 1000, "cold_corpus_us")
    row10 = next(row for row in r["results"] if row["k"] == 10)
    return (
        f"(synthetic {r['words_per_chunk']}-word chunks, with corpus statistics) gives "
        f"{f(_micro(r, 10, 'warm_us'), 2)} ms warm at k = 10; cold, "
        f"{f(corpus10, 2)} ms for chunks of the corpus (their analyses looked up; "
        f"{f(row10['cold_corpus_over_warm_p50'], 2)} x warm), {f(_micro(r, 10, 'cold_us'), 2)} ms "
        f"for new ASCII text and {f(web10, 2)} ms for non-ASCII web text; at k = 1000, "
        f"{round(corpus1000)} ms cold for corpus chunks and "
        f"{round(_micro(r, 1000, 'cold_us'))} ms for new text. Goals: corpus chunks 0.3 ms "
        f"{_verdict(corpus10 <= 0.3)}, within 1.5 x warm "
        f"{_verdict(row10['cold_corpus_over_warm_p50'] <= 1.5)}; web text 0.5 ms "
        f"{_verdict(web10 <= 0.5)}; k = 1000 cold 20 ms {_verdict(corpus1000 <= 20)} for corpus "
        f"chunks, {_verdict(_micro(r, 1000, 'cold_us') <= 20)} for new text"
    )


def _at(r: dict[str, Any]) -> str:
    """How loaded the machine was for a results file's loaded run."""
    load = r["loaded"]["load"]
    return f"{load['busy_processes']} busy processes of the benchmark's own"


def _idle_load(r: dict[str, Any]) -> str:
    idle = r.get("idle", {}).get("load")
    return "idle" if idle is None else f"load average {f(idle['load_average'], 1)}"


def _micro_scifact(r: dict[str, Any]) -> str:
    sf = r["scifact"]
    fast = sf["cost"]["router_ms"]["fast path"]
    return (
        f"On SciFact's {sf['retrievals']} natural test retrievals (k = 10) the evaluator takes "
        f"{f(sf['warm_ms']['p50'], 2)} ms warm, {f(sf['cold_corpus_ms']['p50'], 2)} ms cold from "
        f"the analyses and {f(sf['cold_tokenised_ms']['p50'], 2)} ms cold by tokenising; the "
        f"router's fast path costs {f(fast['over_bare_p50'], 3)} x the bare retrieval of the "
        f"same queries ({sf['cost']['query_encoder']} + FAISS, "
        f"{f(fast['bare_same_queries_p50_ms'], 1)} ms p50; goal 1.05 x: "
        f"{_verdict(fast['over_bare_p50'] <= 1.05)}; {f(fast['over_all_bare_p50'], 3)} x every "
        f"query's bare median)"
    )


def _micro_readme_router(r: dict[str, Any]) -> str:
    """Issue 34: the router as the README writes it, idle and loaded; a new Evaluator()."""
    idle = r["scifact"]["cost"]["readme_router_ms"]["fast path"]["over_bare_p50"]
    loaded = r["loaded"]["scifact"]["cost"]["readme_router_ms"]["fast path"]["over_bare_p50"]
    fresh, fresh_loaded = (part["scifact"]["fresh_over_reused_p50"] for part in (r, r["loaded"]))
    return (
        f"The router as the README writes it (`FaissRetriever(index, docstore, embed)` with "
        f"MiniLM as a plain function, each search on the router's worker thread, "
        f"`CRAG(retriever, lexical=BM25Retriever(docstore))`, every default) costs "
        f"{f(idle, 3)} x the bare retrieval on its fast path without a load of the "
        f"benchmark's own ({_idle_load(r)}; goal 1.05 x: {_verdict(idle <= 1.05)}) and "
        f"{f(loaded, 3)} x with {_at(r)} (goal 1.15 x: {_verdict(loaded <= 1.15)}); a new "
        f"`Evaluator()` per call costs {f(fresh, 2)} x a reused one on SciFact's lists "
        f"({f(fresh_loaded, 2)} x loaded; goal 1.1 x: "
        f"{_verdict(fresh <= 1.1 and fresh_loaded <= 1.1)})"
    )


def _micro_cache(r: dict[str, Any]) -> str:
    c = r["cache"]
    first = c["first_sight"]
    return (
        f"a repeated query costs {f(c['tiered_ms']['p50'], 3)} ms through `TieredCache` in front "
        f"of Redis against {f(c['memory_ms']['p50'], 3)} ms with `MemoryCache` "
        f"({f(c['tiered_over_memory_p50'], 2)} x; goal 1.1 x: "
        f"{_verdict(c['tiered_over_memory_p50'] <= 1.1)}) and {f(c['redis_ms']['p50'], 3)} ms "
        f"through `RedisCache` alone ({f(c['redis_over_memory_p50'], 2)} x); a first sight of "
        f"another process's evaluation through Redis costs {f(first['redis_read_ms']['p50'], 3)} "
        f"ms against {f(first['cold_evaluation_ms']['p50'], 3)} ms to evaluate the chunks cold"
    )


def _micro_hit(r: dict[str, Any]) -> str:
    """Issue 27's cache goals: what a hit costs against the evaluation it saves; issue 34's
    Redis hit under load and the bound's hand-off."""
    h = r["cache"]["hit"]
    memory, redis = h["memory_hit_over_evaluation_p50"], h["redis_hit_over_evaluation_p50"]
    loaded = r["loaded"]["cache"]["hit"]["redis_hit_over_evaluation_p50"]
    made = sum(row["evaluations_made"] for row in h["corrected"].values())
    handoff = r["cache"]["handoff"]["handoff_us"]["p50"] / 1000.0
    return (
        f"a hit costs {f(memory, 2)} x the evaluation it saves with `MemoryCache` (goal 0.5 x: "
        f"{_verdict(memory <= 0.5)}), {f(h['tiered_hit_over_evaluation_p50'], 2)} x with "
        f"`TieredCache` in front of Redis and {f(redis, 2)} x with `RedisCache` alone (goal "
        f"1 x: {_verdict(redis <= 1.0)}; {f(loaded, 2)} x with {_at(r)}: "
        f"{_verdict(loaded <= 1.0)}); queries asked again, corrected routes among them, "
        f"made {made} evaluations; a retrieval bounded by `retriever_timeout` costs "
        f"{f(handoff, 3)} ms more than one called in the caller's thread when the retriever "
        f"answers at once (the hand-off to a worker thread and back, p50; goal 0.1 ms: "
        f"{_verdict(handoff <= 0.1)})"
    )


def _startup(r: dict[str, Any]) -> str:
    wall = r["retrieve"]["wall_s"]
    heavy = ", ".join(r["heavy_modules_imported"]) or "none"
    return (
        f"`crag-heuristic retrieve` on the bundled sample takes {f(wall['median'], 2)} s "
        f"(median of {r['runs']} whole runs, {f(wall['min'], 2)} to {f(wall['max'], 2)}; "
        f"{f(r['retrieve']['cpu_s']['median'], 2)} s of CPU, "
        f"{round(r['retrieve']['peak_mib']['median'])} MiB at its peak) against "
        f"{f(r['python']['wall_s']['median'], 3)} s for `python -c pass` (goal 1 s on the "
        f"loaded machine: {_verdict(wall['median'] <= 1.0)}); heavy modules it imported: {heavy}"
    )


def _micro_paths(r: dict[str, Any]) -> str:
    p = r["paths"]
    first = p["first_call"]
    readme, router = p["first_call_readme"], p["first_call_router"]
    return (
        f"a new `Evaluator()` per call costs {f(p['fresh_over_reused_p50'], 2)} x a reused one "
        f"(goal 1.2 x: {_verdict(p['fresh_over_reused_p50'] <= 1.2)}), an evaluation with "
        f"statistics from `CorpusStats.from_texts(texts)` {f(p['from_texts_over_with_ids_p50'], 2)}"
        f" x one with statistics built with ids and analyses (goal 1.1 x: "
        f"{_verdict(p['from_texts_over_with_ids_p50'] <= 1.1)}), and the first call of a process "
        f"{f(first['first_ms']['p50'], 2)} ms against {f(first['later_ms']['p50'], 2)} ms for its "
        f"later ones ({f(first['first_over_later_median'], 1)} x on new chunks; "
        f"{f(readme['first_ms']['p50'], 2)} ms against {f(readme['later_ms']['p50'], 2)} ms, "
        f"{f(readme['first_over_later_median'], 1)} x, for the README's "
        f"`Evaluator().evaluate(...)`; {f(router['first_ms']['p50'], 2)} ms against "
        f"{f(router['later_ms']['p50'], 2)} ms, {f(router['first_over_later_median'], 1)} x, "
        f"for the README's router; goal 2 x: "
        + _verdict(
            max(
                first["first_over_later_median"],
                readme["first_over_later_median"],
                router["first_over_later_median"],
            )
            <= 2.0
        )
        + ")"
    )


def _own_index(r: dict[str, Any]) -> str:
    i, d = r["index"], r["retrieve"]
    return (
        f"On SciFact's {thousands(i['documents'])} documents `crag-heuristic index` takes "
        f"{f(i['process_s']['p50'], 1)} s, of which {f(i['embedding_s']['p50'], 1)} s fit and "
        f"apply the LSA embedder (goal: 5 s plus the embedding's own time, "
        f"{f(i['without_embedding_s']['p50'], 1)} s: "
        f"{_verdict(i['without_embedding_s']['p50'] <= 5.0)}); `retrieve --index DIR` then takes "
        f"{f(d['index_dir_s']['p50'], 2)} s a process against {f(d['sample_s']['p50'], 2)} s for "
        f"the bundled sample ({f(d['index_dir_over_sample_p50'], 2)} x; goals 1 s and 2 x: "
        f"{_verdict(d['index_dir_s']['p50'] <= 1.0 and d['index_dir_over_sample_p50'] <= 2.0)})"
    )


def _own_serve(r: dict[str, Any]) -> str:
    s = r["serve"]
    loaded = r["loaded"]["serve"]
    weight = s["answer_bytes"]
    return (
        f"over HTTP from another process a retrieval (`POST /v2/retrieve`, k = {s['k']}) takes "
        f"{f(s['service_ms']['p50'], 2)} ms p50 against {f(s['library_ms']['p50'], 2)} ms for the "
        f"library call ({s['service_minus_library_p50_ms']:+.2f} ms; goal 2 ms: "
        f"{_verdict(s['service_minus_library_p50_ms'] <= 2.0)}) and "
        f"{f(s['floor_ms']['p50'], 2)} ms for a minimal Starlette app on the same uvicorn making "
        f"the same call ({s['service_minus_floor_p50_ms']:+.2f} ms; goal 0.3 ms: "
        f"{_verdict(s['service_minus_floor_p50_ms'] <= 0.3)}; with {_at(r)}: "
        f"{loaded['service_minus_floor_p50_ms']:+.2f} ms); at 8 requests at once the service "
        f"answers {f(s['throughput']['8']['service_over_floor'], 2)} x the minimal app's "
        f"requests a second ({f(loaded['throughput']['8']['service_over_floor'], 2)} x loaded; "
        "goal 0.95 x: "
        + _verdict(
            min(
                s["throughput"]["8"]["service_over_floor"],
                loaded["throughput"]["8"]["service_over_floor"],
            )
            >= 0.95
        )
        + f"); an answer weighs {thousands(round(weight['v2_bytes_p50']))} bytes, "
        f"{f(weight['v2_over_texts_median'], 2)} x its chunks' texts (goal 1.2 x: "
        f"{_verdict(weight['v2_over_texts_median'] <= 1.2)}; "
        f"{thousands(round(weight['v1_bytes_p50']))} bytes, "
        f"{f(weight['v1_over_texts_median'], 2)} x, from `/v1/retrieve`)"
    )


def _own_gate_rows(r: dict[str, Any], embedder: str) -> list[dict[str, Any]]:
    return [row for row in r["rows"] if row["embedder"] == embedder]


def _own_gate_missed(rows: list[dict[str, Any]]) -> str:
    missed = [row["collection"] for row in rows if not row["goals"]["auc_vs_top1"]]
    return ", ".join(missed) if missed else "none"


def _own_gate_summary(r: dict[str, Any]) -> str:
    lsa = _own_gate_rows(r, "lsa")
    worst = max(row["good_in_irrelevant"]["value"] for row in lsa)
    return (
        f"indexed with LSA, on the {len(lsa)} shared collections' real queries, at most "
        f"{f(worst)} of the good lists graded IRRELEVANT (goal 0.15) and a mean failure AUC of "
        f"{f(sum(row['auc']['gate'] for row in lsa) / len(lsa))} against the top-1 cosine's "
        f"{f(sum(row['auc']['top1'] for row in lsa) / len(lsa))}; below it on "
        f"{_own_gate_missed(lsa)}"
    )


def _own_gate_cost(r: dict[str, Any]) -> str:
    scifact = {row["embedder"]: row for row in r["rows"] if row["collection"] == "scifact"}
    return (
        f"on SciFact {f(scifact['lsa']['stage_seconds']['calibrating'], 1)} s with LSA and "
        f"{f(scifact['minilm']['stage_seconds']['calibrating'], 1)} s over its MiniLM vectors, "
        f"on {r['cpus']} cores at a load average of {r['load_average_start'][0]:.1f}"
    )


def _own_gate_doc(r: dict[str, Any]) -> str:
    parts = []
    for embedder, name in (("lsa", "LSA"), ("minilm", "the MiniLM vectors")):
        rows = _own_gate_rows(r, embedder)
        worst = max(rows, key=lambda row: row["good_in_irrelevant"]["value"])
        shipped = max(rows, key=lambda row: row["shipped_good_in_irrelevant"]["value"])
        lowest = min(rows, key=lambda row: row["auc"]["gate"] - row["auc"]["top1"])
        low, high = lowest["gain_interval"]["top1"]
        parts.append(
            f"with {name} the gate graded at most {f(worst['good_in_irrelevant']['value'])} of "
            f"the good lists IRRELEVANT (on {worst['collection']}; the shipped gate up to "
            f"{f(shipped['shipped_good_in_irrelevant']['value'])}, on {shipped['collection']}), "
            f"and its failure AUC averaged {f(sum(row['auc']['gate'] for row in rows) / len(rows))}"
            f" against the top-1 cosine's {f(sum(row['auc']['top1'] for row in rows) / len(rows))}"
            f" (below it on {_own_gate_missed(rows)}; the worst, {lowest['collection']}, "
            f"{lowest['auc']['gate'] - lowest['auc']['top1']:+.3f}, 95 % interval {low:+.3f} to "
            f"{high:+.3f})"
        )
    return "; ".join(parts)


def _own_gate_share(r: dict[str, Any]) -> str:
    worst = r["irrelevant_share"]["worst_by_share"]
    return (
        "a band holding 15 % of the simulated good lists held up to "
        f"{round(100 * worst['0.15'])} % of the real ones"
    )


def _serve_load(r: dict[str, Any]) -> str:
    c = r["cache"]
    return (
        f"sends {thousands(r['requests'])} requests, {r['settings']['concurrency']} at a time, "
        f"while the service's Redis is killed and restarted: {r['lost']} lost, {r['untyped']} "
        f"untyped, {c['requests_with_a_failure']} requests with a cache failure, all flagged "
        f"({c['unflagged']} unflagged)"
    )


def _tokens(r: dict[str, Any]) -> str:
    rows = r["collections"].values()
    texts = sum(row["texts"] for row in rows)
    wide = [row["non_ascii_timing"]["past_over_now"] for row in rows if row["non_ascii_timing"]]
    return (
        f"{r['differences']} differences on {thousands(texts)} texts of the "
        f"{len(r['collections'])} shared collections, non-ASCII text "
        f"{f(min(wide), 1)} to {f(max(wide), 1)} x faster than before"
    )


def _scale_goals(r: dict[str, Any]) -> str:
    s, sp = r["stats"], r["lexical"]["sparse"]
    rb, bs = r["lexical"]["rank_bm25"], r["lexical"]["bm25s"]
    d = r["dense"]
    equal = s["dask_equal"] and s["dask_analyses_equal"]
    bm25s = f"; bm25s {f(bs['search_ms']['p50'], 1)} ms" if isinstance(bs, dict) else ""
    return (
        f"| statistics on a {s['workers']}-worker local Dask cluster equal to the one-process "
        f"build | {'bit for bit' if equal else 'DIFFERENT'}, with and without chunk analyses | "
        f"{_met(equal)} |\n"
        f"| statistics build <= 60 s on it | {f(s['dask']['s'], 1)} s on {s['workers']} Dask "
        f"workers ({f(s['dask']['cpu_s']['children'], 0)} s CPU in them), "
        f"{f(s['local']['s'], 1)} s in one process | {_met(s['dask']['s'] <= 60)} |\n"
        f"| statistics in memory <= 100 MB | {round(s['table_mb'])} MB for "
        f"{thousands(s['n_terms'])} terms (a `dict`: {round(s['dict_mb'])} MB) | "
        f"{_met(s['table_mb'] <= 100)} |\n"
        f"| statistics load <= 5 s | {f(s['load_s'], 2)} s ({round(s['file_mb'])} MB file); "
        f"{f(s['load_analyses_s'], 2)} s with the chunk analyses ({round(s['file_analyses_mb'])} "
        f"MB file) | {_met(s['load_analyses_s'] <= 5)} |\n"
        f"| lexical search p50 <= 50 ms | {f(sp['search_ms']['p50'], 1)} ms sparse BM25 (p99 "
        f"{round(sp['search_ms']['p99'])} ms); rank-bm25 ~"
        f"{f(rb['search_p50_extrapolated_ms'] / 1000, 1)} s ({round(rb['search_ms']['p50'])} ms "
        f"at {thousands(rb['docs'])} docs){bm25s} | {_met(sp['search_ms']['p50'] <= 50)} |\n"
        f"| first query <= 2x a later one | FAISS flat {f(d['first_query']['ratio'], 2)}x, BM25 "
        f"{f(sp['first_query']['ratio'], 2)}x | "
        f"{_met(d['first_query']['ratio'] <= 2 and sp['first_query']['ratio'] <= 2)} |"
    )


def _scale_analyses(r: dict[str, Any]) -> str:
    s, e = r["stats"], r["evaluator"]
    p = s["partition"]
    return (
        f"The chunk analyses of the {thousands(r['docs'])} documents take "
        f"{round(s['analyses_mb'])} MB ({round(s['analyses_bytes_per_doc'])} bytes a document) "
        f"and {f(s['local_analyses']['s'], 1)} s to build in one process "
        f"({f(s['dask_analyses']['s'], 1)} s on the Dask cluster). One partition of "
        f"{thousands(p['docs'])} documents is counted at {thousands(round(p['docs_per_s']))} "
        f"documents a second in one process, so {s['workers']} workers that each counted as fast "
        f"would need {f(r['docs'] / p['docs_per_s'] / s['workers'], 1)} s; the client merged the "
        f"partitions in {f(s['dask']['merge_s'], 1)} s. The evaluator on the flat index's top 10: "
        f"{f(e['warm_ms']['p50'], 2)} ms warm, {f(e['cold_corpus_ms']['p50'], 2)} ms cold from "
        f"the analyses ({f(e['cold_corpus_over_warm_p50'], 2)} x warm), "
        f"{f(e['cold_ms']['p50'], 2)} ms cold by tokenising; "
        f"{f(e['k1000_cold_corpus_ms']['p50'], 1)} ms cold from the analyses at k = 1000"
    )


def _scale_faiss(r: dict[str, Any]) -> str:
    d = r["dense"]
    return (
        f"FAISS at d = {d['dim']}: flat {round(d['flat']['search_ms']['p50'])} ms p50, "
        f"IVF{d['ivf']['nlist']} {f(d['ivf']['nprobe=8']['search_ms']['p50'], 2)} ms (nprobe 8), "
        f"HNSW32 {f(d['hnsw']['efSearch=64']['search_ms']['p50'], 2)} ms (efSearch 64)"
    )


def _llm_share(r: dict[str, Any]) -> str:
    a = _s(r)["agreement"]
    return f(a["kappa_vs_human"]["fitted"]["random_splits_mean"])


def _best_grader(r: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    graders: dict[str, Any] = _s(r)["cascade"]["graders"]
    name = max(graders, key=lambda n: graders[n]["kappa_alone"])
    return name, graders[name]


def _pct(value: float | None) -> str:
    return "never" if value is None else f"{round(100 * value)} %"


def _cascade_curve(r: dict[str, Any]) -> str:
    c = _s(r)["cascade"]
    name, g = _best_grader(r)
    strong = c["goal"]["graders_at_or_above_goal_alone"]
    only = "the only label set" if strong == [name] else f"one of {len(strong)} label sets"
    at = g["at"]["band"]
    return (
        f"with {name} (kappa {f(g['kappa_alone'])} alone, {only} at or above "
        f"{c['goal']['kappa']:.2f}) the gate (kappa {f(c['gate_kappa'])} alone) reaches kappa "
        + " / ".join(f(at[k]) for k in ("0.10", "0.20", "0.30", "0.50"))
        + " with 10 / 20 / 30 / 50 % of the pairs escalated, and "
        f"{c['goal']['kappa']:.2f} at {_pct(g['share_for_goal']['band'])} (band policy; "
        f"{_pct(g['share_for_goal']['budget'])} with a per-list budget). **Goal (kappa >= "
        f"{c['goal']['kappa']:.2f} with <= {round(100 * c['goal']['max_share'])} % escalated) "
        f"{_verdict(c['goal']['met'])}.** Escalating the gate's actual errors first "
        f"would reach {c['goal']['kappa']:.2f} at {_pct(g['share_for_goal']['oracle'])}"
    )


def _best_simple(r: dict[str, Any]) -> tuple[str, float]:
    """The best parameter-free predictor of a collection's own report."""
    auc = _s(r)["failure"]["auc"]
    name = max(BASELINES, key=lambda b: auc[b]["natural+probes"] or 0.0)
    return name, float(auc[name]["natural+probes"])


def _collection_row(name: str) -> Quote:
    """A row of the per-collection table: the report's gates against its best simple predictor."""

    def render(r: dict[str, Any]) -> str:
        fail = _s(r)["failure"]
        gates = r["gates"]
        best_name, best = _best_simple(r)

        def auc(gate: str | None) -> str:
            if gate is None:
                return "-"
            value = float(fail["auc"][gate]["natural+probes"])
            return f"{f(value)} ({value - best:+.3f})"

        default = fail["verdicts"][gates["default"]]
        mark = " (in-sample)" if r["profile_fitted_on_this_test_split"] else ""
        return (
            f"| {name} | {fail['natural']} ({fail['natural_failed']}) | {best_name} {f(best)} | "
            f"{auc(gates['default'])}{mark} | {auc(gates.get('self_calibrated'))}{mark} | "
            f"{auc(gates.get('label_fitted'))} | {f(default['good_natural_fast_path'], 2)} / "
            f"{_cell(default['natural_fast_path_precision'], 2)} | "
            f"{f(default['good_natural_in_irrelevant'], 2)} |"
        )

    return Quote(name, render)


def _interval(row: dict[str, Any], ours: str, theirs: str) -> str:
    low, high = row["intervals"][f"{ours} - {theirs}"]
    return f"{low:+.3f} to {high:+.3f}"


def _cell(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f(value, digits)


def _loco_table(r: dict[str, Any]) -> str:
    """The transfer table: the nested gate beside every baseline, intervals of differences."""
    lines = [
        "| collection | queries (failed) | nested gate | LR(top-1, max BM25) | top-1 | oracle: "
        "best simple here | self-calibrated | with sentence evidence |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in r["collections"].items():
        a = row["auc"]
        lines.append(
            f"| {name} | {row['queries']} ({row['natural_failed']}) | "
            f"**{f(a[LOCO]['mix'])}** | {f(a[LR]['mix'])} ({_interval(row, LOCO, LR)}) | "
            f"{f(a[TOP1]['mix'])} ({_interval(row, LOCO, TOP1)}) | "
            f"{row['oracle_baseline']} {f(a[ORACLE]['mix'])} | "
            f"{f(a[SELF]['mix'])} ({_interval(row, SELF, LOCO)}) | "
            f"{f(a[SENTENCES]['mix'])} ({_interval(row, SENTENCES, LOCO)}) |"
        )
    return "\n".join(lines)


def _loco_natural_table(r: dict[str, Any]) -> str:
    lines = [
        "| collection | natural failed | nested gate | LR(top-1, max BM25) | top-1 | score gap | "
        "oracle | self-calibrated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, row in r["collections"].items():
        if row["natural_failed"] < r["min_natural_failures"]:
            continue
        a = row["auc"]
        cells = [_cell(a[g]["natural"]) for g in (LOCO, LR, TOP1, GAP, ORACLE, SELF)]
        lines.append(f"| {name} | {row['natural_failed']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _loco_means(r: dict[str, Any]) -> str:
    s = r["summary"]
    lines = [
        f"| mean over the collections | AUC, natural + probes ({s[LOCO]['collections']}) | "
        f"AUC, natural alone ({s[LOCO]['natural_collections']}) |",
        "|---|---|---|",
    ]
    shown = (
        (LOCO, "**nested gate**"),
        (SELF, "self-calibrated (no qrels)"),
        (SENTENCES, "with sentence evidence (opt-in)"),
        (LR, "LR(top-1, max BM25), fitted on the others"),
        (ORACLE, "oracle: each collection's best simple predictor"),
        (FIXED, "best simple predictor, chosen on the others"),
        (TOP1, "top-1 cosine"),
        (SEED, "seed design (as written)"),
        (SEED004, "mean top-3 + coverage: (mean of the top-3 + keyword coverage) / 2"),
        (GAP, "score gap"),
    )
    for gate, label in shown:
        lines.append(f"| {label} | {f(s[gate]['mean_mix'])} | {f(s[gate]['mean_natural'])} |")
    return "\n".join(lines)


def _loco_goals(r: dict[str, Any]) -> str:
    return "\n".join(
        f"- {goal}: **{'met' if met else 'not met'}**"
        for goal, met in r["summary"]["goals"].items()
    )


def _loco_verdicts(r: dict[str, Any]) -> str:
    lines = [
        "| collection | gate | good on the fast path | its precision (natural) | good sent to "
        "IRRELEVANT | goal |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in r["collections"].items():
        for gate, label in ((LOCO, "nested"), (SELF, "self-calibrated")):
            v = row["verdicts"][gate]
            met = (
                (v["good_natural_fast_path"] or 0) >= 0.30
                and (v["natural_fast_path_precision"] or 0) >= 0.90
                and (v["good_natural_in_irrelevant"] or 0) <= 0.15
            )
            lines.append(
                f"| {name} | {label} | {_cell(v['good_natural_fast_path'])} | "
                f"{_cell(v['natural_fast_path_precision'])} | "
                f"{_cell(v['good_natural_in_irrelevant'])} | {_met(met)} |"
            )
    return "\n".join(lines)


def _loco_met(r: dict[str, Any]) -> str:
    counts = {
        label: sum(
            (row["verdicts"][gate]["good_natural_fast_path"] or 0) >= 0.30
            and (row["verdicts"][gate]["natural_fast_path_precision"] or 0) >= 0.90
            and (row["verdicts"][gate]["good_natural_in_irrelevant"] or 0) <= 0.15
            for row in r["collections"].values()
        )
        for gate, label in ((LOCO, "nested"), (SELF, "self"))
    }
    n = len(r["collections"])
    return (
        f"The nested gate meets the natural-traffic goal on {counts['nested']} of {n} "
        f"collections, the self-calibrated one on {counts['self']} of {n}"
    )


def _readme_table(r: dict[str, Any]) -> str:
    """The README's compact transfer table: the nested gate against the top-1 cosine."""
    lines = [
        "| collection | queries (failed) | nested gate | top-1 cosine | gain over top-1 (95 % "
        "interval) | mean top-3 + coverage | oracle: best simple predictor there | self-calibrated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    gains = []
    for name, row in r["collections"].items():
        a = row["auc"]
        gain = a[LOCO]["mix"] - a[TOP1]["mix"]
        gains.append(gain)
        lines.append(
            f"| {name} | {row['queries']} ({row['natural_failed']}) | **{f(a[LOCO]['mix'])}** | "
            f"{f(a[TOP1]['mix'])} | {gain:+.3f} ({_interval(row, LOCO, TOP1)}) | "
            f"{f(a[SEED004]['mix'])} | {f(a[ORACLE]['mix'])} ({row['oracle_baseline']}) | "
            f"{f(a[SELF]['mix'])} |"
        )
    s = r["summary"]
    lines.append(
        f"| **mean** | | **{f(s[LOCO]['mean_mix'])}** | {f(s[TOP1]['mean_mix'])} | "
        f"{s[LOCO]['mean_mix'] - s[TOP1]['mean_mix']:+.3f} (worst {min(gains):+.3f}) | "
        f"{f(s[SEED004]['mean_mix'])} | {f(s[ORACLE]['mean_mix'])} | {f(s[SELF]['mean_mix'])} |"
    )
    return "\n".join(lines)


def _readme_floor(r: dict[str, Any]) -> str:
    rows = r["collections"]
    above = [n for n, row in rows.items() if row["intervals"][f"{LOCO} - {TOP1}"][1] >= 0]
    ahead = [n for n, row in rows.items() if row["intervals"][f"{LOCO} - {TOP1}"][0] > 0]
    return (
        f"The nested gate is at or above the top-1 cosine, within its interval, on "
        f"{len(above)} of {len(rows)} collections, and significantly ahead on {len(ahead)}"
    )


PREVIOUS_SEVEN = ("cacm", "cranfield", "llmjudge", "med", "nfcorpus", "npl", "scifact")
"""The collections of an earlier nested run (its report: git show cada510:benchmarks/results/loco/loco.md)."""


def _readme_seven(r: dict[str, Any]) -> str:
    rows = r["collections"]
    mean = sum(rows[n]["auc"][LOCO]["mix"] for n in PREVIOUS_SEVEN) / len(PREVIOUS_SEVEN)
    return f"on the seven collections of the earlier nested run this gate's mean is {f(mean)}"


def _readme_natural(r: dict[str, Any]) -> str:
    s = r["summary"]
    return (
        f"On natural failures alone (the {s[LOCO]['natural_collections']} collections with at "
        f"least {r['min_natural_failures']}): nested gate {f(s[LOCO]['mean_natural'])}, score gap "
        f"{f(s[GAP]['mean_natural'])}, top-1 {f(s[TOP1]['mean_natural'])}"
    )


def _at_200(curve: dict[str, Any]) -> dict[str, Any]:
    """The learning curve's row at 200 labelled queries, or at all of them where the
    calibration half holds fewer."""
    row: dict[str, Any] = curve["200"] if "200" in curve else curve["all"]
    return row


def _learning_row(name: str) -> Quote:
    """A row of the learning curve: the gate refitted on n labelled queries."""

    def render(r: dict[str, Any]) -> str:
        curve = _s(r)["guarantee"]["learning_curve"]["rows"]
        if "all" not in curve:  # no natural failure to score the curve by
            return f"| {name} | no natural failure: no curve | | | | | | | |"
        cells = [
            f(curve[size]["grader-calibrated"]) if size in curve else "-"
            for size in ("25", "50", "100", "200")
        ]
        whole = curve["all"]
        return (
            f"| {name} | " + " | ".join(cells) + f" | {f(whole['grader-calibrated'])} "
            f"({whole['queries']:.0f}) | {f(whole['gate'])} | "
            f"{f(_at_200(curve)['best simple, chosen on the same labels'])} | "
            f"{f(whole['best simple on the scored half (oracle)'])} |"
        )

    return Quote(name, render)


def _learning_goal(r: dict[str, Any]) -> str:
    """The labels goal: the gate refitted on 200 labelled queries against the best simple
    predictor chosen on the same labels, averaged over the collections with a curve."""
    ours, theirs = [], []
    for name in COLLECTIONS:
        curve = _s(r[name])["guarantee"]["learning_curve"]["rows"]
        if "all" not in curve:  # no natural failure to score the curve by
            continue
        row = _at_200(curve)
        ours.append(row["grader-calibrated"])
        theirs.append(row["best simple, chosen on the same labels"])
    mine, best = sum(ours) / len(ours), sum(theirs) / len(theirs)
    return (
        f"With 200 labelled queries (the whole calibration half where a collection has fewer), "
        f"the grader-calibrated gate averages {f(mine)} over the {len(ours)} collections with a "
        f"curve, the best simple predictor chosen on the same labels {f(best)} (goal: at least "
        f"it, {_verdict(mine >= best)}); it is ahead on "
        f"{sum(a >= b for a, b in zip(ours, theirs, strict=True))} of {len(ours)}"
    )


def _guarantee_checks(r: dict[str, Any]) -> str:
    """Every guarantee row of every collection: the share of halvings whose scored half broke
    the bound, over all halvings (a refusal chooses no band and breaks nothing: the share the
    guarantee bounds by delta) and over those not refused."""

    def where(x: dict[str, Any]) -> str:
        return (
            f"{x['grader']}, {x['predictor']}, {x['target']} {1 - x['eps']:.2f}, {x['traffic']}, "
            f"{round(x['splits'] * (1 - x['refused']))} of {x['splits']} halvings not refused"
        )

    lines = [
        "| collection | rows scored | rows over delta + 0.05 | largest share, all halvings "
        "(its row) | largest share, halvings not refused |",
        "|---|---|---|---|---|",
    ]
    for name in COLLECTIONS:
        rows = [x for x in _s(r[name])["guarantee"]["rows"] if x["violations"] is not None]
        overall = {id(x): x["violations"] * (1 - x["refused"]) for x in rows}
        over = [x for x in rows if overall[id(x)] > x["delta"] + 0.05]
        top = max(rows, key=lambda x: overall[id(x)])
        cond = max(rows, key=lambda x: x["violations"])
        lines.append(
            f"| {name} | {len(rows)} | {len(over)} | {f(overall[id(top)], 2)} ({where(top)}) | "
            f"{f(cond['violations'], 2)} ({where(cond)}) |"
        )
    return "\n".join(lines)


def _guarantee_row(name: str) -> Quote:
    """A row of the README's guarantee table: calls saved at failure recall 0.90."""

    def render(r: dict[str, Any]) -> str:
        rows = [
            x
            for x in _s(r)["guarantee"]["rows"]
            if x["grader"] == "qrels" and x["traffic"] == "natural"
            and x["target"] == "recall" and x["eps"] == 0.1
        ]  # fmt: skip
        cell = {}
        for x in rows:
            cell[x["predictor"]] = (
                "refused" if x["saved"] is None else f"{f(x['saved'], 2)} ({f(x['violations'], 2)})"
            )
        n, rate = rows[0]["n"], rows[0]["failure_rate"]
        return (
            f"| {name} | {n} ({rate:.0%}) | {cell['gate']} | {cell['top-1']} | "
            f"{cell['best simple']} | {cell['grader-calibrated']} |"
        )

    return Quote(name, render)


def _self_table(r: dict[str, Any]) -> str:
    c = r["choice"]
    rows = r["collections"]
    lines = [
        "| collection | variant chosen on the others | self-calibrated | nested gate | gain |",
        "|---|---|---|---|---|",
    ]
    for name in rows:
        lines.append(
            f"| {name} | {r['self_choice'][name]['chosen']} | "
            f"{f(rows[name]['auc'][SELF]['mix'])} | {f(rows[name]['auc'][LOCO]['mix'])} | "
            f"{c['nested_gain'][name]:+.3f} |"
        )
    return "\n".join(lines)


def _self_choice(r: dict[str, Any]) -> str:
    c = r["choice"]
    return (
        f"Nested, self-calibration gains {c['nested_mean_gain']:+.3f} on average over the nested "
        f"gate (at or above it on {c['nested_at_or_above']} of {len(r['collections'])}); the "
        f"library's default variant, picked by the same rule on every collection, is "
        f"**{c['pick']}** ({c['pick_mean_gain']:+.3f}), and the library's defaults "
        + ("are it" if c["defaults_match"] else "are NOT it")
    )


def _set_cascade(r: dict[str, Any]) -> str:
    c = r["collections"]["llmjudge"]["set_cascade"]
    at30, at20 = c["cascade_auc_at_30pct"], c["median_label_set_cascade_auc_at_20pct"]
    best30 = max(v for v in at30.values() if v is not None)
    best20 = max(at20.values())
    return (
        f"On llmjudge, with the nested gate (failure AUC {f(c['gate_auc'])} alone, fitted "
        f"without llmjudge): the {c['label_sets']} LLM label sets used as gates alone score a "
        f"median {f(c['median_llm_as_gate_auc'])} and at best {f(c['best_llm_as_gate_auc'])} "
        f"({c['best_label_set']}); as the grader of a `SetEscalation` the best one reaches "
        f"{f(best30)} with 30 % of the lists escalated (goal: at least its "
        f"{f(c['best_llm_as_gate_auc'])} alone, "
        f"{_verdict(bool(c['goals']['best label set: cascade >= it alone at <= 30 % escalated']))}"
        f"), and the median label set {f(best20)} at 20 % (goal: the median "
        f"{f(c['median_llm_as_gate_auc'])}, "
        f"{_verdict(bool(c['goals']['median label set: cascade >= the median alone at <= 20 %']))})"
    )


def _calibrated_rows(r: dict[str, Any]) -> str:
    """The grader-calibrated rows refitted on every halving: the largest share broken."""
    rows = [
        x for x in _s(r)["guarantee"]["rows"]
        if x["predictor"] == "grader-calibrated" and x["violations"] is not None
    ]  # fmt: skip
    worst = max(rows, key=lambda x: x["violations"])
    return (
        f"its {len(rows)} grader-calibrated rows that are not always refused break their bound "
        f"on at most {f(worst['violations'], 2)} of the halvings ({worst['target']} "
        f"{1 - worst['eps']:.2f}, {worst['traffic']}; {worst['splits']} halvings)"
    )


def _stream_table(r: dict[str, Any]) -> str:
    """The stream ledger's table, as benchmarks/stream_variants.py wrote it."""
    lines = r["text"].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| variant |"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def _stream_lists(r: dict[str, Any]) -> str:
    """The ledger's sentence on the traffic it replayed."""
    found = re.search(r"^(\d+) natural lists, failure rate ([0-9.]+)", r["text"], re.M)
    if found is None:
        raise ValueError("the stream ledger has no 'N natural lists, failure rate F' line")
    return f"{found.group(1)} natural lists, failure rate {found.group(2)}"


def _stream_kappa(r: dict[str, Any]) -> str:
    """The stream section's chunk agreement on llmjudge: the chunk stage refitted on a
    grader's chunk grades of half the queries, against people on the other half."""
    kappa = _s(r)["stream"]["chunk_kappa"]
    llm = {name: row for name, row in kappa.items() if name.startswith("llm:")}
    learned = sorted(row["learned"] for row in llm.values())
    graders = sorted(row["grader"] for row in llm.values())
    best = max(llm, key=lambda name: llm[name]["grader"])
    return (
        f"refitted on an LLM label set's chunk grades of half the queries, the chunk stage "
        f"agrees with people on the other half at a median kappa of "
        f"{f(learned[len(learned) // 2], 2)} over the {len(llm)} label sets (at most "
        f"{f(learned[-1], 2)}; on the qrels {f(kappa['qrels']['learned'], 2)}), where the label "
        f"sets themselves reach a median {f(graders[len(graders) // 2], 2)} and at best "
        f"{f(llm[best]['grader'], 2)} ({best[4:]})"
    )


def _vs_ref(r: dict[str, Any]) -> str:
    found = re.search(r"Ratio: \*\*([0-9.]+) x\*\*", r["text"])
    if found is None:
        raise ValueError("evaluator_vs_ref.md has no 'Ratio: **N x**' line")
    ratio = float(found.group(1))
    return (
        f"count on the same inputs is {ratio:.2f} x that of the commit the analyzer was "
        "rewritten from"
    )


NO_EXPANSION = "no expansion (dense + BM25 of the query)"


def _shipped(r: dict[str, Any]) -> str:
    sel = r["selection"]
    votes = sel["votes"]
    tied = sorted(n for n in votes if n != sel["shipped"] and votes[n] == votes[sel["shipped"]])
    tie = f", tied with {', '.join(tied)}: the tie goes to the better mean nDCG@10" if tied else ""
    return f"ships {sel['shipped']}, chosen by {votes[sel['shipped']]} of {len(sel['folds'])} folds{tie}"


def _held_out_row(name: str) -> Quote:
    def render(r: dict[str, Any]) -> str:
        fold = r["selection"]["folds"][name]
        t = fold["test"]
        return (
            f"| {name} | {fold['chosen']} | {f(t['variant_ndcg@10'], 4)} | "
            f"{f(t['hybrid_ndcg@10'], 4)} | {f(t['bare_ndcg@10'], 4)} | "
            f"{_met(t['router_ge_hybrid'])} | {f(t['corrected_over_bare_p50'], 2)} |"
        )

    return Quote("corrections", render)


def _fast_path_loss(r: dict[str, Any]) -> str:
    route = r["runs"]["scifact:test"]["variants"][NO_EXPANSION]["routes"]["relevant"]
    return (
        f"on SciFact's {route['queries']} fast-path queries the bare list scores nDCG@10 "
        f"{f(route['ndcg@10_bare'], 4)} and always-hybrid {f(route['ndcg@10_hybrid'], 4)}"
    )


def _ndcg_of(r: dict[str, Any], collection: str, variant: str) -> str:
    run = r["runs"][f"{collection}:test"]
    found = run["variants"].get(variant) or run["references"][variant]
    return f(found["ndcg@10"], 4)


def _synonyms(r: dict[str, Any]) -> str:
    both = "synonyms, dense + BM25 (expand_on=both)"
    lexical = "synonyms, BM25 only (expand_on=lexical)"
    slow = r["runs"]["med:test"]["variants"][both]["latency"]["corrected_over_bare_p50"]
    others = [c for c in COLLECTIONS if c not in ("scifact", "nfcorpus")]
    return (
        f"synonyms on the BM25 side: {_ndcg_of(r, 'scifact', lexical)} against "
        f"{_ndcg_of(r, 'scifact', NO_EXPANSION)} on SciFact, {_ndcg_of(r, 'nfcorpus', lexical)} "
        f"against {_ndcg_of(r, 'nfcorpus', NO_EXPANSION)} on NFCorpus, no higher on "
        f"{sum(_ndcg_of(r, c, lexical) <= _ndcg_of(r, c, NO_EXPANSION) for c in others)} of the "
        f"other {len(others)}; "
        f"re-embedded as well, they help on Medline ({_ndcg_of(r, 'med', both)} against "
        f"{_ndcg_of(r, 'med', NO_EXPANSION)}) at {f(slow, 1)} x the bare retrieval"
    )


def _verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def _quality_row(r: dict[str, Any]) -> str:
    router, hybrid = _ndcg(r, "CRAG router"), _ndcg(r, "dense + BM25 RRF, every query")
    return (
        f"**{_ndcg(r, 'dense (bare)')} -> {router}** "
        f"| BM25 {_ndcg(r, 'BM25')}; dense + BM25 RRF on every query {hybrid} | >= always-hybrid "
        f"| {_met(float(router) >= float(hybrid))} |"
    )


def _context_row(r: dict[str, Any]) -> str:
    m = _s(r)["context"]["methods"]
    router, top = m["router"], m["top-k"]
    hybrid, hybrid_refined = m["always-hybrid"], m["always-hybrid, refined"]
    recall = router["evidence_recall"]
    ok = recall >= max(hybrid["evidence_recall"], hybrid_refined["evidence_recall"])
    return (
        f"(refined to {_s(r)['context']['token_budget']} tokens) | **{f(recall)}**, {f(router['tokens_mean'], 0)} tokens | always-hybrid "
        f"{f(hybrid['evidence_recall'])} (refined {f(hybrid_refined['evidence_recall'])}), top-k "
        f"{f(top['evidence_recall'])} ({f(top['tokens_mean'], 0)} tokens) | >= always-hybrid, "
        f"fewer tokens than top-k | {_met(ok and router['tokens_mean'] < top['tokens_mean'])} |"
    )


def _router_cost_row(r: dict[str, Any]) -> str:
    router = _s(r)["cost"]["router_ms"]
    corrected = router["corrected"]["over_bare_p50"]
    return (
        f"{f(router['fast path']['over_bare_p50'], 2)} x / {f(corrected, 2)} x the bare "
        f"retrieval of the same queries | | corrected <= 2.5 x | {_met(corrected <= 2.5)} |"
    )


QUOTES: list[Quote] = [
    # does the gate transfer? nested leave one collection out
    Quote("loco", _readme_table),
    Quote("loco", _readme_floor),
    Quote("loco", _readme_natural),
    Quote("loco", _readme_seven),
    # calls saved at a guaranteed risk, per collection
    *(_guarantee_row(name) for name in COLLECTIONS),
    *(_learning_row(name) for name in COLLECTIONS),
    Quote("collections", _learning_goal),
    Quote("collections", _guarantee_checks),
    Quote("loco", _loco_table),
    Quote("loco", _loco_natural_table),
    Quote("loco", _loco_means),
    Quote("loco", _loco_goals),
    Quote("loco", _loco_verdicts),
    Quote("loco", _loco_met),
    Quote("loco", _set_cascade),
    # each collection in its own run
    *(_collection_row(name) for name in COLLECTIONS),
    Quote(
        "scifact",
        lambda r: (
            "On SciFact test the gate fitted on SciFact's train split reaches "
            f"{_auc(r, r['gates']['label_fitted'])}"
        ),
    ),
    # how to self-calibrate
    Quote("self_calibration", _self_table),
    Quote("self_calibration", _self_choice),
    # the SciFact headline
    Quote(
        "scifact",
        lambda r: (
            f"SciFact test ({_s(r)['quality']['queries']} claims; k = {r['k']}; "
            f"{_s(r)['failure']['natural']} natural retrievals, {_s(r)['failure']['natural_failed']} "
            f"of them failed"
        ),
    ),
    Quote("scifact", _quality_row),
    Quote("llmjudge", _quality_row),
    Quote(
        "scifact",
        lambda r: (
            f"Recall@100, bare dense -> router | "
            f"{_ndcg(r, 'dense (bare)', 'recall@100')} -> {_ndcg(r, 'CRAG router', 'recall@100')} |"
        ),
    ),
    Quote(
        "scifact",
        lambda r: (
            f"fast-path queries changed by the router | "
            f"{_s(r)['quality']['fast_path']['queries'] - _s(r)['quality']['fast_path']['identical_to_bare']}"
            f" of {_s(r)['quality']['fast_path']['queries']} (identical lists) |"
        ),
    ),
    Quote("scifact", _context_row),
    Quote("llmjudge", _context_row),
    Quote(
        "scifact",
        lambda r: (
            f"**{f(_s(r)['cost']['evaluator_warm_ms']['p50'], 2)} / "
            f"{f(_s(r)['cost']['evaluator_warm_ms']['p99'], 2)} ms** = "
            f"{f(_s(r)['cost']['evaluator_warm_over_bare_p50'])} x the bare retrieval | bare: "
            f"MiniLM encode + FAISS, {f(_s(r)['cost']['bare_retrieval_ms']['p50'], 1)} ms p50 |"
        ),
    ),
    Quote("scifact", _router_cost_row),
    Quote("llmjudge", _router_cost_row),
    Quote(
        "scifact",
        lambda r: (
            "Cold chunk analysis (new texts, not yet tokenised) costs "
            f"{f(_s(r)['cost']['evaluator_cold_ms']['p50'], 1)} ms for {r['k']} chunks"
        ),
    ),
    # per-chunk agreement and the transfer to llmjudge
    Quote(
        "llmjudge",
        lambda r: (
            f"llmjudge ({thousands(_s(r)['agreement']['pairs'])} judged MS MARCO passages, "
            f"{_s(r)['agreement']['queries']} queries; 2-fold by query)"
        ),
    ),
    Quote(
        "llmjudge",
        lambda r: (
            "Cohen's kappa vs people "
            f"**{f(_s(r)['agreement']['kappa_vs_human']['fitted']['fixed_split'])}** (the gate's "
            f"chunk stage fitted on the other half; random splits {_llm_share(r)} ± "
            f"{f(_s(r)['agreement']['kappa_vs_human']['fitted']['random_splits_sd'])}), MiniLM "
            f"cosine alone {f(_s(r)['agreement']['kappa_vs_human']['cosine']['fixed_split'])}, the "
            f"{len(_s(r)['agreement']['llm_graders'])} LLM graders median "
            f"{f(_s(r)['agreement']['llm_kappa_median'])} and best "
            f"{f(_s(r)['agreement']['llm_kappa_best'])}, at "
            f"{f(_s(r)['agreement']['evaluator_ms_per_passage'])} ms per passage"
        ),
    ),
    Quote(
        "llmjudge",
        lambda r: (
            f"per-query calibration that {_s(r)['agreement']['queries'] // 2} training "
            "queries cannot teach"
        ),
    ),
    # the evaluator micro-benchmark: cold analysis, cache tiers, paths; the start-up
    Quote("micro", _micro_speed),
    Quote("micro", _micro_scifact),
    Quote("micro", _micro_readme_router),
    Quote("micro", _micro_cache),
    Quote("micro", _micro_hit),
    Quote("startup", _startup),
    Quote("micro", _micro_paths),
    # a corpus of one's own: index, retrieve --index, serve; the service under load
    Quote("own", _own_index),
    Quote("own", _own_serve),
    Quote("own_gate", _own_gate_summary),
    Quote("own_gate", _own_gate_cost),
    Quote("own_gate", _own_gate_doc),
    Quote("own_gate", _own_gate_share),
    Quote("serve_load", _serve_load),
    Quote("tokens", _tokens),
    # a million documents
    Quote("scale", _scale_goals),
    Quote("scale", _scale_analyses),
    Quote("scale", _scale_faiss),
    # the cascade on llmjudge
    Quote("cascade", _cascade_curve),
    Quote("vs_ref", _vs_ref),
    Quote("arguana_calibrated", _calibrated_rows),
    Quote("stream", _stream_table),
    Quote("llmjudge", _stream_kappa),
    Quote("stream", _stream_lists),
    Quote("stream_5pct", _stream_table),
    Quote("stream_5pct", _stream_lists),
    # which correction pays
    Quote("corrections", _shipped),
    *(_held_out_row(name) for name in COLLECTIONS),
    Quote("corrections", _fast_path_loss),
    Quote("corrections", _synonyms),
    # load with faults
    Quote(
        "load",
        lambda r: f"runs {thousands(r['queries'])} async queries, {r['concurrency']} at a time",
    ),
    Quote(
        "load",
        lambda r: (
            f"Last run: {thousands(r['results'])} results, "
            f"{r['web']['flagged'] + r['cache']['flagged']} failures flagged "
            f"({r['web']['flagged']} web, {r['cache']['flagged']} cache), "
            f"{r['unflagged_failures']} unflagged, {r['hangs']} hangs"
        ),
    ),
    Quote(
        "load",
        lambda r: (
            f"{sum(r['web']['calls_that_met_an_injected_fault'].values())} web calls met "
            f"an injected fault and {r['web']['circuit_refusals']} were refused by the open "
            f"circuit ({r['web']['circuit_opens']} openings)"
        ),
    ),
    Quote(
        "load",
        lambda r: (
            f"p50 {round(r['latency_ms']['overall']['p50'])} ms, p99 "
            f"{f(r['latency_ms']['overall']['p99'] / 1000.0, 2)} s"
        ),
    ),
]


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return {"text": text}
    data: dict[str, Any] = json.loads(text)
    return data


DOCUMENTS = ("README.md", "docs/*.md")
"""Where the quotes are looked for: the README and the documentation beside it."""


def documentation() -> str:
    """The README and every page of docs/, as one text."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def check(readme: str | None = None) -> list[tuple[Quote, str]]:
    """The quotes missing from the README and docs/, each with the text it should read."""
    text = " ".join((readme or documentation()).split())
    loaded = {name: _load(path) for name, path in FILES.items()}
    loaded["collections"] = {name: loaded[name] for name in COLLECTIONS}
    missing = []
    for quote in QUOTES:
        try:
            expected = " ".join(quote.text(loaded[quote.source]).split())
        except (KeyError, IndexError, TypeError) as exc:
            # a results file without what the quote reads (an older run's format): stale too
            expected = f"<cannot render from the results file: {type(exc).__name__} {exc}>"
        if expected not in text:
            missing.append((quote, expected))
    return missing


def main() -> int:
    missing = check()
    for quote, expected in missing:
        where = (
            FILES[quote.source].relative_to(ROOT)
            if quote.source in FILES
            else "benchmarks/results/*/results.json"
        )
        print(f"README or docs/ is stale ({where}): {expected}")
    if not missing:
        print(f"every README number ({len(QUOTES)} quotes) matches its results file")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
