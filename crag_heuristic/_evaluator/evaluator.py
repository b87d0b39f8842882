"""The evaluator: four signals -> weighted score -> verdict, for a set and per chunk.

Pure Python, no model, no network: the cost is analysing the chunks (cached
per chunk id and text; looked up in the corpus's analyses made at index time
where the statistics carry them; else tokenised) and a few passes over at
most ``k`` numbers.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import _evidence as evidence
from .. import _signals as sig
from .._checks import CheckedQuery, check_query, real_number
from .._config import EvaluatorConfig, LogisticStage, Thresholds, load_config
from .._exceptions import ConfigError, InputError, _short
from .._logging import get_logger
from .._scores import similarity
from .._text.analyzer import Analyzer, QueryTerms, TextStats
from .._text.corpus import CorpusStats
from .._types import (
    Chunk,
    ChunkEvaluation,
    Evaluation,
    Signals,
    Verdict,
    check_chunks,
    check_ranking,
)
from . import model
from .refine import Refinement, refine

_TOLD_LIMIT = 64  # (statistics, reason) pairs remembered as said
_ANALYSES_HINTS = {
    "no_analyses": "build the statistics with analyses=True (CorpusStats.from_texts keeps "
    "them) to read each corpus chunk's analysis instead of tokenising it",
    "other_analyzer": "the statistics were built with another analyzer: their analyses are "
    "not used; build them with the evaluator's",
    "not_in_corpus": "texts the statistics never counted (web results, or texts changed "
    "since) are tokenised; corpus chunks whose text differs from what was counted "
    "(a title joined to the text, say) are too",
}
_SIGNAL_LABELS = {
    "keyword_overlap": "keyword overlap",
    "semantic_coherence": "semantic coherence",
    "length_adequacy": "length adequacy",
    "source_diversity": "source diversity",
}


def verdict_for(score: float, thresholds: Thresholds) -> Verdict:
    """RELEVANT if ``score > relevant``, PARTIAL if ``score > partial``, else IRRELEVANT."""
    if score > thresholds.relevant:
        return Verdict.RELEVANT
    if score > thresholds.partial:
        return Verdict.PARTIAL
    return Verdict.IRRELEVANT


class _LRU:
    """A small thread-safe LRU map."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[Any, TextStats] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[Any]) -> list[TextStats | None]:
        """The value of each key (``None``: absent), each found one made the most
        recent, under one lock."""
        data = self._data
        with self._lock:
            found = list(map(data.get, keys))
            move = data.move_to_end
            for key, value in zip(keys, found, strict=True):
                if value is not None:
                    move(key)
        return found

    def put_many(self, items: Sequence[tuple[Any, TextStats]]) -> None:
        """Store each ``(key, value)`` as the most recent, the oldest dropped past
        the size, under one lock."""
        if self._size <= 0:
            return
        data = self._data
        with self._lock:
            data.update(items)
            move = data.move_to_end
            for key, _ in items:
                move(key)
            while len(data) > self._size:
                data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


@functools.lru_cache(maxsize=8)
def _shared_cache(fingerprint: str, size: int) -> _LRU:
    """The analysed chunks the evaluators of one analyzer fingerprint and cache size share
    in this process (the last few such pairs kept)."""
    return _LRU(size)


