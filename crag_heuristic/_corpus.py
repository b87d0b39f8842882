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
analyzer the evaluator uses; :meth:`CorpusStats.from_texts` does that.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._exceptions import InputError
from ._text import Analyzer

__all__ = ["CorpusStats"]


@dataclass(frozen=True)
class CorpusStats:
    """Document frequencies of analyzed terms over a corpus.

    Args:
        n_docs: number of documents (> 0).
        doc_freq: term -> number of documents containing it (0 <= df <= n_docs).
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
            raise InputError(f"CorpusStats.n_docs must be a positive integer, got {self.n_docs!r}")
        if not isinstance(self.doc_freq, Mapping):
            raise InputError("CorpusStats.doc_freq must be a mapping of term -> count")

    def df(self, term: str) -> int:
        """Documents containing ``term`` (0 when unseen)."""
        return self.doc_freq.get(term, 0)

    def idf(self, term: str) -> float:
        """The BM25 inverse document frequency of an analyzed term (see module doc)."""
        df = min(self.doc_freq.get(term, 0), self.n_docs)
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    @classmethod
    def from_texts(cls, texts: Iterable[str], analyzer: Analyzer | None = None) -> CorpusStats:
        """Count document frequencies over ``texts`` with ``analyzer``'s terms."""
        analyzer = analyzer or Analyzer()
        counts: Counter[str] = Counter()
        n_docs = 0
        n_terms = 0
        for text in texts:
            stats = analyzer.analyze(text)
            counts.update(stats.term_set)
            n_terms += stats.n_terms
            n_docs += 1
        if n_docs == 0:
            raise InputError("CorpusStats.from_texts needs at least one text")
        return cls(
            n_docs=n_docs,
            doc_freq=dict(counts),
            avg_doc_len=n_terms / n_docs,
            analyzer=analyzer.fingerprint,
        )

    def fingerprint(self) -> str:
        """A stable digest of the statistics (computed once), for cache keys."""
        if not self._fingerprint:
            digest = hashlib.sha256(f"{self.n_docs}\n{self.analyzer}\n".encode())
            for term in sorted(self.doc_freq):
                digest.update(f"{term}\t{self.doc_freq[term]}\n".encode("utf-8", "surrogatepass"))
            self._fingerprint.append(digest.hexdigest()[:16])
        return self._fingerprint[0]
