"""An index directory's gate, self-calibrated for its corpus and embedder when it is built.

    IndexDirectory.build(documents, path, gate=calibrate_index)   # crag-heuristic index

The shipped gate was fitted on all-MiniLM-L6-v2 cosines; an index of LSA vectors (the
default of ``crag-heuristic index``) or of a model of yours gives cosines on another
scale, and the shipped verdict bands do not travel between collections either. So the
index command calibrates the gate for the directory it built, without labels:

1. **Simulate.** Queries simulated from the directory's documents
   (:func:`~crag_heuristic._calibration.self_calibration.simulate`, topic queries by
   default) are run through the directory's own retriever; their topic neighbours
   are read from the stored vectors (no document is embedded again). Each natural
   list is good when a source document is in its top ``k``; each has a
   leave-source-out probe (failed by construction).
2. **Two gates, one kept.** The shipped gate as it is, and the gate refitted around
   it on the simulated lists (:func:`~crag_heuristic._calibration.self_calibration.fit_simulation`,
   scored out of fold). The refit is kept only where it ranks the simulated failures
   better than the shipped gate does (failure AUC, natural lists and probes); the
   shipped gate otherwise (it was not fitted on these lists, so its scores there
   are honest as they are).
3. **Bands.** The kept gate's verdict bands are chosen on the simulated lists (a
   refit's on its out-of-fold predictions): the fast-path band by
   :func:`~crag_heuristic.calibration.fit_gate`'s rule, and the IRRELEVANT band below
   every good simulated list (:data:`SIMULATED_GOOD_IRRELEVANT`): simulated
   queries are easier than real ones (their good lists score higher), so a band
   that holds 15 % of the simulated good lists holds far more of the real ones
   (up to 0.76 on the shared collections). Without labels, the web is for lists
   below anything the simulation found good; the rest are PARTIAL or RELEVANT.
4. **Refuse what it cannot promise.** Where the kept gate ranks the simulated
   failures no better than the top-1 cosine alone, or the fast-path band misses
   its targets, or the simulation cannot be made (fewer than 50 documents, a
   retriever that never finds the source), the directory keeps the shipped gate
   and its bands, and the manifest and the command say why.

The outcome is an :class:`~crag_heuristic.index.IndexGate`: the profile as TOML
(with the calibration's report in its header) or the notes of why none was kept,
and what was measured on the simulated lists and what it cost.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._config import DEFAULT_PROFILE, EvaluatorConfig, load_config
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError, MissingDependencyError, RetrieverError
from .._index.directory import IndexDirectory
from .._index.embedders import as_rows, batch_embedder
from .._index.gate import SELF_CALIBRATED, SHIPPED, IndexGate, skipped
from .._retrievers.base import embedder
from .._types import Chunk
from .auc import failure_auc
from .self_calibration import (
    DEFAULT_SELF_QUERIES,
    SIMULATED_GOOD_IRRELEVANT,
    Progress,
    Simulation,
    _no_progress,
    _step,
    fit_simulation,
    simulate,
)
from .simulation import Neighbours

_STATED = (
    "relevant",
    "partial",
    "fast_path_precision",
    "failure_recall",
    "good_in_irrelevant",
    "good_quantiles",
)
MIN_AUC_GAIN = 0.0
"""How much better than the shipped gate a refit must rank the simulated failures to
be kept."""


def stored_neighbours(index: IndexDirectory) -> Neighbours:
    """Topic neighbours from the directory's stored vectors: each document's nearest
    others by the index's own metric, nothing embedded again."""
    vectors = index.faiss_index
    ids = index.docs.ids
    rows = {doc_id: i for i, doc_id in enumerate(ids)}

    def neighbours(doc: Any, m: int) -> list[str]:
        row = rows.get(doc.id)
        if row is None:
            return []
        _, found = vectors.search(vectors.reconstruct(row).reshape(1, -1), m + 1)
        return [ids[j] for j in found[0].tolist() if j >= 0 and j != row][:m]

    return neighbours


class IndexSearch:
    """The directory's retriever, its queries embedded a batch at a time
    (``search_many``: what self-calibration searches with; one query a call costs a
    model of yours one forward pass each)."""

    def __init__(self, index: IndexDirectory) -> None:
        self._batch = batch_embedder(index.embedder)
        self._one = embedder(index.embedder)
        self._ready: dict[str, Any] = {}
        self.retriever = index.retriever(embed=self._embed)

    def _embed(self, text: str) -> Any:
        ready = self._ready.pop(text, None)
        return self._one(text) if ready is None else ready

    def search(self, query: str, k: int) -> list[Chunk]:
        return self.retriever.search(query, k)

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        """Each query's ``k`` nearest, the queries embedded in one call.

        Raises:
            InputError: the embedder answered nonsense for the batch.
        """
        rows = as_rows(self._batch(list(queries)), len(queries), "the simulated queries")
        self._ready = dict(zip(queries, rows, strict=True))
        try:
            return [self.retriever.search(query, k) for query in queries]
        finally:
            self._ready = {}


def _scores(config: EvaluatorConfig, simulation: Simulation) -> np.ndarray:
    evaluator = Evaluator(config)
    return np.array(
        [
            evaluator.evaluate(ex.query, ex.chunks, simulation.corpus_stats).score
            for ex in simulation.examples
        ]
    )


