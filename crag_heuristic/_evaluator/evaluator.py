"""The evaluator: four signals -> weighted score -> verdict, for a set and per chunk.

Pure Python, no model, no network: the cost is tokenising the chunks (cached
per chunk id and text) and a few passes over at most ``k`` numbers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from .._checks import check_query
from .._config import EvaluatorConfig, Thresholds, load_config
from .._corpus import CorpusStats
from .._exceptions import InputError
from .._scores import similarity
from .._text import Analyzer, QueryTerms, TextStats
from .._types import Chunk, ChunkEvaluation, Evaluation, Signals, Verdict, check_chunks
from . import features as feat
from . import model
from . import signals as sig
from .refine import Refinement, refine

__all__ = ["Evaluator", "verdict_for"]

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

    def get(self, key: Any) -> TextStats | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Any, value: TextStats) -> None:
        if self._size <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class Evaluator:
    """Grades retrieved chunks against a query without a model.

    Args:
        config: an :class:`EvaluatorConfig`, a profile name, a dict or a
            config file path; ``None`` for the default profile (:data:`DEFAULT_PROFILE`,
            the same as ``EvaluatorConfig()``).
        analyzer: the text analyzer (tokeniser, stop words, stemmer).
        cache_size: how many analysed chunks to keep, keyed by (id, text);
            0 disables the cache.

    An evaluator is thread-safe and keeps no state between calls except the
    analysis cache, which never changes a result.
    """

    def __init__(
        self,
        config: EvaluatorConfig | str | Any = None,
        *,
        analyzer: Analyzer | None = None,
        cache_size: int = 4096,
    ) -> None:
        self.config = load_config(config)
        self.analyzer = analyzer or Analyzer()
        self._cache = _LRU(cache_size)
        self._fingerprint = (self.config, self.config.fingerprint())

    def __repr__(self) -> str:
        return f"Evaluator(config={self.config.name!r}, analyzer={self.analyzer!r})"

    @property
    def fingerprint(self) -> str:
        """``config.fingerprint()``, computed once per configuration object (a digest
        of the whole configuration costs more than an evaluation)."""
        config, digest = self._fingerprint
        if config is not self.config:  # the attribute was reassigned
            digest = self.config.fingerprint()
            self._fingerprint = (self.config, digest)
        return digest

    def clear_cache(self) -> None:
        """Forget the analysed chunks (for cold-start measurements)."""
        self._cache.clear()

    def analyze_chunk(self, chunk: Chunk) -> TextStats:
        """The chunk's terms and token count, cached by (id, text)."""
        key = (chunk.id, chunk.text)
        stats = self._cache.get(key)
        if stats is None:
            stats = self.analyzer.analyze(chunk.text)
            self._cache.put(key, stats)
        return stats

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
    ) -> Evaluation:
        """Grade ``chunks`` (one retrieval result) against ``query``.

        Args:
            query: the user's query (non-blank string).
            chunks: the retrieved chunks, best first, with unique ids.
            corpus_stats: document frequencies for IDF weighting, if known.
            config: overrides this evaluator's configuration for this call.

        Returns:
            The set's verdict and score, each signal, per-chunk grades and a
            short reasoning. No chunks give IRRELEVANT with score 0. Signals
            that cannot be computed are ``None`` and their weight is shared
            among the others (the reasoning says which and why).

        Raises:
            InvalidQueryError: blank or non-string query.
            InvalidChunkError: an element is not a Chunk, or ids repeat.
        """
        check_query(query)
        check_chunks(chunks)
        if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
            raise InputError(
                f"corpus_stats must be a CorpusStats or None, got {type(corpus_stats).__name__}"
            )
        cfg = self.config if config is None else load_config(config)
        if not chunks:
            return _empty_evaluation(cfg)

        terms = self.analyzer.query_terms(query)
        weights = self.term_weights(terms, corpus_stats, cfg)
        analysed = [self.analyze_chunk(chunk) for chunk in chunks]
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

        # per chunk
        chunk_kw = [sig.keyword_overlap(terms.terms, weights, a.match_set(terms)) for a in analysed]
        chunk_len = [sig.length_adequacy(a.n_tokens, cfg.length) for a in analysed]
        set_div, chunk_div = sig.diversity(chunk.source_key for chunk in chunks)
        kw_cfg = cfg.keyword
        avgdl = (corpus_stats.avg_doc_len if corpus_stats is not None else None) or (
            sum(a.n_terms for a in analysed) / len(analysed)
        )
        chunk_bm25 = [
            feat.bm25_norm(terms, weights, a, avgdl, kw_cfg.bm25_k1, kw_cfg.bm25_b)
            for a in analysed
        ]
        rows = feat.chunk_rows(chunk_kw, chunk_bm25, sims, chunk_len, chunk_div)

        # the set's named signals
        if kw_cfg.aggregate == "best":
            set_kw = max(chunk_kw)
        else:
            pooled = frozenset().union(*(a.match_set(terms) for a in analysed))
            set_kw = sig.keyword_overlap(terms.terms, weights, pooled)
        available = [s for s in sims if s is not None]
        parts = sig.coherence(available, coh)
        signals = Signals(
            keyword_overlap=set_kw,
            semantic_coherence=None if parts is None else parts.value,
            length_adequacy=sum(chunk_len) / len(chunk_len),
            source_diversity=set_div,
        )

        notes = _notes(chunks, sims, terms)
        details: dict[str, Any] = {
            "query_terms": list(terms.terms),
            "all_stop_words": terms.all_stop_words,
            "idf_weighted": corpus_stats is not None and cfg.keyword.use_idf,
            "coherence": None if parts is None else parts.as_dict(),
            "score_kinds": sorted({chunk.score_kind.value for chunk in chunks}),
            "notes": notes,
        }
        missing: set[str] = set()
        best_parts: dict[str, float] = {}
        if cfg.model is None:
            chunk_scores = [_linear_chunk_score(cfg, row) for row in rows]
        else:
            chunk_scores = []
            best = -1.0
            for row in rows:
                prob, chunk_parts, absent = model.apply(cfg.model.chunk, row)
                missing.update(absent)
                if prob > best:
                    best, best_parts = prob, chunk_parts
                chunk_scores.append(prob)
        set_features = feat.set_row(
            rows, sims, chunk_scores, keyword=set_kw, coherence=signals.semantic_coherence,
            length=signals.length_adequacy or 0.0, diversity=set_div,
        )  # fmt: skip
        details["features"] = set_features
        if cfg.model is None:
            score, details["weights_used"] = _weighted(signals, cfg)
        else:
            score, set_parts, absent = model.apply(cfg.model.set, set_features)
            missing.update(absent)
            details["model"] = {
                "set": set_parts,
                "best_chunk_by_signal": model.by_signal(best_parts),
                "missing": sorted(missing),
            }
            if missing:
                notes.append(f"model features unavailable: {', '.join(sorted(missing))}")
        verdict = verdict_for(score, cfg.thresholds)
        chunk_thresholds = cfg.effective_chunk_thresholds
        grades = tuple(
            ChunkEvaluation(
                chunk_id=chunk.id,
                score=chunk_scores[i],
                verdict=verdict_for(chunk_scores[i], chunk_thresholds),
                signals=Signals(chunk_kw[i], sims[i], chunk_len[i], chunk_div[i]),
                similarity=sims[i],
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


def _linear_chunk_score(config: EvaluatorConfig, row: feat.Row) -> float:
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
        details={"notes": ["no chunks were retrieved"]},
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
        parts = model_details["best_chunk_by_signal"]
        if parts:
            moved = ", ".join(
                f"{_SIGNAL_LABELS.get(name, name)} {value:+.2f}"
                for name, value in sorted(parts.items(), key=lambda kv: -abs(kv[1]))
            )
            text += f"; best chunk (logit parts): {moved}"
    elif weakest is not None:
        text += f"; weakest: {_SIGNAL_LABELS[weakest]}"
    if notes:
        text += "; " + "; ".join(notes)
    return text
