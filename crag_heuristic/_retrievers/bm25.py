"""A lexical retriever: Okapi BM25 over a whole corpus, with rank-bm25.

BM25 (Robertson and Zaragoza, 2009, "The Probabilistic Relevance Framework:
BM25 and Beyond") scores a document ``D`` for query terms ``q_i``::

    score(D) = sum_i idf(q_i) * f(q_i, D) * (k1 + 1) / (f(q_i, D) + k1 * (1 - b + b * |D| / avgdl))

The IDF comes from the WHOLE corpus, never from a top-k list. By default it
is Lucene's ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``, positive for
every term and the same formula the evaluator's :class:`CorpusStats` uses.
(rank-bm25's ``BM25Okapi`` uses ``ln((N - df + 0.5) / (df + 0.5))`` with a
floor: a term in half of a small corpus then weighs nothing; it remains
available as ``variant="okapi"``.) The corpus is
tokenised with the evaluator's :class:`~crag_heuristic._text.Analyzer`
(Snowball stems, stop words out), so the document frequencies this retriever
exposes through :meth:`BM25Retriever.corpus_stats` are exactly those the
evaluator's IDF weighting expects.

Documents with a score of 0 (no query term at all) are not returned.

Scoring reads an inverted index built once from rank-bm25's own term
frequencies, document lengths and IDF: per query it touches only the
postings of the query's terms (rank-bm25 alone visits every document for
every term, about 17 ms per query on SciFact's 5,183 abstracts). The sums are
the same floating-point operations in the same order, so the scores are
rank-bm25's to the last bit (a test checks it). ``variant="plus"`` adds a
bonus to every document for every term and keeps rank-bm25's loop.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi, BM25Plus

from .._checks import check_k, check_query
from .._corpus import CorpusStats
from .._exceptions import InputError
from .._text import Analyzer
from .._types import Chunk, ScoreKind
from .documents import to_chunk

__all__ = ["BM25Retriever"]


class _LuceneBM25(BM25Okapi):  # type: ignore[misc]
    """rank-bm25's Okapi scoring with Lucene's non-negative IDF."""

    def _calc_idf(self, nd: dict[str, int]) -> None:
        n = self.corpus_size
        for word, freq in nd.items():
            self.idf[word] = math.log(1.0 + (n - freq + 0.5) / (freq + 0.5))


_MODELS: dict[str, type] = {"lucene": _LuceneBM25, "okapi": BM25Okapi, "plus": BM25Plus}


class BM25Retriever:
    """Okapi BM25 (or BM25+) over a corpus held in memory.

    Args:
        documents: the corpus: chunks, mappings (``id``/``_id``, ``text``,
            ``title``, ``source``, ``metadata``) or strings (id = position).
        analyzer: tokeniser + stemmer; use the evaluator's.
        k1, b: the BM25 parameters (defaults 1.5 and 0.75, rank-bm25's).
        variant: ``"lucene"`` (Okapi scoring, Lucene IDF; the default),
            ``"okapi"`` (rank-bm25's ``BM25Okapi`` as is) or ``"plus"`` (``BM25Plus``).

    Raises:
        InputError: an empty corpus, duplicate ids or bad parameters.
    """

    def __init__(
        self,
        documents: Sequence[Any],
        *,
        analyzer: Analyzer | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        variant: str = "lucene",
        name: str = "bm25",
    ) -> None:
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            raise InputError("documents must be a sequence of chunks, mappings or strings")
        if not documents:
            raise InputError("BM25Retriever needs at least one document")
        if variant not in _MODELS:
            raise InputError(f"variant must be one of {sorted(_MODELS)}, got {variant!r}")
        if not (k1 >= 0 and 0 <= b <= 1):
            raise InputError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1!r}, b={b!r}")
        self.name = name
        self.analyzer = analyzer or Analyzer()
        self.documents = [
            to_chunk(d, default_id=str(i), score=None, score_kind=ScoreKind.BM25, retriever=name)
            for i, d in enumerate(documents)
        ]
        ids = [chunk.id for chunk in self.documents]
        if len(set(ids)) != len(ids):
            dup = next(i for i, n in Counter(ids).items() if n > 1)
            raise InputError(f"duplicate document id {dup!r} in the BM25 corpus")
        self._index_of = {chunk_id: i for i, chunk_id in enumerate(ids)}
        tokenised = [self.analyzer.terms(chunk.text) for chunk in self.documents]
        # rank-bm25 divides by the corpus's total length: give empty texts one dummy token
        safe = [tokens or ["\x00"] for tokens in tokenised]
        self._bm25 = _MODELS[variant](safe, k1=k1, b=b)
        self._postings = None if variant == "plus" else _postings(self._bm25)
        doc_freq: Counter[str] = Counter()
        for tokens in tokenised:
            doc_freq.update(set(tokens))
        self._stats = CorpusStats(
            n_docs=len(tokenised),
            doc_freq=dict(doc_freq),
            avg_doc_len=sum(map(len, tokenised)) / len(tokenised),
            analyzer=self.analyzer.fingerprint,
        )

    def __repr__(self) -> str:
        return f"BM25Retriever(documents={len(self.documents)})"

    def __len__(self) -> int:
        return len(self.documents)

    def scores(self, query: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The BM25 score of every document for ``query`` (corpus order)."""
        terms = self.analyzer.terms(query)
        if not terms:
            return np.zeros(len(self.documents))
        if self._postings is None:
            return np.asarray(self._bm25.get_scores(terms), dtype=np.float64)
        postings, norm = self._postings
        model = self._bm25
        scores = np.zeros(len(self.documents))
        for term in terms:  # repeated terms count again, as in rank-bm25
            found = postings.get(term)
            idf = model.idf.get(term) or 0
            if found is None or not idf:
                continue
            docs, tf = found
            scores[docs] += idf * (tf * (model.k1 + 1) / (tf + norm[docs]))
        return scores

    def search(self, query: str, k: int) -> list[Chunk]:
        """The ``k`` best-scoring documents with a positive score, best first.

        Ties are broken by corpus order, so results are deterministic.
        """
        check_query(query)
        check_k(k)
        scores = self.scores(query)
        positive = np.flatnonzero(scores > 0)
        if positive.size == 0:
            return []
        # stable sort on -score keeps corpus order among equal scores
        order = positive[np.argsort(-scores[positive], kind="stable")][:k]
        return [
            self.documents[i].replace(score=float(scores[i]), score_kind=ScoreKind.BM25)
            for i in order
        ]

    async def asearch(self, query: str, k: int) -> list[Chunk]:
        """:meth:`search` in a worker thread."""
        return await asyncio.to_thread(self.search, query, k)

    def corpus_stats(self) -> CorpusStats:
        """Document frequencies over the whole corpus (the evaluator's IDF)."""
        return self._stats

    def get(self, chunk_id: str) -> Chunk | None:
        """The document with this id, unscored, or ``None``."""
        index = self._index_of.get(chunk_id)
        return None if index is None else self.documents[index]


Floats = np.ndarray[Any, np.dtype[np.float64]]
Postings = dict[str, tuple[np.ndarray[Any, np.dtype[np.intp]], Floats]]


def _postings(model: Any) -> tuple[Postings, Floats]:
    """Term -> (document positions, term frequencies) from a fitted rank-bm25 model, and
    each document's length normaliser ``k1 * (1 - b + b * |D| / avgdl)`` (rank-bm25's
    expression, evaluated the same way)."""
    lists: dict[str, tuple[list[int], list[float]]] = {}
    for position, freqs in enumerate(model.doc_freqs):
        for term, count in freqs.items():
            docs, tfs = lists.setdefault(term, ([], []))
            docs.append(position)
            tfs.append(float(count))
    postings: Postings = {
        term: (np.asarray(docs, dtype=np.intp), np.asarray(tfs, dtype=np.float64))
        for term, (docs, tfs) in lists.items()
    }
    doc_len = np.array(model.doc_len)
    norm = model.k1 * (1 - model.b + model.b * doc_len / model.avgdl)
    return postings, np.asarray(norm, dtype=np.float64)
