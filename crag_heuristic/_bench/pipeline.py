"""From a BEIR folder to labelled retrievals: the steps calibration and benchmarks share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._calibration.gate import CalibrationResult, GateExample, fit_gate
from .._config import EvaluatorConfig, load_config
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError
from .._retrievers.bm25 import BM25Retriever
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats
from .._types import Chunk
from .data import Collection, Qrels, load_collection, read_qrels
from .dense import DenseIndex, MiniLM, Vector, query_vectors
from .retrievals import chunks_of, make_retrievals
from .sentences import SentenceCache

LoopProgress = Callable[[Iterable[Any], str], Iterable[Any]]
"""``progress(items, description)``: ``items``, reported as a long loop goes (the
command line's :meth:`Progress.iterate <crag_heuristic._cli.progress.Progress.iterate>`,
or :func:`progress`)."""


def progress(items: Any, description: str) -> Any:
    """``items`` with a progress bar on a terminal (tqdm, from the bench extra), else as is."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=description, disable=None, leave=False)


def labels_for(collection: Collection, labels: str, split: str) -> Qrels:
    """``qrels`` (the split's judgments) or ``llm:RUN`` (``llm_judgments/RUN.tsv``).

    Raises:
        InputError: an unknown split or run.
    """
    if labels == "qrels":
        if split not in collection.qrels:
            splits = ", ".join(sorted(collection.qrels)) or "none"
            raise InputError(f"{collection.path} has no qrels/{split}.tsv (splits: {splits})")
        return collection.qrels[split]
    if labels.startswith("llm:"):
        run = labels[4:]
        path = collection.path / "llm_judgments" / f"{run}.tsv"
        if not path.exists():
            folder = collection.path / "llm_judgments"
            known = sorted(p.stem for p in folder.glob("*.tsv")) if folder.exists() else []
            raise InputError(f"no LLM label set {run!r}; known: {', '.join(known) or 'none'}")
        return read_qrels(path)
    raise InputError(f"--labels must be 'qrels' or 'llm:RUN', got {labels!r}")


@dataclass
class Prepared:
    """A collection with its dense index, vectors and corpus statistics."""

    collection: Collection
    index: DenseIndex
    stats: CorpusStats
    analyzer: Analyzer
    cache_dir: Path | None
    encoder: MiniLM | None = None
    encode: bool = True
    sentences: SentenceCache | None = None
    loops: LoopProgress = progress  # how the benchmarks' long loops report

    def vectors(self, texts: dict[str, str]) -> dict[str, Vector]:
        """Query vectors for ``texts`` (shipped, cached, or encoded with MiniLM).

        Raises:
            InputError: a vector is missing and encoding is off.
        """

        def encoder() -> MiniLM:  # called only when a vector is neither shipped nor cached
            if self.encoder is None:
                if not self.encode:
                    raise InputError("a query vector is missing and encoding is off")
                self.encoder = MiniLM()
            return self.encoder

        return query_vectors(self.collection, texts, self.cache_dir, encoder)

    def load_encoder(self) -> None:
        """Load MiniLM for timed runs that encode their queries, when encoding is on
        and the ``bench`` extra is there; without it, timings are of FAISS alone."""
        if self.encoder is None and self.encode:
            try:
                self.encoder = MiniLM()
            except Exception:  # noqa: BLE001 - no bench extra: time FAISS alone and say so
                self.encoder = None

    @property
    def query_encoder(self) -> str:
        """What encodes the timed queries, as a report says it."""
        return "MiniLM (CPU)" if self.encoder is not None else "none (FAISS only)"


