"""A lexical retriever: Okapi BM25 over a whole corpus.

BM25 (Robertson and Zaragoza, 2009, "The Probabilistic Relevance Framework:
BM25 and Beyond") scores a document ``D`` for query terms ``q_i``::

    score(D) = sum_i idf(q_i) * f(q_i, D) * (k1 + 1) / (f(q_i, D) + k1 * (1 - b + b * |D| / avgdl))

The IDF comes from the WHOLE corpus, never from a top-k list. By default it
is Lucene's ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``, positive for
every term and the same formula the evaluator's :class:`CorpusStats` uses.
(rank-bm25's ``BM25Okapi`` uses ``ln((N - df + 0.5) / (df + 0.5))`` with a
floor of ``0.25 x`` the mean IDF for negative values: a term in half of a
small corpus then weighs little; it remains available as ``variant="okapi"``;
``variant="plus"`` is BM25+ with ``delta = 1`` and ``idf = ln((N + 1) / df)``.)
The corpus is tokenised with the evaluator's
:class:`~crag_heuristic._text.analyzer.Analyzer` (Snowball stems, stop words out), so
the document frequencies this retriever exposes through
:meth:`BM25Retriever.corpus_stats` are exactly those the evaluator's IDF
weighting expects. ``|D|`` counts content terms; an empty document counts as
length 1 (as rank-bm25 sees it, with one placeholder token).

Two backends compute the same scores:

* ``"sparse"`` (the default): every ``(term, document)`` weight
  ``idf * f * (k1 + 1) / (f + k1 * (...))`` is computed once at construction
  (vectorised numpy) and kept in a term-major compressed sparse row matrix
  (``indptr``, ``indices`` int32, ``data`` float32, the layout of
  ``scipy.sparse.csr_matrix`` and of the ``bm25s`` package); a query adds up
  the rows of its terms, so it touches only the postings of its terms.
  Memory is about 8 bytes per distinct (term, document) pair. Scores equal
  rank-bm25's to float32 precision (about 1e-7 relative).
* ``"rank-bm25"``: the ``rank-bm25`` package, which scores every document
  for every query term in a Python loop over the corpus: fine for thousands
  of documents, about a second per query at a million (see
  ``benchmarks/results/scale.md``).

Documents with a score of 0 (no query term at all) are not returned.

A filtered view (:meth:`BM25Retriever.with_filter`: a LangChain metadata
filter, or a predicate over each chunk) searches only the documents the filter
admits: one tenant's, beside a vector store filtered the same way. The
weights and the corpus statistics stay those of the whole corpus (the IDF the
evaluator uses); a document outside the filter scores 0, so it is never
returned, and the view's ``scope`` names the filter (see
:mod:`crag_heuristic._retrievers.scope`).

Shared statistics tell a little across the filter: a term's IDF and the mean
length count every tenant's documents, so a tenant who watches its own
documents' scores can learn whether other tenants' documents hold a term (its
own document's score moves when another tenant adds documents with the term).
``with_filter(where, isolated=True)`` gives the view its own statistics
instead: a BM25 index of the admitted documents alone (their IDF, their mean
length; its ``corpus_stats()`` theirs too), so nothing outside the
filter moves a score. The cost: an index per view, built when the view is made
(the time and memory of a ``BM25Retriever`` over the documents it admits), where
a shared view costs one boolean per document of the corpus.
"""

from __future__ import annotations

import copy
import math
import os
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .._checks import check_k, check_query
from .._documents import to_chunk
from .._exceptions import InputError, _short
from .._optional import requires
from .._text.analyses import AnalysesPart, ChunkAnalyses
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats, _log_event, write_npz
from .._text.npz import read_npz
from .._text.terms import TermTable
from .._types import Chunk, ScoreKind
from .._version import __version__
from .scope import describe, metadata_filter

