"""Rewrite a natural-language query into a keyword query for web search.

LLM-free, in the spirit of the CRAG paper's query rewriting for web search
(Yan et al., 2024, section 4.5), which asks an LLM for keywords:

1. quoted phrases are kept whole, with their quotes;
2. word tokens that are stop words or conversational filler ("please",
   "tell me", "explain", "information about" ...) are dropped;
3. one surface form is kept per stem ("cells" and "cell" count once);
4. when more than ``max_terms`` remain, the most salient are kept: the
   highest IDF when corpus statistics are given, else the longest, and they
   are put back in query order.

When nothing survives (a query of only filler), the original query is used.
"""

from __future__ import annotations

import re
import unicodedata

from .._checks import check_query
from .._exceptions import InputError, _short
from .._text.analyzer import Analyzer
from .._text.corpus import CorpusStats

FILLER_WORDS: frozenset[str] = frozenset(
    """
    please pls tell explain describe know knowing want wanted need needed find finding looking
    information info something anything anyone someone somebody thanks thank help give show
    list question questions answer regarding way ways thing things kind sort really actually
    basically exactly detail details overview simple simply briefly quick quickly hi hello hey
    can could would like get mean means meaning
    """.split()
)

_PHRASE_RE = re.compile(r'"([^"]+)"')
_WORD_RE = re.compile(r"[^\W_]+")


def keyword_query(
    query: str,
    *,
    analyzer: Analyzer | None = None,
    corpus_stats: CorpusStats | None = None,
    max_terms: int = 8,
) -> str:
    """The keyword form of ``query`` (see the module doc).

    >>> keyword_query("Can you please tell me how bees communicate the location of flowers?")
    'bees communicate location flowers'
    """
    check_query(query)
    if analyzer is not None and not isinstance(analyzer, Analyzer):
        raise InputError(f"analyzer must be an Analyzer or None, got {type(analyzer).__name__}")
    if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
        raise InputError(
            f"corpus_stats must be a CorpusStats or None, got {type(corpus_stats).__name__}"
        )
    if isinstance(max_terms, bool) or not isinstance(max_terms, int) or max_terms < 0:
        raise InputError(f"max_terms must be an integer >= 0, got {_short(max_terms)}")
    analyzer = analyzer or Analyzer()
    text = unicodedata.normalize("NFKC", query)
    phrases = [m.group(0) for m in _PHRASE_RE.finditer(text)]
    remainder = _PHRASE_RE.sub(" ", text)

    words: list[tuple[int, str, str]] = []  # (position, surface, stem)
    seen: set[str] = set()
    for match in _WORD_RE.finditer(remainder):
        surface = match.group(0)
        folded = surface.casefold()
        if folded in analyzer.stop_words or folded in FILLER_WORDS:
            continue
        if len(folded) == 1 and not folded.isdigit():
            continue
        stem = analyzer.stem(folded)
        if stem in seen:
            continue
        seen.add(stem)
        words.append((match.start(), surface, stem))

    budget = max(0, max_terms - len(phrases))
    if len(words) > budget:

        def salience(item: tuple[int, str, str]) -> tuple[float, int]:
            position, surface, stem = item
            weight = corpus_stats.idf(stem) if corpus_stats is not None else float(len(surface))
            return (-weight, position)

        kept = sorted(sorted(words, key=salience)[:budget])
    else:
        kept = words
    parts = [*phrases, *(surface for _, surface, _ in kept)]
    return " ".join(parts) if parts else " ".join(query.split())