class HarnessRetriever:
    """The collection's dense index as a retriever (query text -> known vector).

    Query texts the harness has not seen (expanded or simulated queries) are
    encoded with MiniLM when the ``bench`` extra is installed;
    :meth:`search_many` encodes and searches a batch at once.
    """

    def __init__(self, prepared: Prepared, texts: dict[str, str] | None = None) -> None:
        self.prepared = prepared
        self._by_text: dict[str, Vector] = {}
        if texts:
            vectors = prepared.vectors(texts)
            self._by_text = {texts[qid]: vector for qid, vector in vectors.items()}

    def _vectors(self, queries: Sequence[str]) -> list[Vector]:
        missing = {q: q for q in queries if q not in self._by_text}
        if missing:
            self._by_text.update(self.prepared.vectors(missing))
        return [self._by_text[q] for q in queries]

    def prime(self, queries: Sequence[str]) -> None:
        """Encode the vectors of ``queries`` it lacks, as one batch."""
        self._vectors(queries)

    def search(self, query: str, k: int) -> list[Chunk]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Chunk]]:
        """Each query's top ``k``, encoded and searched as one batch."""
        import numpy as np

        rows = self.prepared.index.search(np.stack(self._vectors(queries)), k)
        return [list(chunks_of(self.prepared.collection, hits)) for hits in rows]

    def neighbours(self, doc: Chunk, m: int) -> list[str]:
        """The ``m`` documents nearest to ``doc`` by their vectors (itself excluded)."""
        index = self.prepared.index
        vector = self.prepared.collection.doc_vectors[index.position[doc.id]]  # type: ignore[index]
        [hits] = index.search(vector[None, :], m + 1)
        return [d for d, _ in hits if d != doc.id][:m]

    def corpus_stats(self) -> CorpusStats:
        return self.prepared.stats


@dataclass
class SplitRun:
    """What the quality, context and route-variant sections each start from: a
    split's judged queries, their texts and binary qrels, the dense retriever,
    BM25 over the whole corpus and the evaluator of ``profile``."""

    qids: list[str]
    texts: dict[str, str]
    relevant: dict[str, set[str]]
    qrels: dict[str, dict[str, int]]
    dense: HarnessRetriever
    bm25: BM25Retriever
    evaluator: Evaluator

    @classmethod
    def of(cls, prepared: Prepared, profile: EvaluatorConfig, split: str = "test") -> SplitRun:
        collection = prepared.collection
        relevant = collection.relevant(split)
        qids = list(collection.split_queries(split))
        texts = {q: collection.queries[q] for q in qids}
        return cls(
            qids=qids,
            texts=texts,
            relevant=relevant,
            qrels={q: dict.fromkeys(relevant[q], 1) for q in qids},
            dense=HarnessRetriever(prepared, texts),
            bm25=BM25Retriever(
                [Chunk(id=d, text=collection.doc_text(d), source=d) for d in collection.doc_ids],
                analyzer=prepared.analyzer,
            ),
            evaluator=Evaluator(profile, analyzer=prepared.analyzer),
        )


def prepare(
    data_dir: str | Path,
    cache_dir: str | Path | None = None,
    *,
    encode: bool = True,
    relevant_min: int | None = None,
    corpus_only: bool = False,
    sentences: bool = False,
    loops: LoopProgress = progress,
) -> Prepared:
    """Load the folder, index its vectors, count its document frequencies.

    With ``encode=False`` nothing is encoded: every query vector must ship
    with the folder (and the cost section times FAISS alone).
    ``relevant_min`` overrides the folder's relevance threshold.
    ``corpus_only``: the corpus and its vectors alone (no queries, no qrels read).
    ``sentences``: the benchmark's retrievals carry each chunk's best sentence's
    cosine (MiniLM sentence vectors, encoded on first use and cached in ``cache_dir``).
    ``loops``: how the benchmarks' long loops on it report (a progress bar by default).
    """
    collection = load_collection(data_dir, relevant_min=relevant_min, corpus_only=corpus_only)
    analyzer = Analyzer()
    stats = CorpusStats.build(  # with each document's analysis: the chunks are the corpus's
        (collection.doc_text(d) for d in collection.doc_ids),
        ids=collection.doc_ids,
        analyzer=analyzer,
        analyses=True,
    )
    cache = None if cache_dir is None else Path(cache_dir)
    return Prepared(
        collection=collection,
        index=DenseIndex(collection),
        stats=stats,
        analyzer=analyzer,
        cache_dir=cache,
        encode=encode,
        sentences=SentenceCache(collection, cache) if sentences else None,
        loops=loops,
    )


def retrievals_for(
    prepared: Prepared, qrels: Qrels, k: int, *, probes: bool = True
) -> list[GateExample]:
    """Natural (+ probe) retrievals of depth ``k`` for the judged queries of ``qrels``."""
    collection = prepared.collection
    relevant = {
        q: {d for d, g in docs.items() if g >= collection.relevant_min} for q, docs in qrels.items()
    }
    qids = sorted((q for q, docs in relevant.items() if docs and q in collection.queries))
    if not qids:
        raise InputError("no judged query with a relevant document")
    vectors = prepared.vectors({q: collection.queries[q] for q in qids})
    return make_retrievals(
        collection,
        prepared.index,
        qids,
        vectors,
        relevant,
        k,
        probes=probes,
        sentences=prepared.sentences,
    )


