"""Leave one collection out, nested: the numbers to expect on a collection nobody tuned to.

    crag-heuristic bench --loco --data-dir DIR [--data-dir DIR ...]   (or a parent folder)

For each collection ``c`` of the folders given (the outer fold):

1. the gate's design is chosen on the OTHER collections by an inner leave-one-
   collection-out (:mod:`crag_heuristic._bench.selection`: the evidence among
   :data:`~crag_heuristic._bench.variants.EVIDENCE_VARIANTS`, then the band
   targets), and the pick is fitted on them, each collection weighing the same;
2. it is self-calibrated on ``c``'s corpus (simulated queries, no qrels,
   :func:`crag_heuristic.calibrate_self`) with that gate as its prior, which
   never saw ``c``;
3. both are scored on ``c``'s test retrievals (natural + leave-relevant-out
   probes), next to baselines of the same run: every parameter-free
   predictor of the failure benchmark, the one of them with the best mean on
   the other collections (chosen the same nested way), LR(top-1, max BM25)
   fitted on the other collections, the best predictor on ``c`` itself (an
   oracle: a reference, not a baseline anyone could pick) and, where ``c``
   has LLM label sets, each label set used as a gate.

Nothing of ``c``'s labels is used before it is scored. Writes ``loco.md``
(the tables), ``loco.json`` (every number) and ``ledger.md`` (every variant
compared, the inner scores that picked, and each variant's plain LOCO score
for reference).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._calibration.auc import auc
from .._calibration.self_calibration import (
    DEFAULT_PRIOR_C,
    DEFAULT_SELF_QUERIES,
    DEFAULT_SELF_STYLES,
    Simulation,
    fit_simulation,
    simulate,
)
from .._config import EvaluatorConfig
from .._version import __version__
from .failure import (
    BASELINES,
    MIN_NATURAL_FAILURES,
    baseline_scores,
    llm_gate_scores,
    verdict_table,
)
from .markdown import table_head
from .pipeline import HarnessRetriever, LoopProgress, prepare, progress
from .selection import (
    RULES,
    CollectionData,
    FitCache,
    GateVariant,
    NestedResult,
    gate_scores,
    nested_loco,
)
from .set_cascade import set_cascade_section
from .variants import (
    BAND_VARIANTS,
    EVIDENCE_VARIANTS,
    GOAL,
    LR_BASELINE,
    SENTENCE_VARIANTS,
    meets_goal,
)

LOCO_GATE = "nested gate"
"""The gate chosen and fitted on the other collections."""
SENTENCE_GATE = "nested gate with sentence evidence (opt-in)"
"""The same, chosen among variants that may read each chunk's best sentence."""
SELF_GATE = "self-calibrated (no qrels)"
"""The nested gate self-calibrated on the collection's own corpus."""
LR_GATE = LR_BASELINE.label
FIXED = "best simple predictor, chosen on the others"
ORACLE = "best simple predictor here (oracle)"
LLM_MEDIAN = "LLM label sets as gates: median"
LLM_BEST = "LLM label sets as gates: best"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelfVariant:
    """One way to self-calibrate, compared with ``run_loco(self_variants=...)``.

    Attributes:
        label: its name in the report.
        styles: the simulated query styles.
        queries: how many simulated queries.
        prior_c: the pull towards the nested gate (``None``: no prior, fitted
            from the simulated queries alone).
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


def paired_bootstrap(
    groups: Sequence[str],
    failed: np.ndarray,
    ours: np.ndarray,
    theirs: np.ndarray,
    *,
    rounds: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A 95 % interval for (our AUC - their AUC), resampling queries (a query's
    natural retrieval and its probe together) with replacement."""
    labels = np.asarray(groups)
    members = {g: np.flatnonzero(labels == g) for g in dict.fromkeys(labels.tolist())}
    keys = list(members)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(rounds):
        rows = np.concatenate([members[keys[i]] for i in rng.integers(len(keys), size=len(keys))])
        y = failed[rows]
        if y.all() or not y.any():
            continue
        diffs.append(auc(y, -ours[rows]) - auc(y, -theirs[rows]))
    low, high = np.percentile(diffs, [2.5, 97.5])
    return float(low), float(high)


