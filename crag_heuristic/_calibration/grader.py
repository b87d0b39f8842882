"""A gate calibrated on the user's own grader: its labels, the shipped gate as the prior,
the evidence chosen by cross-validation, the escalation band chosen with a guarantee.

The shipped gate was fitted on public collections; a user's traffic and grader (an
LLM, a cross-encoder, people) are what it should agree with. Given retrievals of
the user's (their queries, a folder's, or simulated ones) and a grader:

1. **Labels.** The grader grades each list's chunks (:func:`examples_from_grader`):
   a chunk is relevant when its grade is at least ``threshold`` (0.5), a list is
   good when one of its chunks is: the grader's list decision everywhere
   (:func:`~crag_heuristic._grading.guarantee.list_decision`: what a monitor
   counts and a grade log records).
2. **Spend the labels on the band first.** With fewer than ``min_refit``
   labelled queries the gate is not refitted: every label goes to its bands (the
   shipped gate's scores: the verdict bands, and with a guarantee asked for
   (``target``) the escalation band, :func:`~crag_heuristic.grading.guaranteed_band`).
   With at least ``min_refit`` and no guarantee, every label refits; with a
   guarantee, the lists are split at random (``seed``) into a half that
   refits the gate and a half that chooses the band: a band chosen on the lists
   the gate was fitted on would not keep its guarantee (and a split of queries
   rather than lists would not either: :func:`_split`).
3. **Refit around the shipped gate.** Each candidate of :data:`CANDIDATES` is
   fitted on the refit half: the shipped gate's evidence pulled towards its
   coefficients (a maximum a posteriori fit, two strengths), wider evidence
   pulled the same way, and single predictors alone. Each is scored by its
   cross-validated failure AUC on those labels (folds by query; the shipped gate
   unchanged is scored as it is: nothing of it is fitted); the best is kept,
   the shipped gate on ties.
4. **Verdict bands from the labels.** The RELEVANT / PARTIAL bands the router acts
   on are chosen on labels the gate was not fitted on, by
   :func:`~crag_heuristic.bench.fit_gate`'s rule (fast-path precision 0.90 on
   natural lists with 0.80 of the failed ones kept off it; at most 0.15 of the
   good lists graded IRRELEVANT): a refit's on its out-of-fold predictions (and
   stated again on the band half, which it never saw); the shipped gate's, kept,
   on every label (its scores were fitted elsewhere). Too few labels (10 good and
   10 failed lists) keep the prior's bands. Each is stated with its fast-path
   precision, failure recall and share of good lists graded IRRELEVANT on those
   labels, with 95 % Clopper-Pearson intervals: point estimates, not guarantees.
   The agreement band's path stays centred on a threshold fixed before the band
   half's labels were read (the refit's, or the prior's).
5. The profile records the sample (lists, queries, failure rate), the grader's
   fingerprint, every candidate's cross-validated AUC, the choice, the bands with
   their statement and the guarantee (:class:`~crag_heuristic.config.Guarantee`,
   a section of the profile).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._config import DEFAULT_PROFILE, EvaluatorConfig, Guarantee, load_config
from .._evaluator.evaluator import Evaluator
from .._exceptions import CragError, GraderError, InputError, InsufficientLabelsError
from .._grading.graders import checked_grades, grader_fingerprint
from .._grading.guarantee import guaranteed_band, labels_needed, window_labels_needed
from .._protocols import Grader
from .._text.corpus import CorpusStats
from .auc import failure_auc
from .gate import (
    WIDER_SET_FEATURES,
    CalibrationResult,
    GateExample,
    bands_on_labels,
    evaluate_examples,
    fit_chunk_stage,
    fit_gate,
    state_bands,
)


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One way to refit the gate on a grader's labels.

    Attributes:
        label: its name in the report.
        set_features: the set stage's evidence (``None``: the prior's).
        prior_c: the pull towards the shipped gate (``None``: no prior; a
            single predictor alone is fitted freely).
        refit: ``False``: the shipped gate as it is (nothing fitted).
    """

    label: str
    set_features: tuple[str, ...] | None = None
    prior_c: float | None = 0.1
    refit: bool = True


