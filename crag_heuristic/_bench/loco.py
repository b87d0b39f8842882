"""Leave one collection out: does a gate hold on a collection it never saw?

    crag-heuristic bench --loco --data-dir DIR [--data-dir DIR ...]   (or a parent folder)

For each collection ``c`` of the folders given:

1. the gate is fitted on the labelled test retrievals (natural + leave-
   relevant-out probes) of every OTHER collection, each collection weighing
   the same (the way the shipped default is made, without ``c``);
2. it is self-calibrated on ``c``'s corpus (simulated queries, no qrels,
   :func:`crag_heuristic.calibrate_self`) starting from that gate;
3. both are scored on ``c``'s test retrievals with the failure benchmark,
   next to the simple baselines of the same run (top-1, score gap, NQC, the
   seed design).

Nothing of ``c``'s labels is used before it is scored: these are the numbers
to expect on a user's collection. One table (``loco.md``, ``loco.json``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._calibrate import DEFAULT_CHUNK_FEATURES, DEFAULT_SET_FEATURES, GateExample, fit_gate
from .._config import EvaluatorConfig
from .._self_calibrate import (
    DEFAULT_PRIOR_C,
    DEFAULT_SELF_QUERIES,
    DEFAULT_SELF_STYLES,
    calibrate_self,
)
from .._version import __version__
from .failure import BASELINES, FailureResult, failure_section
from .pipeline import HarnessRetriever, Prepared, labels_for, prepare, progress, retrievals_for

__all__ = ["SelfVariant", "collection_folders", "labelled_retrievals", "run_loco"]

LOCO_GATE = "gate fitted on the other collections"
SELF_GATE = "self-calibrated on this corpus (no qrels)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelfVariant:
    """One way to self-calibrate, compared with ``run_loco(self_variants=...)``.

    Attributes:
        label: its column in the report.
        styles: the simulated query styles.
        queries: how many simulated queries.
        prior_c: the pull towards the gate fitted on the other collections
            (``None``: no prior, fitted from the simulated queries alone).
    """

    label: str
    styles: tuple[str, ...] = DEFAULT_SELF_STYLES
    queries: int = DEFAULT_SELF_QUERIES
    prior_c: float | None = DEFAULT_PRIOR_C


def _log(message: str) -> None:
    sys.stderr.write(f"[loco] {message}\n")
    sys.stderr.flush()


def collection_folders(paths: Sequence[str | Path]) -> list[Path]:
    """The BEIR folders among ``paths``, or inside a parent folder given alone."""
    folders = [Path(p) for p in paths]
    if len(folders) == 1 and not (folders[0] / "corpus.jsonl").exists():
        folders = sorted(p for p in folders[0].iterdir() if (p / "corpus.jsonl").exists())
    return folders


def labelled_retrievals(prepared: Prepared, k: int, split: str = "test") -> list[GateExample]:
    """The collection's labelled retrievals, each weighing ``1 / n`` and carrying
    its corpus statistics, grouped under ``collection:query``."""
    name = prepared.collection.name
    examples = retrievals_for(prepared, labels_for(prepared.collection, "qrels", split), k)
    return [
        dataclasses.replace(
            ex, group=f"{name}:{ex.group}", weight=1.0 / len(examples), corpus_stats=prepared.stats
        )
        for ex in examples
    ]


def _documents(prepared: Prepared) -> list[Any]:
    from .retrievals import chunks_of

    collection = prepared.collection
    return list(chunks_of(collection, [(d, 0.0) for d in collection.doc_ids]))


def run_loco(
    data_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    k: int = 10,
    chunk_features: Sequence[str] = DEFAULT_CHUNK_FEATURES,
    set_features: Sequence[str] = DEFAULT_SET_FEATURES,
    self_calibrate: bool = True,
    queries: int = DEFAULT_SELF_QUERIES,
    prior_c: float = DEFAULT_PRIOR_C,
    self_variants: Sequence[SelfVariant] | None = None,
    cache_dir: str | Path | None = None,
    encode: bool = True,
    command: str = "",
    log: Callable[[str], None] = _log,
) -> dict[str, Any]:
    """Run the protocol of the module doc; write ``loco.md`` and ``loco.json`` to ``out``.

    ``self_variants`` replaces the one self-calibrated gate (``queries``,
    ``prior_c``, the default styles) by several, one column each: the way the
    self-calibration defaults were compared (``benchmarks/self_calibration.py``).
    """
    out = Path(out)
    variants = list(
        self_variants or [SelfVariant(label=SELF_GATE, queries=queries, prior_c=prior_c)]
    )
    if not self_calibrate:
        variants = []
    started = time.perf_counter()
    folders = collection_folders(data_dirs)
    prepared: dict[str, Prepared] = {}
    examples: dict[str, list[GateExample]] = {}
    for folder in folders:
        log(f"loading {folder}")
        p = prepare(folder, cache_dir=Path(cache_dir or out / "cache") / folder.name, encode=encode)
        prepared[p.collection.name] = p
        examples[p.collection.name] = labelled_retrievals(p, k)
    base = EvaluatorConfig.from_profile("synapse")
    rows: dict[str, Any] = {}
    for name, held_out in prepared.items():
        log(f"{name}: fitting on the other {len(prepared) - 1} collections")
        others = [ex for other, exs in examples.items() if other != name for ex in exs]
        loco = fit_gate(
            others,
            base=base,
            chunk_features=chunk_features,
            set_features=set_features,
            fallbacks=False,
            name="loco",
            fitted_on=f"the test splits of {', '.join(sorted(set(examples) - {name}))}",
        ).config
        profiles = {LOCO_GATE: loco}
        for variant in variants:
            log(f"{name}: self-calibrating on its corpus ({variant.label})")
            retriever = HarnessRetriever(held_out)
            profiles[variant.label] = calibrate_self(
                retriever,
                _documents(held_out),
                k=k,
                queries=variant.queries,
                styles=variant.styles,
                prior=None if variant.prior_c is None else loco,
                prior_c=DEFAULT_PRIOR_C if variant.prior_c is None else variant.prior_c,
                corpus_stats=held_out.stats,
                analyzer=held_out.analyzer,
                neighbours=retriever.neighbours,
                progress=progress,
            ).config
        failure = failure_section(held_out, profiles, k)
        rows[name] = _row(failure.summary, list(profiles))
        for gate in profiles:
            rows[name]["gates"][gate]["over_best_baseline_95ci"] = paired_bootstrap(
                failure, gate, rows[name]["best_baseline"]
            )
    summary = _summary(rows)
    results = {
        "command": command,
        "library_version": __version__,
        "k": k,
        "chunk_features": list(chunk_features),
        "set_features": list(set_features),
        "self_calibration_queries": queries if self_calibrate else 0,
        "prior_c": prior_c,
        "self_variants": [
            {
                "label": v.label,
                "styles": list(v.styles),
                "queries": v.queries,
                "prior_c": v.prior_c,
            }
            for v in variants
        ],
        "collections": rows,
        "summary": summary,
        "seconds": time.perf_counter() - started,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "loco.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out / "loco.md").write_text(render(results), encoding="utf-8")
    log(f"wrote {out / 'loco.md'} in {results['seconds']:.0f} s")
    return results


def paired_bootstrap(
    failure: FailureResult, gate: str, baseline: str, *, rounds: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """A 95 % interval for (the gate's AUC - the baseline's AUC), resampling queries
    (a query's natural retrieval and its probe together) with replacement."""
    from sklearn.metrics import roc_auc_score

    groups = np.array([r.group for r in failure.retrievals])
    failed = np.array([r.failed for r in failure.retrievals])
    ours, theirs = failure.scores[gate], failure.scores[baseline]
    members = {g: np.flatnonzero(groups == g) for g in dict.fromkeys(groups.tolist())}
    keys = list(members)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(rounds):
        rows = np.concatenate([members[keys[i]] for i in rng.integers(len(keys), size=len(keys))])
        y = failed[rows]
        if y.all() or not y.any():
            continue
        diffs.append(roc_auc_score(y, -ours[rows]) - roc_auc_score(y, -theirs[rows]))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(low), float(high)


def _row(summary: dict[str, Any], gates: list[str]) -> dict[str, Any]:
    auc = summary["auc"]
    baselines = {b: auc[b]["natural+probes"] for b in BASELINES}
    best = max(baselines, key=lambda b: baselines[b] or 0.0)
    row: dict[str, Any] = {
        "queries": summary["natural"],
        "natural_failed": summary["natural_failed"],
        "baselines": baselines,
        "best_baseline": best,
        "best_baseline_auc": baselines[best],
        "gates": {},
    }
    for gate in gates:
        v = summary["verdicts"][gate]
        row["gates"][gate] = {
            "auc_mix": auc[gate]["natural+probes"],
            "auc_natural": auc[gate]["natural"],
            "over_best_baseline": (auc[gate]["natural+probes"] or 0.0) - (baselines[best] or 0.0),
            "good_natural_fast_path": v["good_natural_fast_path"],
            "fast_path_precision": v["fast_path_precision"],
            "natural_fast_path_precision": v["natural_fast_path_precision"],
            "good_natural_in_irrelevant": v["good_natural_in_irrelevant"],
        }
    return row


def _summary(rows: dict[str, Any]) -> dict[str, Any]:
    gates = next(iter(rows.values()))["gates"] if rows else {}
    out: dict[str, Any] = {}
    for gate in gates:
        diffs = [r["gates"][gate]["over_best_baseline"] for r in rows.values()]
        aucs = [r["gates"][gate]["auc_mix"] or 0.0 for r in rows.values()]
        out[gate] = {
            "mean_auc_mix": float(np.mean(aucs)),
            "mean_over_best_baseline": float(np.mean(diffs)),
            "min_over_best_baseline": float(np.min(diffs)),
            "collections_at_or_above_best_baseline": int(sum(d >= 0 for d in diffs)),
            "collections_at_or_above_0.80": int(sum(a >= 0.80 for a in aucs)),
        }
    out["best baseline"] = {
        "mean_auc_mix": float(np.mean([r["best_baseline_auc"] or 0.0 for r in rows.values()]))
    }
    return out


def _f(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render(results: dict[str, Any]) -> str:
    """The Markdown table."""
    rows = results["collections"]
    gates = list(next(iter(rows.values()))["gates"]) if rows else []
    lines = [
        "# Leave one collection out",
        "",
        f"k = {results['k']}; crag-heuristic {results['library_version']}; "
        f"{results['seconds']:.0f} s. Each collection is scored by a gate fitted on the "
        "others' labelled test retrievals (chunk features "
        f"{', '.join(results['chunk_features'])}; set features "
        f"{', '.join(results['set_features'])}) and by that gate self-calibrated on the "
        "collection's own corpus ("
        + (
            "each variant below"
            if len(results.get("self_variants", [])) > 1
            else f"{results['self_calibration_queries']} simulated queries"
        )
        + ", no qrels). Failure ROC-AUC over natural retrievals + leave-relevant-out probes; "
        "baselines from the same run; the interval is a paired bootstrap over queries (1,000 "
        "resamples) of the difference to the best baseline.",
        "",
        f"Command: `{results['command']}`" if results["command"] else "",
        "",
    ]
    variants = results.get("self_variants", [])
    if len(variants) > 1:
        lines += ["Self-calibration variants:", ""]
        lines += [
            f"- {v['label']}: {v['queries']} queries, styles {', '.join(v['styles'])}, "
            + (
                "fitted from the simulated queries alone (no prior)"
                if v["prior_c"] is None
                else f"pulled towards the gate fitted on the others (prior_c {v['prior_c']})"
            )
            for v in variants
        ]
        lines.append("")
    lines += [
        "| collection | queries (failed) | best baseline | "
        + " | ".join(f"{g}: AUC (vs best; 95 % interval)" for g in gates)
        + " |",
        "|---|---|---|" + "---|" * len(gates),
    ]
    for name, row in rows.items():
        cells = []
        for g in gates:
            gate = row["gates"][g]
            low, high = gate.get("over_best_baseline_95ci", (float("nan"), float("nan")))
            diff = gate["over_best_baseline"]
            cells.append(f"{_f(gate['auc_mix'])} ({diff:+.3f}; {low:+.3f} to {high:+.3f})")
        lines.append(
            f"| {name} | {row['queries']} ({row['natural_failed']}) | "
            f"{row['best_baseline']} {_f(row['best_baseline_auc'])} | " + " | ".join(cells) + " |"
        )
    summary = results["summary"]
    lines += [
        "",
        f"Mean best baseline {_f(summary['best baseline']['mean_auc_mix'])}.",
        "",
        "| gate | mean AUC | mean vs best baseline | worst vs best baseline | "
        "collections >= best baseline | collections >= 0.80 |",
        "|---|---|---|---|---|---|",
    ]
    for gate in gates:
        s = summary[gate]
        lines.append(
            f"| {gate} | {_f(s['mean_auc_mix'])} | {s['mean_over_best_baseline']:+.3f} | "
            f"{s['min_over_best_baseline']:+.3f} | "
            f"{s['collections_at_or_above_best_baseline']} / {len(rows)} | "
            f"{s['collections_at_or_above_0.80']} / {len(rows)} |"
        )
    lines += [
        "",
        "Verdicts on natural traffic (good = a relevant document in the top k):",
        "",
        "| collection | gate | good on the fast path | fast-path precision, natural (with probes) "
        "| good sent to IRRELEVANT |",
        "|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        for gate, g in row["gates"].items():
            lines.append(
                f"| {name} | {gate} | {_f(g['good_natural_fast_path'])} | "
                f"{_f(g['natural_fast_path_precision'])} ({_f(g['fast_path_precision'])}) | "
                f"{_f(g['good_natural_in_irrelevant'])} |"
            )
    return "\n".join(lines) + "\n"
