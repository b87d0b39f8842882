"""Counting a corpus in partitions, then merging them: one code path for every engine.

A corpus is cut into partitions: runs of texts held in memory
(:class:`TextsPartition`) or byte ranges of a JSON Lines documents file, cut at
line starts and read where the partition is counted (:class:`FilePartition`).
:func:`count_partition` counts one: its documents, their content terms, the
document frequency of each term (numbered in order of first occurrence in the
partition), and with ``analyses`` each document's analysis
(:class:`~crag_heuristic._text.analyses.AnalysesPart`). It is a module-level
function of picklable arguments, so that an engine can run it in this
process or on a Dask worker alike.

:class:`Merger` adds the partitions up in whatever order they finish: the
counts are integers and the term table is canonical (sorted by key), and the
analyses are put in corpus order, then sorted by id key, so the result is
the same, bit for bit, however the corpus was cut and wherever it was
counted.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .._checks import as_text
from .._documents import to_chunk
from .._exceptions import InputError, RetrieverError
from .._types import ScoreKind
from .analyses import AnalysesPart, ChunkAnalyses
from .analyzer import Analyzer
from .terms import keys64, utf8

_BUILD_CACHE = 2_000_000  # tokens in a build's private term cache (~300 MB at most)


def counting_copy(analyzer: Analyzer) -> Analyzer:
    """A copy of ``analyzer`` with an empty term cache allowed to grow to ``_BUILD_CACHE``.

    A corpus's long tail would empty the default cache again and again; the
    caller's analyzer is left as it was (``Analyzer.__getstate__`` drops the
    cache, as sending it to a worker does).
    """
    clone = copy.copy(analyzer)
    clone._own_caches()  # not the caches it shares with the process's other analyzers
    clone.cache_limit = _BUILD_CACHE
    return clone


@dataclass(frozen=True)
class TextsPartition:
    """Texts held in memory: corpus positions ``first`` to ``first + len(texts) - 1``."""

    index: int
    first: int
    texts: Sequence[Any]
    ids: Sequence[Any] | None = None

    def documents(self) -> Iterator[tuple[str | int, str]]:
        """``(id, text)``: the id given (an ``int`` one as its decimal string), else the
        position in the partition (an ``int``, made a corpus position by the merge)."""
        ids: Iterable[Any] = range(len(self.texts)) if self.ids is None else self.ids
        for position, (doc_id, text) in enumerate(zip(ids, self.texts, strict=True)):
            if not isinstance(text, str):
                raise InputError(
                    f"text #{self.first + position} is {type(text).__name__}, not a string"
                )
            if self.ids is None:
                yield doc_id, text
                continue
            shown = as_text(doc_id) if isinstance(doc_id, str | int) else None
            if shown is None or isinstance(doc_id, bool):
                raise InputError(
                    f"id #{self.first + position} is {type(doc_id).__name__}, not a string"
                )
            yield shown, text


@dataclass(frozen=True)
class FilePartition:
    """Lines of a JSON Lines documents file that start in bytes ``[start, stop)``.

    Each line is a document as ``crag-heuristic retrieve --docs`` reads it
    (``id`` / ``_id``, ``text``, optional ``title``); one without an id gets
    its position among the file's documents, as there.
    """

    index: int
    path: str
    start: int
    stop: int

    def documents(self) -> Iterator[tuple[str | int, str]]:
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            data = handle.read(self.stop - self.start)
        position = 0
        offset = self.start
        for line in data.splitlines(keepends=True):
            where = offset
            offset += len(line)
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8-sig" if where == 0 else "utf-8"))
                chunk = to_chunk(
                    record,
                    default_id="-",
                    score=None,
                    score_kind=ScoreKind.UNKNOWN,
                    retriever="docs",
                )
            except (ValueError, RecursionError, RetrieverError) as exc:  # bad UTF-8 or JSON
                raise InputError(f"{self.path}: the line at byte {where}: {exc}") from None
            has_id = isinstance(record, dict) and ("id" in record or "_id" in record)
            yield (chunk.id if has_id else position), chunk.text
            position += 1


def texts_partitions(
    texts: Iterable[Any], ids: Iterable[Any] | None, size: int
) -> Iterator[TextsPartition]:
    """``texts`` (and their ids) in partitions of ``size``, read as they are needed."""
    if isinstance(texts, str | bytes):
        raise InputError("texts must be an iterable of strings, not one string")
    if isinstance(ids, str | bytes):
        raise InputError("ids must be an iterable of strings, not one string")
    try:
        text_iter = iter(texts)
        id_iter = None if ids is None else iter(ids)
    except TypeError:
        what = "texts" if not isinstance(texts, Iterable) else "ids"
        raise InputError(f"{what} must be an iterable of strings") from None
    first = 0
    for index in itertools.count():
        chunk = list(itertools.islice(text_iter, size))
        chunk_ids = None if id_iter is None else list(itertools.islice(id_iter, len(chunk)))
        if chunk_ids is not None and len(chunk_ids) != len(chunk):
            raise InputError(f"fewer ids than texts: {first + len(chunk_ids)} ids")
        if not chunk:
            if id_iter is not None and next(id_iter, None) is not None:
                raise InputError(f"more ids than texts ({first} texts)")
            return
        yield TextsPartition(index, first, chunk, chunk_ids)
        first += len(chunk)


def file_partitions(path: str | os.PathLike[str], size: int) -> list[FilePartition]:
    """A documents file cut into byte ranges of about ``size`` bytes, at line starts.

    Raises:
        InputError: the file cannot be read.
    """
    name = os.fspath(path)
    try:
        total = os.path.getsize(name)
        bounds = [0]
        with open(name, "rb") as handle:
            while bounds[-1] + size < total:
                handle.seek(bounds[-1] + size)
                handle.readline()  # to the start of the next line
                where = handle.tell()
                if where >= total:
                    break
                bounds.append(where)
    except OSError as exc:
        raise InputError(f"cannot read {name!r}: {exc.strerror or exc}") from None
    bounds.append(total)
    return [
        FilePartition(i, name, start, stop)
        for i, (start, stop) in enumerate(itertools.pairwise(bounds))
        if stop > start
    ]


@dataclass
class Part:
    """What counting one partition gives (small and picklable)."""

    index: int
    n_docs: int
    n_terms: int
    vocab: list[str]
    doc_freq: npt.NDArray[np.int64]
    analyses: AnalysesPart | None
    keys: npt.NDArray[np.uint64] | None = None  # of the vocab's terms (counted where it ran)

    def __post_init__(self) -> None:
        if self.keys is None:
            self.keys = vocab_keys(self.vocab)


def vocab_keys(vocab: list[str]) -> npt.NDArray[np.uint64]:
    """The term table's 64-bit key of each term (:func:`~crag_heuristic._text.terms.key64`)."""
    return keys64(map(utf8, vocab))


