"""Corpus statistics: document frequencies, for IDF-weighted keyword evidence.

A rare query term that a chunk contains says far more than a common one. The
evaluator weights query terms by the BM25 (Robertson-Sparck Jones) inverse
document frequency, as Lucene does::

    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with ``N`` documents of which ``df(t)`` contain term ``t``. It is positive for
every ``df`` (unlike the classic RSJ form) and a term the corpus never saw gets
the largest weight, ``ln(2N + 2)``.

Terms are keyed as the :class:`~crag_heuristic._text.Analyzer` produces them
(case-folded Snowball stems), so statistics must be built with the same
analyzer the evaluator uses; :meth:`CorpusStats.build` records the analyzer's
fingerprint and :meth:`CorpusStats.load` refuses a file built with another.

At scale (a million documents, about a million distinct terms) the counts
live in a :class:`TermTable`: three numpy arrays and one bytes blob (about 30
bytes a term, against some 130 for a ``dict`` of ``str`` -> ``int``), looked
up by a 64-bit BLAKE2b key of the term's UTF-8 bytes with a binary search and
a byte comparison, so a lookup is exact whatever the keys. Building is
counting: shards of texts are counted in worker processes
(``concurrent.futures.ProcessPoolExecutor``) and the partial counts summed,
which is also how :meth:`CorpusStats.merge` combines statistics of separate
shards. The file format is one ``.npz`` (see :meth:`CorpusStats.save`).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import math
import os
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._exceptions import CorpusStatsFileError, InputError, _short
from ._logging import get_logger
from ._text import Analyzer
from ._version import __version__

__all__ = ["FORMAT_VERSION", "CorpusStats", "TermTable", "resolve_corpus_stats"]

#: The version of the statistics file format this library writes and reads.
FORMAT_VERSION = 1
_KIND = "crag_heuristic.CorpusStats"
_LOOKUP_CACHE = 65_536
_SHARD = 25_000
_BUILD_CACHE = 2_000_000  # tokens in a build's private term cache (~300 MB at most)


def _key(data: bytes) -> int:
    """The 64-bit lookup key of a term's UTF-8 bytes (BLAKE2b, stable across runs)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _encode(term: str) -> bytes:
    return term.encode("utf-8", "surrogatepass")


