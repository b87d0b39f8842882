"""Knowledge refinement: decompose chunks into strips, keep the relevant, recompose.

The "decompose-then-recompose" step of Corrective RAG (Yan et al., 2024,
section 4.4): each chunk is split into sentence strips; each strip is scored
against the query; the strips scoring at least a threshold are kept, within a
token budget, and put back together in their original order.

A strip's score is its keyword overlap with the query (IDF-weighted when
corpus statistics are given). When more strips pass than the budget holds,
the highest-scoring win (ties: earlier first); a strip that does not fit is
skipped and smaller ones may still fill the budget. The output keeps the
input order of chunks and of strips within a chunk.

The budget is a budget: when no strip is kept (none passes the threshold, or
none that passes fits), the chunks are **cut to fit** instead
(:attr:`Refinement.cut`): their strips in input order, chunk by chunk, whole
while they fit; the first that does not fit is cut to the words that do, and
nothing after it is sent. The refined text never holds more estimated tokens
than the budget (a budget too small for the first word sends nothing).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import _signals as sig
from .._checks import check_query
from .._config import EvaluatorConfig, _check_number
from .._exceptions import InputError
from .._text.analyzer import Analyzer, split_sentences
from .._text.corpus import CorpusStats
from .._types import Chunk, check_chunks


@dataclass(frozen=True, slots=True)
class Strip:
    """One sentence strip of a chunk.

    Attributes:
        chunk_id: the chunk it comes from.
        index: its position among that chunk's strips (from 0).
        text: the sentence.
        score: keyword overlap with the query, in [0, 1].
        tokens: estimated tokens.
        kept: whether it made it into the refined text (when the chunks were
            cut to fit, the last one kept may be there in part).
    """

    chunk_id: str
    index: int
    text: str
    score: float
    tokens: float
    kept: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "index": self.index,
            "text": self.text,
            "score": self.score,
            "tokens": self.tokens,
            "kept": self.kept,
        }


@dataclass(frozen=True, slots=True)
class Refinement:
    """The outcome of knowledge refinement.

    Attributes:
        strips: every strip, kept or not, in input order.
        chunks: one chunk per input chunk that kept a strip: same id, score,
            source and parent, text made of its kept strips, and
            ``metadata["refined_strips"]`` listing their indices.
        text: the kept strips joined by spaces (the generator's context).
        tokens: estimated tokens of ``text``, at most ``token_budget``.
        token_budget: the budget used.
        threshold: the strip threshold used.
        cut: no strip was kept on its score, so ``text`` and ``chunks`` are
            the chunks' beginning, cut to the budget (the module doc).
    """

    strips: tuple[Strip, ...]
    chunks: tuple[Chunk, ...]
    text: str
    tokens: float
    token_budget: int
    threshold: float
    cut: bool = False

    @property
    def kept(self) -> tuple[Strip, ...]:
        """The kept strips, in order."""
        return tuple(strip for strip in self.strips if strip.kept)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tokens": self.tokens,
            "token_budget": self.token_budget,
            "threshold": self.threshold,
            "cut": self.cut,
            "strips": [strip.to_dict() for strip in self.strips],
            "chunks": [chunk.to_dict() for chunk in self.chunks],
        }


def refine(
    query: str,
    chunks: Sequence[Chunk],
    *,
    corpus_stats: CorpusStats | None = None,
    analyzer: Analyzer | None = None,
    config: EvaluatorConfig | None = None,
    token_budget: int | None = None,
    threshold: float | None = None,
) -> Refinement:
    """Keep the sentence strips of ``chunks`` that bear on ``query``.

    Args:
        query: the query (non-blank string).
        chunks: chunks to refine, in the order they should appear.
        corpus_stats: document frequencies for IDF weights, if known.
        analyzer: the analyzer; a default one if omitted.
        config: supplies ``refine.strip_threshold``, ``refine.token_budget``
            and ``length.tokens_per_word`` (defaults if omitted).
        token_budget: overrides ``config.refine.token_budget``.
        threshold: overrides ``config.refine.strip_threshold``.

    Returns:
        A :class:`Refinement` whose text holds at most ``token_budget``
        estimated tokens. When no strip is kept on its score, the chunks are
        cut to fit and ``cut`` is true (the module doc).

    Raises:
        InvalidQueryError, InvalidChunkError: bad input.
        ConfigError: a budget or threshold out of range.
    """
    check_query(query)
    check_chunks(chunks)
    if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
        raise InputError(
            f"corpus_stats must be a CorpusStats or None, got {type(corpus_stats).__name__}"
        )
    if analyzer is not None and not isinstance(analyzer, Analyzer):
        raise InputError(f"analyzer must be an Analyzer or None, got {type(analyzer).__name__}")
    if config is not None and not isinstance(config, EvaluatorConfig):
        raise InputError(f"config must be an EvaluatorConfig or None, got {type(config).__name__}")
    cfg = config or EvaluatorConfig()
    budget = cfg.refine.token_budget if token_budget is None else token_budget
    cut = cfg.refine.strip_threshold if threshold is None else threshold
    _check_number("refine.token_budget", budget, low=1, integer=True)
    _check_number("refine.strip_threshold", cut, low=0.0, high=1.0)
    analyzer = analyzer or Analyzer()
    terms = analyzer.query_terms(query)
    use_idf = corpus_stats is not None and cfg.keyword.use_idf
    weights = [corpus_stats.idf(t) if use_idf else 1.0 for t in terms.terms]  # type: ignore[union-attr]
    per_word = cfg.length.tokens_per_word

    candidates: list[tuple[int, int, str, float, float]] = []
    for c_index, chunk in enumerate(chunks):
        for s_index, sentence in enumerate(split_sentences(chunk.text)):
            stats = analyzer.analyze(sentence)
            score = sig.keyword_overlap(terms.terms, weights, stats.match_set(terms))
            candidates.append((c_index, s_index, sentence, score, stats.n_tokens * per_word))

    # Greedy by score (ties: input order), skipping strips that do not fit.
    # A threshold of 0 keeps everything that fits; otherwise a strip must match something.
    passing = [
        i for i, cand in enumerate(candidates) if cut == 0 or (cand[3] >= cut and cand[3] > 0)
    ]
    order = sorted(passing, key=lambda i: (-candidates[i][3], i))
    sent: dict[int, tuple[str, float]] = {}  # candidate -> (the text sent, its tokens)
    used = 0.0
    for i in order:
        tokens = candidates[i][4]
        if used + tokens <= budget:
            sent[i] = (candidates[i][2], tokens)
            used += tokens
    cut_to_fit = not sent
    if cut_to_fit:  # the chunks' beginning, cut to the budget
        used = 0.0
        for i, (_, _, text, _, tokens) in enumerate(candidates):
            if used + tokens <= budget:
                sent[i] = (text, tokens)
                used += tokens
                continue
            head = _head(text, budget - used, analyzer, per_word)
            if head is not None:
                sent[i] = head
            break

    strips = tuple(
        Strip(
            chunk_id=chunks[c].id,
            index=s,
            text=text,
            score=score,
            tokens=tokens,
            kept=i in sent,
        )
        for i, (c, s, text, score, tokens) in enumerate(candidates)
    )
    by_chunk: dict[str, list[tuple[int, str]]] = {}
    for i in sorted(sent):
        by_chunk.setdefault(strips[i].chunk_id, []).append((strips[i].index, sent[i][0]))
    refined = []
    for chunk in chunks:
        mine = by_chunk.get(chunk.id)
        if mine:
            metadata = {**chunk.metadata, "refined_strips": [index for index, _ in mine]}
            text = " ".join(part for _, part in mine)
            refined.append(chunk.replace(text=text, metadata=metadata))
    return Refinement(
        strips=strips,
        chunks=tuple(refined),
        text=" ".join(sent[i][0] for i in sorted(sent)),
        tokens=sum(tokens for _, tokens in sent.values()),
        token_budget=budget,
        threshold=float(cut),
        cut=cut_to_fit,
    )


_WORD_END = re.compile(r"\S+")


def _head(text: str, room: float, analyzer: Analyzer, per_word: float) -> tuple[str, float] | None:
    """The longest beginning of ``text``, in whole words, whose estimated tokens fit
    ``room``, with those tokens; ``None`` when not even its first word fits."""
    ends = [match.end() for match in _WORD_END.finditer(text)]

    def tokens(n: int) -> float:
        return analyzer.analyze(text[: ends[n - 1]]).n_tokens * per_word

    low, high = 0, len(ends)  # tokens(low) fits (0 words: none); find the largest that does
    while low < high:
        middle = (low + high + 1) // 2
        if tokens(middle) <= room:
            low = middle
        else:
            high = middle - 1
    return None if low == 0 else (text[: ends[low - 1]], tokens(low))