class Evaluator:
    """Grades retrieved chunks against a query without a model.

    Args:
        config: an :class:`EvaluatorConfig`, a profile name, a dict or a
            config file path; ``None`` for the default profile (:data:`DEFAULT_PROFILE`,
            the same as ``EvaluatorConfig()``).
        analyzer: the text analyzer (tokeniser, stop words, stemmer).
        cache_size: how many analysed chunks to keep, keyed by (id, text);
            0 disables the cache.
        all_evidence: compute and record every registered feature (see
            ``crag_heuristic._evidence``) in each evaluation, as
            calibration and the benchmarks need; by default only what the
            named signals and the configured gate read.
        shared_cache: share the analysed chunks with the other evaluators of this
            process whose analyzer has the same settings (a plain
            :class:`~crag_heuristic.text.Analyzer`, whose own caches are shared so)
            and whose ``cache_size`` is the same: a new ``Evaluator()`` per call
            starts with what the process analysed already (it cost 1.3 times a
            reused one on SciFact's lists, whose documents recur). ``False``: a
            cache of its own (a cold-start measurement's).

    Raises:
        ConfigError: a bad configuration, ``cache_size`` (not an integer
            >= 0), ``all_evidence`` or ``shared_cache`` (not a bool) or ``analyzer``.

    An evaluator is thread-safe and keeps no state between calls except the
    analysis cache, which never changes a result.
    """

    def __init__(
        self,
        config: EvaluatorConfig | str | Any = None,
        *,
        analyzer: Analyzer | None = None,
        cache_size: int = 4096,
        all_evidence: bool = False,
        shared_cache: bool = True,
    ) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigError("cache_size", cache_size, "must be an integer >= 0 (0: no cache)")
        if not isinstance(all_evidence, bool):
            raise ConfigError("all_evidence", all_evidence, "must be true or false")
        if not isinstance(shared_cache, bool):
            raise ConfigError("shared_cache", shared_cache, "must be true or false")
        if analyzer is not None and not isinstance(analyzer, Analyzer):
            raise ConfigError("analyzer", analyzer, "must be an Analyzer or None")
        self.config = load_config(config)
        self.all_evidence = all_evidence
        self.analyzer = analyzer or Analyzer()
        shares = shared_cache and cache_size > 0 and self.analyzer.shares_caches
        self._cache = (
            _shared_cache(self.analyzer.fingerprint, cache_size) if shares else _LRU(cache_size)
        )
        self._told: set[tuple[int, str]] = set()  # (statistics, reason) said once

    def __repr__(self) -> str:
        return f"Evaluator(config={self.config.name!r}, analyzer={self.analyzer!r})"

    @property
    def fingerprint(self) -> str:
        """``config.fingerprint()``: computed on first use, once per configuration
        object (a digest of the whole configuration costs more than an evaluation),
        so that making an evaluator costs next to nothing."""
        return self.config.fingerprint()

    def clear_cache(self) -> None:
        """Forget the analysed chunks (for cold-start measurements; with a shared cache,
        the other evaluators sharing it forget them too)."""
        self._cache.clear()

    def analyze_chunk(self, chunk: Chunk, corpus_stats: CorpusStats | None = None) -> TextStats:
        """The chunk's terms and token count, cached by (id, text); see :meth:`analyze_chunks`."""
        return self.analyze_chunks([chunk], corpus_stats)[0]

    def analyze_chunks(
        self, chunks: Sequence[Chunk], corpus_stats: CorpusStats | None = None
    ) -> list[TextStats]:
        """Each chunk's analysis: from this evaluator's cache (by id and text), else
        from the corpus's analyses made at index time (``corpus_stats.analyses``,
        by id and text digest, when built with this evaluator's analyzer), else
        by tokenising its text. All three give the same analysis."""
        return self._analyze(chunks, corpus_stats, ())

    def _analyze(
        self, chunks: Sequence[Chunk], corpus_stats: CorpusStats | None, terms: Sequence[str]
    ) -> list[TextStats]:
        """:meth:`analyze_chunks`; the chunks found in the corpus's analyses carry the
        counts of ``terms`` (see :class:`StoredStats`)."""
        keys = [(chunk.id, chunk.text) for chunk in chunks]
        found = self._cache.get_many(keys)
        missing = [i for i, stats in enumerate(found) if stats is None]
        if not missing:
            return found  # type: ignore[return-value]  # no None left
        looked_up: list[TextStats | None] = [None] * len(missing)
        if corpus_stats is not None:
            if corpus_stats.analyses is None:
                self._tell(corpus_stats, "no_analyses", len(missing), len(chunks))
            elif corpus_stats.analyzer != self.analyzer.fingerprint:
                self._tell(corpus_stats, "other_analyzer", len(missing), len(chunks))
            else:
                looked_up = corpus_stats.analyses.get_many([keys[i] for i in missing], terms)
                missed = looked_up.count(None)
                if missed:
                    self._tell(corpus_stats, "not_in_corpus", missed, len(chunks))
        analyze: Callable[[str], TextStats] = self.analyzer.analyze
        if type(self.analyzer).analyze is Analyzer.analyze:  # a subclass's own: called as it is
            analyze = self.analyzer.analyze_lazily  # the text is kept (the cache's key)
        for i, stats in zip(missing, looked_up, strict=True):
            found[i] = stats if stats is not None else analyze(chunks[i].text)
        self._cache.put_many([(keys[i], found[i]) for i in missing])  # type: ignore[misc]
        return found  # type: ignore[return-value]  # every None replaced

    def _tell(self, stats: CorpusStats, reason: str, tokenised: int, chunks: int) -> None:
        """Say once per statistics object and reason (a debug event, ``crag.chunk_analyses``)
        why chunks were tokenised instead of read from the corpus's analyses: the
        statistics hold none (``no_analyses``), were built with another analyzer
        (``other_analyzer``), or hold no row of these texts (``not_in_corpus``: texts
        the corpus never held, as web results, or changed since it was counted)."""
        told = (id(stats), reason)
        if told in self._told:
            return
        if len(self._told) >= _TOLD_LIMIT:
            self._told.clear()
        self._told.add(told)
        get_logger().debug(
            "crag.chunk_analyses",
            reason=reason,
            tokenised=tokenised,
            chunks=chunks,
            n_docs=stats.n_docs,
            hint=_ANALYSES_HINTS[reason],
        )

    def term_weights(
        self, terms: QueryTerms, corpus_stats: CorpusStats | None, config: EvaluatorConfig
    ) -> list[float]:
        """IDF weights of the query terms, or 1.0 each without statistics."""
        if corpus_stats is None or not config.keyword.use_idf:
            return [1.0] * len(terms.terms)
        return [corpus_stats.idf(term) for term in terms.terms]

    def evaluate(
        self,
        query: str,
        chunks: Sequence[Chunk],
        corpus_stats: CorpusStats | None = None,
        *,
        config: EvaluatorConfig | str | None = None,
        chunk_grades: Mapping[str, float] | None = None,
        ranked: bool = True,
    ) -> Evaluation:
        """Grade ``chunks`` (one retrieval result) against ``query``.

        The stages: analyse the query and the chunks; compute the chunk
        evidence; grade each chunk (the model's chunk stage, or the weighted
        signals); compute the set evidence; score the set (the model's set
        stage, or the weighted signals); band both into verdicts.

        Args:
            query: the user's query (non-blank string).
            chunks: the retrieved chunks, best first, with unique ids.
            corpus_stats: document frequencies for IDF weighting, if known.
            config: overrides this evaluator's configuration for this call.
            chunk_grades: P(relevant) of some chunks, by id, from an outside
                grader (a cascade's): they replace the chunk stage's
                probabilities, so the chunks' grades and the set stage (e.g.
                ``best_chunk``) read them. Recorded in
                ``details["external_grades"]``.
            ranked: ``chunks`` are in the order their scores ranked them (a
                retriever's answer): three or more scores of one kind that
                run the wrong way for it are refused (:class:`ScoreOrderError`,
                see :func:`~crag_heuristic._types.check_ranking`). ``False`` for
                a list reordered after scoring (fused, reranked).

        Returns:
            The set's verdict and score, each signal, per-chunk grades and a
            short reasoning. No chunks give IRRELEVANT with score 0. Signals
            that cannot be computed are ``None`` and their weight is shared
            among the others (the reasoning says which and why). Evidence a
            fitted model needs but the input lacks (no similarities, no
            corpus statistics) selects the model's fallback fitted without it.

        Raises:
            InvalidQueryError: blank or non-string query.
            InvalidChunkError: an element is not a Chunk, or ids repeat.
            ScoreOrderError: (an ``InvalidChunkError``) with ``ranked``, a
                similarity's scores that only rise down the list, or a
                distance's that only fall: the kind is declared the wrong way
                round (the error names the kind it likely is).
            InputError: ``chunk_grades`` names an unknown chunk or holds a
                value that is not a number in [0, 1].
        """
        checked = check_query(query)
        check_chunks(chunks)
        if not isinstance(ranked, bool):
            raise InputError(f"ranked must be true or false, got {type(ranked).__name__}")
        if ranked:
            check_ranking(chunks)
        if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
            raise InputError(
                f"corpus_stats must be a CorpusStats or None, got {type(corpus_stats).__name__}"
            )
        cfg = self.config if config is None else load_config(config)
        if not chunks:
            return _empty_evaluation(cfg)
        x, parts = self._inputs(checked, chunks, corpus_stats, cfg)
        notes = _notes(chunks, x.sims, x.terms)
        gate = _Gate.select(cfg, x, notes)
        rows = evidence.chunk_rows(x, self._names(gate.chunk, _CHUNK_ALWAYS, "chunk"))
        chunk_scores, best_parts = gate.grade_chunks(x, rows)
        fixed = None
        if chunk_grades is not None:
            fixed = _fixed_grades(chunks, chunk_grades, notes)
            chunk_scores, best_parts = gate.with_fixed(rows, chunk_scores, best_parts, fixed)
        set_features = evidence.set_row(
            evidence.SetInputs(x, chunk_scores), self._names(gate.set, _SET_ALWAYS, "set")
        )
        signals = Signals(
            keyword_overlap=set_features["keyword_overlap"],
            semantic_coherence=x.coherence,
            length_adequacy=set_features["length_adequacy"],
            source_diversity=x.diversity[0],
        )
        details: dict[str, Any] = {
            "query_terms": list(x.terms.terms),
            "all_stop_words": x.terms.all_stop_words,
            "idf_weighted": corpus_stats is not None and cfg.keyword.use_idf,
            "coherence": None if parts is None else parts.as_dict(),
            "score_kinds": sorted({chunk.score_kind.value for chunk in chunks}),
            "notes": notes,
            "features": set_features,
            "chunk_bands": {
                "partial": gate.chunk_thresholds.partial,
                "relevant": gate.chunk_thresholds.relevant,
            },
        }
        if fixed:
            details["external_grades"] = {chunks[i].id: p for i, p in fixed.items()}
        score = gate.score_set(signals, set_features, best_parts, details)
        verdict = verdict_for(score, gate.thresholds)
        details["bands"] = {
            "relevant": gate.thresholds.relevant,
            "partial": gate.thresholds.partial,
            "fallback_for": list(gate.fallback_for),
        }
        grades = tuple(
            ChunkEvaluation(
                chunk_id=chunk.id,
                score=chunk_scores[i],
                verdict=verdict_for(chunk_scores[i], gate.chunk_thresholds),
                signals=Signals(
                    rows[i]["keyword_overlap"],
                    x.sims[i],
                    rows[i]["length_adequacy"],
                    rows[i]["source_diversity"],
                ),
                similarity=x.sims[i],
                features=rows[i],
            )
            for i, chunk in enumerate(chunks)
        )
        return Evaluation(
            verdict=verdict,
            score=score,
            signals=signals,
            chunks=grades,
            reasoning=_reasoning(verdict, score, signals, notes, details.get("model")),
            profile=cfg.name,
            details=details,
        )

    def _names(
        self, stage: LogisticStage | None, always: tuple[str, ...], level: str
    ) -> Sequence[str]:
        """The features to compute: all of them with ``all_evidence``, else what the
        named signals and the gate's stage read."""
        if self.all_evidence:
            return evidence.CHUNK_FEATURES if level == "chunk" else evidence.SET_FEATURES
        if stage is None:
            return always
        return tuple(dict.fromkeys([*always, *(term.feature for term in stage.terms)]))

    def _inputs(
        self,
        query: CheckedQuery,
        chunks: Sequence[Chunk],
        corpus_stats: CorpusStats | None,
        cfg: EvaluatorConfig,
    ) -> tuple[evidence.Inputs, sig.CoherenceParts | None]:
        """Analyse the query and the chunks: what every feature reads."""
        terms = self.analyzer.query_terms(query)
        coh = cfg.coherence
        sims = [
            similarity(
                chunk,
                cosine_floor=coh.cosine_floor,
                cosine_ceiling=coh.cosine_ceiling,
                bm25_saturation=coh.bm25_saturation,
            )
            for chunk in chunks
        ]
        parts = sig.coherence([s for s in sims if s is not None], coh)
        sources = [chunk.source_key for chunk in chunks]
        span = coh.cosine_ceiling - coh.cosine_floor
        sentence_sims = [
            None
            if chunk.sentence_score is None
            else min(1.0, max(0.0, (chunk.sentence_score - coh.cosine_floor) / span))
            for chunk in chunks
        ]
        inputs = evidence.Inputs(
            terms=terms,
            weights=self.term_weights(terms, corpus_stats, cfg),
            analysed=self._analyze(
                chunks, corpus_stats, () if terms.all_stop_words else terms.terms
            ),
            sims=sims,
            sources=sources,
            config=cfg,
            corpus_stats=corpus_stats,
            coherence=None if parts is None else parts.value,
            diversity=sig.diversity(sources),
            sentence_sims=sentence_sims,
        )
        return inputs, parts

    def refine(
        self,
        query: str,
        chunks: Sequence[Chunk],
        corpus_stats: CorpusStats | None = None,
        *,
        token_budget: int | None = None,
        threshold: float | None = None,
        config: EvaluatorConfig | str | None = None,
    ) -> Refinement:
        """Knowledge refinement with this evaluator's analyzer and config.

        See :func:`crag_heuristic.refinement.refine`.
        """
        cfg = self.config if config is None else load_config(config)
        return refine(
            query,
            chunks,
            corpus_stats=corpus_stats,
            analyzer=self.analyzer,
            config=cfg,
            token_budget=token_budget,
            threshold=threshold,
        )


