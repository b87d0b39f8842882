"""Duplicate chunk ids and one document under two ids: de-duplicated and noted, never a
failed query.

A retriever may hand back one chunk id twice (a store holding two vectors of one
document, a user's own retriever); that is its fault, not the query's: the
best-ranked copy is kept and a note names the retriever. A store that keys its
documents by uuid and a lexical retriever keyed by the corpus's ids give one
document two ids: the fusion reconciles them by the digest of the text, so the
document appears once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from crag_heuristic import CRAG, Chunk, Evaluator, ScoreKind
from crag_heuristic._router.result import Strategy
from crag_heuristic.testing import ListRetriever, StaticExpander

QUERY = "How do honeybees communicate the distance to food?"


def chunk(i: int, score: float = 0.5, *, prefix: str = "c", kind: str = "cosine") -> Chunk:
    return Chunk(id=f"{prefix}{i}", text=f"bees dance number {i}", score=score, score_kind=kind)


def run_both(crag: CRAG, k: int = 5) -> list[Any]:
    return [crag.retrieve(QUERY, k), asyncio.run(crag.aretrieve(QUERY, k))]


class Doubling(ListRetriever):
    """A retriever that hands back its first chunk twice (the copy ranked lower)."""

    def search(self, query: str, k: int) -> list[Chunk]:
        found = super().search(query, k)
        return [*found[:2], found[0].replace(score=0.1), *found[2:]]


def test_duplicates_in_the_first_retrieval_are_dropped_and_named(
    always_relevant: Evaluator,
) -> None:
    first = [chunk(i, 0.9 - i / 10) for i in range(4)]
    for result in run_both(CRAG(Doubling(first), always_relevant, cache=False)):
        ids = [c.id for c in result.retrieved]
        assert ids == ["c0", "c1", "c2", "c3"]  # the best-ranked copy of c0 kept
        assert result.retrieved[0].score == pytest.approx(0.9)
        assert any(
            "Doubling returned 1 duplicate chunk id(s) ('c0')" in note for note in result.notes
        ), result.notes
        assert result.counts["retrieved"] == 4


def test_duplicates_from_a_re_retrieval_are_dropped_and_named(always_partial: Evaluator) -> None:
    first = ListRetriever([chunk(i, 0.9 - i / 10) for i in range(3)])
    lexical = Doubling([chunk(i, 9.0 - i, kind="bm25") for i in (2, 7, 8)])
    for result in run_both(CRAG(first, always_partial, lexical=lexical, cache=False)):
        assert result.strategy is Strategy.QUERY_EXPANSION  # not an InputError from the fusion
        ids = [c.id for c in result.chunks]
        assert len(ids) == len(set(ids)) and {"c7", "c8"} <= set(ids)
        assert any("Doubling returned 1 duplicate chunk id(s) ('c2')" in n for n in result.notes)


def test_one_document_under_two_ids_is_fused_once(always_partial: Evaluator) -> None:
    # the store keys documents by uuid, the lexical retriever by the corpus's ids
    store = [chunk(i, 0.9 - i / 10, prefix="uuid-") for i in range(4)]
    lexical = ListRetriever([chunk(i, 10.0 - i, kind="bm25") for i in (3, 1, 9)])
    for result in run_both(CRAG(ListRetriever(store), always_partial, lexical=lexical)):
        texts = [c.text for c in result.chunks]
        assert len(texts) == len(set(texts)), texts  # no document twice
        ids = [c.id for c in result.chunks]
        assert "c3" not in ids and "c1" not in ids  # known to the store by its own id
        assert "c9" in ids  # a document only the lexical retriever found keeps its id
        by_id = {c.id: c for c in result.chunks}
        assert by_id["uuid-3"].metadata["rrf_ranks"] == [4, 1]  # both rankings counted
        assert result.counts["reconciled"] == 2


def test_two_documents_with_one_text_in_the_store_are_not_merged(
    always_partial: Evaluator,
) -> None:
    same = [
        Chunk(id=f"s{i}", text="the same words", score=0.5, score_kind="cosine") for i in (1, 2)
    ]
    lexical = ListRetriever([Chunk(id="x", text="the same words", score=2.0, score_kind="bm25")])
    result = CRAG(ListRetriever(same), always_partial, lexical=lexical).retrieve(QUERY, 5)
    assert [c.id for c in result.chunks] == ["s1", "s2"]  # the store's own two ids stay


def test_retrievers_that_share_ids_are_not_reconciled(always_partial: Evaluator) -> None:
    # the lexical ranking names c1 as the store does: one id scheme, so "z", whose text
    # is c0's, is another document of the corpus (a duplicate text), not c0 again
    store = [chunk(0, 0.9), chunk(1, 0.8)]
    twin = Chunk(id="z", text=chunk(0).text, score=3.0, score_kind="bm25")
    lexical = ListRetriever([chunk(1, 4.0, kind="bm25"), twin])
    result = CRAG(ListRetriever(store), always_partial, lexical=lexical).retrieve(QUERY, 5)
    assert sorted(c.id for c in result.chunks) == ["c0", "c1", "z"]
    assert "reconciled" not in result.counts


def test_duplicates_from_an_expanded_query(always_partial: Evaluator) -> None:
    first = Doubling([chunk(i, 0.9 - i / 10) for i in range(3)])
    crag = CRAG(first, always_partial, expander=StaticExpander(["waggle"]), cache=False)
    result = crag.retrieve(QUERY, 5)
    assert result.strategy is Strategy.QUERY_EXPANSION
    assert [c.id for c in result.chunks] == ["c0", "c1", "c2"]
    duplicates = [n for n in result.notes if "duplicate chunk id" in n]
    assert len(duplicates) == 1, result.notes  # one note per retriever, not one per search


def test_scores_of_a_kind_are_unchanged_by_the_reconciliation(always_partial: Evaluator) -> None:
    store = [chunk(0, 0.8, prefix="u")]
    lexical = ListRetriever([chunk(0, 3.0, kind="bm25")])
    result = CRAG(ListRetriever(store), always_partial, lexical=lexical).retrieve(QUERY, 5)
    [fused] = result.chunks
    assert fused.id == "u0" and fused.score == 0.8 and fused.score_kind is ScoreKind.COSINE
