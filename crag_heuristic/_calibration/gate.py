"""Fitting a gate from labels: the two-stage logistic model and its verdict bands.

The gate the evaluator applies when its configuration has a ``model``
(``crag_heuristic._evaluator.model``) is fitted here (penalised logistic
regression, :mod:`crag_heuristic._calibration.logistic`; folds and AUC from scikit-learn):

1. **Chunk stage.** Every retrieved chunk is labelled relevant or not (qrels,
   or an LLM grader's labels). A logistic regression on standardised chunk
   evidence (by default :data:`DEFAULT_CHUNK_FEATURES`: the similarity, its
   z-score within the list, keyword overlap, lexical contrast and the rank)
   estimates P(chunk relevant). Its predictions for the set stage are
   cross-fitted: each query's chunks are scored by a model that never saw
   that query.
2. **Set stage.** Every retrieval is labelled good (a relevant chunk in its
   top k) or failed. A second logistic regression on set evidence (by default
   :data:`DEFAULT_SET_FEATURES`: the top similarity, the first chunk's BM25
   over the query's idf mass and the best chunk's BM25 over the corpus's
   largest idf; a set stage may also read the chunk stage's probabilities,
   ``best_chunk`` and the like) estimates P(good), a calibrated probability on
   the fitting distribution (checked with a reliability diagram in the
   benchmark report).
3. **Bands.** From out-of-fold predictions (grouped by query):
   ``relevant`` is the lowest band whose fast path has the target precision
   on natural retrievals while enough failed retrievals (probes included)
   stay off it; ``partial`` is the band below which at most a given share of
   the good *natural* retrievals fall (the cost of sending good retrievals to
   the web). Chunk bands: ``relevant`` maximises Cohen's kappa with the chunk
   labels; ``partial`` keeps 95 % of relevant chunks.
4. **Fallbacks.** The same, fitted again without the similarities, without
   the corpus statistics, and without both, for inputs that lack them (and,
   for a gate that reads sentence evidence, without the sentence scores).

Examples may weigh differently (``GateExample.weight``: collections fitted
together weigh alike) and a fit may start from a prior gate and be pulled
towards it (``prior``: self-calibration adjusts the shipped gate rather than
replacing it). Regularisation strengths are chosen by grouped cross-validation
(folds by query: a query's natural retrieval and its probe never straddle
folds). Nothing here reads test data: the caller passes the fitting split.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._config import (
    EvaluatorConfig,
    FallbackModel,
    LogisticStage,
    ModelConfig,
    ModelTerm,
    Thresholds,
)
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError
from .._optional import requires
from .._text.corpus import CorpusStats
from .._types import Chunk, Evaluation, ScoreKind
from .logistic import LogisticFit

# Chosen by nested leave-one-collection-out over seven collections (the rule applied to
# every collection, benchmarks/results/loco/ledger.md: "top-1 + BM25 (first, best over
# ln 2N)"; python -m research.loco checks that these are its pick): the chunk stage
# grades each chunk; the set stage reads the top similarity, the first chunk's BM25 over
# the query's idf mass and the best chunk's BM25 over the corpus's largest idf.
DEFAULT_CHUNK_FEATURES = (
    "similarity",
    "similarity_z",
    "keyword_overlap",
    "lexical_contrast",
    "rank",
)
DEFAULT_SET_FEATURES = ("similarity_top", "keyword_coverage", "lexical_coherence")
WIDER_SET_FEATURES = (
    "similarity_top",
    "similarity_mean",
    "similarity_gap",
    "bm25_top",
    "bm25_scaled_max",
    "keyword_coverage",
    "lexical_coherence",
)
"""Wider set evidence a refit on the user's labels may read beside the shipped gate's
(none of it reads the chunk stage): a grader calibration's "wider evidence" candidate
and the learning cascade's refits."""
DEFAULT_ANCHOR = ("similarity_top",)
_C_GRID = (0.01, 0.1, 1.0, 10.0)


@dataclass(frozen=True)
class GateExample:
    """One labelled retrieval: the query, its chunks, which are relevant.

    Attributes:
        group: what cross-validation groups by (the query id).
        kind: ``"natural"`` or ``"probe"`` (probes count as failures; the
            IRRELEVANT band is set on natural retrievals only).
        weight: how much it counts in the fit (e.g. ``1 / n`` for each of the
            ``n`` retrievals of one collection, so collections count alike).
        corpus_stats: the statistics of the corpus it was retrieved from, when
            examples of several corpora are fitted together (else the
            ``corpus_stats`` given to the fit).
        collection: the collection it came from (a fit ``within_collection``
            gives each its own intercept while it learns the coefficients).
    """

    group: str
    kind: str
    query: str
    chunks: tuple[Chunk, ...]
    relevant: frozenset[str]
    weight: float = 1.0
    corpus_stats: CorpusStats | None = field(default=None, compare=False, repr=False)
    collection: str = ""

    @property
    def good(self) -> bool:
        """A relevant chunk is in the list."""
        return any(chunk.id in self.relevant for chunk in self.chunks)

    @property
    def failed(self) -> bool:
        """No relevant chunk in the list."""
        return not self.good


