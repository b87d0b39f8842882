"""``crag-heuristic bench``: every benchmark on one BEIR folder, written as a report.

    crag-heuristic bench --data-dir DIR [--k 10] [--profile NAME|FILE] [--out DIR]

Writes ``results.json`` (every number), ``report.md`` (tables a person can
read, with the command that made them) and PNG plots into ``--out``. Sections
that need what a folder lacks are skipped with a reason: agreement and
cascade need ``llm_judgments/``; everything needs corpus vectors (``corpus_minilm_l6_v2.npy``)
and encodes missing query vectors with the ``bench`` extra.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._calibration.gate import fit_gate
from .._calibration.self_calibration import DEFAULT_SELF_QUERIES, calibrate_self
from .._config import EvaluatorConfig, load_config
from .._exceptions import InputError
from .._version import __version__
from . import plots
from .agreement import agreement_section
from .cascade import GOAL_KAPPA, GOAL_SHARE, READ_AT, cascade_section
from .context import context_section
from .cost import cost_section
from .failure import BASELINES, failure_section
from .guarantee_section import guarantee_lines, guarantee_section
from .pipeline import (
    HarnessRetriever,
    LoopProgress,
    Prepared,
    labels_for,
    prepare,
    retrievals_for,
)
from .pipeline import progress as progress_bar
from .quality import BARE, quality_section
from .retrievals import chunks_of
from .set_cascade import set_cascade_section
from .stream_section import stream_lines, stream_section

SECTIONS = (
    "failure",
    "agreement",
    "cascade",
    "set-cascade",
    "guarantee",
    "stream",
    "quality",
    "cost",
    "context",
)


def _log(message: str) -> None:
    sys.stderr.write(f"[bench] {message}\n")
    sys.stderr.flush()


def run_bench(
    data_dir: str | Path,
    out: str | Path,
    *,
    k: int = 10,
    profile: EvaluatorConfig | str | None = None,
    sections: Sequence[str] = SECTIONS,
    cache_dir: str | Path | None = None,
    encode: bool = True,
    command: str = "",
    agreement_splits: int = 20,
    self_calibrate: bool = True,
    self_queries: int = DEFAULT_SELF_QUERIES,
    relevant_min: int | None = None,
    token_budget: int = 512,
    guarantee_splits: int = 200,
    stream_orders: int = 20,
    guarantee_calibrated_splits: int | None = None,
    progress: Callable[[str], None] = _log,
    loops: LoopProgress = progress_bar,
) -> dict[str, Any]:
    """Run the chosen sections; write results.json, report.md and plots to ``out``.

    ``agreement_splits`` random 2-fold splits give the spread of the agreement
    kappas (20 for the committed reports; each costs two fits of the chunk stage).
    The failure section grades with the profile, with that profile
    self-calibrated on the folder's corpus (``self_calibrate``:
    ``self_queries`` simulated queries encoded with MiniLM, no qrels read), and
    with a gate fitted on the folder's train split when it has one.
    ``relevant_min`` overrides the folder's relevance threshold.
    ``progress`` is told each section as it starts (stderr by default), ``loops``
    wraps the long loops (a progress bar on a terminal by default).
    ``stream_orders``: the stream section's random orders of the traffic (20 in the
    committed reports).
    ``guarantee_splits``: the guarantee section's random halvings (200 in the
    committed reports; a tenth of them, at least 2, refit the grader-calibrated gate, and
    a twentieth, at least 2, make its learning curve); ``guarantee_calibrated_splits``:
    how many refit it instead (at most ``guarantee_splits``; each costs a refit per grader
    and traffic, and 20 halvings measure a row's share of broken halvings with a standard
    error of 0.07 at delta 0.1, 200 with 0.02).

    Raises:
        InputError: ``agreement_splits`` is not an integer >= 0.
    """
    if isinstance(agreement_splits, bool) or not isinstance(agreement_splits, int):
        raise InputError(f"agreement_splits must be an integer >= 0, got {agreement_splits!r}")
    if agreement_splits < 0:
        raise InputError(f"agreement_splits must be an integer >= 0, got {agreement_splits!r}")
    if isinstance(guarantee_splits, bool) or not isinstance(guarantee_splits, int):
        raise InputError(f"guarantee_splits must be an integer >= 1, got {guarantee_splits!r}")
    if guarantee_splits < 1:
        raise InputError(f"guarantee_splits must be an integer >= 1, got {guarantee_splits!r}")
    calibrated_splits = (
        max(2, guarantee_splits // 10)
        if guarantee_calibrated_splits is None
        else guarantee_calibrated_splits
    )
    if (
        isinstance(calibrated_splits, bool)
        or not isinstance(calibrated_splits, int)
        or not 1 <= calibrated_splits <= max(guarantee_splits, 2)
    ):
        raise InputError(
            "guarantee_calibrated_splits must be an integer in [1, guarantee_splits], "
            f"got {guarantee_calibrated_splits!r}"
        )
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise InputError(f"token_budget must be an integer >= 1, got {token_budget!r}")
    out = Path(out)
    config = load_config(profile)
    started = time.perf_counter()
    progress(f"loading {data_dir}")
    prepared = prepare(
        data_dir,
        cache_dir=cache_dir or out / "cache",
        encode=encode,
        relevant_min=relevant_min,
        loops=loops,
    )
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "collection": prepared.collection.name,
        "command": command,
        "profile": config.name,
        "profile_description": config.description,
        "library_version": __version__,
        "python": sys.version.split()[0],
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "k": k,
        "relevant_min": prepared.collection.relevant_min,
        "profile_fitted_on_this_test_split": _fitted_on_test(config, prepared.collection.name),
        "sections": {},
        "skipped": {},
        "plots": [],
    }
    failure = None
    if "failure" in sections:
        progress("failure detection: natural + leave-relevant-out probes")
        profiles = {config.name: config}
        profiles.update(_other_gates(prepared, config, k, results, self_calibrate, self_queries))
        if config.name != "synapse":
            profiles["synapse"] = EvaluatorConfig.from_profile("synapse")
        failure = failure_section(prepared, profiles, k)
        results["gates"] = {"default": config.name, **results.get("gates", {})}
        results["sections"]["failure"] = failure.summary
        failed = np.array([r.failed for r in failure.retrievals])
        plots.roc_plot(
            failed,
            failure.scores,
            out / "roc.png",
            f"{prepared.collection.name}: failed retrievals at k={k}",
        )
        plots.verdict_plot(
            failure.summary["verdicts"][config.name],
            out / "verdicts.png",
            f"verdicts of {config.name} ({prepared.collection.name})",
        )
        results["plots"] += ["roc.png", "verdicts.png"]
        if config.model is not None:
            plots.reliability_plot(
                failure.scores[config.name],
                ~failed,
                out / "reliability.png",
                f"{config.name}: calibration on {prepared.collection.name}",
            )
            results["plots"].append("reliability.png")
    if "agreement" in sections:
        progress("per-chunk agreement with people and LLM graders")
        agreement = agreement_section(prepared, config, repeats=agreement_splits)
        if agreement is None:
            results["skipped"]["agreement"] = "no llm_judgments/ folder with graded test qrels"
        else:
            results["sections"]["agreement"] = agreement
    if "cascade" in sections:
        progress("cascade: agreement with people against the share escalated to LLM graders")
        cascade = cascade_section(prepared, config)
        if cascade is None:
            results["skipped"]["cascade"] = "no llm_judgments/ folder with graded test qrels"
        else:
            results["sections"]["cascade"] = cascade
            plots.cascade_plot(
                cascade,
                out / "cascade.png",
                f"cascade on {prepared.collection.name}: gate + LLM label set",
                goal=(GOAL_KAPPA, GOAL_SHARE),
            )
            results["plots"].append("cascade.png")
    if "set-cascade" in sections:
        progress("set-level cascade: failure AUC against the share of lists escalated")
        if failure is None:
            failure = failure_section(prepared, {config.name: config}, k)
        set_cascade = set_cascade_section(
            prepared,
            failure.retrievals,
            failure.scores[config.name],
            config.thresholds.relevant,
            gate_name=config.name
            + (
                " (fitted on this test split: in-sample)"
                if _fitted_on_test(config, results["collection"])
                else ""
            ),
        )
        if set_cascade is None:
            results["skipped"]["set-cascade"] = "no llm_judgments/ folder"
        else:
            results["sections"]["set-cascade"] = set_cascade
            plots.set_cascade_plot(
                set_cascade,
                out / "set_cascade.png",
                f"set-level cascade on {prepared.collection.name}: gate + LLM label set",
            )
            results["plots"].append("set_cascade.png")
    if "guarantee" in sections:
        progress("guarantee: grader calls saved at a guaranteed risk")
        results["sections"]["guarantee"] = guarantee_section(
            prepared,
            config,
            k,
            splits=guarantee_splits,
            calibrated_splits=calibrated_splits,
            learning_splits=max(2, guarantee_splits // 20),
            log=progress,
        )
    if "stream" in sections:
        progress("stream: a cascade that learns from its grader")
        results["sections"]["stream"] = stream_section(
            prepared, config, k, orders=stream_orders, log=progress
        )
    if "quality" in sections:
        progress("retrieval quality: bare dense vs the CRAG router")
        results["sections"]["quality"] = quality_section(prepared, config)
    if "cost" in sections:
        progress("cost: evaluator and router against the bare retrieval")
        if failure is None:
            failure = failure_section(prepared, {config.name: config}, k)
        cost = cost_section(prepared, config, failure.retrievals)
        samples = cost.pop("samples_ms")
        results["sections"]["cost"] = cost
        plots.latency_plot(
            {
                "bare retrieval": samples["bare"],
                "evaluator (warm)": samples["evaluator_warm"],
                "evaluator (cold)": samples["evaluator_cold"],
                "router fast path": samples["fast path"],
                "router corrected": samples["corrected"],
            },
            out / "latency.png",
            f"latency per query ({prepared.collection.name})",
        )
        results["plots"].append("latency.png")
    if "context" in sections:
        progress("context: what reaches the generator, per method")
        context = context_section(prepared, config, k=k, budget=token_budget)
        results["sections"]["context"] = context
        plots.context_plot(
            context,
            out / "context.png",
            f"{prepared.collection.name}: evidence recall vs tokens sent (k={k})",
        )
        results["plots"].append("context.png")
    results["seconds"] = time.perf_counter() - started
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out / "report.md").write_text(render_report(results), encoding="utf-8")
    progress(f"wrote {out / 'report.md'} in {results['seconds']:.0f} s")
    return results


SELF_CALIBRATED = "self-calibrated (no qrels)"
LABEL_FITTED = "fitted on the train split (qrels)"


def _fitted_on_test(config: EvaluatorConfig, collection: str) -> bool:
    """Whether the profile was fitted on this collection's test split (its numbers
    here are then in-sample: the leave-one-collection-out table has the held-out ones)."""
    return config.model is not None and f"{collection} test" in config.model.fitted_on


def _other_gates(
    prepared: Prepared,
    config: EvaluatorConfig,
    k: int,
    results: dict[str, Any],
    self_calibrate: bool,
    self_queries: int,
) -> dict[str, EvaluatorConfig]:
    """The profile self-calibrated on this corpus, and a gate fitted on the train split."""
    gates: dict[str, EvaluatorConfig] = {}
    names: dict[str, str] = {}
    if not self_calibrate:
        results["skipped"]["self-calibration"] = "turned off"
    elif config.model is None:
        results["skipped"]["self-calibration"] = f"{config.name} has no fitted model to start from"
    elif not prepared.encode:
        results["skipped"]["self-calibration"] = "simulated queries need MiniLM (--no-encode)"
    else:
        retriever = HarnessRetriever(prepared)
        collection = prepared.collection
        fitted = calibrate_self(
            retriever,
            list(chunks_of(collection, [(d, 0.0) for d in collection.doc_ids])),
            k=k,
            queries=self_queries,
            prior=config,
            corpus_stats=prepared.stats,
            analyzer=prepared.analyzer,
            neighbours=retriever.neighbours,
            progress=prepared.loops,
            name="self-calibrated",
        )
        gates[SELF_CALIBRATED] = fitted.config
        names["self_calibrated"] = SELF_CALIBRATED
        results["self_calibration"] = fitted.report
    if "train" in prepared.collection.qrels:
        examples = retrievals_for(prepared, labels_for(prepared.collection, "qrels", "train"), k)
        gates[LABEL_FITTED] = fit_gate(
            examples,
            base=config.replace(model=None),
            corpus_stats=prepared.stats,
            name="label-fitted",
            fitted_on=f"{prepared.collection.name} train split, qrels",
        ).config
        names["label_fitted"] = LABEL_FITTED
    results["gates"] = names
    return gates


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _other_gate_labels(results: dict[str, Any]) -> list[str]:
    named = results.get("gates", {})
    return [named[key] for key in ("self_calibrated", "label_fitted") if key in named]


def headline(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(measure, value, note) rows for the top of the report (and the README)."""
    rows = []
    s = results["sections"]
    name = results["profile"]
    if "failure" in s:
        f = s["failure"]
        baselines = {b: f["auc"][b]["natural+probes"] or 0.0 for b in BASELINES}
        best = max(baselines, key=lambda b: baselines[b])
        in_sample = (
            " (fitted on this test split: in-sample)"
            if results.get("profile_fitted_on_this_test_split")
            else ""
        )
        gates = [(f"`{name}` (shipped default){in_sample}", name)]
        prior_in_sample = (
            " (its prior was fitted on this test split: in-sample; the leave-one-collection-out "
            "run has the honest number)"
            if results.get("profile_fitted_on_this_test_split")
            else ""
        )
        titles = {
            SELF_CALIBRATED: f"`{name}` self-calibrated on this corpus (no qrels){prior_in_sample}",
            LABEL_FITTED: "a gate fitted on this folder's train split (qrels)",
        }
        gates += [(titles[label], label) for label in _other_gate_labels(results)]
        for title, gate in gates:
            auc = f["auc"][gate]["natural+probes"]
            rows.append(
                (
                    f"failure ROC-AUC, natural + probes: {title}",
                    _f(auc),
                    f"{(auc or 0.0) - baselines[best]:+.3f} vs the best simple baseline "
                    f"({best} {_f(baselines[best])})",
                )
            )
        for title, gate in gates:
            v = f["verdicts"][gate]
            rows.append(
                (
                    f"fast path: share of good natural retrievals, precision: {title}",
                    f"{_f(v['good_natural_fast_path'])}, {_f(v['natural_fast_path_precision'])}",
                    f"precision with probes {_f(v['fast_path_precision'])}; good natural "
                    f"retrievals sent to IRRELEVANT {_f(v['good_natural_in_irrelevant'])}",
                )
            )
    if "agreement" in s:
        a = s["agreement"]
        rows.append(
            (
                "per-chunk Cohen's kappa vs people (2-fold)",
                _f(a["kappa_vs_human"]["fitted"]["fixed_split"]),
                f"LLM graders median {_f(a['llm_kappa_median'])}, best {_f(a['llm_kappa_best'])}; "
                f"MiniLM cosine {_f(a['kappa_vs_human']['cosine']['fixed_split'])}",
            )
        )
    if "cascade" in s:
        c = s["cascade"]
        best = max(c["graders"].items(), key=lambda kv: kv[1]["kappa_alone"])
        at = best[1]["at"]
        rows.append(
            (
                f"cascade kappa at {GOAL_SHARE:.0%} escalated (best LLM label set)",
                f"{_f(at['band'][f'{GOAL_SHARE:.2f}'])} band / "
                f"{_f(at['budget'][f'{GOAL_SHARE:.2f}'])} budget",
                f"{best[0]} alone {_f(best[1]['kappa_alone'])}, gate alone {_f(c['gate_kappa'])}; "
                f"goal kappa >= {GOAL_KAPPA} at <= {GOAL_SHARE:.0%}: "
                f"{'met' if c['goal']['met'] else 'not met'}",
            )
        )
    if "quality" in s:
        q = s["quality"]["overall"]
        rows.append(
            (
                "nDCG@10 bare dense -> CRAG router",
                f"{_f(q[BARE]['ndcg@10'], 4)} -> {_f(q['CRAG router']['ndcg@10'], 4)}",
                f"Recall@100 {_f(q[BARE]['recall@100'])} -> {_f(q['CRAG router']['recall@100'])}",
            )
        )
        fp = s["quality"]["fast_path"]
        rows.append(
            (
                "fast-path queries left identical to bare",
                f"{fp['identical_to_bare']} / {fp['queries']}",
                "",
            )
        )
    if "context" in s:
        m = s["context"]["methods"]
        rows.append(
            (
                "context evidence recall: router / always-hybrid / top-k",
                f"{_f(m['router']['evidence_recall'])} / "
                f"{_f(m['always-hybrid, refined']['evidence_recall'])} / "
                f"{_f(m['top-k']['evidence_recall'])}",
                f"tokens {_f(m['router']['tokens_mean'], 0)} (router, refined to "
                f"{s['context']['token_budget']}) vs {_f(m['top-k']['tokens_mean'], 0)} (top-k)",
            )
        )
    if "cost" in s:
        c = s["cost"]
        rows.append(
            (
                "evaluator p50 / p99 per query (warm)",
                f"{_f(c['evaluator_warm_ms']['p50'])} / {_f(c['evaluator_warm_ms']['p99'])} ms",
                f"{_f(c['evaluator_warm_over_bare_p50'], 3)} x the bare retrieval "
                f"({_f(c['bare_retrieval_ms']['p50'])} ms p50, {c['query_encoder']})",
            )
        )
    return rows


