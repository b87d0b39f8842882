"""An index directory: a corpus made ready for the gate once, loaded in milliseconds.

``crag-heuristic index --docs FILE --out DIR`` (or :meth:`IndexDirectory.build`)
analyses every document once and writes what a later process needs, so that
``crag-heuristic retrieve --index DIR`` (or ``CRAG.from_index_dir(DIR)``) reads
it instead of refitting an embedder, rebuilding BM25 and recounting the corpus on
every call::

    DIR/manifest.json     what the directory holds, with each file's size and SHA-256
                          (crag_heuristic._index.manifest), written last
    DIR/vectors.faiss     the documents' unit vectors in a flat FAISS index (inner
                          product, or L2), FAISS id i = document i
    DIR/docs.jsonl        the documents, line i = FAISS id i, and docs.index.npz (line
                          offsets, ids): read when a search returns them
                          (crag_heuristic._index.docstore)
    DIR/stats.npz         the corpus statistics with each document's analysis keyed by
                          its id (CorpusStats.save): the evaluator's IDF, and chunks
                          looked up instead of tokenised
    DIR/bm25.npz          the BM25 side (BM25Retriever.save): its weights, ready to search
    DIR/embedder.npz      the fitted LSA projection (embedder "lsa"); for an embedder of
                          yours the manifest holds its spec instead
                          (crag_heuristic._index.embedders)

One pass analyses the corpus (the BM25 side and the statistics with their
analyses come from it); the documents are embedded in batches. A build writes
into a temporary directory beside ``DIR`` and renames it into place, so a
reader never sees half an index, and an index directory already at ``DIR`` is
replaced whole; anything else there is refused. Loading checks the manifest:
its kind and format version, each field's type and bounds, its signature (with
a ``secret``), that it lists exactly the parts below, and that each is a
regular file of the directory (no symlink), of its size and SHA-256
(``verify=False`` checks sizes only, for a corpus too large to hash at each
start); a directory that does not match is an
:class:`~crag_heuristic.IndexDirectoryError` (an ``InputError``). The parts are
read when first used (``evaluate --index`` reads the statistics alone), each
checked as it is read: a part that is not what the build wrote is an
``IndexDirectoryError`` too, never an error of numpy, FAISS or JSON, and
nothing is allocated from a header larger than the file that holds it.

An index directory is data, never code: an embedder named by its spec is
imported only when the operator names the same spec when loading
(``embedder="package.module:attribute"``, ``--embedder``) or trusts the
directory's (``trust_embedder=True``, ``--trust-embedder``); the LSA
projection is data and loads as it is. The threat model: ``docs/cli.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._cache.signing import signer_of
from .._documents import to_chunk
from .._exceptions import IndexDirectoryError, InputError
from .._retrievers.bm25 import BM25Retriever
from .._retrievers.faiss import FaissRetriever
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats
from .._types import Chunk, ScoreKind
from . import embedders
from .docstore import DocStore, write_docstore
from .manifest import (
    BM25,
    MANIFEST,
    METRICS,
    STATS,
    VECTORS,
    IndexManifest,
    file_digest,
    open_part,
)

Progress = Callable[[str, int, "int | None"], None]
"""``progress(stage, done, total)``: a build's stage (``"analysing"``, ``"fitting"``,
``"embedding"``, ``"writing"``) and how far it is (``total`` ``None``: unknown)."""

DEFAULT_BATCH = 256
_FLAT = {"ip": (b"IxFI", 0), "l2": (b"IxF2", 1)}  # a flat index's FAISS fourcc and metric
_FLAT_HEADER = struct.Struct("<4siqqq?iQ")  # fourcc, d, ntotal, 2 unused, trained, metric, codes


def _no_progress(stage: str, done: int, total: int | None) -> None:
    """The default progress: nothing said."""


class IndexDirectory:
    """A built index directory (see the module doc): its manifest and its parts.

    Make one with :meth:`build` or :meth:`load`. The parts are read on first
    use and kept; the object is then safe to share between threads.

    Attributes:
        path: the directory.
        manifest: what it holds (:class:`IndexManifest`).
        analyzer: the analyzer it was built with.
    """

    def __init__(
        self,
        path: Path,
        manifest: IndexManifest,
        analyzer: Analyzer,
        *,
        embedder: str | None = None,
        trust_embedder: bool = False,
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.analyzer = analyzer
        self._named_embedder = embedder
        self._trust_embedder = trust_embedder

    def __repr__(self) -> str:
        return (
            f"IndexDirectory({str(self.path)!r}, documents={self.manifest.documents}, "
            f"embedder={self.manifest.embedder.get('kind')!r})"
        )

    # -- loading ------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        analyzer: Analyzer | None = None,
        verify: bool = True,
        secret: str | bytes | None = None,
        embedder: str | None = None,
        trust_embedder: bool = False,
    ) -> IndexDirectory:
        """Open an index directory, refusing one whose manifest does not match.

        Args:
            path: the directory ``crag-heuristic index`` (or :meth:`build`) wrote.
            analyzer: the evaluator's analyzer (default :class:`Analyzer`): it
                must be the one the directory was built with.
            verify: check each file's SHA-256 (else its size only).
            secret: the secret the manifest was signed with (``build(secret=...)``):
                then an unsigned manifest, or one signed otherwise, is refused;
                without it, a signed manifest is refused.
            embedder: for a directory whose embedder is a spec of yours, that
                spec (``"package.module:attribute"``): it is imported only when
                it is the directory's (``"lsa"`` or ``None`` for an LSA one).
            trust_embedder: import the spec the directory names, whatever it is
                (the directory is yours): code runs from it.

        Raises:
            IndexDirectoryError: no manifest, another kind or format version, a
                field that does not fit, a signature that does not, a file
                listed that is not a part, missing, not a regular file or
                changed, or another analyzer.
            ConfigError: a secret shorter than 16 bytes (never shown).
        """
        where = Path(path)
        if embedder is not None and not isinstance(embedder, str):
            raise InputError(f"embedder must be a spec or None, got {type(embedder).__name__}")
        manifest = IndexManifest.read(where, secret=secret)
        manifest.check_files(where, digests=verify)
        analyzer = analyzer or Analyzer()
        if manifest.analyzer != analyzer.fingerprint:
            raise IndexDirectoryError(
                os.fspath(where), "analyzer", manifest.analyzer, analyzer.fingerprint
            )
        return cls(
            where, manifest, analyzer, embedder=embedder, trust_embedder=bool(trust_embedder)
        )

    def _refuse(self, what: str, exc: Exception) -> IndexDirectoryError:
        return IndexDirectoryError(os.fspath(self.path), "content", f"{what}: {exc}", "its parts")

    def _check_size(self, what: str, n: int) -> None:
        if n != self.manifest.documents:
            raise IndexDirectoryError(
                os.fspath(self.path),
                "content",
                f"{what} of {n} documents",
                f"{self.manifest.documents} documents",
            )

    @functools.cached_property
    def docs(self) -> DocStore:
        """The documents, FAISS id -> chunk (read when asked for)."""
        try:
            store = DocStore.open(self.path)
        except InputError as exc:
            raise self._refuse("the docstore", exc) from None
        self._check_size("a docstore", len(store))
        return store

    @functools.cached_property
    def corpus_stats(self) -> CorpusStats:
        """The corpus statistics with each document's analysis."""
        try:
            stats = CorpusStats.load(self.path / STATS, analyzer=self.analyzer)
        except InputError as exc:
            raise self._refuse("the statistics", exc) from None
        self._check_size("statistics", stats.n_docs)
        stats.fingerprint()  # the router's cache keys hold it: made now, not on a query
        return stats

    @functools.cached_property
    def faiss_index(self) -> Any:
        """The documents' vectors (a flat ``faiss.Index``: its header checked against the
        manifest and the file's size before FAISS reads it; every vector finite)."""
        import faiss

        self._check_flat()
        try:
            index = faiss.read_index(str(self.path / VECTORS))
        except (RuntimeError, MemoryError) as exc:
            raise self._refuse("the FAISS index", exc) from None
        self._check_size("a FAISS index", int(index.ntotal))
        if int(index.d) != self.manifest.dimension:
            raise self._refuse("the FAISS index", ValueError(f"{index.d} dimensions"))
        flat: Any = index  # a flat index: its vectors are readable in place
        n = int(index.ntotal) * int(index.d)
        if not np.all(np.isfinite(faiss.rev_swig_ptr(flat.get_xb(), n))):
            raise self._refuse("the FAISS index", ValueError("NaN or infinite vectors"))
        return index

    def _check_flat(self) -> None:
        """Refuse a vectors file that is not the flat index of the manifest's metric,
        documents and dimension, of exactly the bytes those take."""
        n, d = self.manifest.documents, self.manifest.dimension
        fourcc, metric = _FLAT[self.manifest.faiss["metric"]]
        fd = open_part(self.path, VECTORS)
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(_FLAT_HEADER.size)
        if len(head) != _FLAT_HEADER.size:
            raise self._refuse("the FAISS index", ValueError("cut short"))
        found, dim, total, _, _, trained, kind, codes = _FLAT_HEADER.unpack(head)
        if (found, dim, total, trained, kind, codes) != (fourcc, d, n, True, metric, n * d):
            raise self._refuse(
                "the FAISS index",
                ValueError(f"not the flat {self.manifest.faiss['metric']} index of the manifest"),
            )
        if size != _FLAT_HEADER.size + 4 * n * d:
            raise self._refuse("the FAISS index", ValueError("of another length than its vectors"))

    @functools.cached_property
    def embedder(self) -> Any:
        """The query embedder: the saved LSA projection (data), or the object a spec of
        yours names, imported only when it was named when loading (``embedder=``) or
        the directory is trusted (``trust_embedder=True``)."""
        entry = self.manifest.embedder
        where = os.fspath(self.path)
        named = self._named_embedder
        if entry["kind"] == "spec":
            spec = entry["spec"]
            if named != spec and not self._trust_embedder:
                raise IndexDirectoryError(
                    where,
                    "embedder",
                    f"the spec {spec!r} (code it would import)"
                    + (f", not the {named!r} named" if named is not None else ""),
                    "the same spec named when loading, or trust in the directory",
                )
        elif named not in (None, embedders.LSA):
            raise IndexDirectoryError(
                where, "embedder", "a saved LSA projection", f"the spec named, {named!r}"
            )
        try:
            embedder = embedders.load(entry, self.path, self.analyzer)
        except InputError as exc:
            if entry["kind"] == embedders.LSA:  # data the build wrote: damaged
                raise self._refuse("the LSA projection", exc) from None
            raise IndexDirectoryError(
                where, "embedder", str(exc), "an embedder that loads"
            ) from exc
        dimension = getattr(embedder, "dimension", self.manifest.dimension)
        if entry["kind"] == embedders.LSA and dimension != self.manifest.dimension:
            raise self._refuse("the LSA projection", ValueError(f"{dimension} dimensions"))
        return embedder

    def retriever(self, **options: Any) -> FaissRetriever:
        """A :class:`FaissRetriever` over the directory: its vectors, documents,
        query embedder and statistics (``options``: more of its keywords)."""
        return FaissRetriever(
            self.faiss_index,
            self.docs,
            self.embedder,
            normalized=bool(self.manifest.faiss.get("normalized", True)),
            corpus_stats=self.corpus_stats,
            analyzer=self.analyzer,
            **options,
        )

    def lexical(self, *, name: str = "bm25") -> BM25Retriever:
        """The BM25 side over the same documents, ready at once (nothing recomputed)."""
        try:
            return BM25Retriever.load(
                self.path / BM25,
                self.docs,
                analyzer=self.analyzer,
                corpus_stats=self.corpus_stats,
                name=name,
            )
        except InputError as exc:
            raise self._refuse("the BM25 side", exc) from None

    # -- building -----------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        documents: Sequence[Any],
        path: str | os.PathLike[str],
        *,
        embedder: str = embedders.LSA,
        metric: str = "ip",
        analyzer: Analyzer | None = None,
        n_components: int = 64,
        batch_size: int = DEFAULT_BATCH,
        progress: Progress | None = None,
        secret: str | bytes | None = None,
    ) -> IndexDirectory:
        """Build an index directory of ``documents`` at ``path`` (see the module doc).

        Args:
            documents: the corpus: chunks, mappings (``id``/``_id``, ``text``,
                ``title``, ``source``, ``metadata``) or strings (id = position);
                document i is FAISS id i. Ids must be unique.
            path: the directory to write (new, empty, or an index directory to
                replace).
            embedder: ``"lsa"`` (fitted here, saved) or ``"package.module:attribute"``
                (see :mod:`crag_heuristic._index.embedders`).
            metric: ``"ip"`` (inner product) or ``"l2"``; the vectors are unit
                length, so either gives cosines.
            analyzer: the evaluator's analyzer (default :class:`Analyzer`).
            n_components: LSA dimensions (at most the corpus size - 1).
            batch_size: texts embedded per call of the embedder.
            progress: ``progress(stage, done, total)`` as the build goes (the
                command line's progress line); nothing by default.
            secret: sign the manifest with it (HMAC-SHA256, 16 bytes or more):
                :meth:`load` then needs the same secret, and whoever writes
                the directory without it cannot change what it lists.

        Raises:
            InputError: no documents, a bad document or argument, repeated ids,
                an embedder that fails or answers nonsense.
            IndexDirectoryError: ``path`` holds something that is not an index
                directory (``field="out"``).
            MissingDependencyError: ``"lsa"`` without scikit-learn (``calibrate``).
            ConfigError: a secret shorter than 16 bytes (never shown).
        """
        signer = signer_of(secret, "secret")
        report = progress or _no_progress
        if metric not in METRICS:
            raise InputError(f"metric must be one of {list(METRICS)}, got {metric!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
        chunks = _chunks(documents)
        analyzer = analyzer or Analyzer()
        out = Path(path)
        _check_out(out)
        seconds: dict[str, float] = {}
        started = time.perf_counter()
        report("analysing", 0, len(chunks))
        bm25 = BM25Retriever(chunks, analyzer=analyzer)  # one pass: BM25, statistics, analyses
        stats = bm25.corpus_stats()
        stats.fingerprint()
        report("analysing", len(chunks), len(chunks))
        seconds["analysing"] = time.perf_counter() - started

        began = time.perf_counter()
        report("fitting", 0, None)
        model, batch, entry = embedders.fit(
            embedder, [c.text for c in chunks], analyzer, n_components=n_components
        )
        seconds["fitting"] = time.perf_counter() - began
        began = time.perf_counter()
        vectors = _embed(batch, chunks, batch_size, report)
        seconds["embedding"] = time.perf_counter() - began

        began = time.perf_counter()
        out.parent.mkdir(parents=True, exist_ok=True)
        building = out.parent / f".{out.name}.building-{uuid.uuid4().hex[:12]}"
        building.mkdir()
        try:
            written = _write(building, chunks, vectors, metric, stats, bm25, model, entry, report)
            seconds["writing"] = time.perf_counter() - began
            manifest = IndexManifest(
                documents=len(chunks),
                analyzer=analyzer.fingerprint,
                embedder={**entry, "dimension": int(vectors.shape[1])},
                faiss={"metric": metric, "normalized": True, "dimension": int(vectors.shape[1])},
                corpus_stats={
                    "fingerprint": stats.fingerprint(),
                    "terms": stats.n_terms,
                    "analyses": stats.analyses is not None,
                },
                bm25={"variant": bm25.variant, "k1": bm25.k1, "b": bm25.b},
                files={
                    name: {"bytes": (building / name).stat().st_size, "sha256": digest}
                    for name, digest in written.items()
                },
                build_seconds={k: round(v, 3) for k, v in seconds.items()},
            )
            manifest = dataclasses.replace(manifest, signed=signer is not None)
            manifest.write(building, secret=signer)
            _replace(building, out)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        return cls(out, manifest, analyzer, embedder=embedder)  # named by its builder


def _chunks(documents: Sequence[Any]) -> list[Chunk]:
    if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
        raise InputError("documents must be a sequence of chunks, mappings or strings")
    if not documents:
        raise InputError("an index needs at least one document")
    chunks = []
    for i, entry in enumerate(documents):
        try:
            chunk = to_chunk(
                entry, default_id=str(i), score=None, score_kind=ScoreKind.UNKNOWN, retriever="docs"
            )
            chunks.append(chunk)
        except Exception as exc:
            raise InputError(f"document {i}: {exc}") from exc
    return chunks


def _check_out(out: Path) -> None:
    """Refuse to write where something other than an index directory is."""
    where = os.fspath(out)
    if out.is_file() or (out.exists() and not out.is_dir()):
        raise IndexDirectoryError(where, "out", "a file", "a directory (new, empty or an index)")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise IndexDirectoryError(
            where, "out", "a directory holding other files", "a new, empty or index directory"
        )


def _embed(
    batch: embedders.Batch, chunks: list[Chunk], size: int, report: Progress
) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Every document's vector, ``size`` texts a call, scaled to unit length."""
    parts = []
    report("embedding", 0, len(chunks))
    for start in range(0, len(chunks), size):
        texts = [c.text for c in chunks[start : start + size]]
        try:
            answer = batch(texts)
        except Exception as exc:
            raise InputError(f"the embedder failed on documents {start}..: {exc!r}") from exc
        parts.append(embedders.as_rows(answer, len(texts), f"documents {start}.."))
        report("embedding", start + len(texts), len(chunks))
    vectors = np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
    if len({p.shape[1] for p in parts}) > 1:
        raise InputError("the embedder returned vectors of different dimensions")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # a text of no known term stays a zero vector
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


def _write(
    folder: Path,
    chunks: list[Chunk],
    vectors: np.ndarray[Any, np.dtype[np.float32]],
    metric: str,
    stats: CorpusStats,
    bm25: BM25Retriever,
    model: Any,
    entry: dict[str, Any],
    report: Progress,
) -> dict[str, str]:
    """Every file but the manifest; returns name -> SHA-256."""
    steps: list[Callable[[], Sequence[str]]] = [
        lambda: _write_faiss(folder, vectors, metric),
        lambda: write_docstore(chunks, folder),
        lambda: [stats.save(folder / STATS).name],
        lambda: [bm25.save(folder / BM25).name],
        lambda: embedders.save(model, entry, folder),
    ]
    names: list[str] = []
    for done, step in enumerate(steps):
        report("writing", done, len(steps))
        names.extend(step())
    report("writing", len(steps), len(steps))
    return {name: file_digest(folder / name) for name in names}


def _write_faiss(
    folder: Path, vectors: np.ndarray[Any, np.dtype[np.float32]], metric: str
) -> list[str]:
    import faiss

    flat = faiss.IndexFlatIP if metric == "ip" else faiss.IndexFlatL2
    index = flat(vectors.shape[1])
    index.add(vectors)
    faiss.write_index(index, str(folder / VECTORS))
    return [VECTORS]


def _replace(building: Path, out: Path) -> None:
    """Move the built directory to ``out``; an index directory already there is
    moved aside first and removed after, so ``out`` is never half written."""
    if not out.exists():
        os.replace(building, out)
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
    os.replace(out, old)
    try:
        os.replace(building, out)
    except BaseException:
        os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
