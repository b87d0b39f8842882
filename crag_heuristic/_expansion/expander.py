"""Query expansion with synonym sets: a few precise, deterministic extra queries.

For the query "heart attack risk in young adults" and a set where "heart
attack" has the synonyms "myocardial infarction" and "cardiac arrest"
(``max_per_term=2``, ``max_queries=3``), :meth:`SynonymExpander.expand` gives::

    heart attack risk in young adults myocardial infarction cardiac arrest
    myocardial infarction risk in young adults
    cardiac arrest risk in young adults

The order of :attr:`Expansion.queries` is fixed:

1. the *bag-of-words* query: the original query followed by every synonym
   added, term by term in query order, each term's synonyms best first. A
   lexical retriever (BM25) scores it as one query holding both vocabularies;
2. the *substitution variants*: one matched term replaced by one synonym, the
   rest of the query untouched, which keeps the sentence a dense encoder
   expects. The best synonym of each term comes first (terms in query order),
   then each term's second synonym, and so on.

The list is cut at ``max_queries``; the original query and duplicates
(compared case-insensitively) never appear. Only content words are expanded
(stop words never), matched by their stems, longest term first; at most
``max_per_term`` synonyms are used per term, skipping those whose words the
query already holds or that an earlier term already added. When nothing
matches, ``queries`` is empty.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .._checks import check_query
from .._config import _check_number
from .._exceptions import InputError
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats
from .._types import Chunk
from .base import Expansion
from .synonyms import SynonymSet, load_synonyms


class SynonymExpander:
    """Expands queries with a :class:`~crag_heuristic._expansion.synonyms.SynonymSet`.

    Args:
        synonyms: the set to use; or a list of synonym-file paths and shipped
            set names (see :func:`load_synonyms`); ``None`` for every shipped
            set (:meth:`SynonymSet.bundled`).
        max_per_term: synonyms used per matched term (>= 1).
        max_queries: length cap of :attr:`Expansion.queries` (>= 1).
        analyzer: the analyzer for matching; defaults to the set's own. A
            different one re-keys the set.

    Raises:
        ConfigError: a cap that is not a positive integer.
        SynonymFormatError: a synonym file with a bad line.
        InputError: a synonym file that cannot be read, or ``synonyms`` of a wrong type.
    """

    bounded = True
    """Its calls end by themselves (in-process work): the router calls it directly,
    never on a worker thread (see ``crag_heuristic._deadline``)."""

    def __init__(
        self,
        synonyms: SynonymSet | Sequence[str | os.PathLike[str]] | None = None,
        *,
        max_per_term: int = 2,
        max_queries: int = 3,
        analyzer: Analyzer | None = None,
    ) -> None:
        _check_number("max_per_term", max_per_term, low=1, integer=True)
        _check_number("max_queries", max_queries, low=1, integer=True)
        if synonyms is None:
            synonyms = SynonymSet.bundled(analyzer=analyzer)
        elif not isinstance(synonyms, SynonymSet):
            if isinstance(synonyms, str | os.PathLike):
                synonyms = [synonyms]
            if not isinstance(synonyms, Sequence):
                raise InputError(
                    "synonyms must be a SynonymSet, a list of paths and set names, or None; "
                    f"got {type(synonyms).__name__}"
                )
            synonyms = load_synonyms(*synonyms, analyzer=analyzer)
        elif analyzer is not None:
            synonyms = synonyms.with_analyzer(analyzer)
        self.synonyms = synonyms
        self.analyzer = synonyms.analyzer
        self.max_per_term = max_per_term
        self.max_queries = max_queries

    def __repr__(self) -> str:
        return (
            f"SynonymExpander({self.synonyms!r}, max_per_term={self.max_per_term}, "
            f"max_queries={self.max_queries})"
        )

    def expand(
        self,
        query: str,
        *,
        chunks: Sequence[Chunk] = (),
        corpus_stats: CorpusStats | None = None,
    ) -> Expansion:
        """Expand ``query`` (``chunks`` and ``corpus_stats`` are not used).

        Raises:
            InvalidQueryError: a blank or non-string query.
        """
        check_query(query)
        present = set(self.analyzer.terms(query))
        used_keys: set[tuple[str, ...]] = set()
        spans: list[tuple[int, int, tuple[str, ...]]] = []
        added: list[tuple[str, tuple[str, ...]]] = []
        for match in self.synonyms.match(query):
            chosen: list[str] = []
            for synonym, key in self.synonyms.synonym_keys(match.key):
                if len(chosen) == self.max_per_term:
                    break
                if key in used_keys or all(stem in present for stem in key):
                    continue
                used_keys.add(key)
                chosen.append(synonym)
            if chosen:
                spans.append((match.start, match.end, tuple(chosen)))
                added.append((match.text, tuple(chosen)))
        queries = self._queries(query, spans)
        return Expansion(original=query, queries=queries, added=tuple(added), method="synonyms")

    def _queries(
        self, query: str, spans: list[tuple[int, int, tuple[str, ...]]]
    ) -> tuple[str, ...]:
        if not spans:
            return ()
        base = " ".join(query.split())
        candidates = [" ".join([base, *(s for _, _, chosen in spans for s in chosen)])]
        for rank in range(self.max_per_term):
            for start, end, chosen in spans:
                if rank < len(chosen):
                    variant = query[:start] + chosen[rank] + query[end:]
                    candidates.append(" ".join(variant.split()))
        seen = {base.casefold()}
        queries: list[str] = []
        for candidate in candidates:
            folded = candidate.casefold()
            if folded not in seen:
                seen.add(folded)
                queries.append(candidate)
                if len(queries) == self.max_queries:
                    break
        return tuple(queries)
