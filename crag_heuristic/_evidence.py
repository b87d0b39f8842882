"""The evidence a gate reads, every feature defined once.

A feature is one decorated function: its name, its level (``"chunk"``: one
value per chunk; ``"set"``: one value for the retrieved list), the named
signal it refines (which the reasoning reports it under) and how it is
computed from :class:`Inputs`, the per-evaluation bundle of what the
evaluator already has (the analysed chunks, the query's terms and their
weights, the retriever's similarities, the corpus statistics, the
configuration). The evaluator computes every registered feature; a fitted
gate (:class:`~crag_heuristic.config.ModelConfig`) may name any of them;
configuration validation, the reasoning by signal, calibration and the
benchmarks all read :data:`CHUNK` and :data:`SET`. Adding evidence is adding one function
here.

Per chunk ``i`` (``Q`` the query's distinct terms, ``w(t)`` their weights:
IDF with corpus statistics, 1 without; ``s_i`` the similarity in [0, 1]):

``keyword_overlap``   ``sum(w(t) for t in Q if t in chunk) / sum(w(t) for t in Q)``
``bm25``              BM25 normalised by its maximum for this query (Robertson and
                      Zaragoza 2009)::

                          sum_t w(t) * tf*(k1+1) / (tf + k1*(1 - b + b*dl/avgdl))
                          -------------------------------------------------------
                                        sum_t w(t) * (k1+1)

                      ``avgdl`` the corpus mean (the list mean without statistics)
``bm25_raw``          the numerator alone: the chunk's BM25 score itself
``lexical_contrast``  ``bm25_i - mean_j bm25_j``
``similarity``        ``s_i`` (``None`` when the score has no absolute meaning)
``similarity_z``      ``(s_i - mean_j s_j) / std_j s_j`` (0 when the std is 0)
``similarity_drop``   ``s_i - max_j s_j``: how far below the list's best
``rank``              ``ln(1 + i)``, the position in the list (0 for the first)
``sentence_similarity``  the cosine of the chunk's best sentence to the query
                      (``Chunk.sentence_score``, from sentence vectors made at index
                      time), mapped to [0, 1] as ``similarity``; ``None`` without it
``length_adequacy``, ``source_diversity``: the signals of the same name

Per set (the list as a whole):

``best_chunk`` / ``top_chunk`` / ``mean_chunk``  the highest, the first and the mean
                      chunk probability (the gate's first stage)
``chunk_margin``      the highest chunk probability minus the second
``keyword_overlap``   the named signal (the best chunk's, or the pooled coverage)
``keyword_coverage``  the share of the query's weight found in any chunk
``bm25_max`` / ``bm25_margin``  the best chunk's ``bm25``; it minus the second best
``bm25_top``          the first chunk's ``bm25`` (its BM25 over the query's idf mass)
``bm25_raw_max`` / ``bm25_raw_top``  the best and the first chunk's ``bm25_raw``
``bm25_scaled_max``   ``bm25_raw_max / ln(2N + 2)``, the idf of a term the corpus of ``N``
                      documents never saw: the raw score grows with ``ln N``, this
                      does not (1 without statistics)
``agreement``         1 when the lexically best chunk is the retriever's best, else 0
``lexical_coherence`` how much the chunks' term sets ``A_i`` overlap, a pooled Jaccard
                      ``sum_{i<j} |A_i & A_j| / sum_{i<j} |A_i | A_j|``: lists that hold
                      an answer tend to agree with themselves (the list coherence of
                      He, Larson and de Rijke 2008)
``top_lexical_coherence``  the same between the first chunk and each other one
``similarity_top`` / ``similarity_mean`` / ``similarity_std`` / ``similarity_gap``
                      the best, mean, spread (the numerator of Shtok et al.'s NQC)
                      and best-minus-last of the similarities
``sentence_similarity_max`` / ``sentence_similarity_top``  the list's best and its first
                      chunk's ``sentence_similarity``
``coherence``, ``length_adequacy``, ``source_diversity``: the named signals

Evidence that needs an opt-in input (``Feature.needs``: ``"sentences"``) is
``None`` without it, and a fitted gate that reads it falls back to its gate
fitted without that group (:func:`needs`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from . import _signals as sig
from ._text.analyses import StoredStats
from ._text.analyzer import QueryTerms, TextStats

if TYPE_CHECKING:
    from ._text.corpus import CorpusStats


class KeywordSettings(Protocol):
    """What the lexical features read of :class:`~crag_heuristic.config.KeywordConfig`."""

    @property
    def use_idf(self) -> bool: ...
    @property
    def aggregate(self) -> Literal["best", "pooled"]: ...
    @property
    def bm25_k1(self) -> float: ...
    @property
    def bm25_b(self) -> float: ...


class EvidenceSettings(Protocol):
    """What the features read of :class:`~crag_heuristic.config.EvaluatorConfig`: a
    protocol, so that this module (which the configuration reads for the feature names)
    imports nothing from the configuration."""

    @property
    def keyword(self) -> KeywordSettings: ...
    @property
    def length(self) -> sig.LengthTarget: ...


Level = Literal["chunk", "set"]
Value = float | None
Row = dict[str, Value]
_F = TypeVar("_F", bound=Callable[..., object])


@dataclass(frozen=True, slots=True)
class Feature:
    """One piece of evidence.

    Attributes:
        name: the name a model term uses.
        level: ``"chunk"`` (a value per chunk) or ``"set"`` (one per list).
        signal: the named signal it refines (``keyword_overlap``,
            ``semantic_coherence``, ``length_adequacy``, ``source_diversity``)
            or ``"chunk_model"`` for the first stage's outputs.
        compute: chunk level: ``Inputs -> list of values``; set level:
            ``SetInputs -> value``. ``None`` means unavailable for this input.
        doc: one line on what it measures.
        needs: the opt-in evidence group it reads (``"sentences"``: sentence
            vectors made at index time), whose absence selects a gate's
            fallback; ``None`` for evidence every input has or the evaluator
            handles as before (similarities, corpus statistics).
    """

    name: str
    level: Level
    signal: str
    compute: Callable[..., object]
    doc: str
    needs: str | None = None


CHUNK: dict[str, Feature] = {}
"""The chunk-level features by name, in the order rows list them."""
SET: dict[str, Feature] = {}
"""The set-level features by name (a name may exist at both levels, e.g. the named signals)."""


def _register(
    name: str, level: Level, signal: str, *, needs: str | None = None
) -> Callable[[_F], _F]:
    registry = CHUNK if level == "chunk" else SET

    def decorate(function: _F) -> _F:
        if name in registry:  # pragma: no cover - a programming error caught at import
            raise ValueError(f"{level} feature {name!r} is defined twice")
        doc = (function.__doc__ or "").strip().splitlines()
        registry[name] = Feature(name, level, signal, function, doc[0] if doc else "", needs)
        return function

    return decorate


class Inputs:
    """What the chunk features of one evaluation read, computed once.

    The evaluator builds it; chunk features read each other through
    :meth:`chunk`. The set stage reads a :class:`SetInputs`, made from this
    one and the chunk stage's outputs.
    """

    __slots__ = (
        "_chunk",
        "_counts",
        "analysed",
        "avgdl",
        "coherence",
        "config",
        "corpus_stats",
        "diversity",
        "sentence_sims",
        "sims",
        "sources",
        "terms",
        "weights",
    )

    def __init__(
        self,
        *,
        terms: QueryTerms,
        weights: Sequence[float],
        analysed: Sequence[TextStats],
        sims: Sequence[float | None],
        sources: Sequence[str],
        config: EvidenceSettings,
        corpus_stats: CorpusStats | None,
        coherence: float | None,
        diversity: tuple[float, list[float]],
        sentence_sims: Sequence[float | None] | None = None,
    ) -> None:
        self.terms = terms
        self.weights = weights
        self.analysed = analysed
        self.sims = sims
        self.sources = sources
        self.config = config
        self.corpus_stats = corpus_stats
        self.coherence = coherence
        self.diversity = diversity
        self.sentence_sims = sentence_sims or [None] * len(analysed)
        stats_avgdl = corpus_stats.avg_doc_len if corpus_stats is not None else None
        self.avgdl = stats_avgdl or sum(a.n_terms for a in analysed) / len(analysed)
        self._chunk: dict[str, list[Value]] = {}
        self._counts: list[list[int]] | None = None

    def query_counts(self) -> list[list[int]]:
        """``counts[i][j]``: how often chunk ``i`` holds query term ``j``
        (:meth:`TextStats.count`), computed once.

        A stored row not decoded (:class:`StoredStats`) gives the counts it was looked
        up with when they are this query's; when it holds none, they are read from its
        analyses' arrays, for all such rows at once; when it holds another query's (a
        chunk seen again, for a new query), it is decoded, all such rows at once, and
        read as a dict from then on, as a tokenised chunk.
        """
        counts = self._counts
        if counts is None:
            terms = self.terms
            found: list[list[int] | None] = [None] * len(self.analysed)
            unread: dict[int, list[tuple[int, StoredStats]]] = {}
            seen: dict[int, list[tuple[int, StoredStats]]] = {}
            for i, a in enumerate(self.analysed):
                if terms.all_stop_words:
                    found[i] = [a.count(term, terms) for term in terms.terms]
                elif type(a) is StoredStats and not a.decoded:
                    query = a.query
                    if query is None:
                        unread.setdefault(id(a.analyses), []).append((i, a))
                    elif query[0] == terms.terms:
                        found[i] = query[1]
                    else:
                        seen.setdefault(id(a.analyses), []).append((i, a))
                else:
                    get = a.term_counts.get
                    found[i] = [get(term, 0) for term in terms.terms]
            for group in unread.values():
                rows = [a.row for _, a in group]
                read = group[0][1].analyses.query_counts(rows, terms.terms)
                for (i, a), row_counts in zip(group, read, strict=True):
                    found[i] = row_counts
                    a.remember(terms.terms, row_counts)
            for group in seen.values():
                group[0][1].analyses.decode([a for _, a in group])
                for i, a in group:
                    get = a.term_counts.get
                    found[i] = [get(term, 0) for term in terms.terms]
            counts = self._counts = found  # type: ignore[assignment]  # no None left
        return counts  # type: ignore[return-value]

    def chunk(self, name: str) -> list[Value]:
        """The values of chunk feature ``name`` (computed on first use)."""
        values = self._chunk.get(name)
        if values is None:
            values = CHUNK[name].compute(self)  # type: ignore[assignment]
            self._chunk[name] = values  # type: ignore[assignment]
        return values  # type: ignore[return-value]

    def present_sims(self) -> list[float]:
        return [s for s in self.sims if s is not None]


class SetInputs(Inputs):
    """What the set features read: the chunk stage's :class:`Inputs` (and the
    chunk features it computed) with that stage's outputs, ``chunk_probs`` (its
    probabilities, or the linear chunk scores without a model)."""

    __slots__ = ("_set", "_term_counts", "_term_keys", "chunk_probs")

    def __init__(self, chunk_stage: Inputs, chunk_probs: Sequence[float]) -> None:
        # the chunk stage's values are shared, not copied (its caches included)
        for name in Inputs.__slots__:
            setattr(self, name, getattr(chunk_stage, name))
        self.chunk_probs = chunk_probs
        self._set: dict[str, Value] = {}
        self._term_counts: Counter[Hashable] | None = None
        self._term_keys: list[Sequence[Hashable]] | None = None

    def value(self, name: str) -> Value:
        """The value of set feature ``name`` (computed on first use)."""
        if name not in self._set:
            self._set[name] = SET[name].compute(self)  # type: ignore[assignment]
        return self._set[name]


def _floats(values: list[Value]) -> list[float]:
    return [v or 0.0 for v in values]


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / n)


def bm25_of_counts(
    counts: Sequence[int],
    weights: Sequence[float],
    n_terms: int,
    avgdl: float,
    k1: float,
    b: float,
) -> float:
    """The normalised BM25 of one text (see the module doc), from the query terms'
    counts in it and its length."""
    total = 0.0
    top = 0.0
    length = 1.0 - b + b * (n_terms / avgdl if avgdl > 0 else 1.0)
    for tf, weight in zip(counts, weights, strict=True):
        top += weight * (k1 + 1.0)
        if tf:
            total += weight * tf * (k1 + 1.0) / (tf + k1 * length)
    return total / top if top > 0 else 0.0


# -- chunk level ------------------------------------------------------------------------------


@_register("keyword_overlap", "chunk", "keyword_overlap")
def _keyword_overlap(x: Inputs) -> list[Value]:
    """The weighted share of the query's terms the chunk contains."""
    return [sig.weighted_share(counts, x.weights) for counts in x.query_counts()]