_VARIANTS = ("lucene", "okapi", "plus")
_BACKENDS = ("sparse", "rank-bm25")
_PLACEHOLDER = "\x00"  # the one token of an empty document (never a term: not alphanumeric)
_OKAPI_EPSILON = 0.25  # rank-bm25's BM25Okapi floor: epsilon x mean idf
_PLUS_DELTA = 1.0  # rank-bm25's BM25Plus delta
_BLOCK = 1 << 22  # postings per block of the vectorised weight computation
_KIND = "crag_heuristic.BM25Retriever"
_FORMAT_VERSION = 1  # of the file BM25Retriever.save writes


def _rank_bm25_model(variant: str) -> type:
    with requires("bm25", "BM25Retriever(backend='rank-bm25')"):
        from rank_bm25 import BM25Okapi, BM25Plus

    if variant == "okapi":
        return BM25Okapi  # type: ignore[no-any-return]
    if variant == "plus":
        return BM25Plus  # type: ignore[no-any-return]

    class LuceneBM25(BM25Okapi):  # type: ignore[misc]
        """rank-bm25's Okapi scoring with Lucene's non-negative IDF."""

        def _calc_idf(self, nd: dict[str, int]) -> None:
            n = self.corpus_size
            for word, freq in nd.items():
                self.idf[word] = math.log(1.0 + (n - freq + 0.5) / (freq + 0.5))

    return LuceneBM25


