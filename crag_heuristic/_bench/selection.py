"""Nested leave-one-collection-out: a gate's design chosen without the collection it is scored on.

A *variant* is one way to make the gate (:class:`GateVariant`: the evidence
each stage reads, the band targets). Choosing among variants by their
leave-one-collection-out (LOCO) scores and then reporting those scores
reports a number chosen on the folds it is reported on. The nested protocol
(Varma and Simon, 2006; Cawley and Talbot, 2010, for the bias it removes)
keeps the choice inside the training collections:

    for each collection c (the outer fold):
        for each variant v and each other collection i:
            gain(v, c, i) = AUC_i(v fitted on the collections other than c and i)
                            - AUC_i(the top-1 cosine)
        pick(c) = the variant whose smallest gain(v, c, i) over i is largest,
                  ties by the mean gain                           (:data:`RULE`)
        nested(c) = AUC_c(pick(c) fitted on the collections other than c)

``nested(c)`` is the number to expect on a collection nobody tuned to; each
collection's ``nested(c)`` against its top-1 cosine is the claim. The rule
protects the worst collection rather than the mean (the rule before it, the
highest mean inner AUC, :data:`MEAN_RULE`, raised the mean of the collections
it was chosen on and fell below the top-1 cosine on collections never seen:
issue 25); both are kept (:data:`RULES`) so a run can be compared with the
earlier one. A gate is fitted by
:func:`crag_heuristic._calibration.gate.fit_gate` (each collection weighing the
same); every fit on the same set of collections is made once
(:class:`FitCache`). The ledger (:func:`ledger`) lists every variant with its
inner scores per outer fold, the picks and the plain LOCO score of each
variant (for reference: a plain LOCO score of the best variant is not a result).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._calibration.auc import failure_auc
from .._calibration.gate import (
    ChunkStage,
    GateExample,
    evaluate_examples,
    fit_chunk_stage,
    fit_gate,
)
from .._config import EvaluatorConfig
from .._evaluator.evaluator import Evaluator
from .._types import Evaluation
from .baselines import top1
from .failure import natural_auc
from .pipeline import Prepared, labels_for, retrievals_for

_BANDS_RULE = (
    "bands: the targets under which the most inner held-out collections meet the "
    "natural-traffic goal, ties by the mean share of good natural retrievals on the fast path"
)
WORST_RULE = (
    "evidence: the variant whose smallest gain in failure AUC (natural + probes) over the "
    "top-1 cosine, among the inner held-out collections, is largest (ties: the larger mean "
    f"gain); {_BANDS_RULE}"
)
"""How a variant is picked from the training collections (fixed before any run): the
worst inner collection decides (issue 25)."""
MEAN_RULE = (
    "evidence: the variant with the highest mean failure AUC (natural + probes) over the inner "
    f"held-out collections; {_BANDS_RULE}"
)
"""The rule before it (issue 18 to issue 24's default): the mean decides."""
WITHIN_RULE = (
    "evidence: among the variants whose set stage is fitted within collections (and the top-1 "
    "cosine alone), the one whose smallest gain in failure AUC (natural + probes) over the "
    "top-1 cosine, among the inner held-out collections, is largest (ties: the larger mean "
    f"gain); {_BANDS_RULE}"
)
"""The worst-case rule among the steady family only: pooled fits stay in the ledger as
references, not picks (added after the first nested run of the worst rule, whose inner
step picked the pooled nine-feature 'wide' variant for Medline left out and lost 0.13 there:
issue 25 found pooled fits transferring worst)."""
RULE = WITHIN_RULE
RULES: dict[str, str] = {"worst-within": WITHIN_RULE, "worst": WORST_RULE, "mean": MEAN_RULE}
"""The rules ``nested_loco(rule=...)`` knows, by name."""


def eligible(rule: str, variant: GateVariant) -> bool:
    """Whether ``rule`` may pick ``variant`` (every variant is scored either way)."""
    if rule == "worst-within":
        return variant.within_collection or variant.set_features == ("similarity_top",)
    return True


def evidence_key(rule: str, inner: Mapping[str, float]) -> tuple[float, ...]:
    """What step 1 ranks a variant by under ``rule`` (``"worst"`` or ``"mean"``), from
    its inner numbers (:func:`inner_numbers`); larger is better."""
    if rule in ("worst", "worst-within"):
        return (inner["min_gain"], inner["mean_gain"])
    if rule == "mean":
        return (inner["mean_auc"],)
    raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")


def inner_numbers(aucs: Sequence[float], top1: Sequence[float]) -> dict[str, float]:
    """A variant's inner AUCs and the top-1 cosine's on the same collections, as the
    numbers a rule reads: the mean AUC, the smallest and the mean gain over top-1."""
    gains = np.array(aucs, dtype=float) - np.array(top1, dtype=float)
    return {
        "mean_auc": float(np.nanmean(aucs)),
        "min_gain": float(np.nanmin(gains)),
        "mean_gain": float(np.nanmean(gains)),
    }


@dataclass(frozen=True, kw_only=True)
class GateVariant:
    """One way to make the gate.

    Attributes:
        label: its name in the ledger.
        chunk_features, set_features: the evidence of each stage.
        target_precision, min_failure_recall, max_good_irrelevant: the band
            targets (see :func:`~crag_heuristic._calibration.gate.fit_gate`).
        within_collection: the set stage fitted within collections (fixed effects).
        shrink: the set stage shrunk towards the top-1 cosine's fit (that share
            of the way from it to the full fit; ``None``: not shrunk).
        note: why it is in the comparison.
    """

    label: str
    chunk_features: tuple[str, ...]
    set_features: tuple[str, ...]
    target_precision: float = 0.90
    min_failure_recall: float = 0.80
    max_good_irrelevant: float = 0.15
    within_collection: bool = False
    shrink: float | None = None
    note: str = ""

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class CollectionData:
    """One collection's labelled retrievals (natural + probes), graded once.

    Attributes:
        name: the collection.
        prepared: its index, statistics and analyzer.
        retrievals: the labelled retrievals as the failure benchmark makes them
            (grouped by query id).
        examples: the same for fitting several collections together: each
            weighing ``1 / n``, grouped under ``collection:query``, carrying
            the collection's statistics.
        evaluations: each example graded by the base profile with every
            feature recorded (what a fit reads).
        failed, natural: per retrieval.
    """

    name: str
    prepared: Prepared
    retrievals: list[GateExample]
    examples: list[GateExample] = field(init=False)
    evaluations: list[Evaluation] = field(init=False)
    base: EvaluatorConfig = field(default_factory=lambda: EvaluatorConfig.from_profile("synapse"))
    failed: np.ndarray = field(init=False)
    natural: np.ndarray = field(init=False)
    top1_auc: float = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.retrievals)
        self.examples = [
            dataclasses.replace(
                ex,
                group=f"{self.name}:{ex.group}",
                weight=1.0 / n,
                corpus_stats=self.prepared.stats,
                collection=self.name,
            )
            for ex in self.retrievals
        ]
        self.evaluations = evaluate_examples(self.examples, self.base, self.prepared.stats)
        self.failed = np.array([ex.failed for ex in self.retrievals])
        self.natural = np.array([ex.kind == "natural" for ex in self.retrievals])
        top = [top1([c.score or 0.0 for c in ex.chunks]) for ex in self.retrievals]
        auc = self.auc(np.array(top))[0]
        self.top1_auc = float("nan") if auc is None else auc

    @classmethod
    def of(cls, prepared: Prepared, k: int, base: EvaluatorConfig | None = None) -> CollectionData:
        """The test split's natural and probe retrievals of depth ``k``."""
        retrievals = retrievals_for(prepared, labels_for(prepared.collection, "qrels", "test"), k)
        if base is None:
            return cls(prepared.collection.name, prepared, retrievals)
        return cls(prepared.collection.name, prepared, retrievals, base)

    def auc(self, scores: np.ndarray) -> tuple[float | None, float | None]:
        """(AUC over natural + probes, AUC over natural retrievals or ``None``)."""
        return failure_auc(self.failed, scores), natural_auc(self.failed, self.natural, scores)