def render_report(results: dict[str, Any]) -> str:
    """The Markdown report."""
    lines = [
        f"# crag-heuristic benchmark: {results['collection']}",
        "",
        f"Profile `{results['profile']}` ({results['profile_description'] or 'no description'}); "
        f"k = {results['k']}; crag-heuristic {results['library_version']}, Python "
        f"{results['python']}, {results['machine']}; {results['seconds']:.0f} s.",
        "",
        f"Command: `{results['command']}`" if results["command"] else "",
        "",
        "| measure | value | baseline / note |",
        "|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in headline(results)]
    warned = results.get("self_calibration", {}).get("warnings") or []
    if warned:
        lines += ["", "**Self-calibration warnings** (the profile's header says the same):", ""]
        lines += [f"- {message}" for message in warned]
    s = results["sections"]
    if "failure" in s:
        f = s["failure"]
        lines += [
            "",
            "## Failure detection",
            "",
            f"{f['natural']} natural retrievals ({f['natural_failed']} failed) and {f['probes']} "
            f"leave-relevant-out probes (all failed), {f['split']} split.",
            "",
            "| gate | AUC natural + probes | AUC natural |",
            "|---|---|---|",
        ]
        for name, auc in sorted(f["auc"].items(), key=lambda kv: -(kv[1]["natural+probes"] or 0)):
            lines.append(f"| {name} | {_f(auc['natural+probes'])} | {_f(auc['natural'])} |")
        for name, table in f["verdicts"].items():
            lines += [
                "",
                f"Verdicts of `{name}`:",
                "",
                "| verdict | good | failed (natural) | probes |",
                "|---|---|---|---|",
            ]
            for verdict, row in table["counts"].items():
                lines.append(
                    f"| {verdict} | {row['good']} | {row['failed_natural']} | {row['probe']} |"
                )
            lines.append("")
            lines.append(
                f"fast-path precision {_f(table['fast_path_precision'])}, failure recall "
                f"{_f(table['failure_recall'])}, RELEVANT share {_f(table['share_relevant'])}, "
                f"probes in IRRELEVANT {_f(table['probes_in_irrelevant'])}, good natural sent to "
                f"IRRELEVANT {_f(table['good_natural_in_irrelevant'])}; on natural traffic only: "
                f"precision {_f(table['natural_fast_path_precision'])}, failure recall "
                f"{_f(table['natural_failure_recall'])}."
            )
    if "agreement" in s:
        a = s["agreement"]
        lines += [
            "",
            "## Per-chunk agreement",
            "",
            f"{a['pairs']} judged (query, passage) pairs over {a['queries']} queries, "
            f"{_f(a['relevant_share'])} relevant. Cohen's kappa of the per-chunk verdict vs "
            "people, 2-fold by query (fixed split; mean and sd over "
            f"{a.get('random_splits', 20)} random splits).",
            "",
            "| scorer | kappa (fixed split) | kappa (random splits) |",
            "|---|---|---|",
        ]
        labels = {
            "fitted": "gate, chunk stage fitted on the other half",
            "shipped": "gate as shipped (band fitted on the other half)",
            "cosine": "MiniLM cosine alone (threshold on the other half)",
        }
        for name, k in a["kappa_vs_human"].items():
            lines.append(
                f"| {labels[name]} | {_f(k['fixed_split'])} | "
                f"{_f(k['random_splits_mean'])} ± {_f(k['random_splits_sd'])} |"
            )
        lines += [
            "",
            f"LLM label sets vs people: median {_f(a['llm_kappa_median'])}, best "
            f"{_f(a['llm_kappa_best'])}; the gate beats {a['llm_beaten_by_ours']} of "
            f"{len(a['llm_graders'])}. Evaluator cost {_f(a['evaluator_ms_per_passage'], 4)} ms "
            "per passage.",
            "",
            "| LLM label set | kappa vs people | kappa gate vs it |",
            "|---|---|---|",
        ]
        for name, row in sorted(a["llm_graders"].items(), key=lambda kv: -kv[1]["kappa_vs_human"]):
            lines.append(
                f"| {name} | {_f(row['kappa_vs_human'])} | {_f(row['kappa_ours_vs_it'])} |"
            )
    if "cascade" in s:
        lines += _cascade_lines(s["cascade"])
    if "set-cascade" in s:
        lines += _set_cascade_lines(s["set-cascade"])
    if "guarantee" in s:
        lines += ["", *guarantee_lines(s["guarantee"])]
    if "stream" in s:
        lines += ["", *stream_lines(s["stream"])]
    if "quality" in s:
        q = s["quality"]
        lines += [
            "",
            "## Retrieval quality",
            "",
            f"{q['queries']} {q['split']} queries; verdicts {q['verdicts']}, routes {q['routes']} "
            f"(web search off). The router as it ships: {q.get('router_config')}.",
            "",
            "| run | nDCG@10 | Recall@100 |",
            "|---|---|---|",
        ]
        for name, m in q["overall"].items():
            lines.append(f"| {name} | {_f(m['ndcg@10'], 4)} | {_f(m['recall@100'], 4)} |")
        fp, co = q["fast_path"], q["corrected"]
        lines += [
            "",
            f"Fast path: {fp['queries']} queries, {fp['identical_to_bare']} identical to bare; "
            f"nDCG@10 {_f(fp['ndcg@10_bare'], 4)} bare, {_f(fp['ndcg@10_router'], 4)} router. "
            f"Corrected: {co['queries']} queries, nDCG@10 {_f(co['ndcg@10_bare'], 4)} -> "
            f"{_f(co['ndcg@10_router'], 4)}, Recall@100 {_f(co['recall@100_bare'])} -> "
            f"{_f(co['recall@100_router'])}.",
        ]
    if "cost" in s:
        c = s["cost"]
        lines += [
            "",
            "## Cost",
            "",
            f"{c['queries']} natural queries; query encoder: {c['query_encoder']}. A route's "
            "ratio is to the bare retrieval of the same queries.",
            "",
            "| path | p50 ms | p99 ms | p50 / bare |",
            "|---|---|---|---|",
        ]
        base = c["bare_retrieval_ms"]["p50"]
        for label, key in (
            ("bare retrieval (encode + FAISS)", "bare_retrieval_ms"),
            ("evaluator, warm", "evaluator_warm_ms"),
            ("evaluator, cold", "evaluator_cold_ms"),
            ("evaluator per passage, warm", "evaluator_per_passage_warm_ms"),
        ):
            row = c[key]
            lines.append(
                f"| {label} | {_f(row['p50'], 4)} | {_f(row['p99'], 4)} | {_f(row['p50'] / base)} |"
            )
        for key, what in (("router_ms", "router"), ("readme_router_ms", "the README's router")):
            for route, row in c.get(key, {}).items():
                lines.append(
                    f"| {what}, {route} | {_f(row['p50'], 4)} | {_f(row['p99'], 4)} | "
                    f"{_f(row['over_bare_p50'])} |"
                )
    if "context" in s:
        lines += _context_lines(s["context"])
    if results["plots"]:
        lines += ["", "## Plots", ""]
        lines += [f"![{name[:-4]}]({name})" for name in results["plots"]]
    for name, reason in results["skipped"].items():
        lines += ["", f"Section {name} skipped: {reason}."]
    return "\n".join(line for line in lines if line is not None) + "\n"


def _cascade_lines(c: dict[str, Any]) -> list[str]:
    """The cascade section of the report."""
    goal = c["goal"]

    def pct(value: float | None) -> str:
        return "not reached" if value is None else f"{value:.0%}"

    lines = [
        "",
        "## Cascade: the gate plus an LLM grader where it is unsure",
        "",
        f"{c['pairs']} judged pairs over {c['queries']} queries ({_f(c['relevant_share'])} "
        "relevant), 2-fold by query. Each LLM label set plays the expensive grader; an "
        "escalated pair takes its label, any other the gate's chunk verdict (chunk stage "
        f"fitted on the other half, bands {', '.join(_f(b) for b in c['gate_band_per_half'])}). "
        f"The gate alone: kappa {_f(c['gate_kappa'])} ({_f(c['gate_error_rate'])} of its "
        "decisions wrong). Policies: `band` escalates every chunk within a log-odds distance "
        "of the band, `budget` at most a share of each query's list, closest first; `oracle` "
        "escalates the gate's wrong decisions first (a reference: a gate that knew where it "
        "errs; not a policy).",
        "",
        f"Goal: kappa >= {goal['kappa']} with <= {goal['max_share']:.0%} escalated, with a label "
        f"set whose own kappa >= {goal['kappa']} "
        f"({', '.join(goal['graders_at_or_above_goal_alone']) or 'none'}): "
        + (f"**met** by {', '.join(goal['met_by'])}." if goal["met"] else "**not met**."),
        "",
        "| LLM label set | alone | policy | "
        + " | ".join(f"at {a:.0%}" for a in READ_AT)
        + f" | share for {goal['kappa']} |",
        "|---|---|---|" + "---|" * len(READ_AT) + "---|",
    ]
    ranked = sorted(c["graders"].items(), key=lambda kv: -kv[1]["kappa_alone"])
    referenced = set(goal["graders_at_or_above_goal_alone"]) or {ranked[0][0]}
    for name, g in ranked:
        for policy in g["at"]:
            if policy == "oracle" and name not in referenced:
                continue
            at = g["at"][policy]
            lines.append(
                f"| {name} | {_f(g['kappa_alone'])} | {policy} | "
                + " | ".join(_f(at[f"{a:.2f}"]) for a in READ_AT)
                + f" | {pct(g['share_for_goal'][policy])} |"
            )
    return lines


def _set_cascade_lines(c: dict[str, Any]) -> list[str]:
    """The set-level cascade section of the report."""
    from .set_cascade import READ_AT as SET_READ_AT

    lines = [
        "",
        "## Set-level cascade: an LLM grader settles the uncertain lists",
        "",
        f"{c['retrievals']} retrievals ({c['natural']} natural + probes); gate `{c['gate']}` "
        f"alone: failure AUC {_f(c['gate_auc'])}. Each of the {c['label_sets']} LLM label sets "
        "used as a gate alone (a list scored by how many of its chunks it grades relevant): "
        f"median {_f(c['median_llm_as_gate_auc'])}, best {_f(c['best_llm_as_gate_auc'])} "
        f"({c['best_label_set']}). As the grader of a `SetEscalation` (2-fold by query: band "
        "and rule set on one half, scored on the other), pointers `threshold` (band centred "
        "on the gate's relevant threshold) and `youden` (on the training half's best "
        "separating score); `oracle` escalates the lists the gate ranks most wrongly first "
        "(a reference, not a policy).",
        "",
    ]
    lines += [f"- {goal}: {'met' if met else 'not met'}" for goal, met in c["goals"].items()]
    lines += [
        "",
        "| LLM label set | alone | pointer | "
        + " | ".join(f"at {a:.0%}" for a in SET_READ_AT)
        + " |",
        "|---|---|---|" + "---|" * len(SET_READ_AT),
    ]
    ranked = sorted(c["graders"].items(), key=lambda kv: -(kv[1]["auc_alone"] or 0.0))
    for name, g in ranked:
        for pointer, at in g["at"].items():
            if pointer == "oracle" and name != c["best_label_set"]:
                continue
            lines.append(
                f"| {name} | {_f(g['auc_alone'])} | {pointer} | "
                + " | ".join(_f(at[f"{a:.2f}"]) for a in SET_READ_AT)
                + " |"
            )
    return lines


def _context_lines(c: dict[str, Any]) -> list[str]:
    """The context section of the report."""
    lines = [
        "",
        "## Context sent to the generator",
        "",
        f"{c['queries']} {c['split']} queries, k = {c['k']}, refinement budget "
        f"{c['token_budget']} estimated tokens; router routes {c['routes']} (web off). Evidence "
        "recall: a relevant document, or a strip of one, is in the context. Precision: share "
        "of the context's tokens from relevant documents. Abstention: the method's flag of a "
        "failed retrieval (router: final verdict IRRELEVANT or no strip kept on its score, the "
        "chunks then cut to the budget; filters: nothing kept) against contexts without a "
        "relevant document.",
        "",
        "| method | evidence recall | context precision | tokens (mean) | tokens (p50) | "
        "empty | abstention flags | flag precision | flag recall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def row(name: str, m: dict[str, Any]) -> str:
        a = m["abstention"]
        flag = (
            ("n/a", "n/a", "n/a")
            if a is None
            else (
                f"{a['flagged']} (misses {a['missed_evidence']})",
                _f(a["precision"]),
                _f(a["recall"]),
            )
        )
        return (
            f"| {name} | {_f(m['evidence_recall'])} | {_f(m['context_precision'])} | "
            f"{_f(m['tokens_mean'], 0)} | {_f(m['tokens_p50'], 0)} | {m['empty_contexts']} | "
            f"{flag[0]} | {flag[1]} | {flag[2]} |"
        )

    lines += [row(name, m) for name, m in c["methods"].items()]
    graders = c["llm_graders"]
    if graders:
        lines += [
            "",
            f"Top {c['k']} filtered by each LLM label set (passages it grades relevant):",
            "",
            "| LLM label set | evidence recall | context precision | tokens (mean) | "
            "tokens (p50) | empty | abstention flags | flag precision | flag recall |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        ordered = sorted(graders.items(), key=lambda kv: -kv[1]["evidence_recall"])
        lines += [row(name, m) for name, m in ordered]
    return lines