# what the named signals and the linear gate read, computed for every evaluation
_CHUNK_ALWAYS = ("keyword_overlap", "similarity", "length_adequacy", "source_diversity")
_SET_ALWAYS = ("keyword_overlap", "length_adequacy", "source_diversity", "coherence")


class _Gate:
    """The stages that turn evidence into scores: a fitted model (or the fallback
    fitted without the evidence the input lacks), else the weighted signals."""

    __slots__ = (
        "chunk",
        "chunk_thresholds",
        "config",
        "fallback_for",
        "missing",
        "set",
        "thresholds",
    )

    def __init__(
        self,
        config: EvaluatorConfig,
        chunk: LogisticStage | None,
        set_: LogisticStage | None,
        thresholds: Thresholds,
        chunk_thresholds: Thresholds,
    ) -> None:
        self.config = config
        self.chunk = chunk
        self.set = set_
        self.thresholds = thresholds
        self.chunk_thresholds = chunk_thresholds
        self.missing: set[str] = set()
        self.fallback_for: tuple[str, ...] = ()

    @classmethod
    def select(cls, cfg: EvaluatorConfig, x: evidence.Inputs, notes: list[str]) -> _Gate:
        model_cfg = cfg.model
        if model_cfg is None:
            return cls(cfg, None, None, cfg.thresholds, cfg.effective_chunk_thresholds)
        lacking = set()
        if not x.present_sims():
            lacking.add("similarity")
        read = evidence.needs((t.feature for t in model_cfg.chunk.terms), "chunk")
        read |= evidence.needs((t.feature for t in model_cfg.set.terms), "set")
        if "sentences" in read and all(s is None for s in x.sentence_sims):
            lacking.add("sentences")
        if x.corpus_stats is None:
            lacking.add("corpus_stats")
        fallback = model_cfg.for_missing(frozenset(lacking)) if lacking else None
        if fallback is None:
            return cls(
                cfg, model_cfg.chunk, model_cfg.set, cfg.thresholds, cfg.effective_chunk_thresholds
            )
        notes.append(f"gate fitted without {' and '.join(fallback.missing).replace('_', ' ')} used")
        thresholds = fallback.thresholds or cfg.thresholds
        chunk_thresholds = (
            fallback.chunk_thresholds or fallback.thresholds or cfg.effective_chunk_thresholds
        )
        gate = cls(cfg, fallback.chunk, fallback.set, thresholds, chunk_thresholds)
        gate.fallback_for = fallback.missing
        return gate

    def grade_chunks(
        self, x: evidence.Inputs, rows: Sequence[evidence.Row]
    ) -> tuple[list[float], dict[str, float]]:
        """Each chunk's score, and the best chunk's contributions per feature."""
        if self.chunk is None:
            return [_linear_chunk_score(self.config, row) for row in rows], {}
        columns = {term.feature: x.chunk(term.feature) for term in self.chunk.terms}
        scores, absent = model.apply_columns(self.chunk, columns, len(rows))
        self.missing.update(absent)
        best = max(range(len(scores)), key=scores.__getitem__)  # the first on ties
        return scores, model.apply(self.chunk, rows[best])[1]

    def with_fixed(
        self,
        rows: Sequence[evidence.Row],
        scores: list[float],
        best_parts: dict[str, float],
        fixed: Mapping[int, float],
    ) -> tuple[list[float], dict[str, float]]:
        """``scores`` with the ``fixed`` ones (by position, from an outside grader) in
        place, and the best chunk's contributions (none when the best is a fixed one)."""
        if not fixed:
            return scores, best_parts
        before = max(range(len(scores)), key=scores.__getitem__)
        scores = [fixed.get(i, score) for i, score in enumerate(scores)]
        best = max(range(len(scores)), key=scores.__getitem__)  # the first on ties
        if best in fixed or self.chunk is None:
            return scores, {}
        return scores, best_parts if best == before else model.apply(self.chunk, rows[best])[1]

    def score_set(
        self,
        signals: Signals,
        features: evidence.Row,
        best_parts: dict[str, float],
        details: dict[str, Any],
    ) -> float:
        """The set's score; records how it was made in ``details``."""
        if self.set is None:
            score, details["weights_used"] = _weighted(signals, self.config)
            return score
        score, set_parts, absent = model.apply(self.set, features)
        self.missing.update(absent)
        details["model"] = {
            "set": set_parts,
            "set_by_signal": model.by_signal(set_parts, "set"),
            "best_chunk_by_signal": model.by_signal(best_parts),
            "missing": sorted(self.missing),
        }
        if self.missing:
            details["notes"].append(
                f"model features unavailable: {', '.join(sorted(self.missing))}"
            )
        return score


