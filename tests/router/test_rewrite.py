from __future__ import annotations

import pytest

from crag_heuristic import InvalidQueryError
from crag_heuristic.text import CorpusStats
from crag_heuristic.web import keyword_query


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "Can you please tell me how bees communicate the location of flowers?",
            "bees communicate location flowers",
        ),
        ("cells and cell walls", "cells walls"),  # one surface form per stem
        ('what is "myocardial infarction"?', '"myocardial infarction"'),
        ("what is it?", "what is it?"),  # nothing survives: the query itself
        ("Vitamin D levels in 2020", "Vitamin levels 2020"),  # single letters go, digits stay
    ],
)
def test_keyword_query(query: str, expected: str) -> None:
    assert keyword_query(query) == expected


def test_salience_by_idf_keeps_rare_terms_in_query_order() -> None:
    stats = CorpusStats(
        n_docs=100, doc_freq={"common": 90, "rare": 1, "medium": 20, "frequent": 80}
    )
    query = "common rare medium frequent"
    assert keyword_query(query, corpus_stats=stats, max_terms=2) == "rare medium"
    # without statistics, the longest words win
    assert keyword_query(query, max_terms=2) == "common frequent"  # 8 letters, then 6 (first)


def test_blank_query() -> None:
    with pytest.raises(InvalidQueryError):
        keyword_query("  ")