class TermTable(Mapping[str, int]):
    """term -> count in compact arrays: an exact, read-only mapping.

    The terms are sorted by their 64-bit key (ties, vanishingly rare, by their
    bytes); a lookup hashes the term, binary-searches the keys and compares
    the bytes, so a key collision can cost a comparison, never a wrong count.
    Recent lookups are cached (a bounded dict). Build one with
    :meth:`from_counts`.
    """

    __slots__ = ("_blob", "_cache", "_counts", "_keys", "_offsets")

    def __init__(
        self,
        keys: npt.NDArray[np.uint64],
        offsets: npt.NDArray[np.int64],
        blob: bytes,
        counts: npt.NDArray[np.int64],
    ) -> None:
        self._keys = keys
        self._offsets = offsets
        self._blob = blob
        self._counts = counts
        self._cache: dict[str, int] = {}

    @classmethod
    def from_counts(cls, counts: Mapping[str, int]) -> TermTable:
        """The table of a mapping of term -> count (any order; the result is canonical)."""
        if isinstance(counts, TermTable):
            return counts
        try:
            data = [_encode(term) for term in counts]
            n = len(data)
            keys = np.fromiter(map(_key, data), dtype=np.uint64, count=n)
            values = np.fromiter(counts.values(), dtype=np.int64, count=n)
        except (AttributeError, TypeError, ValueError, OverflowError) as exc:
            raise InputError(f"document frequencies must map str -> int: {exc}") from None
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        if n > 1 and bool(np.any(sorted_keys[1:] == sorted_keys[:-1])):
            # equal keys: order those by their bytes too, so the table stays canonical
            order = np.asarray(sorted(range(n), key=lambda i: (int(keys[i]), data[i])))
            sorted_keys = keys[order]
        lengths = np.fromiter((len(data[i]) for i in order), dtype=np.int64, count=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        blob = b"".join(data[i] for i in order)
        return cls(sorted_keys, offsets, blob, values[order])

    # -- Mapping ------------------------------------------------------------------------------

    def get(self, term: object, default: Any = None) -> Any:
        if not isinstance(term, str):
            return default
        count = self._cache.get(term)
        if count is None:
            count = self._find(term)
            if len(self._cache) >= _LOOKUP_CACHE:
                self._cache.clear()
            self._cache[term] = count
        return default if count < 0 else count

    def _find(self, term: str) -> int:
        """The count of ``term``, or -1 when the table does not hold it."""
        data = _encode(term)
        key = np.uint64(_key(data))
        keys, offsets, blob = self._keys, self._offsets, self._blob
        i = int(keys.searchsorted(key))
        while i < len(keys) and keys[i] == key:
            if blob[offsets[i] : offsets[i + 1]] == data:
                return int(self._counts[i])
            i += 1
        return -1

    def __getitem__(self, term: str) -> int:
        count: int | None = self.get(term)
        if count is None:
            raise KeyError(term)
        return count

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        blob, offsets = self._blob, self._offsets.tolist()
        for start, end in itertools.pairwise(offsets):
            yield blob[start:end].decode("utf-8", "surrogatepass")

    def items(self) -> ItemsView[str, int]:
        return _TableItems(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TermTable, (self._keys, self._offsets, self._blob, self._counts))

    def __repr__(self) -> str:
        return f"TermTable(terms={len(self)}, bytes={self.nbytes})"

    # -- arrays -------------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays and the blob (the lookup cache not counted)."""
        return int(self._keys.nbytes + self._offsets.nbytes + self._counts.nbytes) + len(self._blob)

    @property
    def counts(self) -> npt.NDArray[np.int64]:
        """The counts, in table order (read-only view)."""
        view: npt.NDArray[np.int64] = self._counts.view()
        view.flags.writeable = False
        return view

    def digest(self) -> bytes:
        """SHA-256 of the table's canonical arrays."""
        digest = hashlib.sha256()
        for array in (self._keys, self._offsets, self._counts):
            digest.update(np.ascontiguousarray(array).astype("<i8", copy=False).tobytes())
        digest.update(self._blob)
        return digest.digest()


class _TableItems(ItemsView[str, int]):
    _mapping: TermTable

    def __iter__(self) -> Iterator[tuple[str, int]]:
        table = self._mapping
        return zip(iter(table), table._counts.tolist(), strict=True)


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
    """

    n_docs: int
    doc_freq: Mapping[str, int]
    avg_doc_len: float | None = None
    analyzer: str | None = None
    _fingerprint: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.n_docs, bool) or not isinstance(self.n_docs, int) or self.n_docs < 1:
            raise InputError(
                f"CorpusStats.n_docs must be a positive integer, got {_short(self.n_docs)}"
            )
        if not isinstance(self.doc_freq, Mapping):
            raise InputError("CorpusStats.doc_freq must be a mapping of term -> count")

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
    def from_texts(cls, texts: Iterable[str], analyzer: Analyzer | None = None) -> CorpusStats:
        """Count document frequencies over ``texts`` with ``analyzer``'s terms (in process)."""
        return cls.build(texts, analyzer=analyzer)

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        analyzer: Analyzer | None = None,
        workers: int = 1,
        shard_size: int = _SHARD,
        executor: Executor | None = None,
    ) -> CorpusStats:
        """Count document frequencies over ``texts``, in parallel processes if asked.

        Args:
            texts: the documents' texts, read once, in shards (an iterator is fine).
            analyzer: the evaluator's analyzer (default :class:`Analyzer`).
            workers: processes to count in; ``1`` counts in this process. With
                more, shards of ``shard_size`` texts go to a
                ``ProcessPoolExecutor`` (the platform's start method: where it
                is ``spawn`` or ``forkserver``, call this under
                ``if __name__ == "__main__":``) and their counts are summed.
            shard_size: texts per shard.
            executor: an executor of your own to count in (``workers`` is then
                only the number of shards in flight per worker, times two).

        Raises:
            InputError: no texts, a text that is not a string, or bad arguments.
        """
        analyzer = analyzer or Analyzer()
        if isinstance(texts, str | bytes):
            raise InputError("texts must be an iterable of strings, not one string")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InputError(f"workers must be a positive integer, got {_short(workers)}")
        if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
            raise InputError(f"shard_size must be a positive integer, got {_short(shard_size)}")
        started = time.perf_counter()
        if workers == 1 and executor is None:
            n_docs, n_terms, counts = _count_shard(analyzer, texts)
        else:
            n_docs, n_terms, counts = _count_in_parallel(
                analyzer, texts, workers, shard_size, executor
            )
        if n_docs == 0:
            raise InputError("CorpusStats.build needs at least one text")
        stats = cls(
            n_docs=n_docs,
            doc_freq=TermTable.from_counts(counts),
            avg_doc_len=n_terms / n_docs,
            analyzer=analyzer.fingerprint,
        )
        _log_event("built", stats, started, workers=workers)
        return stats

    @classmethod
    def merge(cls, *parts: CorpusStats) -> CorpusStats:
        """The statistics of the union of the parts' corpora (e.g. shards counted apart).

        ``n_docs`` and document frequencies add up; ``avg_doc_len`` is the
        mean weighted by documents (unknown if any part's is).

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
        counts: Counter[str] = Counter()
        for part in parts:
            counts.update(dict(part.doc_freq.items()))
        n_docs = sum(part.n_docs for part in parts)
        lengths = [part.avg_doc_len for part in parts]
        avg = (
            None
            if any(length is None for length in lengths)
            else sum(p.n_docs * (p.avg_doc_len or 0.0) for p in parts) / n_docs
        )
        return cls(
            n_docs=n_docs,
            doc_freq=TermTable.from_counts(counts),
            avg_doc_len=avg,
            analyzer=parts[0].analyzer,
        )

    # -- the file ---------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the statistics to one ``.npz`` file (atomically: a temporary file, renamed).

        The file holds ``kind``, ``format_version`` (:data:`FORMAT_VERSION`),
        the analyzer's fingerprint, the library version that wrote it,
        ``n_docs``, ``avg_doc_len``, the :class:`TermTable`'s arrays
        (``keys``, ``offsets``, ``blob``, ``counts``) and the statistics'
        :meth:`fingerprint`, which :meth:`load` checks. Numpy reads it
        without pickle. The path is used as given (no suffix is added).

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
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as out:
                np.savez(out, **arrays)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

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
            with np.load(name, allow_pickle=False) as data:
                fields = {key: data[key] for key in data.files}
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
        if version != FORMAT_VERSION:
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
        try:
            stats = cls(
                n_docs=n_docs,
                doc_freq=table,
                avg_doc_len=None if math.isnan(avg) else avg,
                analyzer=built_with or None,
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
    texts: Callable[[], Iterable[str]] | None,
    workers: int = 1,
) -> CorpusStats | None:
    """What a retriever's ``corpus_stats=`` argument means, resolved now (not on a query).

    A :class:`CorpusStats` is used as is; a path is loaded (refused if built
    with another analyzer); ``None`` builds from ``texts()`` when given, or
    gives ``None``. Building and loading log a ``crag.corpus_stats`` event.
    The statistics' fingerprint (the router's cache keys hold it) is computed
    here too: a digest of every count, milliseconds the first query would pay.

    Raises:
        InputError: a value of another type; see also :meth:`CorpusStats.load`.
    """
    stats: CorpusStats | None
    if given is None:
        stats = (
            None
            if texts is None
            else CorpusStats.build(texts(), analyzer=analyzer, workers=workers)
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


# -- counting ---------------------------------------------------------------------------------


def _counting_copy(analyzer: Analyzer) -> Analyzer:
    """A copy of ``analyzer`` with an empty term cache allowed to grow to ``_BUILD_CACHE``.

    A corpus's long tail would empty the default cache again and again; the
    caller's analyzer is left as it was (``Analyzer.__getstate__`` drops the
    cache, as sending it to a worker process does).
    """
    clone = copy.copy(analyzer)
    clone.cache_limit = _BUILD_CACHE
    return clone


def _count_shard(
    analyzer: Analyzer, texts: Iterable[str], *, private: bool = True
) -> tuple[int, int, Counter[str]]:
    """Documents, content-term occurrences and document frequencies of ``texts``."""
    if private:
        analyzer = _counting_copy(analyzer)
    sizes = [0, 0]  # documents, content terms

    def distinct(text: str) -> set[str]:
        if not isinstance(text, str):
            raise InputError(f"text #{sizes[0]} is {type(text).__name__}, not a string")
        terms, n_terms = analyzer.distinct_terms(text)
        sizes[0] += 1
        sizes[1] += n_terms
        return terms

    counts = Counter(itertools.chain.from_iterable(map(distinct, texts)))
    return sizes[0], sizes[1], counts


class _Worker:
    """A worker process's analyzer, kept across its shards (so is its term cache).

    Set by the pool's initializer, in the worker processes only.
    """

    analyzer: Analyzer | None = None


def _start_worker(analyzer: Analyzer) -> None:
    _Worker.analyzer = _counting_copy(analyzer)


def _count_texts(
    analyzer: Analyzer, texts: Sequence[str], offset: int
) -> tuple[int, int, Counter[str]]:
    """A worker's task: one shard (errors name the text's position in the corpus)."""
    kept = _Worker.analyzer
    try:
        if kept is not None and kept == analyzer:
            return _count_shard(kept, texts, private=False)
        return _count_shard(analyzer, texts)
    except InputError as exc:
        raise InputError(f"{exc} (shard starting at text #{offset})") from None


def _count_in_parallel(
    analyzer: Analyzer,
    texts: Iterable[str],
    workers: int,
    shard_size: int,
    executor: Executor | None,
) -> tuple[int, int, Counter[str]]:
    own = executor is None
    pool: Executor = (
        ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(analyzer,))
        if executor is None
        else executor
    )
    n_docs = n_terms = 0
    total: Counter[str] = Counter()
    pending: list[Future[tuple[int, int, Counter[str]]]] = []

    def collect(future: Future[tuple[int, int, Counter[str]]]) -> None:
        nonlocal n_docs, n_terms, total
        docs, terms, counts = future.result()
        n_docs += docs
        n_terms += terms
        if total:
            total.update(counts)
        else:
            total = counts  # the first shard's counts: no copy

    try:
        iterator = iter(texts)
        offset = 0
        while True:
            shard = list(itertools.islice(iterator, shard_size))
            if not shard:
                break
            pending.append(pool.submit(_count_texts, analyzer, shard, offset))
            offset += len(shard)
            while len(pending) >= 2 * workers:  # bounded: texts are read as shards are counted
                collect(pending.pop(0))
        for future in pending:
            collect(future)
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
    return n_docs, n_terms, total


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
