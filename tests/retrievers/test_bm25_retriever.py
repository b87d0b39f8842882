"""BM25Retriever: hand-computed Okapi scores, corpus statistics, errors."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from crag_heuristic import Chunk, InputError, ScoreKind
from crag_heuristic._retrievers.bm25 import BM25Retriever

CORPUS = [
    {"id": "d0", "text": "Solar panels make power."},
    {"id": "d1", "text": "Wind turbines make power."},
    {"id": "d2", "text": "Solar solar heat."},
]


def okapi(
    idf: float, tf: int, doc_len: int, avgdl: float, k1: float = 1.5, b: float = 0.75
) -> float:
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl))


def test_scores_by_hand() -> None:
    retriever = BM25Retriever(CORPUS)
    # analysed lengths: 4, 4, 3 -> avgdl 11/3; "heat" is in 1 of 3 docs
    idf_df1 = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # Lucene: ln(1 + 2.5/1.5) = 0.9808
    [hit] = retriever.search("heat", 3)
    assert hit.id == "d2" and hit.score_kind is ScoreKind.BM25
    assert hit.score == pytest.approx(okapi(idf_df1, 1, 3, 11 / 3))  # 0.5563
    # "panels" matches d0 only (stems: panel)
    [panel] = retriever.search("panel", 3)
    assert panel.id == "d0" and panel.score == pytest.approx(okapi(idf_df1, 1, 4, 11 / 3))
    # "solar" is in 2 of 3: idf ln(1 + 1.5/2.5); tf 2 in d2 beats tf 1 in d0
    ranked = retriever.search("solar", 3)
    assert [c.id for c in ranked] == ["d2", "d0"]
    assert ranked[0].score == pytest.approx(okapi(math.log(1 + 1.5 / 2.5), 2, 3, 11 / 3))


def test_lucene_idf_equals_the_evaluators() -> None:
    retriever = BM25Retriever(CORPUS)
    stats = retriever.corpus_stats()
    for term in ("solar", "heat", "power"):
        assert retriever.idf(term) == pytest.approx(stats.idf(term))


def test_rank_bm25_floors_negative_idf_at_epsilon_times_mean() -> None:
    # "solar" is in 2 of 3 docs: raw idf ln(1.5/2.5) < 0, floored to 0.25 * mean idf.
    # idfs: 4 terms with df 1 (+0.5108), 3 with df 2 (-0.5108) -> mean 0.5108 / 7
    retriever = BM25Retriever(CORPUS, variant="okapi")
    floor = 0.25 * (math.log(2.5 / 1.5) / 7)
    ranked = retriever.search("solar", 3)
    assert [c.id for c in ranked] == ["d2", "d0"]  # tf 2 beats tf 1
    assert ranked[0].score == pytest.approx(okapi(floor, 2, 3, 11 / 3))


def test_documents_without_any_query_term_are_not_returned() -> None:
    retriever = BM25Retriever(CORPUS)
    assert retriever.search("volcano", 3) == []
    assert retriever.search("the of and", 3) == []  # only stop words


def test_ties_keep_corpus_order() -> None:
    retriever = BM25Retriever(["alpha beta", "alpha gamma", "delta"])
    assert [c.id for c in retriever.search("alpha", 3)] == ["0", "1"]


def test_corpus_stats_match_the_evaluator_analyzer() -> None:
    stats = BM25Retriever(CORPUS).corpus_stats()
    assert stats.n_docs == 3
    assert (stats.df("solar"), stats.df("power"), stats.df("heat"), stats.df("the")) == (2, 2, 1, 0)
    assert stats.avg_doc_len == pytest.approx(11 / 3)


def test_chunks_and_strings_and_lookup() -> None:
    retriever = BM25Retriever([Chunk(id="x", text="kiwi fruit", source="f.md"), "banana bread"])
    assert retriever.search("kiwi", 1)[0].source == "f.md"
    banana = retriever.get("1")
    assert banana is not None and banana.text == "banana bread" and retriever.get("nope") is None
    assert len(retriever) == 2


def test_plus_variant_and_async() -> None:
    retriever = BM25Retriever(CORPUS, variant="plus")
    assert asyncio.run(retriever.asearch("heat", 2)) == retriever.search("heat", 2)


@pytest.mark.parametrize(
    ("documents", "kwargs", "message"),
    [
        ([], {}, "at least one"),
        ("text", {}, "sequence"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], {}, "duplicate"),
        (CORPUS, {"variant": "bm42"}, "variant"),
        (CORPUS, {"b": 2.0}, "0 <= b <= 1"),
    ],
)
def test_bad_arguments(documents: object, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        BM25Retriever(documents, **kwargs)  # type: ignore[arg-type]