CANDIDATES: tuple[Candidate, ...] = (
    Candidate(label="the shipped gate, unchanged", refit=False),
    Candidate(label="the shipped gate's evidence, pulled hard (C 0.01)", prior_c=0.01),
    Candidate(label="the shipped gate's evidence, pulled (C 0.1)", prior_c=0.1),
    Candidate(label="the shipped gate's evidence, pulled lightly (C 1)", prior_c=1.0),
    Candidate(label="wider evidence, pulled (C 0.1)", set_features=WIDER_SET_FEATURES),
    *(
        Candidate(label=f"{name} alone", set_features=(name,), prior_c=None)
        for name in (
            "similarity_top",
            "similarity_mean",
            "similarity_gap",
            "bm25_top",
            "bm25_max",
            "keyword_coverage",
            "lexical_coherence",
        )
    ),
)
"""The refits compared on a grader's labels (module doc, step 3)."""

DEFAULT_MIN_REFIT = 100
"""Labelled queries below which the gate is not refitted when a band is asked for."""


def examples_from_grader(
    retrievals: Sequence[GateExample],
    grader: Grader,
    *,
    threshold: float = 0.5,
    progress: Callable[[Any, str], Any] | None = None,
) -> list[GateExample]:
    """``retrievals`` labelled by ``grader``: each chunk graded ``>= threshold`` is
    relevant (the retrievals' own ``relevant`` sets are replaced).

    Raises:
        GraderOutputError: an answer that is not one grade in [0, 1] per chunk.
        GraderError: the grader raised (its own error, or any other wrapped in one).
    """
    name = grader_fingerprint(grader)
    items = progress(retrievals, "grading") if progress is not None else retrievals
    out = []
    for ex in items:
        try:
            answer = grader.grade(ex.query, list(ex.chunks))
        except CragError:
            raise
        except Exception as exc:  # a grader of the user's: its failure, typed and named
            raise GraderError(
                f"the grader raised {type(exc).__name__} on a list of {len(ex.chunks)} chunk(s)",
                grader=name,
            ) from exc
        grades = checked_grades(answer, len(ex.chunks), grader=name)
        relevant = frozenset(c.id for c, g in zip(ex.chunks, grades, strict=True) if g >= threshold)
        out.append(dataclasses.replace(ex, relevant=relevant))
    return out