def count_partition(
    analyzer: Analyzer,
    partition: TextsPartition | FilePartition,
    *,
    analyses: bool = False,
    private: bool = True,
) -> Part:
    """Count one partition (in this process or on a worker).

    Args:
        analyzer: the evaluator's analyzer.
        partition: the texts to count.
        analyses: keep each document's analysis too.
        private: count with a copy of ``analyzer`` whose term cache may grow
            large (see :func:`counting_copy`); ``False`` when the caller
            passes such a copy already, to keep its cache across partitions.

    Raises:
        InputError: a text that is not a string, or an unreadable line.
    """
    if private:
        analyzer = counting_copy(analyzer)
    documents = partition.documents()
    if analyses:
        part = AnalysesPart(analyzer.stop_words)
        for doc_id, text in documents:
            part.add(doc_id, text, analyzer.analyze(text))
        n_terms = int(np.frombuffer(part.term_counts, dtype=np.uint32).sum(dtype=np.int64))
        return Part(partition.index, len(part), n_terms, list(part.vocab), part.doc_freq(), part)
    sizes = [0, 0]  # documents, content terms

    def distinct(item: tuple[str | int, str]) -> set[str]:
        terms, n_terms = analyzer.distinct_terms(item[1])
        sizes[0] += 1
        sizes[1] += n_terms
        return terms

    counts = Counter(itertools.chain.from_iterable(map(distinct, documents)))
    doc_freq = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    return Part(partition.index, sizes[0], sizes[1], list(counts), doc_freq, None)


