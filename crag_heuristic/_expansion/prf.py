"""Pseudo-relevance feedback: expand a query with terms of its best chunks.

The relevance model of Lavrenko & Croft (2001), used as RM3 by Abdul-Jaleel
et al. (2004), estimates the words of a relevant document from the top
documents ``D`` of a first retrieval, each weighted by its retrieval weight::

    P(t | R) ∝ Σ_D  P(t | D) · P(D | Q)        with  P(t | D) = tf(t, D) / |D|

Here ``D`` ranges over the first ``n_docs`` chunks (best first), ``tf`` and
``|D|`` count the chunk's content terms (analyzed stems, stop words removed)
and ``P(D | Q)`` is the chunk's normalised retrieval weight: its score mapped
to a similarity in [0, 1] (:func:`crag_heuristic._scores.similarity`),
divided by the sum over the feedback chunks. When a chunk has no usable score
(none, or an RRF / web / unknown kind) or all similarities are 0, every
chunk weighs ``1 / n``. With ``corpus_stats`` the weight of a term is further
multiplied by its BM25 IDF (``CorpusStats.idf``), so that words common to
the whole corpus do not win.

The query's own terms and stop words are excluded, and so are one-character
and all-digit tokens. The ``n_terms`` best terms (ties: stem order) are added
to the original query, each written as its most frequent surface token in the
feedback chunks (ties: first seen), so "cells" and "cell" add "cells" if that
is the commoner form. RM3's interpolation with the original query is left to
the router's rank fusion, which always includes the original ranking.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .._checks import check_query
from .._config import _check_number
from .._exceptions import InputError
from .._scores import similarity
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats
from .._types import Chunk, check_chunks
from .base import Expansion


class PRFExpander:
    """Expands a query with feedback terms from the first retrieval (RM3 style).

    Args:
        n_docs: how many top chunks feed back (>= 1).
        n_terms: how many terms to add (>= 1).
        analyzer: the analyzer for terms; defaults to ``Analyzer()``. It must
            be the one ``corpus_stats`` was built with.

    Raises:
        ConfigError: a count that is not a positive integer.
    """

    bounded = True
    """Its calls end by themselves (in-process work): the router calls it directly,
    never on a worker thread (see ``crag_heuristic._deadline``)."""

    def __init__(
        self, *, n_docs: int = 5, n_terms: int = 5, analyzer: Analyzer | None = None
    ) -> None:
        _check_number("n_docs", n_docs, low=1, integer=True)
        _check_number("n_terms", n_terms, low=1, integer=True)
        self.n_docs = n_docs
        self.n_terms = n_terms
        self.analyzer = analyzer or Analyzer()

    def __repr__(self) -> str:
        return f"PRFExpander(n_docs={self.n_docs}, n_terms={self.n_terms})"

    def doc_weights(self, chunks: Sequence[Chunk]) -> list[float]:
        """``P(D | Q)`` of each chunk: normalised similarities, else uniform."""
        if not chunks:
            return []
        sims = [similarity(chunk) for chunk in chunks]
        total = sum(s for s in sims if s is not None)
        if any(s is None for s in sims) or total <= 0.0:
            return [1.0 / len(chunks)] * len(chunks)
        return [(s or 0.0) / total for s in sims]

    def term_weights(
        self, query: str, chunks: Sequence[Chunk], corpus_stats: CorpusStats | None = None
    ) -> list[tuple[str, str, float]]:
        """``(stem, surface, weight)`` of every candidate term, best first."""
        feedback = list(chunks[: self.n_docs])
        excluded = set(self.analyzer.terms(query))
        stop = self.analyzer.stop_words
        weights: dict[str, float] = {}
        surfaces: dict[str, Counter[str]] = {}
        first_seen: dict[str, int] = {}
        position = 0
        for chunk, doc_weight in zip(feedback, self.doc_weights(feedback), strict=True):
            pairs = [
                (token, self.analyzer.stem(token))
                for token in self.analyzer.tokens(chunk.text)
                if token not in stop
            ]
            if not pairs:
                continue
            counts = Counter(stem for _, stem in pairs)
            length = len(pairs)
            for token, stem in pairs:
                surfaces.setdefault(stem, Counter())[token] += 1
                first_seen.setdefault(token, position)
                position += 1
            for stem, tf in counts.items():
                weights[stem] = weights.get(stem, 0.0) + doc_weight * tf / length
        ranked = []
        for stem, weight in weights.items():
            if stem in excluded or len(stem) < 2 or stem.isdigit():
                continue
            if corpus_stats is not None:
                weight *= corpus_stats.idf(stem)
            if weight > 0.0:
                surface = min(surfaces[stem].items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))
                ranked.append((stem, surface[0], weight))
        ranked.sort(key=lambda item: (-item[2], item[0]))
        return ranked

    def expand(
        self,
        query: str,
        *,
        chunks: Sequence[Chunk] = (),
        corpus_stats: CorpusStats | None = None,
    ) -> Expansion:
        """One query: ``query`` followed by the ``n_terms`` best feedback terms.

        Raises:
            InvalidQueryError: a blank or non-string query.
            InvalidChunkError: ``chunks`` is not a sequence of chunks with unique ids.
            InputError: ``corpus_stats`` is not a :class:`CorpusStats` or ``None``.
        """
        check_query(query)
        check_chunks(chunks)
        if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
            raise InputError(
                f"corpus_stats must be a CorpusStats or None, got {type(corpus_stats).__name__}"
            )
        best = self.term_weights(query, chunks, corpus_stats)[: self.n_terms]
        terms = tuple(surface for _, surface, _ in best)
        queries = (" ".join([*query.split(), *terms]),) if terms else ()
        return Expansion(
            original=query,
            queries=queries,
            added=((query, terms),) if terms else (),
            method="prf",
            weights=tuple((surface, weight) for _, surface, weight in best),
        )