@_register("bm25", "chunk", "keyword_overlap")
def _bm25(x: Inputs) -> list[Value]:
    """BM25 of the chunk normalised by its maximum for the query."""
    kw = x.config.keyword
    k1, b, avgdl = kw.bm25_k1, kw.bm25_b, x.avgdl
    return [
        bm25_of_counts(counts, x.weights, a.n_terms, avgdl, k1, b)
        for counts, a in zip(x.query_counts(), x.analysed, strict=True)
    ]


@_register("bm25_raw", "chunk", "keyword_overlap")
def _bm25_raw(x: Inputs) -> list[Value]:
    """BM25 of the chunk itself: ``bm25`` times its maximum for the query."""
    k1 = x.config.keyword.bm25_k1
    top = sum(x.weights) * (k1 + 1.0)
    return [v * top for v in _floats(x.chunk("bm25"))]


@_register("lexical_contrast", "chunk", "keyword_overlap")
def _lexical_contrast(x: Inputs) -> list[Value]:
    """The chunk's bm25 minus the list's mean bm25."""
    bm25 = _floats(x.chunk("bm25"))
    mean = sum(bm25) / len(bm25)
    return [v - mean for v in bm25]


@_register("similarity", "chunk", "semantic_coherence")
def _similarity(x: Inputs) -> list[Value]:
    """The retriever's score mapped to [0, 1]."""
    return list(x.sims)