def _fixed_grades(
    chunks: Sequence[Chunk], grades: Mapping[str, float], notes: list[str]
) -> dict[int, float]:
    """``chunk_grades`` by position, checked; notes how many there are."""
    if not isinstance(grades, Mapping):
        raise InputError(f"chunk_grades must be a mapping id -> P(relevant), got {_short(grades)}")
    position = {chunk.id: i for i, chunk in enumerate(chunks)}
    fixed = {}
    for chunk_id, value in grades.items():
        if chunk_id not in position:
            raise InputError(
                f"chunk_grades names {_short(chunk_id)}, which is not among the chunks"
            )
        real = real_number(value)  # NumPy's numbers too: a model's answers often are
        if real is None or not 0.0 <= real <= 1.0:  # NaN fails this too
            raise InputError(
                f"chunk_grades[{_short(chunk_id)}] = {_short(value)}: must be a number in [0, 1]"
            )
        fixed[position[chunk_id]] = real
    if fixed:
        notes.append(f"{len(fixed)} chunk grade(s) from an outside grader")
    return fixed


def _linear_chunk_score(config: EvaluatorConfig, row: evidence.Row) -> float:
    """A chunk's weighted sum of its four signals; a missing similarity's weight
    is shared by the others (the same rule as :func:`_weighted`)."""
    w = config.weights
    rest = (
        w.keyword_overlap * (row["keyword_overlap"] or 0.0)
        + w.length_adequacy * (row["length_adequacy"] or 0.0)
        + w.source_diversity * (row["source_diversity"] or 0.0)
    )
    sim = row["similarity"]
    if sim is not None:
        score = rest + w.semantic_coherence * sim
    else:
        others = w.keyword_overlap + w.length_adequacy + w.source_diversity
        score = rest / others if others > 0 else 0.0
    return min(1.0, max(0.0, score))


