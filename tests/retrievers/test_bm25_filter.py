"""BM25Retriever.with_filter: a view that searches one tenant's documents, and the
LangChain metadata filter it reads (the form LangChain's FAISS store takes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crag_heuristic import BM25Retriever, Chunk, InputError
from crag_heuristic._retrievers.scope import metadata_filter, scope_of, search_scope

DOCS = [
    Chunk(id="a1", text="solar panels on roofs", metadata={"tenant": "a", "year": 2020}),
    Chunk(id="b1", text="solar panels in fields", metadata={"tenant": "b", "year": 2021}),
    Chunk(id="a2", text="wind turbines and solar", metadata={"tenant": "a", "year": 2022}),
    Chunk(id="c1", text="solar farms at sea", metadata={"year": 2023}),
]


@pytest.mark.parametrize(
    ("where", "admitted"),
    [
        ({"tenant": "a"}, ["a1", "a2"]),
        ({"tenant": ["a", "b"]}, ["a1", "b1", "a2"]),  # a list: one of
        ({"tenant": {"$eq": "b"}}, ["b1"]),
        ({"tenant": {"$neq": "a"}}, ["b1", "c1"]),  # no field: None, not "a"
        ({"year": {"$gt": 2021}}, ["a2", "c1"]),  # > not >=
        ({"year": {"$gte": 2021}}, ["b1", "a2", "c1"]),
        ({"year": {"$lt": 2021}}, ["a1"]),
        ({"year": {"$lte": 2021}}, ["a1", "b1"]),
        ({"year": {"$gt": 2020, "$lt": 2023}}, ["b1", "a2"]),  # every operator must hold
        ({"tenant": {"$in": ["b"]}}, ["b1"]),
        ({"tenant": {"$nin": ["a"]}}, ["b1", "c1"]),
        ({"tenant": {"$gt": 1}}, []),  # a comparison that cannot be made: no match
        ({"$and": [{"tenant": "a"}, {"year": {"$gt": 2020}}]}, ["a2"]),
        ({"$or": [{"tenant": "b"}, {"year": 2023}]}, ["b1", "c1"]),
        ({"$not": {"tenant": "a"}}, ["b1", "c1"]),
        ({"tenant": "a", "year": 2022}, ["a2"]),  # fields: all of them
        ({}, ["a1", "b1", "a2", "c1"]),
    ],
)
def test_metadata_filters_as_langchain_faiss_reads_them(where: Any, admitted: list[str]) -> None:
    matches = metadata_filter(where)
    assert [d.id for d in DOCS if matches(d.metadata)] == admitted


def test_bad_filters_are_refused() -> None:
    for where, message in (
        ({"tenant": {"$like": "a"}}, "unknown filter operator '\\$like' for field 'tenant'"),
        ({"$xor": []}, "unknown filter operator '\\$xor'"),
        ({"$and": {"tenant": "a"}}, "\\$and takes a list of filters"),
        (["tenant"], "a metadata filter is a mapping"),
    ):
        with pytest.raises(InputError, match=message):
            metadata_filter(where)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="where must be a metadata filter"):
        BM25Retriever(DOCS).with_filter(42)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="the filter raised KeyError on document 'c1'"):
        BM25Retriever(DOCS).with_filter(lambda chunk: chunk.metadata["tenant"] == "a")


def test_a_view_searches_its_tenant_only() -> None:
    whole = BM25Retriever(DOCS)
    tenant = whole.with_filter({"tenant": "a"})
    assert [c.id for c in whole.search("solar", 10)] == ["a1", "b1", "a2", "c1"]
    assert [c.id for c in tenant.search("solar", 10)] == ["a1", "a2"]
    # the same scores for the documents it admits (the whole corpus's weights), 0 elsewhere
    full, view = whole.scores("solar panels"), tenant.scores("solar panels")
    assert view.tolist() == [full[0], 0.0, full[2], 0.0]
    assert tenant.corpus_stats() is whole.corpus_stats()
    assert len(whole) == 4 and len(tenant) == 2
    assert tenant.get("a1") is whole.get("a1") and tenant.get("b1") is None
    assert whole.scope is None and scope_of(whole) is None
    assert tenant.scope is not None and tenant.scope.startswith("filter #")
    assert "tenant" not in tenant.scope and "'a'" not in tenant.scope  # never the values


def test_a_view_of_a_view_admits_what_both_admit_and_predicates_see_the_chunk() -> None:
    ids = {"a2", "b1"}
    both = BM25Retriever(DOCS).with_filter({"tenant": "a"}).with_filter(lambda c: c.id in ids)
    assert [c.id for c in both.search("solar", 10)] == ["a2"]
    assert both.scope is not None and " and filter <" in both.scope
    assert len(both) == 1


def test_the_rank_bm25_backend_filters_the_same() -> None:
    pytest.importorskip("rank_bm25")
    view = BM25Retriever(DOCS, backend="rank-bm25", variant="plus").with_filter({"tenant": "b"})
    assert [c.id for c in view.search("solar", 10)] == ["b1"]  # BM25+ gives every doc > 0
    assert np.count_nonzero(view.scores("solar")) == 1


def test_search_scope_names_the_keys_not_the_values() -> None:
    assert search_scope({"fetch_k": 20}) is None
    assert search_scope({"filter": None}) is None
    scope = search_scope({"filter": {"tenant": "a"}, "namespace": "acme"})
    assert scope is not None and scope.startswith("search_kwargs filter=#")
    assert ", namespace=#" in scope and "acme" not in scope
    assert search_scope({"filter": {"tenant": "a"}}) == search_scope({"filter": {"tenant": "a"}})
    assert search_scope({"filter": {"tenant": "a"}}) != search_scope({"filter": {"tenant": "b"}})


class Declares:
    def __init__(self, scope: Any) -> None:
        self.scope = scope


def test_scope_of_reads_a_non_empty_string_only() -> None:
    assert scope_of(Declares("tenant a")) == "tenant a"
    for nothing in (None, "", 1, object()):
        assert scope_of(Declares(nothing)) is None
    assert scope_of(object()) is None