def folder_and_split(item: str | Path, split: str) -> tuple[Path, str]:
    """The folder and split ``item`` names: ``DIR`` (the split is ``split``) or ``DIR:SPLIT``
    (a split named after the last colon, when the path without it is a folder)."""
    text = str(item)
    head, sep, tail = text.rpartition(":")
    if sep and tail and Path(head).is_dir():
        return Path(head), tail
    return Path(text), split


def calibrate(
    data_dir: str | Path | Sequence[str | Path],
    *,
    labels: str = "qrels",
    split: str = "train",
    k: int = 10,
    probes: bool = True,
    base: EvaluatorConfig | str | None = "synapse",
    name: str = "fitted",
    chunk_features: Sequence[str] | None = None,
    set_features: Sequence[str] | None = None,
    cache_dir: str | Path | None = None,
    encode: bool = True,
    sentences: bool = False,
    within_collection: bool = False,
    shrink: float | None = None,
    **targets: float,
) -> CalibrationResult:
    """Fit a gate profile on labelled retrievals of one or several BEIR folders.

    Args:
        data_dir: a folder, or several; each may name its split as
            ``DIR:SPLIT``. Several folders weigh alike (each retrieval of a
            folder with ``n`` of them weighs ``1 / n``).
        labels: ``"qrels"`` or ``"llm:RUN"`` (an LLM grader's labels).
        split: the qrels split to fit on (for folders that do not name one);
            never the one you report on.
        k: the retrieval depth graded.
        probes: add leave-relevant-out probes (realistic corpus gaps).
        base: the profile whose other settings the fitted one keeps.
        name: the fitted profile's name.
        chunk_features, set_features: the evidence each stage reads
            (default: :func:`~crag_heuristic.bench.fit_gate`'s).
        cache_dir: where encoded query vectors are cached.
        encode: encode missing query vectors with MiniLM (else they must ship).
        sentences: the retrievals carry each chunk's best sentence's cosine
            (MiniLM sentence vectors, cached in ``cache_dir``): for a gate
            that reads sentence evidence.
        within_collection, shrink: how the set stage is fitted
            (:func:`~crag_heuristic.bench.fit_gate`).
        targets: ``target_precision``, ``min_failure_recall``, ``max_good_irrelevant``.

    Returns:
        The fitted profile (``.config``; ``.write(path)`` saves it) and its
        cross-validated report.
    """
    items = [data_dir] if isinstance(data_dir, str | Path) else list(data_dir)
    if not items:
        raise InputError("calibrate needs at least one folder")
    retrievals: list[GateExample] = []
    described = []
    stats = None
    for item in items:
        folder, folder_split = folder_and_split(item, split)
        prepared = prepare(
            folder,
            cache_dir=None if cache_dir is None else Path(cache_dir) / folder.name,
            encode=encode,
            sentences=sentences,
        )
        qrels = labels_for(prepared.collection, labels, folder_split)
        found = retrievals_for(prepared, qrels, k, probes=probes)
        name_here = prepared.collection.name
        retrievals += [
            dataclasses.replace(
                ex,
                group=f"{name_here}:{ex.group}",
                weight=1.0 / len(found),
                corpus_stats=prepared.stats,
                collection=name_here,
            )
            for ex in found
        ]
        described.append(f"{name_here} {folder_split}")
        stats = prepared.stats
    fitted_on = (
        f"{', '.join(described)} split{'s' if len(items) > 1 else ''}, labels {labels}, k={k}, "
        f"{'natural + leave-relevant-out probes' if probes else 'natural retrievals'}"
    )
    features: dict[str, Sequence[str]] = {}
    if chunk_features is not None:
        features["chunk_features"] = chunk_features
    if set_features is not None:
        features["set_features"] = set_features
    return fit_gate(
        retrievals,
        base=load_config(base),
        corpus_stats=stats if len(items) == 1 else None,
        name=name,
        fitted_on=fitted_on,
        within_collection=within_collection,
        shrink=shrink,
        **features,  # type: ignore[arg-type]
        **targets,  # type: ignore[arg-type]
    )