def gate_scores(config: EvaluatorConfig, data: CollectionData) -> tuple[np.ndarray, list[str]]:
    """The gate's P(good) and verdict for each of ``data``'s retrievals."""
    evaluator = Evaluator(config, analyzer=data.prepared.analyzer)
    evaluations = [
        evaluator.evaluate(ex.query, ex.chunks, data.prepared.stats) for ex in data.retrievals
    ]
    return np.array([e.score for e in evaluations]), [e.verdict.value for e in evaluations]


class FitCache:
    """Fits of variants on sets of collections, each made once."""

    def __init__(self, datasets: Mapping[str, CollectionData]) -> None:
        self.datasets = datasets
        bases = [d.base for d in datasets.values()]
        if not bases or any(b.fingerprint() != bases[0].fingerprint() for b in bases):
            raise ValueError("the collections must be graded with one base profile")
        self.base = bases[0]
        self._fits: dict[tuple[str, frozenset[str]], EvaluatorConfig] = {}
        self._chunk_stages: dict[tuple[tuple[str, ...], frozenset[str]], ChunkStage] = {}
        self._scores: dict[tuple[str, frozenset[str], str], tuple[np.ndarray, list[str]]] = {}

    def fit(self, variant: GateVariant, names: Sequence[str]) -> EvaluatorConfig:
        """``variant`` fitted on the collections ``names`` (each weighing the same)."""
        key = (variant.label, frozenset(names))
        if key not in self._fits:
            chosen = sorted(names)
            examples = [ex for n in chosen for ex in self.datasets[n].examples]
            evaluations = [ev for n in chosen for ev in self.datasets[n].evaluations]
            stage_key = (variant.chunk_features, frozenset(names))
            if (
                stage_key not in self._chunk_stages
            ):  # variants that differ in their set stage share it
                self._chunk_stages[stage_key] = fit_chunk_stage(
                    examples, evaluations=evaluations, chunk_features=variant.chunk_features
                )
            self._fits[key] = fit_gate(
                examples,
                base=self.base,
                chunk_features=variant.chunk_features,
                set_features=variant.set_features,
                target_precision=variant.target_precision,
                min_failure_recall=variant.min_failure_recall,
                max_good_irrelevant=variant.max_good_irrelevant,
                fallbacks=False,
                name=variant.label,
                fitted_on=f"the test splits of {', '.join(chosen)}",
                evaluations=evaluations,
                chunk_stage=self._chunk_stages[stage_key],
                within_collection=variant.within_collection,
                shrink=variant.shrink,
            ).config
        return self._fits[key]

    def scores(self, variant: GateVariant, names: Sequence[str], held_out: str) -> np.ndarray:
        """P(good) on ``held_out`` of ``variant`` fitted on ``names``."""
        return self.graded(variant, names, held_out)[0]

    def graded(
        self, variant: GateVariant, names: Sequence[str], held_out: str
    ) -> tuple[np.ndarray, list[str]]:
        """P(good) and verdicts on ``held_out`` of ``variant`` fitted on ``names``, made
        once (every nested run over the same collections shares them)."""
        key = (variant.label, frozenset(names), held_out)
        if key not in self._scores:
            self._scores[key] = gate_scores(self.fit(variant, names), self.datasets[held_out])
        return self._scores[key]


