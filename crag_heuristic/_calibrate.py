"""Fitting a gate from labels: the two-stage logistic model and its verdict bands.

The gate the evaluator applies when its configuration has a ``model``
(``crag_heuristic._evaluator.model``) is fitted here, with scikit-learn:

1. **Chunk stage.** Every retrieved chunk is labelled relevant or not (qrels,
   or an LLM grader's labels). A regularised logistic regression on
   standardised chunk features (by default ``lexical_contrast``,
   ``similarity``, ``similarity_z`` and ``keyword_overlap``) estimates
   P(chunk relevant). Its predictions for the set stage are cross-fitted:
   each query's chunks are scored by a model that never saw that query.
2. **Set stage.** Every retrieval is labelled good (a relevant chunk in its
   top k) or failed. A second logistic regression on set features (by default
   ``best_chunk``, the highest chunk probability, and ``similarity_std``, the
   spread of the retriever's scores) estimates P(good). Logistic regression's
   output is a calibrated probability on the fitting distribution (checked
   with a reliability diagram in the benchmark report).
3. **Bands.** From out-of-fold predictions (grouped by query):
   ``relevant`` is the lowest band that gives the fast path the target
   precision (RELEVANT and not failed) while keeping the failure recall
   (failed and not RELEVANT); ``partial`` is the band below which at most a
   given share of the good *natural* retrievals fall (the cost of sending
   good retrievals to the web). Chunk bands: ``relevant`` maximises Cohen's
   kappa with the chunk labels; ``partial`` keeps 95 % of relevant chunks.

Regularisation strengths are chosen by grouped cross-validation (folds by
query: a query's natural retrieval and its probe never straddle folds).
Nothing here reads test data: the caller passes the fitting split.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._config import EvaluatorConfig, LogisticStage, ModelConfig, ModelTerm
from ._corpus import CorpusStats
from ._evaluator import Evaluator
from ._exceptions import InputError
from ._types import Chunk, Evaluation

__all__ = [
    "DEFAULT_CHUNK_FEATURES",
    "DEFAULT_SET_FEATURES",
    "CalibrationResult",
    "ChunkStage",
    "GateExample",
    "fit_chunk_stage",
    "fit_gate",
    "kappa_band",
    "profile_toml",
]

DEFAULT_CHUNK_FEATURES = ("lexical_contrast", "similarity", "similarity_z", "keyword_overlap")
DEFAULT_SET_FEATURES = ("best_chunk", "similarity_std")
_C_GRID = (0.01, 0.1, 1.0, 10.0)


@dataclass(frozen=True)
class GateExample:
    """One labelled retrieval: the query, its chunks, which are relevant.

    Attributes:
        group: what cross-validation groups by (the query id).
        kind: ``"natural"`` or ``"probe"`` (probes count as failures; the
            IRRELEVANT band is set on natural retrievals only).
    """

    group: str
    kind: str
    query: str
    chunks: tuple[Chunk, ...]
    relevant: frozenset[str]

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
    """

    config: EvaluatorConfig
    report: dict[str, Any] = field(default_factory=dict)

    def write(self, path: str | Path) -> Path:
        """Write the profile as TOML (loadable by ``EvaluatorConfig.from_file``)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(profile_toml(self.config, self.report), encoding="utf-8")
        return target


def _fit_lr(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int
) -> tuple[Any, float, np.ndarray]:
    """Pick C by grouped CV (AUC), refit on everything; also return OOF probabilities."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(set(y.tolist())) < 2:
        raise InputError("calibration needs both positive and negative labels")
    n_groups = len(set(groups.tolist()))
    folds = list(GroupKFold(n_splits=min(5, n_groups)).split(x, y, groups))

    def model(c: float) -> Any:
        return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000))

    best_c, best_auc, best_oof = _C_GRID[0], -1.0, np.zeros(len(y))
    for c in _C_GRID:
        oof = np.zeros(len(y))
        for train, test in folds:
            if len(set(y[train].tolist())) < 2:
                oof[test] = y[train].mean()
                continue
            oof[test] = model(c).fit(x[train], y[train]).predict_proba(x[test])[:, 1]
        auc = float(roc_auc_score(y, oof))
        if auc > best_auc + 1e-9:
            best_c, best_auc, best_oof = c, auc, oof
    del seed  # GroupKFold is deterministic; kept for a future shuffled splitter
    return model(best_c).fit(x, y), best_c, best_oof


