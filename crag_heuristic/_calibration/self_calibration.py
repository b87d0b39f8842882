"""Label-free self-calibration: fit a gate on the user's corpus through the user's retriever.

    calibrate_self(retriever, documents)  ->  CalibrationResult (a profile)

1. Simulate queries from the documents (:mod:`crag_heuristic._calibration.simulation`):
   each knows its targets, the documents that answer it.
2. Run each through the retriever. The natural retrieval (top ``k``) is good
   when a target is in it. The leave-source-out probe is the same search with
   the targets removed (the retriever is asked for ``k + len(targets)`` and
   the targets are dropped, which for an exact index is the search of a
   corpus without them): a realistic gap, failed by construction.
3. Fit the two-stage gate and its bands on those retrievals
   (:func:`crag_heuristic._calibration.gate.fit_gate`, folds grouped by query). By
   default the fit starts from the shipped gate and is pulled towards it
   (a maximum a posteriori fit): simulated queries differ from real ones,
   so they adjust the gate to this corpus and retriever rather than replace
   it. The bands come from the out-of-fold predictions.

No relevance label and no LLM is used. The profile records how it was made.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._config import DEFAULT_PROFILE, EvaluatorConfig, load_config
from .._documents import to_chunk
from .._exceptions import CalibrationWarning, InputError, MissingDependencyError, RetrieverError
from .._protocols import Retriever, StatsProvider
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats
from .._types import Chunk, Evaluation, ScoreKind
from .._version import __version__
from .simulation import Neighbours, QuerySimulator, SimulatedQuery

if TYPE_CHECKING:  # calibration is imported when a gate is fitted, not with the package
    from .gate import CalibrationResult, GateExample

MIN_DOCUMENTS = 50
"""Fewer documents than this cannot be calibrated on (too few distinct queries)."""
DEFAULT_SELF_QUERIES = 300
DEFAULT_SELF_STYLES: tuple[str, ...] = ("topic",)
"""Topic queries (the terms typical of a document and its nearest neighbours, all of
which count as answers): chosen leave one collection out among the style mixes of
``benchmarks/self_calibration.py`` (the best mean difference in failure AUC to the
best simple baseline over the collections left out; the known-item styles ``title``,
``sentence`` and ``terms`` do better on a collection where a query has one relevant
document, worse where it has many)."""
DEFAULT_PRIOR_C = 0.01
_MAX_FAILED_SHARE = 0.2
_BATCH = 64

_T = TypeVar("_T")
Progress = Callable[[Iterable[_T], str], Iterable[_T]]


def _step(progress: Progress[Any], description: str, work: Callable[[], _T]) -> _T:
    """``work()`` reported as a stage of one step (``progress([...], description)``)."""
    for _ in progress([None], description):
        done = work()
    return done


def _no_progress(items: Iterable[_T], description: str) -> Iterable[_T]:
    del description
    return items


def _documents(documents: Sequence[Any]) -> list[Chunk]:
    if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
        raise InputError("documents must be a sequence of chunks, mappings or strings")
    chunks = [
        to_chunk(d, default_id=str(i), score=None, score_kind=ScoreKind.UNKNOWN, retriever="docs")
        for i, d in enumerate(documents)
    ]
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        raise InputError("document ids repeat: self-calibration needs unique ids")
    with_text = [c for c in chunks if c.text.strip()]
    if len(with_text) < MIN_DOCUMENTS:
        raise InputError(
            f"self-calibration needs at least {MIN_DOCUMENTS} documents with text, "
            f"got {len(with_text)}: use the shipped profile on so small a corpus"
        )
    return with_text


class _NotChunks(RetrieverError):
    """The retriever answered with something that is not a list of chunks."""


def _checked(retriever: object, hits: object) -> list[Chunk]:
    if isinstance(hits, str | bytes) or not isinstance(hits, Iterable):
        raise _NotChunks(
            f"{type(retriever).__name__} returned {type(hits).__name__}, not a list of chunks"
        )
    out = list(hits)
    if not all(isinstance(h, Chunk) for h in out):
        raise _NotChunks(f"{type(retriever).__name__} returned something that is not a Chunk")
    return out


def _search(retriever: Retriever, query: str, depth: int) -> list[Chunk]:
    return _checked(retriever, retriever.search(query, depth))


def _search_many(
    retriever: Retriever, queries: Sequence[str], depth: int
) -> list[list[Chunk] | BaseException]:
    """Each query's hits (or the exception its search raised); in one batch when the
    retriever has ``search_many(queries, k)``."""
    batch = getattr(retriever, "search_many", None)
    if batch is not None:
        try:
            answers = batch(list(queries), depth)
        except (_NotChunks, MissingDependencyError):  # not the retriever failing: said at once
            raise
        except Exception as exc:  # noqa: BLE001 - a user's retriever may raise anything
            return [exc] * len(queries)
        answers = list(answers)
        if len(answers) != len(queries):
            raise _NotChunks(
                f"{type(retriever).__name__}.search_many answered {len(answers)} lists "
                f"for {len(queries)} queries"
            )
        return [_checked(retriever, a) for a in answers]
    out: list[list[Chunk] | BaseException] = []
    for query in queries:
        try:
            out.append(_search(retriever, query, depth))
        except (_NotChunks, MissingDependencyError):
            raise
        except Exception as exc:  # noqa: BLE001 - a user's retriever may raise anything
            out.append(exc)
    return out


def retriever_neighbours(retriever: Retriever) -> Neighbours:
    """Topic neighbours through the retriever: search with the document's text
    (a failed search gives none: that topic query is not made)."""

    def neighbours(doc: Chunk, m: int) -> list[str]:
        try:
            hits = _search(retriever, doc.text, m + 1)
        except _NotChunks:
            raise
        except Exception:  # noqa: BLE001 - counted where the queries are run
            return []
        return [h.id for h in hits if h.id != doc.id][:m]

    return neighbours


@dataclass(frozen=True)
class Simulation:
    """Simulated queries run through a retriever: what self-calibration fits on.

    Attributes:
        examples: natural retrievals, then their leave-source-out probes.
        queries: the simulated queries (in the order of the naturals).
        documents: how many documents with text the corpus has.
        corpus_stats: the statistics the examples are graded with.
        retriever: the retriever's class name.
        failures: simulated queries whose search failed.
        k, seed: as given.
    """

    examples: list[GateExample]
    queries: list[SimulatedQuery]
    documents: int
    corpus_stats: CorpusStats
    retriever: str
    failures: int
    k: int
    seed: int

    @property
    def natural(self) -> list[GateExample]:
        return [ex for ex in self.examples if ex.kind == "natural"]

    @property
    def styles(self) -> list[str]:
        return sorted({q.style for q in self.queries})


def simulate(
    retriever: Retriever,
    documents: Sequence[Any],
    *,
    k: int = 10,
    queries: int = DEFAULT_SELF_QUERIES,
    styles: Sequence[str] = DEFAULT_SELF_STYLES,
    corpus_stats: CorpusStats | None = None,
    analyzer: Analyzer | None = None,
    neighbours: Neighbours | None = None,
    seed: int = 0,
    progress: Progress[Any] = _no_progress,
) -> Simulation:
    """Steps 1 and 2 of the module doc: simulated queries and their retrievals
    (the arguments as :func:`calibrate_self`'s).

    Raises:
        InputError, RetrieverError: as :func:`calibrate_self`.
    """
    if not hasattr(retriever, "search"):
        raise InputError("retriever must have search(query, k)")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    docs = _documents(documents)
    analyzer = analyzer or Analyzer()
    if corpus_stats is None and isinstance(retriever, StatsProvider):
        corpus_stats = retriever.corpus_stats()
    if corpus_stats is None:
        corpus_stats = CorpusStats.from_texts((d.text for d in docs), analyzer)
    simulator = QuerySimulator(docs, analyzer=analyzer, corpus_stats=corpus_stats, seed=seed)
    simulated = _step(
        progress,
        "simulating queries",
        lambda: simulator.simulate(
            queries, styles=styles, neighbours=neighbours or retriever_neighbours(retriever)
        ),
    )
    examples, failures = _retrievals(retriever, simulated, k, progress)
    if failures and failures[0] > _MAX_FAILED_SHARE * len(simulated):
        raise RetrieverError(
            f"the retriever failed on {failures[0]} of {len(simulated)} simulated queries "
            f"(first error: {failures[1]})"
        )
    asked = {ex.query for ex in examples}
    answered = [q for q in simulated if q.text in asked]
    simulation = Simulation(
        examples=examples,
        queries=answered,
        documents=len(docs),
        corpus_stats=corpus_stats,
        retriever=type(retriever).__name__,
        failures=failures[0] if failures else 0,
        k=k,
        seed=seed,
    )
    if not any(ex.good for ex in simulation.natural):
        raise InputError(
            "the retriever found no simulated query's source document in its top "
            f"{k}: are its chunk ids the documents' ids?"
        )
    return simulation


def calibrate_self(
    retriever: Retriever,
    documents: Sequence[Any],
    *,
    k: int = 10,
    queries: int = DEFAULT_SELF_QUERIES,
    styles: Sequence[str] = DEFAULT_SELF_STYLES,
    prior: EvaluatorConfig | str | None = DEFAULT_PROFILE,
    prior_c: float = DEFAULT_PRIOR_C,
    corpus_stats: CorpusStats | None = None,
    analyzer: Analyzer | None = None,
    neighbours: Neighbours | None = None,
    seed: int = 0,
    name: str = "self-calibrated",
    progress: Progress[Any] = _no_progress,
    **targets: float,
) -> CalibrationResult:
    """Fit a gate on ``documents`` through ``retriever``, with no labels (module doc).

    Args:
        retriever: the retriever the gate will guard (``search(query, k)``;
            ``search_many(queries, k)``, when it has it, is used in batches of
            64); its chunk ids must be the documents' ids.
        documents: the corpus it searches: chunks, mappings (``id``/``_id``,
            ``text``, ``title``) or strings (id = position).
        k: the retrieval depth the gate grades.
        queries: how many simulated queries (each also gives a probe).
        styles: the query styles (see :mod:`crag_heuristic._calibration.simulation`).
        prior: the gate the fit starts from and is pulled towards (a profile
            with a model); ``None`` fits from scratch (base settings: ``synapse``).
        prior_c: the pull's inverse strength (smaller: closer to the prior).
        corpus_stats: document frequencies (from the retriever when it
            provides them, else built from the documents).
        analyzer: the evaluator's analyzer.
        neighbours: ``(document, m) -> nearest ids`` for topic queries
            (default: search the retriever with the document's text).
        seed: the random seed (same inputs and seed: same profile).
        name: the profile's name.
        progress: ``progress(items, description)`` wraps each step (simulating
            the queries, searching them in batches of 64, fitting the gate), e.g.
            a progress bar.
        targets: ``target_precision``, ``min_failure_recall``,
            ``max_good_irrelevant`` (see :func:`~crag_heuristic.bench.fit_gate`).

    Returns:
        The profile and its report. When the bands cannot meet their targets
        on the simulated queries, or the gate would take no fast path on
        them, the result says so: ``result.warnings`` (also in the profile's
        header and ``report["warnings"]``), and a :class:`CalibrationWarning`
        is issued; with a prior, the prior's bands are kept in place of the
        ones that missed.

    Raises:
        InputError: fewer than 50 documents with text, repeated ids, bad
            arguments, or simulated queries of one outcome only (e.g. the
            retriever never finds the source).
        RetrieverError: the retriever failed on more than a fifth of the
            simulated queries, or answered with something that is not chunks.
    """
    prior_config = _prior(prior)
    started = time.perf_counter()
    simulation = simulate(
        retriever,
        documents,
        k=k,
        queries=queries,
        styles=styles,
        corpus_stats=corpus_stats,
        analyzer=analyzer,
        neighbours=neighbours,
        seed=seed,
        progress=progress,
    )
    result = _step(
        progress,
        "fitting the gate",
        lambda: fit_simulation(
            simulation,
            prior=prior_config,
            prior_c=prior_c,
            name=name,
            **targets,  # type: ignore[arg-type]
        ),
    )
    result.report["seconds"] = round(time.perf_counter() - started, 1)
    for message in result.warnings:
        warnings.warn(message, CalibrationWarning, stacklevel=2)
    return result


def _prior(prior: EvaluatorConfig | str | None) -> EvaluatorConfig | None:
    prior_config = None if prior is None else load_config(prior)
    if prior_config is not None and prior_config.model is None:
        raise InputError(f"the prior profile {prior_config.name!r} has no fitted model")
    return prior_config


def fit_simulation(
    simulation: Simulation,
    *,
    prior: EvaluatorConfig | str | None = DEFAULT_PROFILE,
    prior_c: float = DEFAULT_PRIOR_C,
    name: str = "self-calibrated",
    fallbacks: bool = True,
    evaluations: Sequence[Evaluation] | None = None,
    **targets: float,
) -> CalibrationResult:
    """Step 3 of the module doc on a :class:`Simulation` (no warning issued:
    :func:`calibrate_self` issues them; ``result.warnings`` lists them).

    ``evaluations``: the examples already graded (see
    :func:`~crag_heuristic._calibration.gate.fit_gate`), when one simulation is fitted
    with several priors.
    """
    from .gate import CalibrationResult, fit_gate

    prior_config = _prior(prior)
    fitted_on = (
        f"self-calibration: {len(simulation.natural)} simulated queries "
        f"({', '.join(simulation.styles)}) on {simulation.documents} documents through "
        f"{simulation.retriever}, k={simulation.k}, seed={simulation.seed}, "
        "natural + leave-source-out probes, no relevance labels"
    )
    base = (prior_config or EvaluatorConfig.from_profile("synapse")).replace(model=None)
    features: dict[str, Any] = {}
    if prior_config is not None and prior_config.model is not None:
        features = {  # the prior's evidence: the pull is towards its coefficients
            "chunk_features": [t.feature for t in prior_config.model.chunk.terms],
            "set_features": [t.feature for t in prior_config.model.set.terms],
        }
    result = fit_gate(
        simulation.examples,
        base=base,
        corpus_stats=simulation.corpus_stats,
        **features,
        prior=None if prior_config is None else prior_config.model,
        prior_c=prior_c,
        fallbacks=fallbacks,
        name=name,
        fitted_on=fitted_on,
        seed=simulation.seed,
        evaluations=evaluations,
        **targets,  # type: ignore[arg-type]
    )
    found = sum(ex.good for ex in simulation.natural) / len(simulation.natural)
    report = result.report
    report.update(
        {
            "method": "calibrate_self",
            "library_version": __version__,
            "documents": simulation.documents,
            "simulated_queries": {
                s: sum(q.style == s for q in simulation.queries) for s in simulation.styles
            },
            "natural_found_share": found,
            "retriever": simulation.retriever,
            "retriever_failures": simulation.failures,
            "prior": None if prior_config is None else f"{prior_config.name} (C = {prior_c})",
        }
    )
    problems = []
    config = result.config
    if not report["bands_met_targets"]:
        what = (
            "the fast-path band cannot meet its targets on the simulated queries "
            f"(precision {report['targets']['fast_path_precision']:.2f} on natural retrievals "
            f"with {report['targets']['failure_recall']:.2f} of failures kept off it)"
        )
        if prior_config is not None:
            config = config.replace(
                thresholds={
                    "relevant": prior_config.thresholds.relevant,
                    "partial": prior_config.thresholds.partial,
                }
            )
            report["bands"] = f"the prior's ({prior_config.name}): the fitted ones missed"
            problems.append(f"{what}: the prior's bands are kept")
        else:
            report["bands"] = "fitted (targets missed; no prior to fall back to)"
            problems.append(f"{what}: the bands are the closest it could fit")
    else:
        report["bands"] = "fitted on the simulated queries (out-of-fold)"
    if not report.get("oof_good_natural_fast_path"):
        problems.append(
            "the gate takes no fast path on its own simulated queries: every retrieval "
            "would be corrected"
        )
    report["warnings"] = problems
    return CalibrationResult(config=config, report=report, warnings=tuple(problems))


def _retrievals(
    retriever: Retriever,
    simulated: Sequence[SimulatedQuery],
    k: int,
    progress: Progress[Any],
) -> tuple[list[GateExample], tuple[int, str] | None]:
    """Natural and probe retrievals; (number of failed searches, first error) or None."""
    from .gate import GateExample

    naturals: list[GateExample] = []
    probes: list[GateExample] = []
    failed = 0
    first_error = ""
    batches = [simulated[i : i + _BATCH] for i in range(0, len(simulated), _BATCH)]
    answered: list[tuple[SimulatedQuery, list[Chunk] | BaseException]] = []
    for batch in progress(batches, "searching the simulated queries"):
        depth = k + max(len(q.targets) for q in batch)
        answers = _search_many(retriever, [q.text for q in batch], depth)
        answered.extend(zip(batch, answers, strict=True))
    for i, (query, hits) in enumerate(answered):
        if isinstance(hits, BaseException):
            failed += 1
            first_error = first_error or f"{type(hits).__name__}: {hits}"
            continue
        group = f"sim{i}:{query.style}"
        naturals.append(GateExample(group, "natural", query.text, tuple(hits[:k]), query.targets))
        gap = tuple(h for h in hits if h.id not in query.targets)[:k]
        if gap:
            probes.append(GateExample(group, "probe", query.text, gap, query.targets))
    return naturals + probes, ((failed, first_error) if failed else None)