@_register("similarity_z", "chunk", "semantic_coherence")
def _similarity_z(x: Inputs) -> list[Value]:
    """The similarity's z-score within the list."""
    present = x.present_sims()
    mean, std = _mean_std(present) if present else (0.0, 0.0)
    return [None if s is None else ((s - mean) / std if std > 0 else 0.0) for s in x.sims]


@_register("similarity_drop", "chunk", "semantic_coherence")
def _similarity_drop(x: Inputs) -> list[Value]:
    """The similarity minus the list's best similarity."""
    present = x.present_sims()
    best = max(present) if present else 0.0
    return [None if s is None else s - best for s in x.sims]


@_register("sentence_similarity", "chunk", "semantic_coherence", needs="sentences")
def _sentence_similarity(x: Inputs) -> list[Value]:
    """The chunk's best sentence's cosine to the query, mapped to [0, 1] as ``similarity``."""
    return list(x.sentence_sims)


@_register("rank", "chunk", "semantic_coherence")
def _rank(x: Inputs) -> list[Value]:
    """ln(1 + position in the list)."""
    return [math.log1p(i) for i in range(len(x.analysed))]


@_register("length_adequacy", "chunk", "length_adequacy")
def _length_adequacy(x: Inputs) -> list[Value]:
    """Enough text for an answer: min(1, words * tokens_per_word / min_tokens)."""
    return [sig.length_adequacy(a.n_tokens, x.config.length) for a in x.analysed]