def calibrate_index(
    index: IndexDirectory,
    *,
    queries: int = DEFAULT_SELF_QUERIES,
    k: int = 10,
    seed: int = 0,
    prior: EvaluatorConfig | str = DEFAULT_PROFILE,
    progress: Progress[Any] = _no_progress,
) -> IndexGate:
    """The module doc for ``index``: its gate, or why the shipped gate decides.

    Args:
        index: the built directory (``IndexDirectory.build`` passes it).
        queries: how many simulated queries (each also gives a probe).
        k: the retrieval depth the gate grades.
        seed: the simulation's random seed (same corpus and seed: same gate).
        prior: the shipped gate (or another profile with a fitted model).
        progress: ``progress(items, description)`` wraps each step.

    Returns:
        The gate: ``"self-calibrated"`` with its profile, or ``"shipped"`` with the
        notes of why (``"skipped"`` without scikit-learn, the ``calibrate`` extra).
    """
    started = time.perf_counter()
    prior_config = load_config(prior)
    if prior_config.model is None:
        raise InputError(f"the prior profile {prior_config.name!r} has no fitted model")
    embedder = str(index.manifest.embedder.get("name", index.manifest.embedder.get("kind")))
    try:
        simulation = simulate(
            IndexSearch(index),
            index.docs,
            k=k,
            queries=queries,
            corpus_stats=index.corpus_stats,
            analyzer=index.analyzer,
            neighbours=stored_neighbours(index),
            seed=seed,
            progress=progress,
        )
        refit = _step(
            progress,
            "fitting the gate",
            lambda: fit_simulation(
                simulation,
                prior=prior_config,
                name="index-gate",
            ),
        )
    except MissingDependencyError as exc:
        return skipped(f"the gate was not self-calibrated: {exc}; the shipped gate decides")
    except (InputError, RetrieverError) as exc:
        return IndexGate(
            SHIPPED,
            notes=(f"self-calibration could not be made ({exc}): the shipped gate decides",),
            details={"seconds": round(time.perf_counter() - started, 1)},
        )
    return _decide(simulation, refit, prior_config, embedder, started)


def _decide(
    simulation: Simulation,
    refit: Any,
    prior: EvaluatorConfig,
    embedder: str,
    started: float,
) -> IndexGate:
    """Steps 2 to 4 of the module doc."""
    from .gate import bands_on_labels, profile_toml

    examples = simulation.examples
    good = np.array([ex.good for ex in examples])
    natural = np.array([ex.kind == "natural" for ex in examples])
    top1 = np.array([ex.chunks[0].score or 0.0 for ex in examples])
    shipped_scores = _scores(prior, simulation)
    aucs = {
        "top1": failure_auc(~good, top1),
        "shipped": failure_auc(~good, shipped_scores),
        "refit": refit.report["oof_set_auc_failure"],
    }
    details: dict[str, Any] = {
        "simulated_queries": len(simulation.natural),
        "simulated_found_share": round(float(good[natural].mean()), 4),
        "simulated_auc": {name: None if v is None else round(v, 4) for name, v in aucs.items()},
    }
    keep_refit = (aucs["refit"] or 0.0) > (aucs["shipped"] or 0.0) + MIN_AUC_GAIN
    notes: list[str] = []
    if keep_refit:
        config = refit.config
        report = dict(refit.report)
        statement = report["verdict_bands"]
        met = bool(report["bands_met_targets"])
        chosen = "the shipped gate refitted on the simulated lists (it ranks their failures better)"
    else:
        bands = bands_on_labels(
            shipped_scores,
            good,
            natural,
            prior=prior.thresholds,
            chosen_on=f"{len(examples)} simulated lists (natural and probes) of this index",
            max_good_irrelevant=SIMULATED_GOOD_IRRELEVANT,
        )
        config = prior.replace(
            name="index-gate",
            thresholds={"relevant": bands.relevant, "partial": bands.partial},
            description="the shipped gate, its bands chosen on this index's simulated lists",
        )
        report = {"method": "calibrate_index", "verdict_bands": bands.statement}
        statement, met = bands.statement, bands.met and bands.fitted
        chosen = "the shipped gate as it is (the refit ranked the simulated failures no better)"
    kept_auc = aucs["refit"] if keep_refit else aucs["shipped"]
    details["chosen"] = chosen
    details["bands"] = {key: statement[key] for key in _STATED}
    details["bands"]["good_share_irrelevant"] = SIMULATED_GOOD_IRRELEVANT
    details["seconds"] = round(time.perf_counter() - started, 1)
    if kept_auc is None or aucs["top1"] is None or kept_auc < aucs["top1"]:
        notes.append(
            f"on the simulated queries the gate ranks failures no better than the top-1 "
            f"cosine alone (failure AUC {_said(kept_auc)} against {_said(aucs['top1'])}): "
            "the shipped gate decides (fitted on all-MiniLM-L6-v2 cosines of other "
            f"collections, not on {embedder}'s)"
        )
    if not met:
        notes.append(
            "the fast-path band cannot meet its targets on the simulated queries "
            f"({statement['summary']}): the shipped gate decides"
        )
    if notes:
        return IndexGate(SHIPPED, notes=tuple(notes), details=details)
    report.update(
        {
            "method": "calibrate_index",
            "embedder": embedder,
            "chosen": chosen,
            "simulated_auc": details["simulated_auc"],
            "seconds": details["seconds"],
        }
    )
    return IndexGate(
        SELF_CALIBRATED,
        profile=profile_toml(config.replace(name="index-gate"), report),
        notes=(
            "verdicts on real queries may differ from these simulated ones: label a sample "
            "(crag-heuristic calibrate --grader) to measure them",
        ),
        details=details,
    )


def _said(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