@dataclass(frozen=True)
class Inner:
    """One variant fitted without two collections and scored on one of them."""

    auc: float
    verdicts: dict[str, Any]


@dataclass
class NestedResult:
    """What :func:`nested_loco` found.

    Attributes:
        picks: outer collection -> the variant picked on the others (its band
            targets included).
        inner: outer collection -> step -> variant label -> the numbers it was
            ranked by (step ``"evidence"``: :func:`inner_numbers`, the mean inner
            AUC, the smallest and the mean inner gain over the top-1 cosine;
            ``"bands"``: the number of inner collections meeting the goal, then
            the mean fast-path share).
        rule: the step-1 rule's name (:data:`RULES`).
        configs: outer collection -> the pick fitted on the others.
        scores, verdicts: outer collection -> the pick's P(good) and verdicts there.
        loco: variant -> collection -> (AUC mix, AUC natural) fitted on the
            others (plain LOCO, for reference: not a result).
        on_all: the variant the rule picks on every collection (plain LOCO):
            what the shipped default is made as; its nested score is the claim.
        on_all_keys: the keys it was picked by.
    """

    picks: dict[str, GateVariant]
    inner: dict[str, dict[str, dict[str, Any]]]
    configs: dict[str, EvaluatorConfig]
    scores: dict[str, np.ndarray]
    verdicts: dict[str, list[str]]
    loco: dict[str, dict[str, tuple[float | None, float | None]]]
    on_all: GateVariant
    on_all_keys: dict[str, dict[str, Any]]
    rule: str = "worst-within"