def _weighted(signals: Signals, config: EvaluatorConfig) -> tuple[float, dict[str, float]]:
    """Weighted score over the available signals, weights renormalised to sum 1."""
    weights = config.weights.as_dict()
    values = signals.as_dict()
    present = {name: w for name, w in weights.items() if values[name] is not None}
    total = sum(present.values())
    if total <= 0:
        return 0.0, dict.fromkeys(weights, 0.0)
    used = {name: present.get(name, 0.0) / total for name in weights}
    score = sum(used[name] * (values[name] or 0.0) for name in present)
    return min(1.0, max(0.0, score)), used


def _empty_evaluation(config: EvaluatorConfig) -> Evaluation:
    signals = Signals(
        keyword_overlap=0.0, semantic_coherence=None, length_adequacy=0.0, source_diversity=0.0
    )
    return Evaluation(
        verdict=Verdict.IRRELEVANT,
        score=0.0,
        signals=signals,
        chunks=(),
        reasoning="irrelevant (0.00): no chunks were retrieved",
        profile=config.name,
        details={
            "notes": ["no chunks were retrieved"],
            "bands": {
                "relevant": config.thresholds.relevant,
                "partial": config.thresholds.partial,
                "fallback_for": [],
            },
        },
    )


def _notes(chunks: Sequence[Chunk], sims: Sequence[float | None], terms: QueryTerms) -> list[str]:
    notes = []
    if not terms.terms:
        notes.append("the query has no word tokens: keyword overlap is 0")
    elif terms.all_stop_words:
        notes.append("the query has only stop words: matched on those")
    kinds = sorted({chunk.score_kind.value for chunk in chunks})
    missing = [c.score_kind.value for c, s in zip(chunks, sims, strict=True) if s is None]
    if len(missing) == len(chunks):
        why = (
            "no chunk has a score"
            if all(c.score is None for c in chunks)
            else (f"scores of kind {', '.join(sorted(set(missing)))} carry no absolute similarity")
        )
        notes.append(f"semantic coherence unavailable: {why}; declare a ScoreKind such as cosine")
    elif missing:
        notes.append(f"{len(missing)} of {len(chunks)} chunks have no usable score")
    if len(kinds) > 1:
        notes.append(f"mixed score kinds ({', '.join(kinds)}): each converted by its own formula")
    return notes