@dataclass(frozen=True)
class CalibrationResult:
    """A fitted profile and how it was fitted.

    Attributes:
        config: the profile (base configuration + model + bands).
        report: cross-validated numbers (AUCs, bands, verdict shares ...).
        warnings: what the fit could not do as asked (e.g. bands that missed
            their targets), each a sentence; the profile's header repeats them.
    """

    config: EvaluatorConfig
    report: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def write(self, path: str | Path) -> Path:
        """Write the profile as TOML (loadable by ``EvaluatorConfig.from_file``)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            profile_toml(self.config, self.report, warnings=self.warnings), encoding="utf-8"
        )
        return target


def _matrix(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> np.ndarray:
    """Feature matrix; a missing value takes the column mean (it then adds nothing)."""
    x = np.array(
        [[np.nan if r.get(n) is None else float(r[n]) for n in names] for r in rows], dtype=float
    ).reshape(len(rows), len(names))
    if not len(rows):
        return x
    with np.errstate(all="ignore"):
        means = np.nanmean(x, axis=0) if len(names) else np.zeros(0)
    means = np.where(np.isnan(means), 0.0, means)
    return np.where(np.isnan(x), means, x)


def _auc(y: np.ndarray, score: np.ndarray, weights: np.ndarray) -> float:
    with requires("calibrate", "calibration"):
        from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score, sample_weight=weights))


@dataclass(frozen=True)
class _StageFit:
    stage: LogisticStage
    c: float
    oof: np.ndarray


def _fit_stage(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    weights: np.ndarray,
    names: Sequence[str],
    *,
    prior: LogisticStage | None = None,
    prior_c: float = 0.1,
    strata: np.ndarray | None = None,
    shrink: float | None = None,
    anchor: Sequence[str] = (),
) -> _StageFit:
    """Fit one logistic stage; out-of-fold probabilities by folds grouped by query.

    Without a prior, ``C`` is chosen on the grid by grouped cross-validation
    (weighted AUC). With one, the fit is pulled towards the prior's
    coefficients with the fixed strength ``prior_c`` (features standardised
    as the prior did), so a few hundred simulated queries adjust a gate
    instead of replacing it. ``strata``: one intercept per stratum while
    fitting (fixed effects, :mod:`crag_heuristic._calibration.logistic`). ``shrink``:
    the coefficients that share of the way from the fit on the ``anchor``
    features alone to the full fit, each with its own ``C`` chosen by the same
    cross-validation (each fold's fits combined likewise for the out-of-fold
    predictions), the intercept refitted.
    """
    with requires("calibrate", "calibration"):
        from sklearn.model_selection import GroupKFold

    from .logistic import fit_intercept, fit_logistic, shrink_towards, weighted_standardizer

    if len(set(y.tolist())) < 2:
        raise InputError(
            "calibration needs both positive and negative labels "
            f"(got only {'positive' if y.all() else 'negative'} ones)"
        )
    mean, scale = weighted_standardizer(x, weights)
    beta0 = np.zeros(len(names))
    intercept0 = 0.0
    if prior is not None:
        known = {term.feature: term for term in prior.terms}
        for i, name in enumerate(names):
            if name in known:
                mean[i], scale[i], beta0[i] = (
                    known[name].mean,
                    known[name].scale,
                    known[name].weight,
                )
        intercept0 = prior.intercept
    z = (x - mean) / scale
    w = weights * (len(weights) / weights.sum())  # mean weight 1, so C keeps its meaning

    anchored = [i for i, name in enumerate(names) if name in anchor]
    if shrink is not None and not anchored:
        raise InputError(f"shrinking needs an anchor among the features {list(names)}")
    n_groups = len(set(groups.tolist()))
    folds = list(GroupKFold(n_splits=max(2, min(5, n_groups))).split(z, y, groups))
    grid = (prior_c,) if prior is not None else _C_GRID
    everything = np.arange(len(y))

    def chosen(columns: list[int]) -> tuple[float, list[LogisticFit | None], LogisticFit]:
        """The fit on ``columns`` with ``C`` chosen by grouped CV: (C, each fold's
        fit, ``None`` for a fold with one class, the fit on every row)."""

        def fit(rows: np.ndarray, c: float) -> LogisticFit:
            return fit_logistic(
                z[rows][:, columns],
                y[rows],
                c=c,
                weights=w[rows],
                prior=beta0[columns],
                prior_intercept=intercept0,
                strata=None if strata is None else strata[rows],
            )

        best: tuple[float, list[LogisticFit | None]] | None = None
        best_auc = -1.0
        for c in grid:
            fits = [
                fit(train, c) if len(set(y[train].tolist())) > 1 else None for train, _ in folds
            ]
            oof = _oof(fits, [columns] * len(fits))
            auc = _auc(y, oof, w)
            if auc > best_auc + 1e-9:
                best, best_auc = (c, fits), auc
        assert best is not None
        return best[0], best[1], fit(everything, best[0])

    def _oof(fits: Sequence[LogisticFit | None], columns: Sequence[list[int]]) -> np.ndarray:
        oof = np.zeros(len(y))
        for (train, test), fitted, cols in zip(folds, fits, columns, strict=True):
            if fitted is None:  # one class in the training folds: its rate
                oof[test] = float(np.average(y[train], weights=w[train]))
            else:
                oof[test] = fitted.predict(z[test][:, cols])
        return oof

    every = list(range(len(names)))
    best_c, fold_fits, final = chosen(every)
    if shrink is not None:
        _, anchor_folds, anchor_final = chosen(anchored)

        def towards(full: LogisticFit, start: LogisticFit, rows: np.ndarray) -> LogisticFit:
            begin = np.zeros(len(names))
            begin[anchored] = start.coef
            coef = shrink_towards(full.coef, begin, shrink)
            return LogisticFit(fit_intercept(z[rows] @ coef, y[rows], weights=w[rows]), coef)

        fold_fits = [
            None if f is None or a is None else towards(f, a, train)
            for f, a, (train, _) in zip(fold_fits, anchor_folds, folds, strict=True)
        ]
        final = towards(final, anchor_final, everything)
    best_oof = _oof(fold_fits, [every] * len(fold_fits))
    terms = tuple(
        ModelTerm(
            feature=name,
            weight=float(final.coef[i]),
            mean=float(mean[i]),
            scale=float(scale[i]),
        )
        for i, name in enumerate(names)
    )
    return _StageFit(LogisticStage(intercept=final.intercept, terms=terms), best_c, best_oof)


def _bands(
    p_good: np.ndarray,
    good: np.ndarray,
    natural: np.ndarray,
    *,
    target_precision: float,
    min_failure_recall: float,
    max_good_irrelevant: float,
) -> tuple[float, float, bool]:
    """(relevant, partial, targets met) bands on out-of-fold P(good).

    ``relevant`` is the lowest band whose fast path is precise enough on
    natural retrievals (the traffic a user sends; probes are corpus gaps
    made on purpose, as many as the queries) while every retrieval that
    failed, probes included, is kept off it often enough. ``partial`` keeps
    at most ``max_good_irrelevant`` of the good natural retrievals below it.
    """
    failed = ~good
    relevant = None
    for t in np.unique(p_good):  # ascending: the lowest band meeting the targets
        fast = p_good > t
        fast_natural = fast & natural
        if fast_natural.sum() < 10:
            break
        precision = (fast_natural & good).sum() / fast_natural.sum()
        recall = (failed & ~fast).sum() / max(failed.sum(), 1)
        if precision >= target_precision and recall >= min_failure_recall:
            relevant = float(t)
            break
    met = relevant is not None
    if relevant is None:  # unreachable targets: the band of the best precision with 10 retrievals
        relevant = float(np.sort(p_good)[-11]) if len(p_good) > 11 else 0.99
    good_natural = np.sort(p_good[good & natural])
    partial = float(np.quantile(good_natural, max_good_irrelevant)) if len(good_natural) else 0.0
    return min(relevant, 1.0), min(partial, relevant), met


BAND_CONFIDENCE = 0.95
"""The two-sided confidence of the intervals a band statement gives (Clopper-Pearson)."""
MIN_BAND_LABELS = 10
"""Good and failed natural lists, each, below which labels do not choose verdict bands."""
GOOD_SHARES = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.15)
"""The shares of good natural lists a band statement gives the scores of (where an
IRRELEVANT band would hold that share of them)."""


def _rate(k: int, n: int) -> dict[str, Any]:
    """``k`` of ``n`` as a share with its two-sided Clopper-Pearson interval."""
    from .._grading.guarantee import binomial_lower, binomial_upper

    tail = (1.0 - BAND_CONFIDENCE) / 2
    if n == 0:
        return {"value": None, "ci95": None, "of": 0}
    return {
        "value": round(k / n, 4),
        "ci95": [round(binomial_lower(k, n, tail), 4), round(binomial_upper(k, n, tail), 4)],
        "of": n,
    }


def state_bands(
    p_good: npt.ArrayLike,
    good: npt.ArrayLike,
    natural: npt.ArrayLike | None = None,
    *,
    relevant: float,
    partial: float,
    chosen_on: str,
) -> dict[str, Any]:
    """What the verdict bands ``relevant`` / ``partial`` do on labelled lists: their
    fast-path precision (good natural lists among the natural lists above
    ``relevant``), failure recall (failed lists, probes included, kept off the fast
    path), the share of good natural lists graded IRRELEVANT (at or below
    ``partial``), each a point estimate on these labels with its 95 %
    Clopper-Pearson interval, and how many labels they count (``chosen_on`` says
    which lists they are); and ``good_quantiles``: for each share of
    :data:`GOOD_SHARES`, the score at or below which that share of the good natural
    lists falls. The verdicts are the evaluator's: RELEVANT above ``relevant``,
    IRRELEVANT at or below ``partial``."""
    p = np.asarray(p_good, dtype=float)
    g = np.asarray(good, dtype=bool)
    n = np.ones(len(p), dtype=bool) if natural is None else np.asarray(natural, dtype=bool)
    fast = p > relevant
    failed = ~g
    precision = _rate(int((fast & n & g).sum()), int((fast & n).sum()))
    recall = _rate(int((failed & ~fast).sum()), int(failed.sum()))
    irrelevant = _rate(int((g & n & (p <= partial)).sum()), int((g & n).sum()))

    def said(rate: dict[str, Any]) -> str:
        if rate["value"] is None:
            return "n/a (none)"
        low, high = rate["ci95"]
        return f"{rate['value']:.2f} (95 % interval {low:.2f} to {high:.2f}, of {rate['of']})"

    sentence = (
        f"RELEVANT above {relevant:.3f}, IRRELEVANT at or below {partial:.3f}, measured on "
        f"{chosen_on}: fast-path precision {said(precision)}, failure recall {said(recall)}, "
        f"good lists graded IRRELEVANT {said(irrelevant)}; point estimates on these labels "
        "with their intervals, not guarantees"
    )
    return {
        "relevant": float(relevant),
        "partial": float(partial),
        "measured_on": chosen_on,
        "lists": len(p),
        "natural_lists": int(n.sum()),
        "good_natural": int((g & n).sum()),
        "failed": int(failed.sum()),
        "fast_path_share": round(float(fast[n].mean()), 4) if n.any() else None,
        "fast_path_precision": precision,
        "failure_recall": recall,
        "good_in_irrelevant": irrelevant,
        "good_quantiles": {
            f"{share:g}": float(np.quantile(p[g & n], share)) for share in GOOD_SHARES
        }
        if (g & n).any()
        else {},
        "summary": sentence,
    }


@dataclass(frozen=True)
class LabelledBands:
    """Verdict bands chosen on labelled lists (:func:`bands_on_labels`).

    Attributes:
        relevant, partial: the bands (the prior's when the labels were too few).
        fitted: whether the labels chose them.
        met: whether they met their targets on the labels.
        statement: what they do on the labels (:func:`state_bands`).
        warnings: what could not be done as asked, each a sentence.
    """

    relevant: float
    partial: float
    fitted: bool
    met: bool
    statement: dict[str, Any]
    warnings: tuple[str, ...] = ()


def bands_on_labels(
    p_good: npt.ArrayLike,
    good: npt.ArrayLike,
    natural: npt.ArrayLike | None = None,
    *,
    prior: Thresholds,
    chosen_on: str,
    target_precision: float = 0.90,
    min_failure_recall: float = 0.80,
    max_good_irrelevant: float = 0.15,
) -> LabelledBands:
    """The RELEVANT / PARTIAL bands chosen on lists a grader (or qrels) labelled, by
    the rule of :func:`fit_gate` (the lowest fast-path band with ``target_precision``
    on natural lists and ``min_failure_recall`` of the failed ones kept off it; at
    most ``max_good_irrelevant`` of the good natural lists graded IRRELEVANT), and
    stated on them (:func:`state_bands`).

    ``p_good`` must come from a gate that was not fitted on these lists (the shipped
    gate, a gate fitted on other lists, or out-of-fold predictions). With fewer than
    :data:`MIN_BAND_LABELS` good or failed natural lists the ``prior`` bands are
    kept (and stated), with a warning.
    """
    p = np.asarray(p_good, dtype=float)
    g = np.asarray(good, dtype=bool)
    n = np.ones(len(p), dtype=bool) if natural is None else np.asarray(natural, dtype=bool)
    if len(p) != len(g) or len(p) != len(n):
        raise InputError("bands need one score and one label per list")
    good_natural, failed = int((g & n).sum()), int((~g).sum())
    if min(good_natural, failed) < MIN_BAND_LABELS:
        statement = state_bands(
            p, g, n, relevant=prior.relevant, partial=prior.partial, chosen_on=chosen_on
        )
        message = (
            f"too few labels to choose the verdict bands ({good_natural} good and {failed} "
            f"failed lists; {MIN_BAND_LABELS} of each needed): the prior's bands are kept"
        )
        return LabelledBands(prior.relevant, prior.partial, False, False, statement, (message,))
    relevant, partial, met = _bands(
        p,
        g,
        n,
        target_precision=target_precision,
        min_failure_recall=min_failure_recall,
        max_good_irrelevant=max_good_irrelevant,
    )
    statement = state_bands(p, g, n, relevant=relevant, partial=partial, chosen_on=chosen_on)
    warnings: tuple[str, ...] = ()
    if not met:
        warnings = (
            f"the fast-path band cannot meet its targets on {chosen_on} (precision "
            f"{target_precision:.2f} on natural lists with {min_failure_recall:.2f} of the "
            f"failed ones kept off it): the band of the best precision over 10 lists is "
            f"used; {statement['summary']}",
        )
    return LabelledBands(relevant, partial, True, met, statement, warnings)


def kappa_band(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(band, kappa): the band over the scores' percentiles whose ``score > band``
    agrees best with ``labels`` by Cohen's kappa (the first such band on ties)."""
    with requires("calibrate", "calibration"):
        from sklearn.metrics import cohen_kappa_score

    candidates = np.unique(np.quantile(scores, np.linspace(0.01, 0.99, 99)))
    kappas = [cohen_kappa_score(labels, scores > t) for t in candidates]
    best = int(np.argmax(kappas))
    return float(candidates[best]), float(kappas[best])


def _chunk_bands(p: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(relevant band maximising kappa, partial band keeping 95 % of positives, kappa)."""
    relevant, kappa = kappa_band(p, y)
    positives = np.sort(p[y])
    partial = float(np.quantile(positives, 0.05)) if len(positives) else 0.0
    return relevant, min(partial, relevant), kappa


def evaluate_examples(
    examples: Sequence[GateExample],
    base: EvaluatorConfig,
    corpus_stats: CorpusStats | None,
    *,
    without: Sequence[str] = (),
) -> list[Evaluation]:
    """Every example graded by ``base`` without a model, all evidence recorded;
    ``without`` removes evidence groups first (``similarity``: scores dropped;
    ``corpus_stats``: no document frequencies; ``sentences``: no sentence scores)."""
    evaluator = Evaluator(base.replace(model=None), all_evidence=True)
    out = []
    for ex in examples:
        chunks: Sequence[Chunk] = ex.chunks
        if "similarity" in without:
            chunks = [c.replace(score=None, score_kind=ScoreKind.UNKNOWN) for c in chunks]
        if "sentences" in without:
            chunks = [c.replace(sentence_score=None) for c in chunks]
        stats = None if "corpus_stats" in without else (ex.corpus_stats or corpus_stats)
        out.append(evaluator.evaluate(ex.query, chunks, stats))
    return out


@dataclass(frozen=True)
class ChunkStage:
    """A fitted chunk stage with its out-of-fold evidence.

    Attributes:
        stage: the logistic stage (for ``ModelConfig.chunk``).
        evaluations: the base evaluation of each example (features inside).
        labels, groups, weights, oof: per chunk, in example order.
        c: the chosen regularisation strength.
    """

    stage: LogisticStage
    evaluations: list[Evaluation]
    labels: np.ndarray
    groups: np.ndarray
    weights: np.ndarray
    oof: np.ndarray
    c: float


def _available(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    """The features of ``names`` that have a value somewhere (the rest cannot be fitted)."""
    return [n for n in names if any(r.get(n) is not None for r in rows)]


def fit_chunk_stage(
    examples: Sequence[GateExample],
    *,
    base: EvaluatorConfig | None = None,
    corpus_stats: CorpusStats | None = None,
    chunk_features: Sequence[str] = DEFAULT_CHUNK_FEATURES,
    prior: LogisticStage | None = None,
    prior_c: float = 0.1,
    evaluations: Sequence[Evaluation] | None = None,
    seed: int = 0,
) -> ChunkStage:
    """Fit the chunk stage alone (per-document grading) on labelled chunks.

    Features that no chunk has (e.g. similarities of scores without a kind)
    are left out of the stage.
    """
    if not examples:
        raise InputError("calibration needs labelled retrievals")
    del seed  # the folds are deterministic (GroupKFold)
    base = base or EvaluatorConfig()
    if evaluations is None:
        evaluations = evaluate_examples(examples, base, corpus_stats)
    rows = [g.features for ev in evaluations for g in ev.chunks]
    names = _available(rows, chunk_features)
    labels = np.array([c.id in ex.relevant for ex in examples for c in ex.chunks], dtype=bool)
    groups = np.array([ex.group for ex in examples for _ in ex.chunks])
    weights = np.array([ex.weight for ex in examples for _ in ex.chunks], dtype=float)
    fitted = _fit_stage(
        _matrix(rows, names), labels, groups, weights, names, prior=prior, prior_c=prior_c
    )
    return ChunkStage(
        stage=fitted.stage,
        evaluations=list(evaluations),
        labels=labels,
        groups=groups,
        weights=weights,
        oof=fitted.oof,
        c=fitted.c,
    )


@dataclass(frozen=True)
class _TwoStage:
    chunk: ChunkStage
    set: _StageFit
    relevant: float
    partial: float
    met: bool
    chunk_relevant: float
    chunk_partial: float
    chunk_kappa: float


def _fit_two_stage(
    examples: Sequence[GateExample],
    evaluations: Sequence[Evaluation],
    *,
    chunk_features: Sequence[str],
    set_features: Sequence[str],
    prior: ModelConfig | FallbackModel | None,
    prior_c: float,
    targets: Mapping[str, float],
    chunk_stage: ChunkStage | None = None,
    within_collection: bool = False,
    shrink: float | None = None,
    anchor: Sequence[str] = (),
) -> _TwoStage:
    chunks = chunk_stage or fit_chunk_stage(
        examples,
        evaluations=evaluations,
        chunk_features=chunk_features,
        prior=None if prior is None else prior.chunk,
        prior_c=prior_c,
    )
    # set rows with cross-fitted chunk probabilities in place of the model's own
    set_rows = []
    offset = 0
    for ev in evaluations:
        probs = chunks.oof[offset : offset + len(ev.chunks)]
        offset += len(ev.chunks)
        row = dict(ev.details["features"])
        top_two = np.sort(probs)[::-1][:2]
        row.update(
            best_chunk=float(probs.max()),
            top_chunk=float(probs[0]),
            mean_chunk=float(probs.mean()),
            chunk_margin=float(top_two[0] - (top_two[1] if len(top_two) > 1 else 0.0)),
        )
        set_rows.append(row)
    good = np.array([ex.good for ex in examples])
    natural = np.array([ex.kind == "natural" for ex in examples])
    groups = np.array([ex.group for ex in examples])
    weights = np.array([ex.weight for ex in examples], dtype=float)
    names = _available(set_rows, set_features)
    set_fit = _fit_stage(
        _matrix(set_rows, names),
        good.astype(int),
        groups,
        weights,
        names,
        prior=None if prior is None else prior.set,
        prior_c=prior_c,
        strata=np.array([ex.collection for ex in examples]) if within_collection else None,
        # a fallback without the anchor's evidence (no similarities) is fitted unshrunk
        shrink=shrink if any(name in anchor for name in names) else None,
        anchor=anchor,
    )
    relevant, partial, met = _bands(
        set_fit.oof,
        good,
        natural,
        target_precision=targets["target_precision"],
        min_failure_recall=targets["min_failure_recall"],
        max_good_irrelevant=targets["max_good_irrelevant"],
    )
    natural_chunks = np.array([ex.kind == "natural" for ex in examples for _ in ex.chunks])
    c_relevant, c_partial, c_kappa = _chunk_bands(
        chunks.oof[natural_chunks], chunks.labels[natural_chunks]
    )
    return _TwoStage(chunks, set_fit, relevant, partial, met, c_relevant, c_partial, c_kappa)


FALLBACK_GROUPS: tuple[tuple[str, ...], ...] = (
    ("similarity",),
    ("corpus_stats",),
    ("corpus_stats", "similarity"),
)
"""The evidence combinations a fitted profile gets a fallback gate for."""
SENTENCE_FALLBACK_GROUPS: tuple[tuple[str, ...], ...] = (
    ("sentences",),
    ("sentences", "similarity"),
    ("corpus_stats", "sentences"),
    ("corpus_stats", "sentences", "similarity"),
)
"""And these too when the gate reads sentence evidence (an input without sentence
vectors, alone or with the other groups missing)."""


def fit_gate(
    examples: Sequence[GateExample],
    *,
    base: EvaluatorConfig | None = None,
    corpus_stats: CorpusStats | None = None,
    chunk_features: Sequence[str] = DEFAULT_CHUNK_FEATURES,
    set_features: Sequence[str] = DEFAULT_SET_FEATURES,
    target_precision: float = 0.90,
    min_failure_recall: float = 0.80,
    max_good_irrelevant: float = 0.15,
    prior: ModelConfig | None = None,
    prior_c: float = 0.1,
    fallbacks: bool = True,
    name: str = "fitted",
    fitted_on: str = "",
    seed: int = 0,
    evaluations: Sequence[Evaluation] | None = None,
    chunk_stage: ChunkStage | None = None,
    within_collection: bool = False,
    shrink: float | None = None,
    anchor: Sequence[str] = DEFAULT_ANCHOR,
) -> CalibrationResult:
    """Fit the two-stage gate and its bands on labelled retrievals (see module doc).

    Args:
        examples: labelled retrievals (``GateExample.weight`` weighs each).
        base: the profile whose other settings the fitted one keeps.
        corpus_stats: the corpus's document frequencies (IDF evidence).
        chunk_features, set_features: the evidence each stage reads.
        target_precision, min_failure_recall, max_good_irrelevant: the band targets.
        prior: a fitted gate to adjust rather than replace (MAP fit, see
            :func:`crag_heuristic._calibration.logistic.fit_logistic`): its coefficients are
            the prior's centre and ``prior_c`` its inverse strength.
        fallbacks: also fit the gates used when an input lacks similarities,
            corpus statistics, or both.
        name, fitted_on: recorded in the profile.
        seed: recorded; the folds are deterministic.
        evaluations: the examples already graded by :func:`evaluate_examples`
            (``base``, every feature recorded), one per example in order: many
            fits on the same retrievals then grade them once.
        chunk_stage: the chunk stage already fitted on these examples
            (:func:`fit_chunk_stage`, the same ``chunk_features`` and prior):
            fits that differ only in their set stage then share it.
        within_collection: fit the set stage's coefficients within collections
            (``GateExample.collection``: one intercept each while fitting, then
            one refitted on all; :mod:`crag_heuristic._calibration.logistic`).
        shrink: the set stage's coefficients that share (in (0, 1]) of the way
            from the fit on the ``anchor`` features alone to the full fit
            (``None``: the full fit).
        anchor: the set features a ``shrink`` starts from (default: the top
            similarity, the strongest single predictor that needs no corpus).

    Raises:
        InputError: no examples, labels of one class only, ``evaluations``
            that do not match the examples, a ``shrink`` outside (0, 1] or
            with no anchor among the set features.
    """
    with requires("calibrate", "calibration"):
        from sklearn.metrics import roc_auc_score

    if not examples:
        raise InputError("calibration needs labelled retrievals")
    base = base or EvaluatorConfig()
    targets = {
        "target_precision": target_precision,
        "min_failure_recall": min_failure_recall,
        "max_good_irrelevant": max_good_irrelevant,
    }
    if evaluations is None:
        evaluations = evaluate_examples(examples, base, corpus_stats)
    elif len(evaluations) != len(examples) or any(
        len(ev.chunks) != len(ex.chunks) for ev, ex in zip(evaluations, examples, strict=False)
    ):
        raise InputError("evaluations must grade the examples, one per example, in order")
    if chunk_stage is not None and len(chunk_stage.labels) != sum(
        len(ex.chunks) for ex in examples
    ):
        raise InputError("chunk_stage was fitted on other examples")
    if shrink is not None and (
        isinstance(shrink, bool) or not (isinstance(shrink, float | int) and 0.0 < shrink <= 1.0)
    ):
        raise InputError(f"shrink must be in (0, 1], got {shrink!r}")
    if shrink is not None and not set(anchor) & set(set_features):
        raise InputError(f"shrink needs an anchor among the set features, got {list(anchor)}")
    set_options: dict[str, Any] = {
        "within_collection": within_collection,
        "shrink": shrink,
        "anchor": tuple(anchor),
    }
    main = _fit_two_stage(
        examples,
        evaluations,
        chunk_features=chunk_features,
        set_features=set_features,
        prior=prior,
        prior_c=prior_c,
        targets=targets,
        chunk_stage=chunk_stage,
        **set_options,
    )
    fallback_models = []
    if fallbacks:
        from .. import _evidence

        missing_groups = FALLBACK_GROUPS
        if "sentences" in _evidence.needs(chunk_features, "chunk") | _evidence.needs(
            set_features, "set"
        ):
            missing_groups += SENTENCE_FALLBACK_GROUPS
        for missing in missing_groups:
            if (
                "corpus_stats" in missing
                and corpus_stats is None
                and not any(ex.corpus_stats for ex in examples)
            ):
                continue  # the main gate already does without
            variant = _fit_two_stage(
                examples,
                evaluate_examples(examples, base, corpus_stats, without=missing),
                chunk_features=chunk_features,
                set_features=set_features,
                prior=None if prior is None else prior.for_missing(frozenset(missing)),
                prior_c=prior_c,
                targets=targets,
                **set_options,
            )
            fallback_models.append(
                FallbackModel(
                    missing=missing,
                    chunk=variant.chunk.stage,
                    set=variant.set.stage,
                    thresholds=Thresholds(relevant=variant.relevant, partial=variant.partial),
                    chunk_thresholds=Thresholds(
                        relevant=variant.chunk_relevant, partial=variant.chunk_partial
                    ),
                )
            )
    model = ModelConfig(
        chunk=main.chunk.stage,
        set=main.set.stage,
        fitted_on=fitted_on,
        fallbacks=tuple(fallback_models),
    )
    config = base.replace(
        name=name,
        model=model,
        thresholds={"relevant": main.relevant, "partial": main.partial},
        chunk_thresholds={"relevant": main.chunk_relevant, "partial": main.chunk_partial},
        description=f"two-stage logistic gate fitted on {fitted_on or 'labelled retrievals'}",
    )
    good = np.array([ex.good for ex in examples])
    natural = np.array([ex.kind == "natural" for ex in examples])
    groups = np.array([ex.group for ex in examples])
    set_oof = main.set.oof
    fast = set_oof > main.relevant
    irrelevant = set_oof <= main.partial
    failed = ~good
    chunk_y, chunk_oof = main.chunk.labels, main.chunk.oof
    report = {
        "fitted": _dt.date.today().isoformat(),
        "fitted_on": fitted_on,
        "retrievals": len(examples),
        "queries": len(set(groups.tolist())),
        "natural_failure_rate": float(failed[natural].mean()) if natural.any() else None,
        "chunk_features": [t.feature for t in main.chunk.stage.terms],
        "set_features": [t.feature for t in main.set.stage.terms],
        "prior": None if prior is None else f"MAP around the given gate, C = {prior_c}",
        "within_collection": within_collection,
        "shrink": None if shrink is None else {"amount": shrink, "anchor": list(anchor)},
        "chunk_C": main.chunk.c,
        "set_C": main.set.c,
        "oof_chunk_auc": float(roc_auc_score(chunk_y, chunk_oof))
        if len(set(chunk_y.tolist())) > 1
        else None,
        "oof_set_auc_failure": float(roc_auc_score(failed, -set_oof)),
        "oof_chunk_kappa": main.chunk_kappa,
        "bands_met_targets": main.met,
        "targets": {
            "fast_path_precision": target_precision,
            "failure_recall": min_failure_recall,
            "good_natural_in_irrelevant": max_good_irrelevant,
        },
        "oof_fast_path_precision": float((fast & good).sum() / max(fast.sum(), 1)),
        "oof_natural_fast_path_precision": float(
            (fast & good & natural).sum() / max((fast & natural).sum(), 1)
        ),
        "oof_good_natural_fast_path": float(fast[good & natural].mean())
        if (good & natural).any()
        else None,
        "oof_failure_recall": float((failed & ~fast).sum() / max(failed.sum(), 1)),
        "oof_probes_in_irrelevant": float(irrelevant[~natural].mean())
        if (~natural).any()
        else None,
        "fallbacks": [list(f.missing) for f in fallback_models],
        "seed": seed,
        "verdict_bands": state_bands(
            set_oof,
            good,
            natural,
            relevant=main.relevant,
            partial=main.partial,
            chosen_on=f"the out-of-fold predictions of the {len(examples)} lists fitted "
            f"({fitted_on or 'labelled retrievals'})",
        ),
    }
    return CalibrationResult(config=config, report=report)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def profile_toml(
    config: EvaluatorConfig,
    report: dict[str, Any] | None = None,
    *,
    warnings: Sequence[str] = (),
) -> str:
    """A configuration as TOML, with the calibration report as header comments
    (``warnings`` first, each on a ``# WARNING:`` line)."""
    lines = [f"# crag-heuristic profile {config.name!r}"]
    lines += [f"# WARNING: {message}" for message in warnings]
    for key, value in (report or {}).items():
        if isinstance(value, dict) and "summary" in value:  # a band statement: its sentence
            value = value["summary"]
        if key != "warnings":
            lines.append(f"# {key}: {value}")
    lines.append("")
    data = config.to_dict()

    def is_table_array(value: Any) -> bool:
        return isinstance(value, list | tuple) and bool(value) and isinstance(value[0], dict)

    def emit(table: dict[str, Any], prefix: str, header: str = "") -> None:
        scalars = {
            k: v
            for k, v in table.items()
            if not isinstance(v, dict) and (k == "terms" or not is_table_array(v))
        }
        tables = {k: v for k, v in table.items() if isinstance(v, dict)}
        arrays = {k: v for k, v in table.items() if k != "terms" and is_table_array(v)}
        if header:
            lines.append(header)
        elif prefix and scalars:
            lines.append(f"[{prefix}]")
        for key, value in scalars.items():
            if value is None:
                continue
            if key == "terms":
                lines.append("terms = [")
                lines.extend(f"    {_toml_value(term)}," for term in value)
                lines.append("]")
            else:
                lines.append(f"{key} = {_toml_value(value)}")
        if header or (prefix and scalars):
            lines.append("")
        for key, value in tables.items():
            if value is not None:
                emit(value, f"{prefix}.{key}" if prefix else key)
        for key, items in arrays.items():
            path = f"{prefix}.{key}" if prefix else key
            for item in items:
                emit(item, path, header=f"[[{path}]]")

    top = {k: v for k, v in data.items() if v is not None}
    emit(top, "")
    return "\n".join(lines).rstrip() + "\n"
