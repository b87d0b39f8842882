"""Every signal against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest

from crag_heuristic import _signals as sig
from crag_heuristic._config import CoherenceConfig, LengthConfig
from crag_heuristic.text import CorpusStats


def test_keyword_overlap_uniform() -> None:
    # 2 of 3 query terms present
    assert sig.keyword_overlap(
        ["a", "b", "c"], [1, 1, 1], frozenset({"a", "c", "z"})
    ) == pytest.approx(2 / 3)


def test_keyword_overlap_weighted() -> None:
    # weights 3, 1: only the heavy term present -> 3 / 4
    assert sig.keyword_overlap(["rare", "common"], [3.0, 1.0], {"rare"}) == pytest.approx(0.75)


def test_keyword_overlap_without_terms_is_zero() -> None:
    assert sig.keyword_overlap([], [], {"x"}) == 0.0


def test_bm25_idf_by_hand() -> None:
    stats = CorpusStats(n_docs=10, doc_freq={"solar": 1, "panel": 4, "effici": 9})
    # ln(1 + (N - df + 0.5) / (df + 0.5))
    assert stats.idf("solar") == pytest.approx(math.log(1 + 9.5 / 1.5))  # 1.99243
    assert stats.idf("panel") == pytest.approx(math.log(1 + 6.5 / 4.5))  # 0.89382
    assert stats.idf("effici") == pytest.approx(math.log(1 + 1.5 / 9.5))  # 0.14660
    assert stats.idf("unseen") == pytest.approx(math.log(2 * 10 + 2))


def test_corpus_stats_from_texts_counts_documents_not_occurrences() -> None:
    stats = CorpusStats.from_texts(["cats cats cats", "a cat and a dog", "dogs"])
    assert stats.n_docs == 3
    assert stats.df("cat") == 2 and stats.df("dog") == 2 and stats.df("and") == 0
    assert stats.avg_doc_len == pytest.approx(
        (3 + 2 + 1) / 3
    )  # content terms: a, and are stop words
    assert (
        stats.fingerprint()
        == CorpusStats.from_texts(["cats cats cats", "a cat and a dog", "dogs"]).fingerprint()
    )


def test_coherence_default_is_mean_times_one_minus_variance() -> None:
    parts = sig.coherence([0.8, 0.4], CoherenceConfig())
    assert parts is not None
    # mean 0.6; variance ((0.2)^2 + (0.2)^2) / 2 = 0.04; 0.6 * 0.96
    assert parts.mean == pytest.approx(0.6)
    assert parts.variance == pytest.approx(0.04)
    assert parts.value == pytest.approx(0.576)
    assert parts.top == pytest.approx(0.8)
    assert parts.gap == pytest.approx(0.4)


def test_coherence_variance_penalty_is_capped() -> None:
    # variance of [1, 0] is 0.25; cap 0.1 -> 0.5 * 0.9
    parts = sig.coherence([1.0, 0.0], CoherenceConfig(variance_cap=0.1))
    assert parts is not None and parts.value == pytest.approx(0.45)


def test_coherence_with_top_and_gap_weights() -> None:
    # s = [0.9, 0.7, 0.5, 0.3]: mean 0.6, top 0.9, tail [0.5, 0.3] -> gap 0.5
    # variance = (0.09 + 0.01 + 0.01 + 0.09) / 4 = 0.05
    # level = (1*0.6 + 2*0.9 + 1*0.5) / 4 = 0.725; value = 0.725 * 0.95
    parts = sig.coherence([0.5, 0.9, 0.3, 0.7], CoherenceConfig(mean=1, top=2, gap=1))
    assert parts is not None
    assert parts.gap == pytest.approx(0.5)
    assert parts.value == pytest.approx(0.725 * 0.95)


def test_coherence_of_one_score_has_no_gap_or_variance() -> None:
    parts = sig.coherence([0.7], CoherenceConfig())
    assert parts is not None and (parts.value, parts.gap, parts.variance) == (0.7, 0.0, 0.0)


def test_coherence_of_nothing_is_none() -> None:
    assert sig.coherence([], CoherenceConfig()) is None


def test_length_adequacy() -> None:
    config = LengthConfig(min_tokens=100, tokens_per_word=1.3)
    assert sig.length_adequacy(50, config) == pytest.approx(0.65)
    assert sig.length_adequacy(200, config) == 1.0
    assert sig.length_adequacy(0, config) == 0.0


def test_diversity() -> None:
    overall, each = sig.diversity(["a", "a", "b", "c"])
    assert overall == pytest.approx(3 / 4)
    assert each == pytest.approx([0.5, 0.5, 1.0, 1.0])
    assert sig.diversity([]) == (0.0, [])