@_register("source_diversity", "chunk", "source_diversity")
def _source_diversity(x: Inputs) -> list[Value]:
    """1 / the number of chunks sharing this chunk's source."""
    return list(x.diversity[1])


# -- set level --------------------------------------------------------------------------------


@_register("best_chunk", "set", "chunk_model")
def _best_chunk(x: SetInputs) -> Value:
    """The highest chunk probability."""
    return max(x.chunk_probs)


@_register("top_chunk", "set", "chunk_model")
def _top_chunk(x: SetInputs) -> Value:
    """The first chunk's probability."""
    return x.chunk_probs[0]


@_register("mean_chunk", "set", "chunk_model")
def _mean_chunk(x: SetInputs) -> Value:
    """The mean chunk probability."""
    probs = x.chunk_probs
    return sum(probs) / len(probs)


@_register("chunk_margin", "set", "chunk_model")
def _chunk_margin(x: SetInputs) -> Value:
    """The highest chunk probability minus the second."""
    top_two = sorted(x.chunk_probs, reverse=True)[:2]
    return top_two[0] - (top_two[1] if len(top_two) > 1 else 0.0)


@_register("bm25_margin", "set", "keyword_overlap")
def _bm25_margin(x: SetInputs) -> Value:
    """The best chunk's bm25 minus the second best."""
    top_two = sorted(_floats(x.chunk("bm25")), reverse=True)[:2]
    return top_two[0] - (top_two[1] if len(top_two) > 1 else 0.0)