def _stage(fitted: Any, names: Sequence[str]) -> LogisticStage:
    scaler, lr = fitted[0], fitted[1]
    terms = tuple(
        ModelTerm(
            feature=name,
            weight=float(lr.coef_[0][i]),
            mean=float(scaler.mean_[i]),
            scale=float(scaler.scale_[i]) or 1.0,
        )
        for i, name in enumerate(names)
    )
    return LogisticStage(intercept=float(lr.intercept_[0]), terms=terms)


def _matrix(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> np.ndarray:
    """Feature matrix; a missing value takes the column mean (it then adds nothing)."""
    x = np.array([[np.nan if r.get(n) is None else float(r[n]) for n in names] for r in rows])
    means = np.nanmean(x, axis=0)
    means = np.where(np.isnan(means), 0.0, means)
    return np.where(np.isnan(x), means, x)


def _bands(
    p_good: np.ndarray,
    good: np.ndarray,
    natural: np.ndarray,
    *,
    target_precision: float,
    min_failure_recall: float,
    max_good_irrelevant: float,
) -> tuple[float, float, bool]:
    """(relevant, partial, target met) bands on out-of-fold P(good)."""
    failed = ~good
    relevant = None
    for t in np.unique(p_good):  # ascending: the lowest band meeting the targets
        fast = p_good > t
        if fast.sum() < 10:
            break
        precision = (fast & good).sum() / fast.sum()
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


def kappa_band(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(band, kappa): the band over the scores' percentiles whose ``score > band``
    agrees best with ``labels`` by Cohen's kappa (the first such band on ties)."""
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


@dataclass(frozen=True)
class ChunkStage:
    """A fitted chunk stage with its out-of-fold evidence.

    Attributes:
        stage: the logistic stage (for ``ModelConfig.chunk``).
        evaluations: the base evaluation of each example (features inside).
        labels, groups, oof: per chunk, in example order.
        c: the chosen regularisation strength.
    """

    stage: LogisticStage
    evaluations: list[Evaluation]
    labels: np.ndarray
    groups: np.ndarray
    oof: np.ndarray
    c: float


def fit_chunk_stage(
    examples: Sequence[GateExample],
    *,
    base: EvaluatorConfig | None = None,
    corpus_stats: CorpusStats | None = None,
    chunk_features: Sequence[str] = DEFAULT_CHUNK_FEATURES,
    seed: int = 0,
) -> ChunkStage:
    """Fit the chunk stage alone (per-document grading) on labelled chunks."""
    if not examples:
        raise InputError("calibration needs labelled retrievals")
    base = base or EvaluatorConfig()
    evaluator = Evaluator(base.replace(model=None), all_evidence=True)
    evaluations: list[Evaluation] = [
        evaluator.evaluate(ex.query, ex.chunks, corpus_stats) for ex in examples
    ]
    rows = [g.features for ev in evaluations for g in ev.chunks]
    labels = np.array([c.id in ex.relevant for ex in examples for c in ex.chunks])
    groups = np.array([ex.group for ex in examples for _ in ex.chunks])
    fitted, c, oof = _fit_lr(_matrix(rows, chunk_features), labels, groups, seed)
    return ChunkStage(
        stage=_stage(fitted, chunk_features),
        evaluations=evaluations,
        labels=labels,
        groups=groups,
        oof=oof,
        c=c,
    )


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
    name: str = "fitted",
    fitted_on: str = "",
    seed: int = 0,
) -> CalibrationResult:
    """Fit the two-stage gate and its bands on labelled retrievals (see module doc).

    Raises:
        InputError: no examples, or labels of one class only.
    """
    from sklearn.metrics import roc_auc_score

    base = base or EvaluatorConfig()
    chunks = fit_chunk_stage(
        examples, base=base, corpus_stats=corpus_stats, chunk_features=chunk_features, seed=seed
    )
    evaluations, chunk_y, chunk_oof = chunks.evaluations, chunks.labels, chunks.oof

    # set rows with cross-fitted chunk probabilities in place of the model's own
    set_rows = []
    offset = 0
    for ev in evaluations:
        probs = chunk_oof[offset : offset + len(ev.chunks)]
        offset += len(ev.chunks)
        row = dict(ev.details["features"])
        row.update(
            best_chunk=float(probs.max()), top_chunk=float(probs[0]), mean_chunk=float(probs.mean())
        )
        set_rows.append(row)
    good = np.array([ex.good for ex in examples])
    natural = np.array([ex.kind == "natural" for ex in examples])
    groups = np.array([ex.group for ex in examples])
    x_set = _matrix(set_rows, set_features)
    set_model, set_c, set_oof = _fit_lr(x_set, good.astype(int), groups, seed)

    relevant, partial, met = _bands(
        set_oof,
        good,
        natural,
        target_precision=target_precision,
        min_failure_recall=min_failure_recall,
        max_good_irrelevant=max_good_irrelevant,
    )
    natural_chunks = np.array([ex.kind == "natural" for ex in examples for _ in ex.chunks])
    c_relevant, c_partial, c_kappa = _chunk_bands(
        chunk_oof[natural_chunks], chunk_y[natural_chunks]
    )
    model = ModelConfig(
        chunk=chunks.stage,
        set=_stage(set_model, set_features),
        fitted_on=fitted_on,
    )
    config = base.replace(
        name=name,
        model=model,
        thresholds={"relevant": relevant, "partial": partial},
        chunk_thresholds={"relevant": c_relevant, "partial": c_partial},
        description=f"two-stage logistic gate fitted on {fitted_on or 'labelled retrievals'}",
    )
    fast = set_oof > relevant
    irrelevant = set_oof <= partial
    failed = ~good
    report = {
        "fitted": _dt.date.today().isoformat(),
        "fitted_on": fitted_on,
        "retrievals": len(examples),
        "queries": len(set(groups.tolist())),
        "natural_failure_rate": float(failed[natural].mean()) if natural.any() else None,
        "chunk_features": list(chunk_features),
        "set_features": list(set_features),
        "chunk_C": chunks.c,
        "set_C": set_c,
        "oof_chunk_auc": float(roc_auc_score(chunk_y, chunk_oof)),
        "oof_set_auc_failure": float(roc_auc_score(failed, -set_oof)),
        "oof_chunk_kappa": c_kappa,
        "bands_met_targets": met,
        "targets": {
            "fast_path_precision": target_precision,
            "failure_recall": min_failure_recall,
            "good_natural_in_irrelevant": max_good_irrelevant,
        },
        "oof_fast_path_precision": float((fast & good).sum() / max(fast.sum(), 1)),
        "oof_failure_recall": float((failed & ~fast).sum() / max(failed.sum(), 1)),
        "oof_probes_in_irrelevant": float(irrelevant[~natural].mean())
        if (~natural).any()
        else None,
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


def profile_toml(config: EvaluatorConfig, report: dict[str, Any] | None = None) -> str:
    """A configuration as TOML, with the calibration report as header comments."""
    lines = [f"# crag-heuristic profile {config.name!r}"]
    for key, value in (report or {}).items():
        lines.append(f"# {key}: {value}")
    lines.append("")
    data = config.to_dict()

    def emit(table: dict[str, Any], prefix: str) -> None:
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        tables = {k: v for k, v in table.items() if isinstance(v, dict)}
        if prefix and scalars:
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
        if prefix and scalars:
            lines.append("")
        for key, value in tables.items():
            emit(value, f"{prefix}.{key}" if prefix else key)

    top = {k: v for k, v in data.items() if v is not None}
    emit(top, "")
    return "\n".join(lines).rstrip() + "\n"