class _SparseIndex:
    """BM25 weights in a term-major CSR matrix (see the module doc)."""

    def __init__(
        self, term_counts: Iterable[Mapping[str, int]], *, variant: str, k1: float, b: float
    ) -> None:
        vocab: dict[str, int] = {}
        term_ids = array("i")
        tfs = array("i")
        doc_lens = array("q")
        n_unique = array("i")
        row = vocab.__getitem__
        for counts in term_counts:
            if not counts:
                counts = {_PLACEHOLDER: 1}
            new = set(counts).difference(vocab)  # O(len(counts)), unlike keys() - keys()
            if new:  # rows in order of first occurrence
                for term in counts:
                    if term in new:
                        vocab[term] = len(vocab)
            term_ids.extend(map(row, counts))
            tfs.extend(counts.values())
            doc_lens.append(sum(counts.values()))
            n_unique.append(len(counts))
        n_docs = len(doc_lens)
        ids = np.frombuffer(term_ids, dtype=np.int32)
        df = np.bincount(ids, minlength=len(vocab)).astype(np.int64)
        dl = np.frombuffer(doc_lens, dtype=np.int64).astype(np.float64)
        avgdl = float(dl.sum()) / n_docs
        idf = _idf(df, n_docs, variant)
        # term-major order; stable, so each term's postings stay in corpus order
        order = np.argsort(ids, kind="stable")
        docs = np.repeat(np.arange(n_docs, dtype=np.int32), np.frombuffer(n_unique, np.int32))
        self.indices: npt.NDArray[np.int32] = docs[order]
        del docs
        tf_sorted = np.frombuffer(tfs, dtype=np.int32)[order]
        del order
        self.indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=self.indptr[1:])
        term_of = np.repeat(np.arange(len(vocab), dtype=np.int32), df)
        self.data: npt.NDArray[np.float32] = np.empty(len(self.indices), dtype=np.float32)
        norm = k1 * (1.0 - b + b * dl / avgdl)  # per document
        for start in range(0, len(self.data), _BLOCK):
            end = start + _BLOCK
            tf = tf_sorted[start:end].astype(np.float64)
            weight = tf * (k1 + 1.0) / (tf + norm[self.indices[start:end]])
            self.data[start:end] = idf[term_of[start:end]] * weight
        self.n_docs = n_docs
        self.variant = variant
        # BM25+ adds idf * delta to every document for every known query term
        self._constant = idf * _PLUS_DELTA if variant == "plus" else None
        self.idf = idf
        vocab.pop(_PLACEHOLDER, None)  # never a query term, not a corpus term
        self.term_ids = TermTable.from_counts(vocab)  # term -> row, compact
        del vocab
        self.doc_freq = TermTable(
            self.term_ids._keys,
            self.term_ids._offsets,
            self.term_ids._blob,
            df[self.term_ids._counts],
        )

    _ARRAYS = ("indptr", "indices", "data", "idf")

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """Everything a search needs, as arrays (:meth:`from_arrays` reads them back)."""
        table = self.term_ids
        return {
            **{name: getattr(self, name) for name in self._ARRAYS},
            "term_keys": table._keys,
            "term_offsets": table._offsets,
            "term_blob": np.frombuffer(table._blob, dtype=np.uint8),
            "term_rows": table._counts,
            "term_df": self.doc_freq._counts,
        }

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, npt.NDArray[Any]], *, n_docs: int, variant: str
    ) -> _SparseIndex:
        """The index :meth:`arrays` gave, checked for consistency.

        Raises:
            ValueError: arrays of the wrong types or lengths, or that do not agree.
        """
        index = cls.__new__(cls)
        index.indptr = np.ascontiguousarray(arrays["indptr"], dtype=np.int64)
        index.indices = np.ascontiguousarray(arrays["indices"], dtype=np.int32)
        index.data = np.ascontiguousarray(arrays["data"], dtype=np.float32)
        index.idf = np.ascontiguousarray(arrays["idf"], dtype=np.float64)
        keys = np.ascontiguousarray(arrays["term_keys"], dtype=np.uint64)
        offsets = np.ascontiguousarray(arrays["term_offsets"], dtype=np.int64)
        blob = np.ascontiguousarray(arrays["term_blob"], dtype=np.uint8).tobytes()
        rows = np.ascontiguousarray(arrays["term_rows"], dtype=np.int64)
        df = np.ascontiguousarray(arrays["term_df"], dtype=np.int64)
        n_rows, postings = len(index.idf), index.indices
        if (
            index.indptr.shape != (n_rows + 1,)
            or postings.shape != index.data.shape
            or (n_rows and (index.indptr[0] != 0 or index.indptr[-1] != len(postings)))
            or bool(np.any(np.diff(index.indptr) < 0))
            or (len(postings) and not 0 <= int(postings.min()) <= int(postings.max()) < n_docs)
            or rows.shape != keys.shape
            or df.shape != keys.shape
            or offsets.shape != (len(keys) + 1,)
            or (len(rows) and not 0 <= int(rows.min()) <= int(rows.max()) < n_rows)
        ):
            raise ValueError("BM25 arrays of mismatched lengths or out of range")
        index.term_ids = TermTable(keys, offsets, blob, rows)
        index.doc_freq = TermTable(keys, offsets, blob, df)
        index.n_docs = n_docs
        index.variant = variant
        index._constant = index.idf * _PLUS_DELTA if variant == "plus" else None
        return index

    @property
    def nbytes(self) -> int:
        return int(
            self.indices.nbytes
            + self.data.nbytes
            + self.indptr.nbytes
            + self.idf.nbytes
            + self.term_ids.nbytes
            + self.doc_freq._counts.nbytes
        )

    def rows(self, terms: Sequence[str]) -> list[int]:
        """Row numbers of the known terms, with multiplicity and in order."""
        get = self.term_ids.get
        return [row for row in map(get, terms) if row is not None]

    def scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64]:
        scores = np.zeros(self.n_docs, dtype=np.float64)
        indptr, indices, data = self.indptr, self.indices, self.data
        for row in self.rows(terms):
            start, end = int(indptr[row]), int(indptr[row + 1])
            scores[indices[start:end]] += data[start:end]
            if self._constant is not None:
                scores += self._constant[row]
        return scores


def _idf(df: npt.NDArray[np.int64], n: int, variant: str) -> npt.NDArray[np.float64]:
    freq = df.astype(np.float64)
    if variant == "lucene":
        return np.log(1.0 + (n - freq + 0.5) / (freq + 0.5))
    if variant == "plus":
        return np.log((n + 1.0) / freq)
    idf = np.log(n - freq + 0.5) - np.log(freq + 0.5)  # okapi, floored as rank-bm25 does
    if len(idf):
        idf[idf < 0] = _OKAPI_EPSILON * float(idf.mean())
    return idf


