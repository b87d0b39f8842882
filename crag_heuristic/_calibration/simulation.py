"""Simulated queries from a corpus, without an LLM: labels for self-calibration.

A gate is fitted on retrievals labelled good or failed; a user rarely has
such labels. Simulated queries carry their own: each is made from known
documents (its *targets*), so a retrieval is good when a target is in the
top ``k``, and the same search with the targets removed is a realistic
corpus gap (a leave-source-out probe). Styles:

``title``     the document's title (known-item; Azzopardi, de Rijke and Balog
              2007 simulate known-item queries from a document's own terms)
``sentence``  one sentence of the document (the inverse cloze task of Lee,
              Chang and Toutanova 2019: a sentence as a pseudo-query for its
              context)
``terms``     2 to 5 of the document's terms, drawn with probability
              proportional to their tf-idf (the discriminative term selection
              of Azzopardi et al.)
``topic``     a document and its ``m`` nearest neighbours form a topic; 2 to 5
              terms are drawn in proportion to ``(share of the topic's
              documents holding them)^2 * idf``, and every document of the
              topic is a target: many documents answer, as for real queries
              on collections where a query has tens of relevant documents

Targets always include exact duplicates of a source (same normalised text).
Everything is drawn from one seeded ``random.Random``: the same corpus and
seed give the same queries.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .._exceptions import InputError
from .._text.analyzer import Analyzer, split_sentences
from .._text.corpus import CorpusStats
from .._types import Chunk

STYLES = ("title", "sentence", "terms", "topic")
"""The query styles, in the order the module doc describes them."""

Neighbours = Callable[[Chunk, int], Sequence[str]]
"""``(document, m) -> ids of its m nearest documents`` (the document itself excluded)."""


@dataclass(frozen=True, slots=True)
class SimulatedQuery:
    """One simulated query.

    Attributes:
        text: the query.
        style: how it was made (one of :data:`STYLES`).
        source: the id of the document it was made from.
        targets: the ids that answer it (the source, its exact duplicates and,
            for ``topic``, the topic's documents).
    """

    text: str
    style: str
    source: str
    targets: frozenset[str]


def _digest(analyzer: Analyzer, text: str) -> str:
    return hashlib.sha256(
        " ".join(analyzer.tokens(text)).encode("utf-8", "surrogatepass")
    ).hexdigest()


class QuerySimulator:
    """Makes :class:`SimulatedQuery` objects from a corpus.

    Args:
        documents: the corpus (unique ids); a ``title`` in a chunk's metadata
            is used by the ``title`` style.
        analyzer: the term analyzer (the evaluator's).
        corpus_stats: document frequencies for tf-idf (built from the
            documents when not given).
        seed: the random seed.
        min_terms: documents with fewer content terms are never sources.

    Raises:
        InputError: no document has ``min_terms`` content terms.
    """

    def __init__(
        self,
        documents: Sequence[Chunk],
        *,
        analyzer: Analyzer | None = None,
        corpus_stats: CorpusStats | None = None,
        seed: int = 0,
        min_terms: int = 8,
    ) -> None:
        self.documents = list(documents)
        self.analyzer = analyzer or Analyzer()
        self.stats = corpus_stats or CorpusStats.from_texts(
            (d.text for d in self.documents), self.analyzer
        )
        self.rng = random.Random(seed)
        self._by_id = {d.id: d for d in self.documents}
        by_digest: dict[str, list[str]] = {}
        for d in self.documents:
            by_digest.setdefault(_digest(self.analyzer, d.text), []).append(d.id)
        self._duplicates = {i: group for group in by_digest.values() for i in group}
        self.sources = [d for d in self.documents if len(self.analyzer.terms(d.text)) >= min_terms]
        if not self.sources:
            raise InputError(
                f"no document has at least {min_terms} content terms to simulate queries from"
            )

    # -- pieces ---------------------------------------------------------------------------

    def _surface(self, text: str) -> tuple[dict[str, str], Counter[str]]:
        """stem -> its most frequent word in ``text``, and the stems' counts."""
        words: dict[str, Counter[str]] = {}
        counts: Counter[str] = Counter()
        for token in self.analyzer.tokens(text):
            if self.analyzer.is_stop_word(token) or len(token) < 3 or token.isdigit():
                continue
            stem = self.analyzer.stem(token)
            counts[stem] += 1
            words.setdefault(stem, Counter())[token] += 1
        return {stem: c.most_common(1)[0][0] for stem, c in words.items()}, counts

    def _draw(self, weights: Mapping[str, float], surface: Mapping[str, str]) -> str | None:
        """2 to 5 distinct terms drawn in proportion to ``weights``, as words."""
        pool = {t: w for t, w in weights.items() if w > 0 and t in surface}
        if len(pool) < 2:
            return None
        n = min(len(pool), self.rng.randint(2, 5))
        chosen: list[str] = []
        for _ in range(n):
            terms = sorted(pool)  # a stable order: the draw depends on the seed only
            pick = self.rng.choices(terms, weights=[pool[t] for t in terms])[0]
            chosen.append(surface[pick])
            del pool[pick]
        return " ".join(chosen)

    def _targets(self, ids: Sequence[str]) -> frozenset[str]:
        out: set[str] = set()
        for i in ids:
            out.update(self._duplicates.get(i, (i,)))
        return frozenset(out)

    def title(self, doc: Chunk) -> str | None:
        """The document's title: ``metadata["title"]``, else a short first line."""
        title = doc.metadata.get("title") if isinstance(doc.metadata, Mapping) else None
        if not isinstance(title, str):
            first, newline, _ = doc.text.partition("\n")
            title = first if newline else None
        if not title or not 2 <= len(self.analyzer.terms(title)) <= 25:
            return None
        return title.strip()

    def sentence(self, doc: Chunk) -> str | None:
        """One sentence of 4 to 30 content terms."""
        body = doc.text
        title = self.title(doc)
        if title and body.startswith(title):
            body = body[len(title) :]
        sentences = [s for s in split_sentences(body) if 4 <= len(self.analyzer.terms(s)) <= 30]
        return self.rng.choice(sentences) if sentences else None

    def terms(self, doc: Chunk) -> str | None:
        """2 to 5 of the document's terms, by tf-idf."""
        surface, counts = self._surface(doc.text)
        weights = {t: (1.0 + math.log(c)) * self.stats.idf(t) for t, c in counts.items()}
        return self._draw(weights, surface)

    def topic(self, docs: Sequence[Chunk]) -> str | None:
        """2 to 5 terms typical of a group of documents."""
        share: Counter[str] = Counter()
        surface: dict[str, str] = {}
        for d in docs:
            words, counts = self._surface(d.text)
            share.update(counts.keys())
            for stem, word in words.items():
                surface.setdefault(stem, word)
        n = len(docs)
        weights = {
            t: (c / n) ** 2 * self.stats.idf(t) for t, c in share.items() if c >= 2 or n <= 2
        }
        return self._draw(weights, surface)

    # -- the whole set --------------------------------------------------------------------

    def simulate(
        self,
        n: int,
        *,
        styles: Sequence[str] = STYLES,
        neighbours: Neighbours | None = None,
        topic_sizes: Sequence[int] = (3, 10, 30),
    ) -> list[SimulatedQuery]:
        """About ``n`` queries, spread evenly over ``styles`` (fewer when a style
        cannot be made from a document, e.g. no title).

        Raises:
            InputError: an unknown style, ``topic`` without ``neighbours``, or
                ``n < 1``.
        """
        if not styles:
            raise InputError(f"no query style given; known: {', '.join(STYLES)}")
        unknown = [s for s in styles if s not in STYLES]
        if unknown:
            raise InputError(f"unknown query style(s) {unknown}; known: {', '.join(STYLES)}")
        if "topic" in styles and neighbours is None:
            raise InputError("the topic style needs neighbours (document -> nearest ids)")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(
                f"the number of simulated queries must be a positive integer, got {n!r}"
            )
        per_style = max(1, math.ceil(n / len(styles)))
        sources = self.rng.sample(self.sources, min(len(self.sources), per_style))
        out: list[SimulatedQuery] = []
        for doc in sources:
            for style in styles:
                text: str | None
                ids: Sequence[str] = (doc.id,)
                if style == "title":
                    text = self.title(doc)
                elif style == "sentence":
                    text = self.sentence(doc)
                elif style == "terms":
                    text = self.terms(doc)
                else:
                    assert neighbours is not None
                    m = self.rng.choice(list(topic_sizes))
                    near = [i for i in neighbours(doc, m) if i in self._by_id and i != doc.id]
                    ids = (doc.id, *near[:m])
                    text = self.topic([self._by_id[i] for i in ids]) if near else None
                if text:
                    out.append(SimulatedQuery(text, style, doc.id, self._targets(ids)))
        return out