class _SelfCalibration:
    """Simulations per (collection, variant), run once; fits with any prior."""

    def __init__(self, datasets: Mapping[str, CollectionData], k: int) -> None:
        self.datasets = datasets
        self.k = k
        self._runs: dict[tuple[str, str], tuple[Simulation, list[Any]]] = {}

    def run(self, name: str, variant: SelfVariant) -> tuple[Simulation, list[Any]]:
        from .._calibration.gate import evaluate_examples
        from .retrievals import chunks_of

        key = (name, variant.label)
        if key not in self._runs:
            data = self.datasets[name]
            prepared = data.prepared
            collection = prepared.collection
            retriever = HarnessRetriever(prepared)
            simulation = simulate(
                retriever,
                list(chunks_of(collection, [(d, 0.0) for d in collection.doc_ids])),
                k=self.k,
                queries=variant.queries,
                styles=variant.styles,
                corpus_stats=prepared.stats,
                analyzer=prepared.analyzer,
                neighbours=retriever.neighbours,
                progress=prepared.loops,
            )
            evaluations = evaluate_examples(simulation.examples, data.base, prepared.stats)
            self._runs[key] = (simulation, evaluations)
        return self._runs[key]

    def fit(
        self, name: str, variant: SelfVariant, prior: EvaluatorConfig
    ) -> tuple[EvaluatorConfig, dict[str, Any]]:
        simulation, evaluations = self.run(name, variant)
        result = fit_simulation(
            simulation,
            prior=None if variant.prior_c is None else prior,
            prior_c=DEFAULT_PRIOR_C if variant.prior_c is None else variant.prior_c,
            fallbacks=False,
            evaluations=evaluations,
        )
        report = {
            **result.report,
            "prior_fitted_on": None
            if variant.prior_c is None or prior.model is None
            else prior.model.fitted_on,
        }
        return result.config, report