class Merger:
    """Adds partitions up, in any order; :meth:`finish` gives the corpus's counts.

    The merge is vectorised: every partition's terms come with their 64-bit keys
    (computed where the partition was counted), so the client sorts the keys of all
    partitions together (``numpy.unique``), sums each term's counts and checks, with
    one comparison per term, that a key never stands for two terms. Should two terms
    share a key (about one corpus in ten million at a million terms), the partitions
    are merged again by the terms themselves, in a ``dict``: the result is the same.
    """

    def __init__(self) -> None:
        self._parts: dict[int, Part] = {}
        self.n_docs = 0
        self.n_terms = 0

    def add(self, part: Part) -> None:
        """Keep one partition's counts (and analyses) for :meth:`finish`."""
        if part.index in self._parts:
            raise InputError(f"partition {part.index} was counted twice")
        self._parts[part.index] = part
        self.n_docs += part.n_docs
        self.n_terms += part.n_terms

    def finish(self, table_class: Any) -> tuple[Any, ChunkAnalyses | None]:
        """The term table (a ``table_class``: :class:`~crag_heuristic._text.terms.TermTable`)
        and the analyses (``None`` unless every partition kept them)."""
        parts = [self._parts[index] for index in sorted(self._parts)]  # corpus order
        table, where = _merge_by_key(parts, table_class) or _merge_by_term(parts, table_class)
        kept = [part.analyses for part in parts if part.analyses is not None]
        if not parts or len(kept) < len(parts):
            return table, None
        ordered = []
        first = done = 0
        for part, analyses in zip(parts, kept, strict=True):
            ordered.append((analyses, where[done : done + len(part.vocab)], first))
            done += len(part.vocab)
            first += part.n_docs
        return table, ChunkAnalyses.assemble(ordered, table)


def _merge_by_key(parts: list[Part], table_class: Any) -> tuple[Any, Any] | None:
    """The table and each partition term's position in it (the partitions' terms one
    after another), by their keys; ``None`` when a key stands for two terms."""
    vocab = list(itertools.chain.from_iterable(part.vocab for part in parts))
    empty_keys = np.zeros(0, dtype=np.uint64)
    keys = np.concatenate([empty_keys, *(part.keys for part in parts if part.keys is not None)])
    counts = np.concatenate([np.zeros(0, dtype=np.int64), *(part.doc_freq for part in parts)])
    unique, first, where = np.unique(keys, return_index=True, return_inverse=True)
    terms = np.empty(len(vocab), dtype=object)
    terms[:] = vocab
    representatives = terms[first]
    if not bool(np.all(terms == representatives[where])):
        return None
    order = np.argsort(where, kind="stable")
    starts = np.searchsorted(where[order], np.arange(len(unique)))
    sums = np.add.reduceat(counts[order], starts) if len(order) else counts
    data = [utf8(term) for term in representatives.tolist()]
    return table_class.from_sorted(unique, data, sums.astype(np.int64)), where.astype(np.int64)


def _merge_by_term(parts: list[Part], table_class: Any) -> tuple[Any, Any]:
    """The same, by the terms themselves (two terms share a key)."""
    index: dict[str, int] = {}
    totals = array("q")
    numbers = array("q")
    for part in parts:
        for term, count in zip(part.vocab, part.doc_freq.tolist(), strict=True):
            number = index.get(term)
            if number is None:
                number = index[term] = len(totals)
                totals.append(count)
            else:
                totals[number] += count
            numbers.append(number)
    table, positions = table_class.of_terms(list(index), np.frombuffer(totals, dtype=np.int64))
    return table, positions[np.frombuffer(numbers, dtype=np.int64)]