def nested_loco(
    evidence: Sequence[GateVariant],
    bands: Sequence[Mapping[str, float]],
    cache: FitCache,
    *,
    meets_goal: Callable[[Mapping[str, Any]], bool],
    rule: str = "worst-within",
    log: Callable[[str], None] = lambda message: None,
) -> NestedResult:
    """The protocol of the module doc over ``cache``'s collections: per outer fold,
    step 1 picks the evidence variant by ``rule`` (:data:`RULES`: ``"worst-within"``,
    the smallest inner gain over the top-1 cosine among the variants fitted within
    collections; ``"worst"``, the same among all; ``"mean"``, the mean inner AUC),
    step 2 its band targets (``bands``, each a dict of :class:`GateVariant` band
    fields) by the number of inner collections where ``meets_goal`` holds for the
    natural-traffic verdicts."""
    evidence_key(rule, {"mean_auc": 0.0, "min_gain": 0.0, "mean_gain": 0.0})  # a known rule
    if not any(eligible(rule, v) for v in evidence):
        raise ValueError(f"no variant the rule {rule!r} may pick")
    from .failure import verdict_table

    if len({v.label for v in evidence}) != len(evidence):
        raise ValueError("variant labels must be unique")
    names = sorted(cache.datasets)
    done: dict[tuple[str, str, str], Inner] = {}

    def inner_result(variant: GateVariant, outer: str, held: str) -> Inner:
        key = (variant.label, outer, held)
        if key not in done:
            train = [n for n in names if n not in (outer, held)]
            data = cache.datasets[held]
            scores, verdicts = cache.graded(variant, train, held)
            auc = data.auc(scores)[0]
            done[key] = Inner(
                float("nan") if auc is None else auc,
                verdict_table(verdicts, data.failed, data.natural),
            )
        return done[key]

    def choose(outer: str) -> tuple[GateVariant, dict[str, dict[str, Any]]]:
        """The two steps on the collections other than ``outer`` ("" for none: the
        rule applied to every collection, which is how the shipped default is picked)."""
        others = [n for n in names if n != outer]
        top1_aucs = [cache.datasets[i].top1_auc for i in others]
        step1 = {
            v.label: inner_numbers([inner_result(v, outer, i).auc for i in others], top1_aucs)
            for v in evidence
        }
        chosen = max(  # the first on ties
            (v for v in evidence if eligible(rule, v)),
            key=lambda v: evidence_key(rule, step1[v.label]),
        )
        banded = [
            dataclasses.replace(chosen, label=f"{chosen.label} | {_band_label(b)}", **dict(b))  # type: ignore[arg-type]
            for b in bands
        ]
        step2 = {}
        for v in banded:
            results = [inner_result(v, outer, i) for i in others]
            met = sum(meets_goal(r.verdicts) for r in results)
            share = float(np.mean([r.verdicts["good_natural_fast_path"] or 0.0 for r in results]))
            step2[v.label] = (met, share)
        pick = max(banded, key=lambda v: step2[v.label])
        return pick, {"evidence": step1, "bands": {k: list(v) for k, v in step2.items()}}

    picks: dict[str, GateVariant] = {}
    inner: dict[str, dict[str, dict[str, Any]]] = {}
    configs: dict[str, EvaluatorConfig] = {}
    scores: dict[str, np.ndarray] = {}
    verdicts: dict[str, list[str]] = {}
    for outer in names:
        others = [n for n in names if n != outer]
        picks[outer], inner[outer] = choose(outer)
        configs[outer] = cache.fit(picks[outer], others)
        scores[outer], verdicts[outer] = cache.graded(picks[outer], others, outer)
        log(f"{outer}: picked {picks[outer].label!r}")
    on_all, on_all_keys = choose("")
    log(f"on every collection: {on_all.label!r} (the shipped default's rule)")
    loco = {
        v.label: {
            n: cache.datasets[n].auc(cache.scores(v, [m for m in names if m != n], n))
            for n in names
        }
        for v in evidence
    }
    return NestedResult(picks, inner, configs, scores, verdicts, loco, on_all, on_all_keys, rule)


def _band_label(targets: Mapping[str, float]) -> str:
    short = {"target_precision": "precision", "max_good_irrelevant": "good->irrelevant"}
    return ", ".join(f"{short.get(k, k)} {v:g}" for k, v in targets.items())