def _split(examples: Sequence[GateExample], seed: int) -> tuple[list[int], list[int]]:
    """Example positions of two random halves of the lists (seeded), each in order.

    Lists, not queries: the band's guarantee is for lists exchangeable with the ones it
    is chosen on. Halves of queries keep a query's lists together (its natural
    retrieval and its probe, the same list when the natural one failed), so the band's
    half holds them together far more often than a random sample of lists would, and
    its violations come in clumps the test does not allow for (20 queries of 20
    identical lists: the band broke its bound on 0.42 of 200 halvings, against delta
    0.1; tests/bench/test_grader_calibration.py)."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    first = set(order[: len(order) // 2])
    a = [i for i in range(len(examples)) if i in first]
    b = [i for i in range(len(examples)) if i not in first]
    return a, b


def _scores(
    config: EvaluatorConfig, examples: Sequence[GateExample], stats: CorpusStats | None
) -> list[float]:
    evaluator = Evaluator(config)
    return [
        evaluator.evaluate(ex.query, ex.chunks, ex.corpus_stats or stats).score for ex in examples
    ]


def refit_on_labels(
    examples: Sequence[GateExample],
    prior: EvaluatorConfig,
    *,
    corpus_stats: CorpusStats | None = None,
    candidates: Sequence[Candidate] = CANDIDATES,
    name: str = "grader-calibrated",
    fitted_on: str = "",
    band_targets: Mapping[str, float] | None = None,
) -> tuple[CalibrationResult, dict[str, float | None], str]:
    """Step 3 of the module doc: (the chosen gate, every candidate's cross-validated
    AUC, the chosen candidate's label); ``band_targets``: a refit's band targets
    (:func:`~crag_heuristic.bench.fit_gate`'s ``target_precision``,
    ``min_failure_recall``, ``max_good_irrelevant``)."""
    if prior.model is None:
        raise InputError(f"the prior {prior.name!r} has no fitted gate to refit")
    base = prior.replace(model=None, guarantee=None)
    chunk_features = tuple(t.feature for t in prior.model.chunk.terms)
    prior_set = tuple(t.feature for t in prior.model.set.terms)
    evaluations = evaluate_examples(examples, base, corpus_stats)
    failed = np.array([ex.failed for ex in examples])
    aucs: dict[str, float | None] = {}
    # one chunk stage, pulled towards the shipped one, serves every candidate: what they
    # differ in is the set stage
    chunk_stage = fit_chunk_stage(
        examples,
        evaluations=evaluations,
        chunk_features=chunk_features,
        prior=prior.model.chunk,
        prior_c=0.1,
    )

    targets = dict(band_targets or {})

    def fitted(candidate: Candidate, fallbacks: bool) -> CalibrationResult:
        return fit_gate(
            examples,
            base=base,
            corpus_stats=corpus_stats,
            chunk_features=chunk_features,
            set_features=candidate.set_features or prior_set,
            prior=None if candidate.prior_c is None else prior.model,
            prior_c=candidate.prior_c or 0.1,
            fallbacks=fallbacks,
            name=name,
            fitted_on=fitted_on,
            evaluations=evaluations,
            chunk_stage=chunk_stage,
            target_precision=targets.get("target_precision", 0.90),
            min_failure_recall=targets.get("min_failure_recall", 0.80),
            max_good_irrelevant=targets.get("max_good_irrelevant", 0.15),
        )

    for candidate in candidates:
        if not candidate.refit:
            scores = np.array(_scores(prior, examples, corpus_stats))
            aucs[candidate.label] = failure_auc(failed, scores)
            continue
        try:
            aucs[candidate.label] = fitted(candidate, False).report["oof_set_auc_failure"]
        except InputError:  # e.g. evidence none of the lists has
            aucs[candidate.label] = None

    def cv_auc(candidate: Candidate) -> float:
        value = aucs[candidate.label]
        return -1.0 if value is None else value

    best = max(candidates, key=cv_auc)  # the first (the shipped gate) on ties
    if not best.refit:
        return CalibrationResult(config=prior), aucs, best.label
    # the choice refitted with its fallback gates (inputs without some evidence)
    return fitted(best, True), aucs, best.label


@dataclass(frozen=True)
class GraderCalibration:
    """What :func:`fit_on_grader` made.

    Attributes:
        config: the gate (refitted, or the prior's) with its verdict bands chosen
            on the labels, without a guarantee.
        bands: per ``(target, eps)`` asked for, its guarantee, or the
            :class:`~crag_heuristic.InsufficientLabelsError` that refused it.
        report: the sample, the candidates' cross-validated AUCs, the choice, the
            verdict bands and what they do on the labels (``report["verdict_bands"]``).
        warnings: what could not be done as asked (too few labels for the verdict
            bands, targets they miss), each a sentence.
    """

    config: EvaluatorConfig
    bands: dict[tuple[str, float], Guarantee | InsufficientLabelsError]
    report: dict[str, Any]
    warnings: tuple[str, ...] = ()


def _enough(
    examples: Sequence[GateExample],
    at: Sequence[int],
    target: str,
    eps: float,
    delta: float,
    windows: Mapping[str, int] | None,
) -> bool:
    """Whether the lists at ``at`` count enough for a ``target`` band at ``eps``."""
    counted = len(at) if target == "agreement" else sum(examples[i].failed for i in at)
    window = None if windows is None else windows.get(target)
    try:
        needed = (
            labels_needed(eps, delta)
            if window is None
            else window_labels_needed(eps, delta, window)
        )
    except InsufficientLabelsError:
        return False
    return counted >= needed


def fit_on_grader(
    examples: Sequence[GateExample],
    *,
    grader: str,
    prior: EvaluatorConfig | str = DEFAULT_PROFILE,
    corpus_stats: CorpusStats | None = None,
    targets: Sequence[tuple[str, float]] = (),
    delta: float = 0.1,
    windows: Mapping[str, int] | None = None,
    min_refit: int = DEFAULT_MIN_REFIT,
    seed: int = 0,
    name: str = "grader-calibrated",
    labels: str = "",
    candidates: Sequence[Candidate] = CANDIDATES,
    target_precision: float = 0.90,
    min_failure_recall: float = 0.80,
    max_good_irrelevant: float = 0.15,
) -> GraderCalibration:
    """Steps 2 to 4 of the module doc, and a band per ``(target, eps)`` of ``targets``
    (all chosen on the same band half: one refit serves every target); ``windows``:
    per target, a guarantee on the realised risk over that many future lists
    (:func:`~crag_heuristic.grading.guaranteed_band`'s ``window``);
    ``target_precision``, ``min_failure_recall``, ``max_good_irrelevant``: the
    verdict bands' targets (:func:`~crag_heuristic.bench.fit_gate`'s).

    Raises:
        InputError: no examples, or labels of one class only.
    """
    if not examples:
        raise InputError("calibration on a grader needs labelled retrievals")
    prior_config = load_config(prior)
    queries = len({ex.group for ex in examples})
    # labels are scarce: below min_refit labelled queries they choose the bands of the
    # gate as it is (a refit chosen by cross-validation on a few dozen lists is noise)
    refit = queries >= min_refit
    everything = list(range(len(examples)))
    short: list[str] = []
    if targets and refit:
        fit_at, band_at = _split(examples, seed)
        # labels go to the band first: a refit that would leave the band half too few
        # lists for a target that every label allows is not made
        short = [
            f"{target} {eps:g}"
            for target, eps in targets
            if not _enough(examples, band_at, target, eps, delta, windows)
            and _enough(examples, everything, target, eps, delta, windows)
        ]
        if short:
            refit = False
    if not (targets and refit):
        fit_at = everything if refit else []
        band_at = everything
    report: dict[str, Any] = {
        "method": "calibrate_on_grader",
        "grader": grader,
        "labels": labels,
        "lists": len(examples),
        "queries": queries,
        "failure_rate": float(np.mean([ex.failed for ex in examples])),
        "prior": prior_config.name,
        "refit": refit,
        "refit_lists": len(fit_at),
        "band_lists": len(band_at) if targets else 0,
        "min_refit": min_refit,
        "seed": seed,
    }
    if short:
        report["refit_skipped"] = (
            f"half the labels would be too few for {', '.join(short)}: all went to the band"
        )
    config = prior_config.replace(guarantee=None)
    band_targets = {
        "target_precision": target_precision,
        "min_failure_recall": min_failure_recall,
        "max_good_irrelevant": max_good_irrelevant,
    }
    gate_fitted = False
    if refit:
        fit_examples = [examples[i] for i in fit_at]
        result, aucs, chosen = refit_on_labels(
            fit_examples,
            prior_config,
            corpus_stats=corpus_stats,
            candidates=candidates,
            name=name,
            fitted_on=f"{len(fit_examples)} lists labelled by {grader} ({labels or 'user lists'})",
            band_targets=band_targets,
        )
        config = result.config
        gate_fitted = config is not prior_config
        report.update(result.report)
        report["cv_auc"] = aucs
        report["chosen"] = chosen
    else:
        report["chosen"] = f"the prior ({prior_config.name}), unchanged (the labels go to the band)"
    config = config.replace(name=name)
    warnings: tuple[str, ...] = ()
    held_out = band_at if targets else []
    if gate_fitted:
        # the refit's bands came from its out-of-fold predictions (fit_gate); stated on
        # the band half too, when there is one: lists neither the gate nor its bands saw
        if not report.get("bands_met_targets", True):
            warnings = (
                "the refit's fast-path band cannot meet its targets on its out-of-fold "
                f"predictions: {report['verdict_bands']['summary']}",
            )
        if held_out:
            held = [examples[i] for i in held_out]
            report["verdict_bands_held_out"] = state_bands(
                _scores(config, held, corpus_stats),
                [ex.good for ex in held],
                relevant=config.thresholds.relevant,
                partial=config.thresholds.partial,
                chosen_on=f"the {len(held)} labelled lists of the band half (not fitted on)",
            )
    else:
        # the gate was not fitted on these labels: every one of them chooses its bands
        scores_all = _scores(config, examples, corpus_stats)
        chosen_bands = bands_on_labels(
            scores_all,
            [ex.good for ex in examples],
            prior=prior_config.thresholds,
            chosen_on=f"{len(examples)} lists labelled by {grader} ({labels or 'user lists'})",
            **band_targets,
        )
        config = config.replace(
            thresholds={"relevant": chosen_bands.relevant, "partial": chosen_bands.partial}
        )
        report["verdict_bands"] = chosen_bands.statement
        report["bands_chosen"] = (
            "on the labels, scored by the gate (not fitted on them)"
            if chosen_bands.fitted
            else f"the prior's ({prior_config.name}): too few labels"
        )
        warnings = chosen_bands.warnings
    bands: dict[tuple[str, float], Guarantee | InsufficientLabelsError] = {}
    if targets:
        band_examples = [examples[i] for i in band_at]
        scores = _scores(config, band_examples, corpus_stats)
        good = [ex.good for ex in band_examples]
        # the agreement path is centred on a threshold fixed before the band half's
        # labels were read: the refit's (chosen on the other half) or the prior's
        centre = config.thresholds.relevant if gate_fitted else prior_config.thresholds.relevant
        for target, eps in targets:
            try:
                bands[(target, eps)] = guaranteed_band(
                    scores,
                    good,
                    target=target,  # type: ignore[arg-type]
                    eps=eps,
                    delta=delta,
                    centre=centre,
                    window=None if windows is None else windows.get(target),
                    grader=grader,
                    labels=labels or f"{len(band_examples)} user lists",
                )
            except InsufficientLabelsError as exc:
                bands[(target, eps)] = exc
    return GraderCalibration(config=config, bands=bands, report=report, warnings=warnings)


def calibrate_on_grader(
    examples: Sequence[GateExample],
    *,
    grader: str,
    prior: EvaluatorConfig | str = DEFAULT_PROFILE,
    corpus_stats: CorpusStats | None = None,
    target: str | None = None,
    eps: float = 0.1,
    delta: float = 0.1,
    window: int | None = None,
    min_refit: int = DEFAULT_MIN_REFIT,
    seed: int = 0,
    name: str = "grader-calibrated",
    labels: str = "",
    candidates: Sequence[Candidate] = CANDIDATES,
    target_precision: float = 0.90,
    min_failure_recall: float = 0.80,
    max_good_irrelevant: float = 0.15,
) -> CalibrationResult:
    """The module doc on labelled retrievals (:func:`examples_from_grader`): the
    profile, with its guarantee when ``target`` is given.

    Args:
        examples: the grader-labelled retrievals (natural ones: the user's traffic).
        grader: the grader's fingerprint (recorded; keys the guarantee).
        prior: the shipped gate (or another profile) to refit around.
        corpus_stats: the corpus's statistics (when the examples carry none).
        target: ``"recall"`` or ``"agreement"`` for a set cascade's band with a
            guarantee (:func:`~crag_heuristic.grading.guaranteed_band`), or ``None``.
        eps, delta: the guarantee's bound and confidence.
        window: a guarantee on the realised risk of the next ``window`` lists
            counted (:func:`~crag_heuristic.grading.guaranteed_band`).
        min_refit: labelled queries needed to refit the gate (below it, every label
            chooses the bands of the gate as it is).
        seed: the split of the lists (refit half, band half).
        name: the profile's name; ``labels``: how the lists were made (recorded).
        candidates: the refits compared.
        target_precision, min_failure_recall, max_good_irrelevant: the verdict
            bands' targets (step 4 of the module doc).

    Returns:
        The profile and its report (``report["verdict_bands"]``: the verdict bands and what
        they do on the labels); ``warnings`` when the labels were too few for the
        verdict bands or the bands miss their targets on them.

    Raises:
        InputError: no examples, or labels of one class only.
        InsufficientLabelsError: too few lists for the guarantee (how many are needed).
    """
    made = fit_on_grader(
        examples,
        grader=grader,
        prior=prior,
        corpus_stats=corpus_stats,
        targets=() if target is None else ((target, eps),),
        delta=delta,
        windows=None if window is None or target is None else {target: window},
        min_refit=min_refit,
        seed=seed,
        name=name,
        labels=labels,
        candidates=candidates,
        target_precision=target_precision,
        min_failure_recall=min_failure_recall,
        max_good_irrelevant=max_good_irrelevant,
    )
    config, report = made.config, dict(made.report)
    if target is not None:
        band = made.bands[(target, eps)]
        if isinstance(band, InsufficientLabelsError):
            raise band
        config = config.replace(guarantee=band)
        report["guarantee"] = band.describe()
    report["warnings"] = list(made.warnings)
    return CalibrationResult(config=config, report=report, warnings=made.warnings)