def _moved(parts: Mapping[str, float]) -> str:
    """Contributions by signal, the largest first: ``keyword overlap +0.83, ...``."""
    labels = {**_SIGNAL_LABELS, "chunk_model": "best chunk"}
    return ", ".join(
        f"{labels.get(name, name)} {value:+.2f}"
        for name, value in sorted(parts.items(), key=lambda kv: -abs(kv[1]))
    )


def _reasoning(
    verdict: Verdict,
    score: float,
    signals: Signals,
    notes: list[str],
    model_details: Mapping[str, Any] | None = None,
) -> str:
    values = signals.as_dict()
    shown = ", ".join(
        f"{_SIGNAL_LABELS[name]} {value:.2f}" for name, value in values.items() if value is not None
    )
    present = {name: value for name, value in values.items() if value is not None}
    weakest = min(present, key=lambda name: present[name]) if present else None
    text = f"{verdict.value} ({score:.2f}): {shown}"
    if model_details is not None:
        decided = model_details.get("set_by_signal") or {}
        if decided:
            text += f"; set (logit parts): {_moved(decided)}"
        parts = model_details["best_chunk_by_signal"]
        if parts and (not decided or "chunk_model" in decided):  # the set reads the chunk stage
            text += f"; best chunk (logit parts): {_moved(parts)}"
    elif weakest is not None:
        text += f"; weakest: {_SIGNAL_LABELS[weakest]}"
    if notes:
        text += "; " + "; ".join(notes)
    return text
