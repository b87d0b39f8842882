"""Label-free self-calibration: fit a gate on the user's corpus through the user's retriever.

    calibrate_self(retriever, documents)  ->  CalibrationResult (a profile)

1. Simulate queries from the documents (:mod:`crag_heuristic._simulate`):
   each knows its targets, the documents that answer it.
2. Run each through the retriever. The natural retrieval (top ``k``) is good
   when a target is in it. The leave-source-out probe is the same search with
   the targets removed (the retriever is asked for ``k + len(targets)`` and
   the targets are dropped, which for an exact index is the search of a
   corpus without them): a realistic gap, failed by construction.
3. Fit the two-stage gate and its bands on those retrievals
   (:func:`crag_heuristic._calibrate.fit_gate`, folds grouped by query). By
   default the fit starts from the shipped gate and is pulled towards it
   (a maximum a posteriori fit): simulated queries differ from real ones,
   so they adjust the gate to this corpus and retriever rather than replace
   it. The bands come from the out-of-fold predictions.

No relevance label and no LLM is used. The profile records how it was made.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ._config import DEFAULT_PROFILE, EvaluatorConfig, load_config
from ._corpus import CorpusStats
from ._exceptions import InputError, RetrieverError
from ._protocols import Retriever, StatsProvider
from ._retrievers.documents import to_chunk
from ._simulate import Neighbours, QuerySimulator, SimulatedQuery
from ._text import Analyzer
from ._types import Chunk, ScoreKind
from ._version import __version__

if TYPE_CHECKING:  # calibration is imported when a gate is fitted, not with the package
    from ._calibrate import CalibrationResult, GateExample

__all__ = [
    "DEFAULT_PRIOR_C",
    "DEFAULT_SELF_QUERIES",
    "DEFAULT_SELF_STYLES",
    "MIN_DOCUMENTS",
    "calibrate_self",
]

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
        except _NotChunks:
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
        except _NotChunks:
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
        styles: the query styles (see :mod:`crag_heuristic._simulate`).
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
        progress: wraps the query loop, e.g. a progress bar.
        targets: ``target_precision``, ``min_failure_recall``,
            ``max_good_irrelevant`` (see :func:`~crag_heuristic.bench.fit_gate`).

    Raises:
        InputError: fewer than 50 documents with text, repeated ids, bad
            arguments, or simulated queries of one outcome only (e.g. the
            retriever never finds the source).
        RetrieverError: the retriever failed on more than a fifth of the
            simulated queries, or answered with something that is not chunks.
    """
    from ._calibrate import fit_gate

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
    prior_config = None if prior is None else load_config(prior)
    if prior_config is not None and prior_config.model is None:
        raise InputError(f"the prior profile {prior_config.name!r} has no fitted model")
    started = time.perf_counter()
    simulator = QuerySimulator(docs, analyzer=analyzer, corpus_stats=corpus_stats, seed=seed)
    simulated = simulator.simulate(
        queries,
        styles=styles,
        neighbours=neighbours or retriever_neighbours(retriever),
    )
    examples, failures = _retrievals(retriever, simulated, k, progress)
    if failures and failures[0] > _MAX_FAILED_SHARE * len(simulated):
        raise RetrieverError(
            f"the retriever failed on {failures[0]} of {len(simulated)} simulated queries "
            f"(first error: {failures[1]})"
        )
    natural = [ex for ex in examples if ex.kind == "natural"]
    found = sum(ex.good for ex in natural)
    if found == 0:
        raise InputError(
            "the retriever found no simulated query's source document in its top "
            f"{k}: are its chunk ids the documents' ids?"
        )
    styles_used = sorted({q.style for q in simulated})
    fitted_on = (
        f"self-calibration: {len(natural)} simulated queries ({', '.join(styles_used)}) on "
        f"{len(docs)} documents through {type(retriever).__name__}, k={k}, seed={seed}, "
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
        examples,
        base=base,
        corpus_stats=corpus_stats,
        **features,
        prior=None if prior_config is None else prior_config.model,
        prior_c=prior_c,
        name=name,
        fitted_on=fitted_on,
        seed=seed,
        **targets,  # type: ignore[arg-type]
    )
    result.report.update(
        {
            "method": "calibrate_self",
            "library_version": __version__,
            "documents": len(docs),
            "simulated_queries": {s: sum(q.style == s for q in simulated) for s in styles_used},
            "natural_found_share": found / len(natural),
            "retriever": type(retriever).__name__,
            "retriever_failures": failures[0] if failures else 0,
            "prior": None if prior_config is None else f"{prior_config.name} (C = {prior_c})",
            "seconds": round(time.perf_counter() - started, 1),
        }
    )
    return result


def _retrievals(
    retriever: Retriever,
    simulated: Sequence[SimulatedQuery],
    k: int,
    progress: Progress[Any],
) -> tuple[list[GateExample], tuple[int, str] | None]:
    """Natural and probe retrievals; (number of failed searches, first error) or None."""
    from ._calibrate import GateExample

    naturals: list[GateExample] = []
    probes: list[GateExample] = []
    failed = 0
    first_error = ""
    batches = [simulated[i : i + _BATCH] for i in range(0, len(simulated), _BATCH)]
    answered: list[tuple[SimulatedQuery, list[Chunk] | BaseException]] = []
    for batch in progress(batches, "self-calibration"):
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