@_register("agreement", "set", "keyword_overlap")
def _agreement(x: SetInputs) -> Value:
    """1 when the lexically best chunk is also the retriever's best, else 0."""
    present = [i for i, s in enumerate(x.sims) if s is not None]
    if not present:
        return None
    bm25 = _floats(x.chunk("bm25"))
    lexical_best = max(range(len(bm25)), key=bm25.__getitem__)
    dense_best = max(present, key=lambda i: x.sims[i] or 0.0)
    return 1.0 if dense_best == lexical_best else 0.0


@_register("keyword_overlap", "set", "keyword_overlap")
def _set_keyword_overlap(x: SetInputs) -> Value:
    """The named signal: the best chunk's overlap, or the pooled one."""
    if x.config.keyword.aggregate == "best":
        return max(_floats(x.chunk("keyword_overlap")))
    return x.value("keyword_coverage")


@_register("keyword_coverage", "set", "keyword_overlap")
def _keyword_coverage(x: SetInputs) -> Value:
    """The weighted share of the query's terms found in any chunk."""
    found = [any(column) for column in zip(*x.query_counts(), strict=True)]
    return sig.weighted_share(found, x.weights)


@_register("bm25_max", "set", "keyword_overlap")
def _bm25_max(x: SetInputs) -> Value:
    """The best chunk's bm25."""
    return max(_floats(x.chunk("bm25")))


@_register("bm25_top", "set", "keyword_overlap")
def _bm25_top(x: SetInputs) -> Value:
    """The first chunk's bm25."""
    return _floats(x.chunk("bm25"))[0]


@_register("bm25_raw_max", "set", "keyword_overlap")
def _bm25_raw_max(x: SetInputs) -> Value:
    """The best chunk's BM25, not normalised."""
    return max(_floats(x.chunk("bm25_raw")))


@_register("bm25_scaled_max", "set", "keyword_overlap")
def _bm25_scaled_max(x: SetInputs) -> Value:
    """The best chunk's BM25 over the corpus's largest idf, ln(2N + 2): comparable across
    corpus sizes."""
    stats = x.corpus_stats
    scale = (
        math.log(2.0 * stats.n_docs + 2.0)
        if stats is not None and x.config.keyword.use_idf
        else 1.0
    )
    return max(_floats(x.chunk("bm25_raw"))) / scale


@_register("bm25_raw_top", "set", "keyword_overlap")
def _bm25_raw_top(x: SetInputs) -> Value:
    """The first chunk's BM25, not normalised."""
    return _floats(x.chunk("bm25_raw"))[0]


def _term_keys(x: SetInputs) -> list[Sequence[Hashable]]:
    """Each chunk's distinct content terms, as keys comparable across the list
    (computed once): the terms' ids in the corpus's analyses when every chunk is a
    stored row of the same analyses (read from the arrays, one gather for all, no
    string made), else the terms themselves (stored rows not yet decoded decoded all
    at once per analyses)."""
    keys = x._term_keys
    if keys is None:
        stored = [a for a in x.analysed if type(a) is StoredStats]
        if (
            stored
            and len(stored) == len(x.analysed)
            and all(a.analyses is stored[0].analyses for a in stored)
        ):
            keys = list(stored[0].analyses.term_ids([a.row for a in stored]))
        else:
            undecoded: dict[int, list[StoredStats]] = {}
            for a in stored:
                if a.decoded:
                    continue
                undecoded.setdefault(id(a.analyses), []).append(a)
            for group in undecoded.values():
                group[0].analyses.decode(group)
            keys = [list(a.term_counts) for a in x.analysed]
        x._term_keys = keys
    return keys


def _term_chunk_counts(x: SetInputs) -> Counter[Hashable]:
    """term -> the number of chunks whose term set holds it (computed once)."""
    counts = x._term_counts
    if counts is None:
        counts = Counter()
        for terms in _term_keys(x):
            counts.update(terms)
        x._term_counts = counts
    return counts


