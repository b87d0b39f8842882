"""What a person reads: the notes of a result and the `retrieve --pretty` table.

The notes tell one story (no contradiction between "the original chunks are
kept" and "trying query expansion instead"), and the table's order matches
the column it labels: after fusion, the fused (RRF) score.
"""

from __future__ import annotations

from typing import Any

from crag_heuristic import CRAG, Evaluator, Strategy, WebSearchTimeout
from crag_heuristic._cli.retrieve import render_table
from crag_heuristic.testing import RecordingWebSearcher, StaticExpander

QUERY = "How do honeybees communicate the distance to food?"


def test_no_web_then_expansion_reads_as_one_story(
    retriever: Any, bm25: Any, always_irrelevant: Evaluator
) -> None:
    crag = CRAG(retriever, always_irrelevant, lexical=bm25, expander=StaticExpander(["waggle"]))
    result = crag.retrieve(QUERY, 5)
    assert result.strategy is Strategy.QUERY_EXPANSION
    assert "no web searcher configured: trying query expansion instead" in result.notes
    assert not any("kept" in note for note in result.notes), result.notes


def test_a_failed_web_search_then_expansion(
    retriever: Any, bm25: Any, always_irrelevant: Evaluator
) -> None:
    web = RecordingWebSearcher(error=WebSearchTimeout("down"))
    crag = CRAG(retriever, always_irrelevant, web=web, lexical=bm25, expander=StaticExpander(["x"]))
    notes = crag.retrieve(QUERY, 5).notes
    assert "the web search failed: trying query expansion instead" in notes
    assert not any("kept" in note for note in notes), notes


def test_no_web_and_nothing_to_expand_keeps_the_chunks(
    retriever: Any, always_irrelevant: Evaluator
) -> None:
    result = CRAG(retriever, always_irrelevant, expander=False).retrieve(QUERY, 5)
    assert result.chunks == result.retrieved
    assert result.notes == ("no web searcher configured: the original chunks are kept",)


def test_web_found_nothing_and_nothing_to_expand(
    retriever: Any, always_irrelevant: Evaluator
) -> None:
    crag = CRAG(retriever, always_irrelevant, web=RecordingWebSearcher([]), expander=False)
    assert crag.retrieve(QUERY, 5).notes == (
        "the web search found nothing: the original chunks are kept",
    )


def _rows(table: str) -> list[str]:
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("#"))
    return lines[start + 1 :]


def test_the_table_after_fusion_is_ordered_by_the_column_it_labels(
    retriever: Any, bm25: Any, always_partial: Evaluator
) -> None:
    crag = CRAG(retriever, always_partial, lexical=bm25, expander=StaticExpander(["waggle dance"]))
    result = crag.retrieve(QUERY, 5)
    assert result.strategy is Strategy.QUERY_EXPANSION
    table = render_table(result)
    header = next(line for line in table.splitlines() if line.lstrip().startswith("#"))
    assert "rrf" in header
    assert "order      fused ranking (RRF)" in table
    rrf_column = header.index("rrf")
    values = [float(row[rrf_column - 3 : rrf_column + 3]) for row in _rows(table)]
    assert len(values) == 5 and values == sorted(values, reverse=True)
    expected = [round(c.metadata["rrf_score"], 4) for c in result.chunks]
    assert values == expected


def test_the_table_without_fusion_says_whose_order_it_is(
    retriever: Any, always_relevant: Evaluator
) -> None:
    result = CRAG(retriever, always_relevant).retrieve(QUERY, 3)
    table = render_table(result)
    assert "order      the retriever's ranking" in table
    header = next(line for line in table.splitlines() if line.lstrip().startswith("#"))
    assert "rrf" not in header and "score" in header
