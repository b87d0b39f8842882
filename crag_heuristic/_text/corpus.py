"""Corpus statistics: document frequencies, for IDF-weighted keyword evidence.

A rare query term that a chunk contains says far more than a common one. The
evaluator weights query terms by the BM25 (Robertson-Sparck Jones) inverse
document frequency, as Lucene does::

    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with ``N`` documents of which ``df(t)`` contain term ``t``. It is positive for
every ``df`` (unlike the classic RSJ form) and a term the corpus never saw gets
the largest weight, ``ln(2N + 2)``.

Terms are keyed as the :class:`~crag_heuristic._text.analyzer.Analyzer` produces them
(case-folded Snowball stems), so statistics must be built with the same
analyzer the evaluator uses; :meth:`CorpusStats.build` records the analyzer's
fingerprint and :meth:`CorpusStats.load` refuses a file built with another.

At scale (a million documents, about a million distinct terms) the counts
live in a :class:`TermTable`: three numpy arrays and one bytes blob (about 30
bytes a term, against some 130 for a ``dict`` of ``str`` -> ``int``), looked
up by a 64-bit BLAKE2b key of the term's UTF-8 bytes with a binary search and
a byte comparison, so a lookup is exact whatever the keys. Building is
counting: partitions of the corpus are counted by an engine, in this process
or on a Dask cluster (:mod:`crag_heuristic._text.engines`), and the partial counts
merged (:mod:`crag_heuristic._text.counting`), which is also how
:meth:`CorpusStats.merge` combines statistics built apart. With
``analyses=True`` each document's analysis is kept too
(:class:`~crag_heuristic._text.analyses.ChunkAnalyses`), for the evaluator to look
up instead of tokenising. The file format is one ``.npz`` (see
:meth:`CorpusStats.save`).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import os
import secrets
import time
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._exceptions import CorpusStatsFileError, InputError, _short
from .._logging import get_logger
from .._version import __version__
from .analyses import ARRAY_NAMES, AnalysesPart, ChunkAnalyses
from .analyzer import Analyzer
from .counting import (
    Merger,
    Part,
    count_partition,
    counting_copy,
    file_partitions,
    texts_partitions,
)
from .engines import LocalEngine, resolve_engine
from .npz import read_npz
from .terms import TermTable

if TYPE_CHECKING:
    from .engines import StatsEngine

#: The version of the statistics file format this library writes; it reads this one
#: and version 1 (the same file without chunk analyses).
FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_KIND = "crag_heuristic.CorpusStats"
_PARTITION = 25_000  # texts per partition
_PARTITION_BYTES = 32 << 20  # bytes of a documents file per partition


@dataclass(frozen=True)
class CorpusStats:
    """Document frequencies of analyzed terms over a corpus.

    Args:
        n_docs: number of documents (> 0).
        doc_freq: term -> number of documents containing it (0 <= df <= n_docs);
            any mapping (:meth:`build` and :meth:`load` give a compact
            :class:`TermTable`).
        avg_doc_len: mean document length in content terms (stop words not
            counted), if known: the BM25 ``avgdl``.
        analyzer: fingerprint of the analyzer that produced the terms.
        analyses: each document's analysis, by id and text digest, if built
            (``build(..., analyses=True)``); the evaluator reads a chunk's
            here before it tokenises it. Not part of :meth:`fingerprint`:
            it changes no count.
    """

    n_docs: int
    doc_freq: Mapping[str, int]
    avg_doc_len: float | None = None
    analyzer: str | None = None
    analyses: ChunkAnalyses | None = field(default=None, compare=False, repr=False)
    _fingerprint: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.n_docs, bool) or not isinstance(self.n_docs, int) or self.n_docs < 1:
            raise InputError(
                f"CorpusStats.n_docs must be a positive integer, got {_short(self.n_docs)}"
            )
        if not isinstance(self.doc_freq, Mapping):
            raise InputError("CorpusStats.doc_freq must be a mapping of term -> count")
        if self.analyses is not None and (
            not isinstance(self.analyses, ChunkAnalyses) or self.analyses.terms is not self.doc_freq
        ):
            raise InputError(
                "CorpusStats.analyses must be None or the ChunkAnalyses built with this doc_freq"
            )

    def df(self, term: str) -> int:
        """Documents containing ``term`` (0 when unseen)."""
        count: int = self.doc_freq.get(term, 0)
        return count

    def idf(self, term: str) -> float:
        """The BM25 inverse document frequency of an analyzed term (see module doc)."""
        df = min(self.doc_freq.get(term, 0), self.n_docs)
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    @property
    def n_terms(self) -> int:
        """Distinct terms (the vocabulary's size)."""
        return len(self.doc_freq)

    @property
    def nbytes(self) -> int | None:
        """Bytes held by a :class:`TermTable`'s arrays; ``None`` for another mapping."""
        return self.doc_freq.nbytes if isinstance(self.doc_freq, TermTable) else None

    # -- building -------------------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        analyzer: Analyzer | None = None,
        *,
        ids: Iterable[str] | None = None,
        analyses: bool = True,
    ) -> CorpusStats:
        """Count document frequencies over ``texts`` with ``analyzer``'s terms (in
        process), keeping each text's analysis (``analyses=False``: the counts alone,
        for a corpus too large to keep them): the evaluator then looks a chunk of
        this corpus up, by its id and text or by its text alone, instead of
        tokenising it. ``ids``: the chunks' ids, in order (optional: a chunk is found
        by its text's digest too). See :meth:`build`."""
        return cls.build(texts, analyzer=analyzer, ids=ids, analyses=analyses)

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        analyzer: Analyzer | None = None,
        ids: Iterable[str] | None = None,
        analyses: bool = False,
        engine: StatsEngine | str = "local",
        partition_size: int = _PARTITION,
    ) -> CorpusStats:
        """Count document frequencies over ``texts``: in this process, or on Dask.

        Args:
            texts: the documents' texts, read once, in partitions (an iterator
                is fine).
            analyzer: the evaluator's analyzer (default :class:`Analyzer`).
            ids: the documents' ids, in the order of ``texts`` (the chunk ids
                the retriever will give them); default: their positions
                (``"0"``, ``"1"`` ...). Only the analyses use them.
            analyses: keep each document's analysis too (:attr:`analyses`).
            engine: ``"local"`` (this process), ``"dask"`` (a
                :class:`DaskEngine` on a ``LocalCluster`` of its own) or an
                engine (``DaskEngine(scheduler="tcp://...")``). Every engine
                gives the same statistics, bit for bit.
            partition_size: texts per partition.

        Raises:
            InputError: no texts, a text that is not a string, ids that do not
                match the texts, or bad arguments.
            ConfigError: an unknown engine (or Dask not installed).
            StatsEngineError: the engine failed (a scheduler out of reach ...).
        """
        _check_size("partition_size", partition_size)
        partitions = texts_partitions(texts, ids, partition_size)
        return cls._count(partitions, analyzer, analyses, resolve_engine(engine))

    @classmethod
    def from_jsonl(
        cls,
        path: str | os.PathLike[str],
        *,
        analyzer: Analyzer | None = None,
        analyses: bool = False,
        engine: StatsEngine | str = "local",
        partition_bytes: int = _PARTITION_BYTES,
    ) -> CorpusStats:
        """Count a JSON Lines documents file (``id`` / ``_id``, ``text``, optional
        ``title``: what ``crag-heuristic retrieve --docs`` reads; a document
        without an id is known by its position), cut into byte ranges that each
        engine's workers read where they run.

        Raises:
            InputError: an unreadable file or line, or no documents.
            ConfigError, StatsEngineError: as :meth:`build`.
        """
        _check_size("partition_bytes", partition_bytes)
        partitions = file_partitions(path, partition_bytes)
        return cls._count(partitions, analyzer, analyses, resolve_engine(engine))

    @classmethod
    def _count(
        cls,
        partitions: Iterable[Any],
        analyzer: Analyzer | None,
        analyses: bool,
        engine: StatsEngine,
    ) -> CorpusStats:
        analyzer = analyzer or Analyzer()
        started = time.perf_counter()
        if isinstance(engine, LocalEngine):  # one analyzer, its term cache kept throughout
            count = functools.partial(
                count_partition, counting_copy(analyzer), analyses=analyses, private=False
            )
        else:
            count = functools.partial(count_partition, analyzer, analyses=analyses)
        merger = Merger()
        merging = 0.0  # seconds spent here adding partitions up, not counting them
        n_parts = 0
        for part in engine.map_unordered(count, partitions):
            began = time.perf_counter()
            merger.add(part)
            merging += time.perf_counter() - began
            n_parts += 1
        if merger.n_docs == 0:
            raise InputError("CorpusStats.build needs at least one text")
        began = time.perf_counter()
        table, stored = merger.finish(TermTable)
        stats = cls(
            n_docs=merger.n_docs,
            doc_freq=table,
            avg_doc_len=merger.n_terms / merger.n_docs,
            analyzer=analyzer.fingerprint,
            analyses=stored,
        )
        merging += time.perf_counter() - began
        _log_event(
            "built",
            stats,
            started,
            engine=engine.name,
            partitions=n_parts,
            merge_seconds=round(merging, 3),
            analyses=stored is not None,
        )
        return stats

    @classmethod
    def merge(cls, *parts: CorpusStats) -> CorpusStats:
        """The statistics of the union of the parts' corpora (e.g. shards counted apart).

        ``n_docs`` and document frequencies add up; ``avg_doc_len`` is the
        mean weighted by documents (unknown if any part's is); the chunk
        analyses are joined when every part has them (else dropped).

        Raises:
            InputError: no parts, or parts built with different analyzers.
        """
        if not parts:
            raise InputError("CorpusStats.merge needs at least one CorpusStats")
        for part in parts:
            if not isinstance(part, CorpusStats):
                raise InputError(f"can only merge CorpusStats, got {type(part).__name__}")
        analyzers = {part.analyzer for part in parts}
        if len(analyzers) > 1:
            raise InputError(
                "cannot merge statistics built with different analyzers: "
                f"{sorted(map(str, analyzers))}"
            )
        merger = Merger()
        for index, part in enumerate(parts):
            table = TermTable.from_counts(part.doc_freq)
            vocab = list(table)
            stored = part.analyses
            merger.add(
                Part(
                    index,
                    part.n_docs,
                    0,
                    vocab,
                    np.array(table.counts),
                    None if stored is None else AnalysesPart.from_analyses(stored, vocab),
                    keys=table._keys,
                )
            )
        merged, analyses = merger.finish(TermTable)
        n_docs = sum(part.n_docs for part in parts)
        lengths = [part.avg_doc_len for part in parts]
        avg = (
            None
            if any(length is None for length in lengths)
            else sum(p.n_docs * (p.avg_doc_len or 0.0) for p in parts) / n_docs
        )
        return cls(
            n_docs=n_docs,
            doc_freq=merged,
            avg_doc_len=avg,
            analyzer=parts[0].analyzer,
            analyses=analyses,
        )

    # -- the file ---------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the statistics to one ``.npz`` file (atomically: a temporary file, renamed).

        The file holds ``kind``, ``format_version`` (:data:`FORMAT_VERSION`),
        the analyzer's fingerprint, the library version that wrote it,
        ``n_docs``, ``avg_doc_len``, the :class:`TermTable`'s arrays
        (``keys``, ``offsets``, ``blob``, ``counts``) and the statistics'
        :meth:`fingerprint`, which :meth:`load` checks; with :attr:`analyses`,
        their arrays too (``analyses_<name>``, see
        :mod:`crag_heuristic._text.analyses`), their stop words and their digest,
        checked likewise. Numpy reads it without pickle. The path is used as
        given (no suffix is added).

        Returns:
            the path written.
        """
        target = Path(path)
        table = TermTable.from_counts(self.doc_freq)
        arrays: dict[str, Any] = {
            "kind": np.asarray(_KIND),
            "format_version": np.asarray(FORMAT_VERSION, dtype=np.int64),
            "analyzer": np.asarray(self.analyzer or ""),
            "library_version": np.asarray(__version__),
            "n_docs": np.asarray(self.n_docs, dtype=np.int64),
            "avg_doc_len": np.asarray(
                math.nan if self.avg_doc_len is None else self.avg_doc_len, dtype=np.float64
            ),
            "fingerprint": np.asarray(self.fingerprint()),
            "keys": table._keys,
            "offsets": table._offsets,
            "blob": np.frombuffer(table._blob, dtype=np.uint8),
            "counts": table._counts,
        }
        if self.analyses is not None:
            arrays.update(
                {f"analyses_{name}": a for name, a in self.analyses.arrays().items()},
                analyses_stop_words=np.asarray("\n".join(self.analyses.stop_words)),
                analyses_fingerprint=np.asarray(self.analyses.digest()),
            )
        return write_npz(target, arrays)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, analyzer: Analyzer | str | None = None
    ) -> CorpusStats:
        """Read statistics written by :meth:`save`, refusing a file that does not fit.

        Args:
            path: the file.
            analyzer: the analyzer (or its fingerprint) the statistics must
                have been built with; default: the default :class:`Analyzer`.

        Raises:
            CorpusStatsFileError: the file is missing or unreadable, is not a
                statistics file, was written in another format version, was
                built with another analyzer, or is damaged (its arrays do not
                agree with each other or with its fingerprint). The message
                says which, and the error's ``field``, ``found`` and
                ``expected`` say it for programs.
        """
        started = time.perf_counter()
        expected_analyzer = (
            analyzer if isinstance(analyzer, str) else (analyzer or Analyzer()).fingerprint
        )
        name = os.fspath(path)
        try:
            fields = read_npz(name)
        except FileNotFoundError:
            raise CorpusStatsFileError(name, "file", "missing", "a statistics file") from None
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise CorpusStatsFileError(
                name, "kind", f"unreadable ({exc})", "an .npz written by CorpusStats.save"
            ) from exc
        kind = _scalar(fields, "kind", str)
        if kind != _KIND:
            raise CorpusStatsFileError(name, "kind", kind, _KIND)
        version = _scalar(fields, "format_version", int)
        if version not in _READABLE_VERSIONS:
            raise CorpusStatsFileError(name, "format_version", version, FORMAT_VERSION)
        built_with = _scalar(fields, "analyzer", str)
        if built_with != expected_analyzer:
            raise CorpusStatsFileError(name, "analyzer", built_with, expected_analyzer)
        try:
            table = TermTable(
                np.ascontiguousarray(fields["keys"], dtype=np.uint64),
                np.ascontiguousarray(fields["offsets"], dtype=np.int64),
                np.ascontiguousarray(fields["blob"], dtype=np.uint8).tobytes(),
                np.ascontiguousarray(fields["counts"], dtype=np.int64),
            )
            n_docs = _scalar(fields, "n_docs", int)
            avg = float(fields["avg_doc_len"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorpusStatsFileError(name, "content", f"damaged ({exc})", "valid arrays") from exc
        _check_table(name, table, n_docs)
        analyses = _read_analyses(name, fields, table, n_docs)
        try:
            stats = cls(
                n_docs=n_docs,
                doc_freq=table,
                avg_doc_len=None if math.isnan(avg) else avg,
                analyzer=built_with or None,
                analyses=analyses,
            )
        except InputError as exc:
            raise CorpusStatsFileError(name, "content", str(exc), "valid statistics") from exc
        recorded = _scalar(fields, "fingerprint", str)
        if stats.fingerprint() != recorded:
            raise CorpusStatsFileError(
                name, "fingerprint", stats.fingerprint(), recorded, note="the file is damaged"
            )
        _log_event("loaded", stats, started)
        return stats

    def fingerprint(self) -> str:
        """A stable digest of the statistics (computed once), for cache keys."""
        if not self._fingerprint:
            digest = hashlib.sha256(f"{self.n_docs}\n{self.analyzer}\n".encode())
            digest.update(TermTable.from_counts(self.doc_freq).digest())
            self._fingerprint.append(digest.hexdigest()[:16])
        return self._fingerprint[0]


def resolve_corpus_stats(
    given: CorpusStats | str | os.PathLike[str] | None,
    *,
    analyzer: Analyzer | None,
    documents: Callable[[], Iterable[tuple[str, str]]] | None,
    analyses: bool = True,
) -> CorpusStats | None:
    """What a retriever's ``corpus_stats=`` argument means, resolved now (not on a query).

    A :class:`CorpusStats` is used as is; a path is loaded (refused if built
    with another analyzer); ``None`` builds from ``documents()`` (``(chunk id,
    text)`` pairs: what the retriever holds) when given, with each document's
    analysis if ``analyses``, or gives ``None``. Building and loading log a
    ``crag.corpus_stats`` event. The statistics' fingerprint (the router's cache
    keys hold it) is computed here too: a digest of every count, milliseconds the
    first query would pay.

    Raises:
        InputError: a value of another type; see also :meth:`CorpusStats.load`.
    """
    stats: CorpusStats | None
    if given is None:
        if documents is None:
            return None
        pairs, copies = itertools.tee(documents())  # read in step: one partition is buffered
        stats = CorpusStats.build(
            (text for _, text in pairs),
            ids=(doc_id for doc_id, _ in copies),
            analyzer=analyzer,
            analyses=analyses,
        )
    elif isinstance(given, CorpusStats):
        stats = given
    elif isinstance(given, str | os.PathLike):
        stats = CorpusStats.load(given, analyzer=analyzer)
    else:
        raise InputError(
            "corpus_stats must be a CorpusStats, a path to a saved one or None, "
            f"got {type(given).__name__}"
        )
    if stats is not None:
        stats.fingerprint()
    return stats


def write_npz(path: str | os.PathLike[str], arrays: Mapping[str, Any]) -> Path:
    """Write ``arrays`` to one ``.npz`` file at ``path`` (as given, no suffix added)
    atomically: a temporary file beside it, renamed over it. Missing folders on the way
    are created; the file's mode follows the umask, as any file the process creates
    (``tempfile.mkstemp`` would make it 0600: unreadable to a Dask worker running as
    another user). Returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(8)}"
    handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **arrays)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _check_size(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**40:
        raise InputError(f"{name} must be an integer in [1, 2**40], got {_short(value)}")


# -- file checks ----------------------------------------------------------------------------


def _scalar(fields: Mapping[str, Any], key: str, kind: type) -> Any:
    value = fields.get(key)
    if value is None:
        return None
    try:
        item = np.asarray(value).item()
    except ValueError:
        return None
    if kind is int and isinstance(item, int) and not isinstance(item, bool):
        return item
    if kind is str and isinstance(item, str):
        return item
    return None


def _check_table(name: str, table: TermTable, n_docs: Any) -> None:
    keys, offsets, counts = table._keys, table._offsets, table._counts
    problems = []
    if not isinstance(n_docs, int) or n_docs < 1:
        problems.append(f"n_docs {n_docs!r}")
    elif len(counts) and (int(counts.min()) < 0 or int(counts.max()) > n_docs):
        problems.append("a count outside 0..n_docs")
    if keys.ndim != 1 or counts.shape != keys.shape or offsets.shape != (len(keys) + 1,):
        problems.append("arrays of mismatched lengths")
    elif len(offsets) and (
        offsets[0] != 0 or offsets[-1] != len(table._blob) or bool(np.any(np.diff(offsets) < 0))
    ):
        problems.append("offsets that do not cut the blob")
    elif len(keys) > 1 and bool(np.any(keys[1:] < keys[:-1])):
        problems.append("unsorted keys")
    if problems:
        raise CorpusStatsFileError(
            name, "content", "damaged: " + ", ".join(problems), "consistent arrays"
        )


def _read_analyses(
    name: str, fields: Mapping[str, Any], table: TermTable, n_docs: int
) -> ChunkAnalyses | None:
    """The file's chunk analyses, checked (``None`` when it has none)."""
    if "analyses_id_keys" not in fields:
        return None
    try:
        arrays = {key: np.ascontiguousarray(fields[f"analyses_{key}"]) for key in ARRAY_NAMES}
        stop_words = _scalar(fields, "analyses_stop_words", str)
        if stop_words is None:
            raise KeyError("analyses_stop_words")
        analyses = ChunkAnalyses(arrays, stop_words.split("\n") if stop_words else (), table)
    except (KeyError, TypeError, ValueError) as exc:
        raise CorpusStatsFileError(
            name, "content", f"damaged analyses ({exc})", "valid arrays"
        ) from exc
    problems = analyses.problems(n_docs)
    if problems:
        raise CorpusStatsFileError(
            name, "content", "damaged analyses: " + ", ".join(problems), "consistent arrays"
        )
    recorded = _scalar(fields, "analyses_fingerprint", str)
    if analyses.digest() != recorded:
        raise CorpusStatsFileError(
            name, "fingerprint", analyses.digest(), recorded, note="its analyses are damaged"
        )
    return analyses


def _log_event(source: str, stats: CorpusStats, started: float, **fields: Any) -> None:
    get_logger().info(
        "crag.corpus_stats",
        source=source,
        n_docs=stats.n_docs,
        n_terms=stats.n_terms,
        nbytes=stats.nbytes,
        seconds=round(time.perf_counter() - started, 3),
        **fields,
    )