@_register("lexical_coherence", "set", "keyword_overlap")
def _lexical_coherence(x: SetInputs) -> Value:
    """How much the chunks' term sets overlap: a pooled Jaccard over all pairs."""
    n = len(x.analysed)
    if n < 2:
        return None
    # sum over pairs of |A & B| = sum over terms of C(chunks holding it, 2);
    # sum over pairs of |A | B| = (n - 1) * sum of |A| - sum over pairs of |A & B|
    spread = Counter(_term_chunk_counts(x).values())  # how many terms k chunks share
    shared = sum(terms * k * (k - 1) // 2 for k, terms in spread.items())
    union = (n - 1) * sum(map(len, _term_keys(x))) - shared
    return shared / union if union else 0.0


@_register("top_lexical_coherence", "set", "keyword_overlap")
def _top_lexical_coherence(x: SetInputs) -> Value:
    """How much the first chunk's term set overlaps the others': a pooled Jaccard."""
    n = len(x.analysed)
    if n < 2:
        return None
    counts = _term_chunk_counts(x)
    keys = _term_keys(x)
    first = keys[0]
    shared = sum(counts[t] - 1 for t in first)
    union = (n - 1) * len(first) + sum(map(len, keys[1:])) - shared
    return shared / union if union else 0.0


@_register("similarity_top", "set", "semantic_coherence")
def _similarity_top(x: SetInputs) -> Value:
    """The best similarity."""
    present = x.present_sims()
    return max(present) if present else None


@_register("similarity_mean", "set", "semantic_coherence")
def _similarity_mean(x: SetInputs) -> Value:
    """The mean similarity."""
    present = x.present_sims()
    return sum(present) / len(present) if present else None


@_register("similarity_std", "set", "semantic_coherence")
def _similarity_std(x: SetInputs) -> Value:
    """The standard deviation of the similarities (NQC without its normaliser)."""
    present = x.present_sims()
    return _mean_std(present)[1] if present else None


@_register("similarity_gap", "set", "semantic_coherence")
def _similarity_gap(x: SetInputs) -> Value:
    """The best similarity minus the lowest."""
    present = x.present_sims()
    return max(present) - min(present) if present else None


@_register("sentence_similarity_max", "set", "semantic_coherence", needs="sentences")
def _sentence_similarity_max(x: SetInputs) -> Value:
    """The best sentence of the list: the highest sentence_similarity."""
    present = [s for s in x.sentence_sims if s is not None]
    return max(present) if present else None


@_register("sentence_similarity_top", "set", "semantic_coherence", needs="sentences")
def _sentence_similarity_top(x: SetInputs) -> Value:
    """The first chunk's sentence_similarity."""
    return x.sentence_sims[0]


@_register("coherence", "set", "semantic_coherence")
def _coherence(x: SetInputs) -> Value:
    """The named signal semantic coherence."""
    return x.coherence


@_register("length_adequacy", "set", "length_adequacy")
def _set_length_adequacy(x: SetInputs) -> Value:
    """The mean length adequacy of the chunks."""
    values = _floats(x.chunk("length_adequacy"))
    return sum(values) / len(values)


@_register("source_diversity", "set", "source_diversity")
def _set_source_diversity(x: SetInputs) -> Value:
    """Distinct sources over chunks."""
    return x.diversity[0]


CHUNK_FEATURES: tuple[str, ...] = tuple(CHUNK)
"""The names a model's chunk stage may use."""
SET_FEATURES: tuple[str, ...] = tuple(SET)
"""The names a model's set stage may use."""


def chunk_rows(x: Inputs, names: Iterable[str] = CHUNK_FEATURES) -> list[Row]:
    """One row per chunk holding the chunk features ``names`` (all by default)."""
    keys = tuple(names)
    columns = zip(*(x.chunk(n) for n in keys), strict=True)
    return [dict(zip(keys, values, strict=True)) for values in columns]


def set_row(x: SetInputs, names: Iterable[str] = SET_FEATURES) -> Row:
    """The set's row holding the set features ``names`` (all by default)."""
    return {name: x.value(name) for name in names}


def needs(features: Iterable[str], level: Level) -> set[str]:
    """The opt-in evidence groups the ``features`` of a stage read."""
    registry = CHUNK if level == "chunk" else SET
    return {f.needs for name in features if (f := registry.get(name)) and f.needs}


def signal_of(feature: str, level: Level = "chunk") -> str:
    """The named signal a feature refines (``"chunk_model"`` when unknown)."""
    found = (CHUNK if level == "chunk" else SET).get(feature)
    return found.signal if found is not None else "chunk_model"