def run_loco(
    data_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    k: int = 10,
    evidence: Sequence[GateVariant] = EVIDENCE_VARIANTS,
    bands: Sequence[Mapping[str, float]] = BAND_VARIANTS,
    self_calibrate: bool = True,
    queries: int = DEFAULT_SELF_QUERIES,
    prior_c: float = DEFAULT_PRIOR_C,
    self_variants: Sequence[SelfVariant] | None = None,
    cache_dir: str | Path | None = None,
    encode: bool = True,
    sentences: bool = False,
    sentence_variants: Sequence[GateVariant] = SENTENCE_VARIANTS,
    rule: str = "worst-within",
    command: str = "",
    log: Callable[[str], None] = _log,
    loops: LoopProgress = progress,
) -> dict[str, Any]:
    """Run the protocol of the module doc; write ``loco.md``, ``loco.json`` and
    ``ledger.md`` to ``out``; ``log`` is told each step as it starts, ``loops`` wraps
    the long loops (a progress bar on a terminal by default).

    ``sentences``: the retrievals carry each chunk's best sentence's cosine
    (MiniLM sentence vectors, cached), and a second gate, the opt-in one with
    sentence evidence, is chosen the same nested way among ``evidence`` and
    ``sentence_variants``.

    ``rule``: how step 1 picks the evidence (:data:`~crag_heuristic._bench.selection.RULES`:
    ``"worst-within"``, the smallest inner gain over the top-1 cosine among the variants
    fitted within collections; ``"worst"``, the same among all; ``"mean"``, the mean inner
    AUC, the rule before them).

    ``self_variants`` replaces the one self-calibrated gate (``queries``,
    ``prior_c``, the default styles) by several: each collection's
    self-calibration variant is then chosen nested too (by the mean gain over
    the nested gate on the inner held-out collections, each self-calibrated
    with a prior fitted without the outer one), which is how
    ``benchmarks/self_calibration.py`` compares them.
    """
    out = Path(out)
    started = time.perf_counter()
    datasets: dict[str, CollectionData] = {}
    for folder in collection_folders(data_dirs):
        log(f"loading {folder}")
        p = prepare(
            folder,
            cache_dir=Path(cache_dir or out / "cache") / folder.name,
            encode=encode,
            sentences=sentences,
            loops=loops,
        )
        datasets[p.collection.name] = CollectionData.of(p, k)
    if len(datasets) < 3:
        from .._exceptions import InputError

        raise InputError(
            f"nested leave-one-collection-out needs at least 3 collections, got {len(datasets)}"
        )
    names = sorted(datasets)
    cache = FitCache(datasets)
    nested = nested_loco(evidence, bands, cache, meets_goal=meets_goal, rule=rule, log=log)
    with_sentences = None
    if sentences:
        log("the opt-in gate with sentence evidence")
        with_sentences = nested_loco(
            [*evidence, *sentence_variants],
            bands,
            cache,
            meets_goal=meets_goal,
            rule=rule,
            log=log,
        )

    variants = list(
        self_variants or [SelfVariant(label=SELF_GATE, queries=queries, prior_c=prior_c)]
    )
    selfcal = _SelfCalibration(datasets, k)
    self_choice: dict[str, Any] = {}
    rows: dict[str, Any] = {}
    plain = {n: baseline_scores(datasets[n].prepared, datasets[n].retrievals) for n in names}
    plain_auc = {n: {b: datasets[n].auc(plain[n][b]) for b in BASELINES} for n in names}
    for name in names:
        data = datasets[name]
        others = [n for n in names if n != name]
        scores: dict[str, np.ndarray] = {LOCO_GATE: nested.scores[name]}
        verdicts: dict[str, list[str]] = {LOCO_GATE: nested.verdicts[name]}
        if with_sentences is not None:
            scores[SENTENCE_GATE] = with_sentences.scores[name]
            verdicts[SENTENCE_GATE] = with_sentences.verdicts[name]
        lr_config = cache.fit(LR_BASELINE, others)
        scores[LR_GATE], verdicts[LR_GATE] = gate_scores(lr_config, data)
        fixed = max(BASELINES, key=lambda b: _mean(plain_auc[o][b][0] for o in others))
        scores[FIXED] = plain[name][fixed]
        oracle = max(BASELINES, key=lambda b: plain_auc[name][b][0] or 0.0)
        scores[ORACLE] = plain[name][oracle]
        scores.update({b: plain[name][b] for b in BASELINES})
        llm = llm_gate_scores(data.prepared, data.retrievals)
        self_report: dict[str, Any] | None = None
        if self_calibrate:
            chosen = variants[0]
            if len(variants) > 1:
                chosen, self_choice[name] = _choose_self(variants, name, nested, cache, selfcal)
                self_choice[name]["auc_mix"] = {  # every variant on this collection: reference
                    v.label: data.auc(
                        gate_scores(selfcal.fit(name, v, nested.configs[name])[0], data)[0]
                    )[0]
                    for v in variants
                }
            log(f"{name}: self-calibrating on its corpus ({chosen.label})")
            config, self_report = selfcal.fit(name, chosen, nested.configs[name])
            scores[SELF_GATE], verdicts[SELF_GATE] = gate_scores(config, data)
        rows[name] = _row(data, scores, verdicts, llm, fixed, oracle, nested, self_report)
        if with_sentences is not None:
            rows[name]["pick_sentences"] = with_sentences.picks[name].label
        if llm:
            set_cascade = set_cascade_section(
                data.prepared,
                data.retrievals,
                nested.scores[name],
                nested.configs[name].thresholds.relevant,
                gate_name=LOCO_GATE,
            )
            if set_cascade is not None:
                rows[name]["set_cascade"] = {
                    key: value for key, value in set_cascade.items() if key != "graders"
                }
    results = {
        "command": command,
        "library_version": __version__,
        "k": k,
        "rule": RULES[rule],
        "rule_name": rule,
        "goal": GOAL,
        "min_natural_failures": MIN_NATURAL_FAILURES,
        "evidence_variants": [v.describe() for v in evidence],
        "band_variants": [dict(b) for b in bands],
        "picks": {n: nested.picks[n].describe() for n in names},
        "pick_on_all": nested.on_all.describe(),
        "pick_on_all_keys": nested.on_all_keys,
        "library_default_is_the_pick": _library_default_is(nested.on_all),
        "inner": nested.inner,
        "plain_loco": {v: {n: list(a) for n, a in per.items()} for v, per in nested.loco.items()},
        "sentences": None
        if with_sentences is None
        else {
            "variants": [v.describe() for v in sentence_variants],
            "picks": {n: with_sentences.picks[n].describe() for n in names},
            "inner": with_sentences.inner,
            "pick_on_all": with_sentences.on_all.describe(),
            "plain_loco": {
                v: {n: list(a) for n, a in per.items()} for v, per in with_sentences.loco.items()
            },
        },
        "self_calibration_queries": queries if self_calibrate else 0,
        "prior_c": prior_c,
        "self_variants": [dataclasses.asdict(v) for v in variants] if self_calibrate else [],
        "self_choice": self_choice,
        "collections": rows,
        "summary": _summary(rows),
        "seconds": time.perf_counter() - started,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "loco.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out / "loco.md").write_text(render(results), encoding="utf-8")
    (out / "ledger.md").write_text(ledger(results), encoding="utf-8")
    log(f"wrote {out / 'loco.md'} in {results['seconds']:.0f} s")
    return results


_HEADER_LINE = re.compile(r"# (?P<key>[a-z_]+): (?P<value>.*)")
"""A line of a profile's header: ``# key: value`` (what ``profile_toml`` writes)."""


def shipped_recipe(profile: str | None = None) -> dict[str, Any]:
    """How the shipped default profile (or ``profile``, a bundled one) was fitted, read
    from its header (what ``crag-heuristic calibrate`` wrote there): its evidence, band
    targets, within-collection fit and shrinkage."""
    import ast

    from .._config import DEFAULT_PROFILE, _bundled_profile_files

    path = _bundled_profile_files()[profile or DEFAULT_PROFILE]
    header: dict[str, Any] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        found = _HEADER_LINE.fullmatch(line)
        if found is None:
            continue
        try:
            header[found["key"]] = ast.literal_eval(found["value"])
        except (ValueError, SyntaxError):
            header[found["key"]] = found["value"]
    targets = header.get("targets", {})
    shrink = header.get("shrink")
    return {
        "chunk_features": tuple(header.get("chunk_features", ())),
        "set_features": tuple(header.get("set_features", ())),
        "target_precision": targets.get("fast_path_precision"),
        "min_failure_recall": targets.get("failure_recall"),
        "max_good_irrelevant": targets.get("good_natural_in_irrelevant"),
        "within_collection": bool(header.get("within_collection", False)),
        "shrink": None if not shrink else shrink.get("amount"),
    }


def _library_default_is(variant: GateVariant) -> bool:
    """Whether the shipped default profile was fitted as ``variant`` says (its header:
    :func:`shipped_recipe`)."""
    recipe = shipped_recipe()
    return all(recipe[key] == getattr(variant, key) for key in recipe)


def _mean(values: Any) -> float:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else float("nan")


def _choose_self(
    variants: Sequence[SelfVariant],
    outer: str,
    nested: NestedResult,
    cache: FitCache,
    selfcal: _SelfCalibration,
) -> tuple[SelfVariant, dict[str, Any]]:
    """The self-calibration variant for ``outer``, chosen on the other collections:
    each inner collection self-calibrated with the outer pick fitted without both."""
    names = sorted(cache.datasets)
    others = [n for n in names if n != outer]
    gains: dict[str, list[float]] = {v.label: [] for v in variants}
    for inner in others:
        train = [n for n in names if n not in (outer, inner)]
        prior = cache.fit(nested.picks[outer], train)
        data = cache.datasets[inner]
        base_auc = data.auc(gate_scores(prior, data)[0])[0] or 0.0
        for v in variants:
            config, _ = selfcal.fit(inner, v, prior)
            gains[v.label].append((data.auc(gate_scores(config, data)[0])[0] or 0.0) - base_auc)
    mean_gain = {label: float(np.mean(g)) for label, g in gains.items()}
    chosen = max(variants, key=lambda v: mean_gain[v.label])
    return chosen, {"chosen": chosen.label, "inner_mean_gain": mean_gain}


def _row(
    data: CollectionData,
    scores: dict[str, np.ndarray],
    verdicts: dict[str, list[str]],
    llm: dict[str, np.ndarray],
    fixed: str,
    oracle: str,
    nested: NestedResult,
    self_report: dict[str, Any] | None,
) -> dict[str, Any]:
    groups = [r.group for r in data.retrievals]
    auc = {name: data.auc(s) for name, s in scores.items()}
    llm_auc = {name: data.auc(s) for name, s in llm.items()}
    config = nested.configs[data.name]
    row: dict[str, Any] = {
        "queries": int(data.natural.sum()),
        "natural_failed": int((data.failed & data.natural).sum()),
        "pick": nested.picks[data.name].label,
        "gate_fitted_on": None if config.model is None else config.model.fitted_on,
        "fixed_baseline": fixed,
        "oracle_baseline": oracle,
        "auc": {name: {"mix": a[0], "natural": a[1]} for name, a in auc.items()},
        "llm": {name: {"mix": a[0], "natural": a[1]} for name, a in llm_auc.items()},
        "verdicts": {
            name: verdict_table(v, data.failed, data.natural) for name, v in verdicts.items()
        },
        "intervals": {},
    }
    if llm_auc:
        mixes = [a[0] for a in llm_auc.values() if a[0] is not None]
        row["auc"][LLM_MEDIAN] = {"mix": float(np.median(mixes)), "natural": None}
        row["auc"][LLM_BEST] = {"mix": float(np.max(mixes)), "natural": None}
    pairs = [(LOCO_GATE, LR_GATE), (LOCO_GATE, "top-1 score"), (LOCO_GATE, FIXED)]
    if SELF_GATE in scores:
        pairs.append((SELF_GATE, LOCO_GATE))
    if SENTENCE_GATE in scores:
        pairs.append((SENTENCE_GATE, LOCO_GATE))
    for ours, theirs in pairs:
        low, high = paired_bootstrap(groups, data.failed, scores[ours], scores[theirs])
        row["intervals"][f"{ours} - {theirs}"] = [low, high]
    if self_report is not None:
        row["self_calibration"] = {
            key: self_report.get(key)
            for key in (
                "bands",
                "bands_met_targets",
                "warnings",
                "oof_good_natural_fast_path",
                "prior_fitted_on",
            )
        }
    return row


def _summary(rows: dict[str, Any]) -> dict[str, Any]:
    names = list(rows)
    gates = list(dict.fromkeys(g for r in rows.values() for g in r["auc"]))
    out: dict[str, Any] = {}
    for gate in gates:
        mix = [rows[n]["auc"][gate]["mix"] for n in names if gate in rows[n]["auc"]]
        natural = [
            rows[n]["auc"][gate]["natural"]
            for n in names
            if gate in rows[n]["auc"] and rows[n]["auc"][gate]["natural"] is not None
        ]
        out[gate] = {
            "mean_mix": _mean(mix),
            "collections": len(mix),
            "mean_natural": _mean(natural),
            "natural_collections": len(natural),
        }
    for gate in (LOCO_GATE, SELF_GATE, LR_GATE, SENTENCE_GATE):
        if gate not in gates:
            continue
        met = [n for n in names if meets_goal(rows[n]["verdicts"][gate])]
        out[gate]["goal_met"] = met
    top1 = [rows[n]["intervals"][f"{LOCO_GATE} - top-1 score"][1] >= 0 for n in names]
    out["goals"] = {
        "nested >= LR(top-1, max BM25), mean": out[LOCO_GATE]["mean_mix"]
        >= out[LR_GATE]["mean_mix"],
        "nested >= top-1 on every collection (within its interval)": all(top1),
        "nested >= the oracle's mean": out[LOCO_GATE]["mean_mix"] >= out[ORACLE]["mean_mix"],
        "nested natural >= the score gap's": out[LOCO_GATE]["mean_natural"]
        >= out["score gap (top-1 - top-k)"]["mean_natural"],
    }
    if SELF_GATE in gates:
        out["goals"]["self-calibrated >= nested + 0.02, mean"] = (
            out[SELF_GATE]["mean_mix"] >= out[LOCO_GATE]["mean_mix"] + 0.02
        )
    if SENTENCE_GATE in gates:
        s = out[SENTENCE_GATE]
        out["goals"]["with sentence evidence: >= the oracle's mean"] = (
            s["mean_mix"] >= out[ORACLE]["mean_mix"]
        )
        out["goals"]["with sentence evidence: natural >= the score gap's"] = (
            s["mean_natural"] >= out["score gap (top-1 - top-k)"]["mean_natural"]
        )
    return out


def _f(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"


def _natural_cell(row: dict[str, Any], gate: str) -> str:
    value = row["auc"].get(gate, {}).get("natural")
    return _f(value) if value is not None else f"n/a ({row['natural_failed']} failed)"


def _interval(row: dict[str, Any], key: str) -> str:
    low, high = row["intervals"][key]
    return f"{low:+.3f} to {high:+.3f}"


def render(results: dict[str, Any]) -> str:
    """``loco.md``: the tables."""
    rows = results["collections"]
    names = list(rows)
    summary = results["summary"]
    has_self = any(SELF_GATE in r["auc"] for r in rows.values())
    has_llm = any(LLM_BEST in r["auc"] for r in rows.values())
    has_sentences = any(SENTENCE_GATE in r["auc"] for r in rows.values())
    lines = [
        "# Leave one collection out, nested",
        "",
        f"k = {results['k']}; crag-heuristic {results['library_version']}; "
        f"{results['seconds']:.0f} s. For each collection the gate's evidence and bands were "
        "chosen on the other collections by an inner leave-one-collection-out "
        f"({len(results['evidence_variants'])} evidence variants x "
        f"{len(results['band_variants'])} band targets; rule: {results['rule']}; every variant "
        "and inner score in [ledger.md](ledger.md)), fitted on them (each weighing the same) and "
        "scored here. Failure ROC-AUC over natural retrievals + leave-relevant-out probes "
        '("mix") and over natural retrievals alone (n/a below '
        f"{results['min_natural_failures']} failed ones); every baseline from the same run; "
        "intervals: paired bootstrap over queries (1,000 resamples) of the difference.",
        "",
        f"Command: `{results['command']}`" if results["command"] else "",
        "",
        "## Failure AUC (natural + probes)",
        "",
        "| collection | queries (failed) | nested gate | LR(top-1, max BM25) | "
        "best simple, chosen on the others | top-1 | oracle: best simple here"
        + (" | self-calibrated" if has_self else "")
        + (" | with sentence evidence (opt-in)" if has_sentences else "")
        + (" | LLM as gate: median / best" if has_llm else "")
        + " |",
        "|---|---|---|---|---|---|---|"
        + ("---|" if has_self else "")
        + ("---|" if has_sentences else "")
        + ("---|" if has_llm else ""),
    ]
    for name in names:
        r = rows[name]
        a = r["auc"]
        cells = [
            f"{name}",
            f"{r['queries']} ({r['natural_failed']})",
            f"{_f(a[LOCO_GATE]['mix'])}",
            f"{_f(a[LR_GATE]['mix'])} ({_interval(r, f'{LOCO_GATE} - {LR_GATE}')})",
            f"{r['fixed_baseline']} {_f(a[FIXED]['mix'])}",
            f"{_f(a['top-1 score']['mix'])} ({_interval(r, f'{LOCO_GATE} - top-1 score')})",
            f"{r['oracle_baseline']} {_f(a[ORACLE]['mix'])}",
        ]
        if has_self:
            cells.append(
                f"{_f(a.get(SELF_GATE, {}).get('mix'))} "
                f"({_interval(r, f'{SELF_GATE} - {LOCO_GATE}')})"
                if SELF_GATE in a
                else "-"
            )
        if has_sentences:
            cells.append(
                f"{_f(a[SENTENCE_GATE]['mix'])} ({_interval(r, f'{SENTENCE_GATE} - {LOCO_GATE}')})"
            )
        if has_llm:
            cells.append(
                f"{_f(a[LLM_MEDIAN]['mix'])} / {_f(a[LLM_BEST]['mix'])}" if LLM_BEST in a else "-"
            )
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Intervals: the nested gate minus LR(top-1, max BM25), the nested gate minus top-1"
        + (", the self-calibrated gate minus the nested gate" if has_self else "")
        + (", the gate with sentence evidence minus the nested gate" if has_sentences else "")
        + ".",
        "",
        "## Failure AUC, natural retrievals alone",
        "",
        "| collection | natural failed | nested gate | LR(top-1, max BM25) | top-1 | score gap | "
        "oracle: best simple here"
        + (" | self-calibrated" if has_self else "")
        + (" | with sentence evidence" if has_sentences else "")
        + " |",
        "|---|---|---|---|---|---|---|"
        + ("---|" if has_self else "")
        + ("---|" if has_sentences else ""),
    ]
    for name in names:
        r = rows[name]
        cells = [
            name,
            str(r["natural_failed"]),
            _natural_cell(r, LOCO_GATE),
            _natural_cell(r, LR_GATE),
            _natural_cell(r, "top-1 score"),
            _natural_cell(r, "score gap (top-1 - top-k)"),
            _natural_cell(r, ORACLE),
        ]
        if has_self:
            cells.append(_natural_cell(r, SELF_GATE))
        if has_sentences:
            cells.append(_natural_cell(r, SENTENCE_GATE))
        lines.append("| " + " | ".join(cells) + " |")
    shown = [LOCO_GATE, LR_GATE, FIXED, ORACLE, *BASELINES]
    if has_self:
        shown.insert(1, SELF_GATE)
    if has_sentences:
        shown.insert(1, SENTENCE_GATE)
    if has_llm:
        shown += [LLM_MEDIAN, LLM_BEST]
    lines += [
        "",
        "## Means",
        "",
        "| gate or predictor | mean AUC, mix (collections) | mean AUC, natural (collections) |",
        "|---|---|---|",
    ]
    for gate in shown:
        s = summary[gate]
        lines.append(
            f"| {gate} | {_f(s['mean_mix'])} ({s['collections']}) | "
            f"{_f(s['mean_natural'])} ({s['natural_collections']}) |"
        )
    lines += ["", "Goals:", ""]
    lines += [f"- {goal}: {'met' if met else 'NOT met'}" for goal, met in summary["goals"].items()]
    lines += [
        "",
        "## Verdicts on natural traffic",
        "",
        f"Goal: a fast path of >= {GOAL['min_good_natural_fast_path']:.2f} of good natural "
        f"retrievals at >= {GOAL['min_natural_fast_path_precision']:.2f} precision on natural "
        f"retrievals, <= {GOAL['max_good_natural_in_irrelevant']:.2f} of them sent to IRRELEVANT. "
        "n/a: nothing to measure.",
        "",
        "| collection | gate | good on the fast path | fast-path precision, natural (with probes) "
        "| good sent to IRRELEVANT | goal |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        for gate in (LOCO_GATE, SELF_GATE, SENTENCE_GATE, LR_GATE):
            v = rows[name]["verdicts"].get(gate)
            if v is None:
                continue
            lines.append(
                f"| {name} | {gate} | {_f(v['good_natural_fast_path'])} | "
                f"{_f(v['natural_fast_path_precision'])} ({_f(v['fast_path_precision'])}) | "
                f"{_f(v['good_natural_in_irrelevant'])} | {'met' if meets_goal(v) else 'not met'} |"
            )
    warned = {n: r["self_calibration"] for n, r in rows.items() if r.get("self_calibration")}
    if warned:
        lines += [
            "",
            "## Self-calibration",
            "",
            "| collection | bands | warnings |",
            "|---|---|---|",
        ]
        for name, s in warned.items():
            lines.append(f"| {name} | {s['bands']} | {'; '.join(s['warnings']) or 'none'} |")
    cascades = {n: r["set_cascade"] for n, r in rows.items() if r.get("set_cascade")}
    if cascades:
        lines += [
            "",
            "## Set-level cascade with the nested gate (collections with LLM label sets)",
            "",
            "The set-cascade section of the per-collection benchmark with the nested gate, "
            "which never saw the collection: failure AUC with each LLM label set grading the "
            "uncertain lists, read at 30 % of the lists escalated (the best label set) and at "
            "20 % (the median over label sets).",
            "",
            "| collection | gate alone | LLM as gate: median / best | cascade, best set at 30 %: "
            "threshold / youden | cascade, median at 20 %: threshold / youden |",
            "|---|---|---|---|---|",
        ]
        for n, c in cascades.items():
            at30, at20 = c["cascade_auc_at_30pct"], c["median_label_set_cascade_auc_at_20pct"]
            lines.append(
                f"| {n} | {_f(c['gate_auc'])} | {_f(c['median_llm_as_gate_auc'])} / "
                f"{_f(c['best_llm_as_gate_auc'])} | {_f(at30['threshold'])} / "
                f"{_f(at30['youden'])} | {_f(at20['threshold'])} / {_f(at20['youden'])} |"
            )
    lines += [
        "",
        "## Picks",
        "",
        "| collection left out | evidence and bands picked on the others |",
    ]
    lines += ["|---|---|"]
    lines += [f"| {n} | {rows[n]['pick']} |" for n in names]
    if has_sentences:
        lines += ["", "With sentence evidence (opt-in):", "", "| collection left out | pick |"]
        lines += ["|---|---|"]
        lines += [f"| {n} | {rows[n]['pick_sentences']} |" for n in names]
    return "\n".join(lines) + "\n"


_STEP1_READS = {
    "worst-within": "smallest / mean inner gain over the top-1 cosine (picks: fitted within "
    "collections, or the top-1 cosine alone)",
    "worst": "smallest / mean inner gain over the top-1 cosine",
    "mean": "mean inner AUC",
}


def _step1_cell(rule: str, numbers: Any) -> str:
    """A variant's step-1 numbers as the rule reads them (a bare number: an older run)."""
    if not isinstance(numbers, Mapping):
        return _f(numbers)
    if rule in ("worst", "worst-within"):
        return f"{numbers['min_gain']:+.3f} / {numbers['mean_gain']:+.3f}"
    return _f(numbers["mean_auc"])


def _fitted_how(variant: Mapping[str, Any]) -> str:
    """How a variant's set stage is fitted, in words."""
    how = "within collections" if variant.get("within_collection") else "pooled"
    shrink = variant.get("shrink")
    return how if shrink is None else f"{how}, {shrink:g} of the way from the top-1 cosine"


def ledger(results: dict[str, Any]) -> str:
    """``ledger.md``: every variant compared, on which folds, and the rule that picked."""
    names = list(results["collections"])
    lines = [
        "# Ledger: every gate variant compared",
        "",
        f"Written by `{results['command'] or 'crag-heuristic bench --loco'}` "
        f"(crag-heuristic {results['library_version']}). Rule, fixed before the run: "
        f"{results['rule']}. For the collection left out (outer fold), each variant is fitted "
        "without it and without one inner collection, and scored on that inner one; the outer "
        "collection's labels are read only to score the pick.",
        "",
        "## Evidence variants",
        "",
        "Evidence tried outside these variants, kept or not (the corpus centroid, passage-level "
        "lexical coverage, the deeper ranking, query-only predictors, document density, "
        "proximity, sentence cosines): [the evidence probe](../evidence_probe/evidence_probe.md) "
        "(`python benchmarks/evidence_probe.py --sentences`). A variant's note says when it "
        "joined the list.",
        "",
        "| variant | chunk stage | set stage | set stage fitted | why |",
        "|---|---|---|---|---|",
    ]
    for v in results["evidence_variants"]:
        lines.append(
            f"| {v['label']} | {', '.join(v['chunk_features'])} | {', '.join(v['set_features'])} "
            f"| {_fitted_how(v)} | {v['note']} |"
        )
    lines += ["", "Band targets tried on each evidence pick:", ""]
    lines += [
        "- " + ", ".join(f"{k} {val:g}" for k, val in b.items()) for b in results["band_variants"]
    ]
    rule_name = results.get("rule_name", "mean")
    lines += [
        "",
        f"## Step 1: {_STEP1_READS[rule_name]} per outer fold (the pick in bold)",
        "",
        *table_head("variant", *names),
    ]
    picks = {n: results["picks"][n]["label"] for n in names}
    for v in results["evidence_variants"]:
        cells = []
        for n in names:
            text = _step1_cell(rule_name, results["inner"][n]["evidence"][v["label"]])
            cells.append(f"**{text}**" if picks[n].startswith(v["label"] + " | ") else text)
        lines.append(f"| {v['label']} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Step 2: inner collections meeting the goal, mean fast-path share (the pick in bold)",
        "",
        "| outer fold | "
        + " | ".join(
            ", ".join(f"{k} {val:g}" for k, val in b.items()) for b in results["band_variants"]
        )
        + " |",
        "|---|" + "---|" * len(results["band_variants"]),
    ]
    for n in names:
        cells = []
        for label, (met, share) in results["inner"][n]["bands"].items():
            text = f"{met}, {share:.2f}"
            cells.append(f"**{text}**" if label == picks[n] else text)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    keys = results["pick_on_all_keys"]
    lines += [
        "",
        "## The shipped default",
        "",
        "The same rule applied to every collection (each variant fitted without one collection, "
        "scored on it) picks **"
        + results["pick_on_all"]["label"]
        + f"** (step 1, {_STEP1_READS[rule_name]}: "
        + ", ".join(f"{label} {_step1_cell(rule_name, v)}" for label, v in keys["evidence"].items())
        + "). That is how the shipped default is made (fitted on all the collections); its "
        "expected score is the nested one, not this pick's. The library's defaults "
        + ("are this pick." if results["library_default_is_the_pick"] else "are NOT this pick.")
        + "",
        "",
        "## For reference only: each variant's plain LOCO AUC (mix)",
        "",
        "Chosen by looking at this table, a variant's mean would be a number chosen on the "
        "folds it is reported on: it is not a result.",
        "",
        *table_head("variant", *names, "mean"),
    ]
    for label, per in results["plain_loco"].items():
        values = [per[n][0] for n in names]
        lines.append(
            f"| {label} | " + " | ".join(_f(v) for v in values) + f" | {_f(_mean(values))} |"
        )
    sentences = results.get("sentences")
    if sentences:
        picks_s = {n: sentences["picks"][n]["label"] for n in names}
        lines += [
            "",
            "## The opt-in gate with sentence evidence",
            "",
            "Chosen the same way among the evidence variants above and these:",
            "",
            "| variant | chunk stage | set stage | why |",
            "|---|---|---|---|",
        ]
        for v in sentences["variants"]:
            lines.append(
                f"| {v['label']} | {', '.join(v['chunk_features'])} | "
                f"{', '.join(v['set_features'])} | {v['note']} |"
            )
        lines += [
            "",
            f"Step 1, {_STEP1_READS[rule_name]} per outer fold (the pick in bold):",
            "",
            *table_head("variant", *names),
        ]
        for label in sentences["inner"][names[0]]["evidence"]:
            cells = []
            for n in names:
                text = _step1_cell(rule_name, sentences["inner"][n]["evidence"][label])
                cells.append(f"**{text}**" if picks_s[n].startswith(label + " | ") else text)
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += [
            "",
            f"On every collection the rule picks **{sentences['pick_on_all']['label']}** (the "
            "opt-in profile is made as this pick).",
        ]
    if results.get("self_choice"):
        labels = [v["label"] for v in results["self_variants"]]
        lines += [
            "",
            "## Self-calibration variants: mean inner gain over the nested gate (the pick in bold)",
            "",
            *table_head("variant", *names),
        ]
        for label in labels:
            cells = []
            for n in names:
                choice = results["self_choice"][n]
                text = f"{choice['inner_mean_gain'][label]:+.3f}"
                cells.append(f"**{text}**" if choice["chosen"] == label else text)
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