class BM25Retriever:
    """Okapi BM25 (or BM25+) over a corpus held in memory.

    Args:
        documents: the corpus: chunks, mappings (``id``/``_id``, ``text``,
            ``title``, ``source``, ``metadata``) or strings (id = position).
        analyzer: tokeniser + stemmer; use the evaluator's.
        k1, b: the BM25 parameters (defaults 1.5 and 0.75, rank-bm25's).
        variant: ``"lucene"`` (Okapi scoring, Lucene IDF; the default),
            ``"okapi"`` (rank-bm25's ``BM25Okapi`` as is) or ``"plus"`` (``BM25Plus``).
        backend: ``"sparse"`` (precomputed weights, numpy; the default) or
            ``"rank-bm25"`` (see the module doc). Both give the same scores.
        chunk_analyses: keep each document's analysis with the corpus
            statistics (``CorpusStats.analyses``), so that the evaluator looks
            this corpus's chunks up by id and text digest instead of
            tokenising them again.

    Attributes:
        scope: the filter a view searches within (see :meth:`with_filter`), or
            ``None``: the whole corpus.

    Raises:
        InputError: an empty corpus, duplicate ids or bad parameters.
    """

    scope: str | None = None
    _mask: npt.NDArray[np.bool_] | None = None
    bounded = True
    """Its calls end by themselves (in-process work): the router calls it directly,
    never on a worker thread (see ``crag_heuristic._deadline``)."""

    def __init__(
        self,
        documents: Sequence[Any],
        *,
        analyzer: Analyzer | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        variant: str = "lucene",
        backend: str = "sparse",
        chunk_analyses: bool = True,
        name: str = "bm25",
    ) -> None:
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            raise InputError("documents must be a sequence of chunks, mappings or strings")
        if not documents:
            raise InputError("BM25Retriever needs at least one document")
        if variant not in _VARIANTS:
            raise InputError(f"variant must be one of {sorted(_VARIANTS)}, got {_short(variant)}")
        if backend not in _BACKENDS:
            raise InputError(f"backend must be one of {list(_BACKENDS)}, got {_short(backend)}")
        if not (
            isinstance(k1, int | float) and isinstance(b, int | float) and k1 >= 0 and 0 <= b <= 1
        ):
            raise InputError(f"need k1 >= 0 and 0 <= b <= 1, got k1={_short(k1)}, b={_short(b)}")
        started = time.perf_counter()
        self.name = name
        self.backend = backend
        self.variant = variant
        self.k1, self.b = float(k1), float(b)
        self.analyzer = analyzer or Analyzer()
        self.documents: Sequence[Chunk] = [
            to_chunk(d, default_id=str(i), score=None, score_kind=ScoreKind.BM25, retriever=name)
            for i, d in enumerate(documents)
        ]
        ids = [chunk.id for chunk in self.documents]
        if len(set(ids)) != len(ids):
            dup = next(i for i, n in Counter(ids).items() if n > 1)
            raise InputError(f"duplicate document id {dup!r} in the BM25 corpus")
        self._index_of: dict[str, int] | None = {chunk_id: i for i, chunk_id in enumerate(ids)}
        self._sparse: _SparseIndex | None = None
        self._bm25: Any = None
        n_terms = 0
        part = AnalysesPart(self.analyzer.stop_words) if chunk_analyses else None
        if backend == "sparse":
            lengths: list[int] = []

            def counts() -> Iterable[Mapping[str, int]]:
                analyze = self.analyzer.analyze
                for chunk in self.documents:
                    analysis = analyze(chunk.text)
                    if part is not None:
                        part.add(chunk.id, chunk.text, analysis)
                    lengths.append(analysis.n_terms)
                    yield analysis.term_counts

            self._sparse = _SparseIndex(counts(), variant=variant, k1=float(k1), b=float(b))
            doc_freq: Any = self._sparse.doc_freq
            n_terms = sum(lengths)
        else:
            tokenised = [self.analyzer.terms(chunk.text) for chunk in self.documents]
            if part is not None:
                for chunk in self.documents:
                    part.add(chunk.id, chunk.text, self.analyzer.analyze(chunk.text))
            # rank-bm25 divides by the corpus's total length: give empty texts one placeholder
            safe = [tokens or [_PLACEHOLDER] for tokens in tokenised]
            self._bm25 = _rank_bm25_model(variant)(safe, k1=k1, b=b)
            df: Counter[str] = Counter()
            for tokens in tokenised:
                df.update(set(tokens))
            doc_freq = TermTable.from_counts(df)
            n_terms = sum(map(len, tokenised))
        analyses = None
        if part is not None:
            positions = doc_freq.positions(list(part.vocab))
            analyses = ChunkAnalyses.assemble([(part, positions, 0)], doc_freq)
        self._stats = CorpusStats(
            n_docs=len(self.documents),
            doc_freq=doc_freq,
            avg_doc_len=n_terms / len(self.documents),
            analyzer=self.analyzer.fingerprint,
            analyses=analyses,
        )
        _log_event("built", self._stats, started, by=f"bm25:{backend}")

    def __repr__(self) -> str:
        scope = "" if self.scope is None else f", scope={self.scope!r}"
        return f"BM25Retriever(documents={len(self)}, backend={self.backend!r}{scope})"

    def __len__(self) -> int:
        """The documents it searches (those its filter admits, for a view)."""
        return len(self.documents) if self._mask is None else int(self._mask.sum())

    def with_filter(
        self, where: Mapping[str, Any] | Callable[[Chunk], bool], *, isolated: bool = False
    ) -> BM25Retriever:
        """This retriever searching only the documents ``where`` admits (a view: the
        weights, documents and statistics are shared; a view of a view admits what
        both filters admit).

        Args:
            where: a LangChain metadata filter over each document's metadata (the
                form LangChain's FAISS store takes: ``{"tenant": "a"}``, see
                :func:`~crag_heuristic._retrievers.scope.metadata_filter`), so one
                filter serves the store and this retriever; or a predicate over
                each document's :class:`Chunk` (``lambda c: c.id in allowed``).
            isolated: give the view statistics of its own (strict isolation: see
                the module doc for what shared statistics tell and what this costs):
                a new index over the admitted documents, with the same analyzer,
                parameters and backend.

        Reads every document once (the admitted set is kept as a mask).

        Raises:
            InputError: neither a mapping nor a callable, an unknown operator, a
                predicate that raised, or (``isolated``) a filter that admits no
                document.
            ScopeError: a metadata filter that mixes ``$and`` / ``$or`` / ``$not``
                with another key.
        """
        admit: Callable[[Chunk], bool]
        if isinstance(where, Mapping):
            matches = metadata_filter(where)
            admit = lambda chunk: matches(chunk.metadata)  # noqa: E731
        elif callable(where):
            admit = where
        else:
            raise InputError(
                "where must be a metadata filter (a mapping) or a predicate over a Chunk, "
                f"got {type(where).__name__}"
            )
        mask = np.empty(len(self.documents), dtype=bool)
        for position, chunk in enumerate(self.documents):
            try:
                mask[position] = bool(admit(chunk))
            except Exception as exc:
                raise InputError(
                    f"the filter raised {type(exc).__name__} on document {chunk.id!r}"
                ) from exc
        own = f"filter {describe(where)}"
        if self._mask is not None:
            mask &= self._mask
            own = f"{self.scope} and {own}"
        if isolated:
            return self._isolated(mask, f"{own} (own statistics)")
        view = copy.copy(self)
        view._mask = mask
        view.scope = own
        return view

    def _isolated(self, mask: npt.NDArray[np.bool_], scope: str) -> BM25Retriever:
        """A new index over the documents ``mask`` admits (see :meth:`with_filter`)."""
        admitted = [self.documents[int(i)] for i in np.flatnonzero(mask)]
        if not admitted:
            raise InputError("the filter admits no document: an isolated view needs one or more")
        view = BM25Retriever(
            admitted,
            analyzer=self.analyzer,
            k1=self.k1,
            b=self.b,
            variant=self.variant,
            backend=self.backend,
            name=self.name,
        )
        view.scope = scope
        return view

    @property
    def nbytes(self) -> int | None:
        """Bytes held by the sparse backend's arrays (``None`` for rank-bm25)."""
        return None if self._sparse is None else self._sparse.nbytes

    def idf(self, term: str) -> float:
        """The IDF this retriever gives an analyzed term (0 for a term it never saw)."""
        if self._sparse is not None:
            row = self._sparse.term_ids.get(term)
            return 0.0 if row is None else float(self._sparse.idf[row])
        return float(self._bm25.idf.get(term) or 0.0)

    def scores(self, query: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The BM25 score of every document for ``query`` (corpus order; 0 for a
        document outside a view's filter)."""
        terms = self.analyzer.terms(query)
        if not terms:
            return np.zeros(len(self.documents))
        if self._sparse is not None:
            scores = self._sparse.scores(terms)
        else:
            scores = np.asarray(self._bm25.get_scores(terms), dtype=np.float64)
        if self._mask is not None:
            scores[~self._mask] = 0.0
        return scores

    def search(self, query: str, k: int) -> list[Chunk]:
        """The ``k`` best-scoring documents with a positive score, best first.

        Ties are broken by corpus order, so results are deterministic.
        """
        check_query(query)
        check_k(k)
        scores = self.scores(query)
        order = _top_k(scores, k)
        return [
            self.documents[i].replace(score=float(scores[i]), score_kind=ScoreKind.BM25)
            for i in order
        ]

    async def asearch(self, query: str, k: int) -> list[Chunk]:
        """:meth:`search`, in the calling coroutine: in-process work of about a millisecond
        at 100,000 documents, less than a hop to a worker thread and back costs (3 to 5
        ms a request measured on two busy cores)."""
        return self.search(query, k)

    def corpus_stats(self) -> CorpusStats:
        """Document frequencies over the whole corpus (the evaluator's IDF)."""
        return self._stats

    def get(self, chunk_id: str) -> Chunk | None:
        """The document with this id, unscored, or ``None`` (also for a document
        outside a view's filter)."""
        positions = self._index_of
        if positions is None:  # loaded: the ids read on first use
            ids = getattr(self.documents, "ids", None)
            if ids is None:
                ids = [chunk.id for chunk in self.documents]
            positions = self._index_of = {chunk_id: i for i, chunk_id in enumerate(ids)}
        index = positions.get(chunk_id)
        if index is None or (self._mask is not None and not self._mask[index]):
            return None
        return self.documents[index]

    # -- the file ---------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write what a search needs to one ``.npz`` file (atomically), for :meth:`load`.

        The file holds the BM25 weights (the sparse backend's term-major matrix:
        ``indptr``, ``indices``, ``data``), the IDF, the term -> row table and the
        document frequencies, the parameters (``variant``, ``k1``, ``b``), the
        corpus size and mean length, and the analyzer's fingerprint; not the
        documents (give them to :meth:`load`), nor their analyses (those are the
        statistics': :meth:`CorpusStats.save`). Loading it computes nothing.

        Raises:
            InputError: the ``rank-bm25`` backend (only the sparse one is saved).
        """
        if self._sparse is None:
            raise InputError("only the sparse backend can be saved (backend='sparse')")
        arrays = {
            "kind": np.asarray(_KIND),
            "format_version": np.asarray(_FORMAT_VERSION, dtype=np.int64),
            "library_version": np.asarray(__version__),
            "analyzer": np.asarray(self.analyzer.fingerprint),
            "variant": np.asarray(self.variant),
            "k1": np.asarray(self.k1, dtype=np.float64),
            "b": np.asarray(self.b, dtype=np.float64),
            "n_docs": np.asarray(len(self), dtype=np.int64),
            "avg_doc_len": np.asarray(self._stats.avg_doc_len or 0.0, dtype=np.float64),
            **self._sparse.arrays(),
        }
        return write_npz(path, arrays)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        documents: Sequence[Any],
        *,
        analyzer: Analyzer | None = None,
        corpus_stats: CorpusStats | None = None,
        name: str = "bm25",
    ) -> BM25Retriever:
        """A retriever from a file :meth:`save` wrote and its documents, ready at once.

        Args:
            path: the file.
            documents: the corpus it was built on, in the same order (a
                sequence read item by item, when a search returns it: a list,
                or an index directory's lazy docstore).
            analyzer: the analyzer it was built with (default :class:`Analyzer`);
                another is refused.
            corpus_stats: the corpus's statistics (with their chunk analyses,
                say), kept as :meth:`corpus_stats`; default: made from the
                file's document frequencies.
            name: the retriever's name in chunks.

        Raises:
            InputError: an unreadable file, not a BM25 file, another format
                version or analyzer, damaged arrays, or documents of another size.
        """
        analyzer = analyzer or Analyzer()
        where = os.fspath(path)
        try:
            fields = read_npz(where)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read the BM25 file {where!r}: {exc}") from exc
        try:
            kind, version = str(fields["kind"]), int(fields["format_version"])
            if kind != _KIND or version != _FORMAT_VERSION:
                raise ValueError(
                    f"a {kind!r} file of format {version}; this library reads {_KIND!r} "
                    f"format {_FORMAT_VERSION}"
                )
            if str(fields["analyzer"]) != analyzer.fingerprint:
                raise ValueError(
                    f"built with analyzer {str(fields['analyzer'])!r}, not {analyzer.fingerprint!r}"
                )
            n_docs, variant = int(fields["n_docs"]), str(fields["variant"])
            if variant not in _VARIANTS or n_docs < 1:
                raise ValueError(f"variant {variant!r}, {n_docs} documents")
            sparse = _SparseIndex.from_arrays(fields, n_docs=n_docs, variant=variant)
            k1, b, avg = float(fields["k1"]), float(fields["b"]), float(fields["avg_doc_len"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"unusable BM25 file {where!r}: {exc}") from exc
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            raise InputError("documents must be a sequence of chunks, mappings or strings")
        if len(documents) != n_docs:
            raise InputError(
                f"the BM25 file {where!r} was built on {n_docs} documents; {len(documents)} given"
            )
        self = cls.__new__(cls)
        self.name = name
        self.backend = "sparse"
        self.variant = variant
        self.k1, self.b = k1, b
        self.analyzer = analyzer
        self.documents = _Documents(documents, name)
        self._index_of = None
        self._sparse = sparse
        self._bm25 = None
        self._stats = corpus_stats or CorpusStats(
            n_docs=n_docs, doc_freq=sparse.doc_freq, avg_doc_len=avg, analyzer=analyzer.fingerprint
        )
        return self


class _Documents(Sequence[Chunk]):
    """A loaded retriever's documents: each entry made a chunk when it is read (a
    search reads ``k`` of them), so that loading reads none."""

    def __init__(self, entries: Sequence[Any], name: str) -> None:
        self._entries = entries
        self._name = name
        self.ids = getattr(entries, "ids", None)  # a docstore's, read without its texts

    def __len__(self) -> int:
        return len(self._entries)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Chunk]: ...
    def __getitem__(self, index: int | slice) -> Chunk | Sequence[Chunk]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        entry = self._entries[index]
        return to_chunk(
            entry,
            default_id=str(index % len(self)),
            score=None,
            score_kind=ScoreKind.BM25,
            retriever=self._name,
        )


def _top_k(scores: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` highest positive scores, best first, ties in corpus order.

    The same as a stable sort of all positive scores, without sorting them
    all: a partition finds the k-th best score, and only the documents at or
    above it are sorted.
    """
    positive = np.flatnonzero(scores > 0)
    if positive.size > k:
        values = scores[positive]
        kth = np.partition(values, positive.size - k)[positive.size - k]
        positive = positive[values >= kth]
    # a stable sort on -score keeps corpus order among equal scores
    return positive[np.argsort(-scores[positive], kind="stable")][:k]
