"""Benchmark section ``guarantee``: grader calls saved at a guaranteed risk.

A set cascade lets the gate decide some lists alone and sends the others to an
expensive grader; with a band chosen by Learn-then-Test
(:func:`~crag_heuristic.grading.guaranteed_band`) the risk of the gate's own
decisions is at most ``eps`` with probability ``1 - delta``. What that buys is
the share of lists that skip the grader. Measured here, per grader (the
folder's qrels, the best case, and each LLM label set where the folder has
them: a list is good for a grader when it grades one of its chunks relevant;
a chunk it did not judge is not), per traffic (``natural``: the judged
queries' retrievals, the traffic a user sends; ``mix``: with the
leave-relevant-out probes), over every judged split of the folder:

    for each of ``splits`` random halvings of the lists (seeded):
        calibration half: the band, per predictor and target, by Learn-then-Test
                          (too few lists counted: refused, as a user would be)
        test half:        saved = the share of lists outside the band
                          risk  = the realised risk (recall: failed lists above
                          the band / failed lists; agreement: lists decided
                          alone against the grader / lists)
    row = the means of saved and risk over the splits not refused, the share of
          those splits whose risk exceeds eps ("violations"), the share refused

The test half is a finite window of traffic, and its realised risk is noisier
than the traffic's: every band is chosen with ``window`` = the number of lists
the target counts on the test half (its failed lists for recall, all for
agreement: a count, not which lists nor how they were graded), so that the
guarantee is on the realised risk the row scores
(:func:`~crag_heuristic.grading.guaranteed_band`).

The halves are of lists, not of queries: in ``mix`` traffic a query's natural
retrieval and its probe are two lists, and only a split that makes the lists
exchangeable keeps the guarantee's argument (:func:`~crag_heuristic.grading.guaranteed_band`).

Predictors: ``gate`` (the benchmarked profile; agreement bands centred on its
relevant threshold), ``top-1`` (the top cosine), ``best simple`` (of the
failure benchmark's parameter-free predictors whose scores lie in [0, 1], the
one with the best failure AUC on one half of the calibration lists, its band
chosen on the other half) and ``grader-calibrated``
(:func:`~crag_heuristic._calibration.grader.fit_on_grader` on the
calibration half: refitted on one half of it when it holds at least
``min_refit`` queries, the band chosen on the other half; fewer, the labels all
go to the band). The agreement path of a predictor that is not a probability
is centred on the median of its scores over the traffic (unlabelled, the same
for both halves). The grader-calibrated gate is refitted on
``calibrated_splits`` of the splits (refits cost seconds).

``results["sections"]["guarantee"]["rows"]``: ``{"grader", "predictor", "target",
"eps", "delta", "traffic", "n", "saved", "risk", "violations", "refused",
"splits"}``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._calibration.auc import failure_auc
from .._calibration.gate import GateExample
from .._calibration.grader import DEFAULT_MIN_REFIT, fit_on_grader
from .._config import EvaluatorConfig
from .._evaluator.evaluator import Evaluator
from .._exceptions import InsufficientLabelsError
from .._grading.guarantee import Target, band_risk, guaranteed_band
from .data import read_qrels
from .failure import BASELINES, baseline_scores
from .pipeline import Prepared, retrievals_for

TARGETS: tuple[tuple[Target, float], ...] = (
    ("recall", 0.10),
    ("recall", 0.05),
    ("agreement", 0.10),
    ("agreement", 0.05),
)
"""(target, eps): failure recall 0.90 / 0.95, agreement 0.90 / 0.95."""
DELTA = 0.1
PREDICTORS = ("gate", "top-1", "best simple", "grader-calibrated")
SIMPLE = tuple(b for b in BASELINES if b not in ("NQC", "WIG"))
"""The parameter-free predictors whose scores lie in [0, 1] (NQC and WIG do not)."""


def judged_retrievals(prepared: Prepared, k: int) -> list[GateExample]:
    """Natural and probe retrievals of every judged query of every split."""
    merged: dict[str, dict[str, int]] = {}
    for split in sorted(prepared.collection.qrels):
        for query, docs in prepared.collection.qrels[split].items():
            merged.setdefault(query, {}).update(docs)
    return retrievals_for(prepared, merged, k)


def graded_by(
    prepared: Prepared, retrievals: Sequence[GateExample]
) -> dict[str, list[GateExample]]:
    """Per grader, the retrievals with the chunks it finds relevant: ``qrels`` (their
    own labels) and each LLM label set of the folder (a chunk it did not judge is
    not relevant). A list is good for a grader when one of its chunks is."""
    out = {"qrels": list(retrievals)}
    folder = prepared.collection.path / "llm_judgments"
    if folder.is_dir():
        threshold = prepared.collection.relevant_min
        for path in sorted(folder.glob("*.tsv")):
            labels = read_qrels(path)
            out[f"llm:{path.stem}"] = [
                dataclasses.replace(
                    r,
                    relevant=frozenset(
                        c.id for c in r.chunks if labels.get(r.group, {}).get(c.id, 0) >= threshold
                    ),
                )
                for r in retrievals
            ]
    return out


def _realised(
    target: str, band: tuple[float, float], scores: np.ndarray, good: np.ndarray
) -> float | None:
    violations, counted = band_risk(target, band, scores.tolist(), good.tolist())
    return violations / counted if counted else None


@dataclasses.dataclass
class _Tally:
    saved: list[float] = dataclasses.field(default_factory=list)
    risk: list[float] = dataclasses.field(default_factory=list)
    refused: int = 0
    runs: int = 0

    def add(
        self, band: tuple[float, float] | None, target: str, scores: np.ndarray, good: np.ndarray
    ) -> None:
        self.runs += 1
        if band is None:
            self.refused += 1
            return
        realised = _realised(target, band, scores, good)
        if realised is None:  # nothing to count in this test half
            return
        inside = (scores >= band[0]) & (scores <= band[1])
        self.saved.append(float(1.0 - inside.mean()))
        self.risk.append(realised)

    def row(self, eps: float) -> dict[str, Any]:
        return {
            "saved": float(np.mean(self.saved)) if self.saved else None,
            "risk": float(np.mean(self.risk)) if self.risk else None,
            "violations": float(np.mean([r > eps for r in self.risk])) if self.risk else None,
            "refused": self.refused / self.runs if self.runs else None,
            "splits": self.runs,
        }


def halvings(
    rng: np.random.Generator, idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One random halving of the lists ``idx``: ``(calibration, test, choose, rest)``,
    each sorted, with ``choose`` and ``rest`` a random halving of the calibration lists
    (the best simple predictor is picked on ``choose``, its band chosen on ``rest``: a
    band on the lists that picked it would not keep its guarantee).

    Every half is drawn from the permutation, never from the sorted positions: the
    lists come in the folder's order (its splits, then the probes), and a half cut
    from sorted positions would be one part of that order, not exchangeable with the
    test half."""
    order = rng.permutation(idx)  # lists at random: exchangeable halves
    calibration, test = order[: len(order) // 2], order[len(order) // 2 :]
    choose, rest = calibration[: len(calibration) // 2], calibration[len(calibration) // 2 :]
    return np.sort(calibration), np.sort(test), np.sort(choose), np.sort(rest)


def _windows(good: np.ndarray) -> dict[str, int]:
    """The lists each target counts on a test half: the window whose realised risk the
    row scores (recall: its failed lists; agreement: all)."""
    return {"recall": max(1, int((~good).sum())), "agreement": max(1, len(good))}


def _band(
    scores: np.ndarray,
    good: np.ndarray,
    target: Target,
    eps: float,
    centre: float,
    window: int,
) -> tuple[float, float] | None:
    try:
        return guaranteed_band(
            scores.tolist(),
            good.tolist(),
            target=target,
            eps=eps,
            delta=DELTA,
            centre=centre,
            window=window,
        ).band
    except InsufficientLabelsError:
        return None


def _centre(scores: np.ndarray) -> float:
    return float(min(max(np.median(scores), 1e-6), 1 - 1e-6))


def guarantee_section(
    prepared: Prepared,
    config: EvaluatorConfig,
    k: int,
    *,
    splits: int = 200,
    calibrated_splits: int = 20,
    min_refit: int = DEFAULT_MIN_REFIT,
    learning_splits: int = 10,
    seed: int = 0,
    log: Callable[[str], None] = lambda message: None,
) -> dict[str, Any]:
    """The section of the module doc on one folder, with the learning curve of the
    gate refitted on the qrels (:func:`learning_curve`, ``learning_splits`` halvings;
    0: none)."""
    retrievals = judged_retrievals(prepared, k)
    evaluator = Evaluator(config, analyzer=prepared.analyzer)
    scores: dict[str, np.ndarray] = {
        "gate": np.array(
            [evaluator.evaluate(r.query, r.chunks, prepared.stats).score for r in retrievals]
        ),
    }
    simple = baseline_scores(prepared, retrievals)
    scores["top-1"] = np.clip(simple["top-1 score"], 0.0, 1.0)
    simple = {name: np.clip(simple[name], 0.0, 1.0) for name in SIMPLE}
    natural = np.array([r.kind == "natural" for r in retrievals])
    examples = [
        dataclasses.replace(r, corpus_stats=prepared.stats, collection=prepared.collection.name)
        for r in retrievals
    ]
    rows: list[dict[str, Any]] = []
    choices: dict[str, dict[str, int]] = {}
    for grader, graded in graded_by(prepared, examples).items():
        good_all = np.array([r.good for r in graded])
        for traffic in ("natural", "mix"):
            idx = np.flatnonzero(natural) if traffic == "natural" else np.arange(len(retrievals))
            good = good_all[idx]
            centres = {
                name: _centre(v[idx]) for name, v in (("top-1", scores["top-1"]), *simple.items())
            }
            tallies = {(p, t, e): _Tally() for p in PREDICTORS for t, e in TARGETS}
            picked: dict[str, int] = {}
            log(f"guarantee: {grader}, {traffic} ({len(idx)} lists)")
            for s in range(splits):
                rng = np.random.default_rng(seed + s)
                a, b, choose, rest = halvings(rng, idx)
                gb = good_all[b]
                windows = _windows(gb)  # a count of the test half: none of its lists' labels
                best = max(
                    SIMPLE,
                    key=lambda name: failure_auc(~good_all[choose], simple[name][choose]) or 0.0,
                )
                picked[best] = picked.get(best, 0) + 1
                plain = {
                    "gate": (scores["gate"], a, config.thresholds.relevant),
                    "top-1": (scores["top-1"], a, centres["top-1"]),
                    "best simple": (simple[best], rest, centres[best]),
                }
                for predictor, (values, at, centre) in plain.items():
                    for target, eps in TARGETS:
                        band = _band(values[at], good_all[at], target, eps, centre, windows[target])
                        tallies[(predictor, target, eps)].add(band, target, values[b], gb)
                if s < calibrated_splits:
                    made = fit_on_grader(
                        [graded[i] for i in a],
                        grader=grader,
                        prior=config,
                        targets=TARGETS,
                        delta=DELTA,
                        windows=windows,
                        min_refit=min_refit,
                        seed=seed + s,
                    )
                    fitted = Evaluator(made.config, analyzer=prepared.analyzer)
                    values_b = np.array(
                        [
                            fitted.evaluate(
                                examples[i].query, examples[i].chunks, prepared.stats
                            ).score
                            for i in b
                        ]
                    )
                    for target, eps in TARGETS:
                        found = made.bands[(target, eps)]
                        band = None if isinstance(found, InsufficientLabelsError) else found.band
                        tallies[("grader-calibrated", target, eps)].add(band, target, values_b, gb)
            choices[f"{grader} {traffic}"] = picked
            for (predictor, target, eps), tally in tallies.items():
                rows.append(
                    {
                        "grader": grader,
                        "predictor": predictor,
                        "target": target,
                        "eps": eps,
                        "delta": DELTA,
                        "traffic": traffic,
                        "n": len(idx),
                        "failure_rate": float(1.0 - good.mean()),
                        **tally.row(eps),
                    }
                )
    curve = None
    if learning_splits:
        log("guarantee: learning curve of the gate refitted on the qrels")
        curve = learning_curve(prepared, config, retrievals, splits=learning_splits, seed=seed)
    return {
        "learning_curve": curve,
        "splits": splits,
        "calibrated_splits": calibrated_splits,
        "min_refit": min_refit,
        "delta": DELTA,
        "queries": len({r.group for r in retrievals}),
        "judged_splits": sorted(prepared.collection.qrels),
        "best_simple_picks": choices,
        "rows": rows,
    }


LEARNING_SIZES: tuple[int | None, ...] = (25, 50, 100, 200, None)
"""Labelled queries of the learning curve (``None``: the whole calibration half)."""


def learning_curve(
    prepared: Prepared,
    config: EvaluatorConfig,
    retrievals: Sequence[GateExample],
    *,
    splits: int = 10,
    sizes: Sequence[int | None] = LEARNING_SIZES,
    seed: int = 0,
) -> dict[str, Any]:
    """The gate refitted on the qrels of ``n`` natural retrievals (queries drawn from
    one half, :func:`~crag_heuristic._calibration.grader.fit_on_grader` with no
    band: every label refits), scored by failure AUC on the other half beside the gate
    unchanged, the best simple predictor chosen on the same ``n`` labels, and the best
    simple predictor on the scored half itself (an oracle); means over ``splits``
    random halvings."""
    natural = [r for r in retrievals if r.kind == "natural"]
    examples = [
        dataclasses.replace(r, corpus_stats=prepared.stats, collection=prepared.collection.name)
        for r in natural
    ]
    failed = np.array([r.failed for r in natural])
    groups = np.array([r.group for r in natural])
    evaluator = Evaluator(config, analyzer=prepared.analyzer)
    gate = np.array([evaluator.evaluate(r.query, r.chunks, prepared.stats).score for r in natural])
    simple = {n: v for n, v in baseline_scores(prepared, natural).items() if n in SIMPLE}
    found: dict[str, dict[str, list[float]]] = {}
    for s in range(splits):
        rng = np.random.default_rng(seed + s)
        order = rng.permutation(np.unique(groups))
        half = order[: len(order) // 2]
        test = np.flatnonzero(~np.isin(groups, half))
        if failed[test].all() or not failed[test].any():
            continue
        oracle = max(failure_auc(failed[test], v[test]) or 0.0 for v in simple.values())
        plain = failure_auc(failed[test], gate[test]) or 0.0
        for size in sizes:
            chosen = half if size is None else half[:size]
            label = "all" if size is None else str(size)
            if size is not None and size > len(half):
                continue
            train = np.flatnonzero(np.isin(groups, chosen))
            if failed[train].all() or not failed[train].any():
                continue
            made = fit_on_grader(
                [examples[i] for i in train], grader="qrels", prior=config, min_refit=0
            )
            fitted = Evaluator(made.config, analyzer=prepared.analyzer)
            refit = np.array(
                [
                    fitted.evaluate(natural[i].query, natural[i].chunks, prepared.stats).score
                    for i in test
                ]
            )
            pick = max(simple, key=lambda n: failure_auc(failed[train], simple[n][train]) or 0.0)
            row = found.setdefault(label, {})
            for key, value in (
                ("grader-calibrated", failure_auc(failed[test], refit) or 0.0),
                ("gate", plain),
                (
                    "best simple, chosen on the same labels",
                    failure_auc(failed[test], simple[pick][test]) or 0.0,
                ),
                ("best simple on the scored half (oracle)", oracle),
            ):
                row.setdefault(key, []).append(value)
            row.setdefault("queries", []).append(float(len(chosen)))
    return {
        "splits": splits,
        "traffic": "natural",
        "grader": "qrels",
        "rows": {
            label: {key: float(np.mean(values)) for key, values in row.items()}
            for label, row in found.items()
        },
    }


def guarantee_lines(section: Mapping[str, Any]) -> list[str]:
    """The section's table for a report: saved share per grader, traffic and target."""
    lines = [
        "## Guarantee: grader calls saved at a guaranteed risk",
        "",
        f"Bands by Learn-then-Test (delta {section['delta']:g}) on half the queries, scored on "
        f"the other half, {section['splits']} random halvings ({section['calibrated_splits']} for "
        f"the grader-calibrated gate); {section['queries']} judged queries over the splits "
        f"{', '.join(section['judged_splits'])}. Each cell: the share of lists that skip the "
        "grader / the realised risk / the share of halvings over eps"
        " (refused: too few labels on the calibration half).",
        "",
    ]
    rows: Sequence[Mapping[str, Any]] = section["rows"]
    keys = sorted({(r["grader"], r["traffic"]) for r in rows}, key=lambda x: (x[0] != "qrels", x))
    shown = [k for k in keys if k[0] == "qrels"] + [k for k in keys if k[0] != "qrels"][:4]
    for grader, traffic in shown:
        here = [r for r in rows if r["grader"] == grader and r["traffic"] == traffic]
        lines += [
            f"Grader {grader}, {traffic} traffic ({here[0]['n']} lists, failure rate "
            f"{here[0]['failure_rate']:.2f}):",
            "",
            "| predictor | " + " | ".join(f"{t} {1 - e:.2f}" for t, e in TARGETS) + " |",
            "|---|" + "---|" * len(TARGETS),
        ]
        for predictor in PREDICTORS:
            cells = []
            for target, eps in TARGETS:
                r = next(
                    x
                    for x in here
                    if x["predictor"] == predictor and x["target"] == target and x["eps"] == eps
                )
                if r["saved"] is None:
                    cells.append("refused" if r["refused"] else "n/a")
                else:
                    refused = f", refused {r['refused']:.0%}" if r["refused"] else ""
                    cells.append(
                        f"{r['saved']:.2f} / {r['risk']:.3f} / {r['violations']:.2f}{refused}"
                    )
            lines.append(f"| {predictor} | " + " | ".join(cells) + " |")
        lines.append("")
    hidden = len(keys) - len(shown)
    if hidden > 0:
        lines += [f"{hidden} more grader/traffic tables in results.json.", ""]
    curve = section.get("learning_curve")
    if curve and curve["rows"]:
        heads = ["grader-calibrated", "gate", "best simple, chosen on the same labels",
                 "best simple on the scored half (oracle)"]  # fmt: skip
        lines += [
            "### Learning curve: the gate refitted on n labelled queries",
            "",
            f"Failure AUC on natural retrievals of the other half (qrels as the grader), means "
            f"over {curve['splits']} random halvings.",
            "",
            "| labelled queries | " + " | ".join(heads) + " |",
            "|---|" + "---|" * len(heads),
        ]
        for label, row in curve["rows"].items():
            queries = f"{label} ({row['queries']:.0f})" if label == "all" else label
            lines.append(f"| {queries} | " + " | ".join(f"{row[h]:.3f}" for h in heads) + " |")
        lines.append("")
    return lines
