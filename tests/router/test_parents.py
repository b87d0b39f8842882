"""Parent expansion on a small corpus the tests build: sections split into sentence
chunks in a real FAISS index (LSA vectors), each chunk knowing its section."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import faiss
import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    ConfigError,
    Evaluator,
    EvaluatorConfig,
    FaissRetriever,
    InputError,
    RouterConfig,
    Verdict,
)
from crag_heuristic._router.parents import parent_chunk
from crag_heuristic.sample import LsaEmbedder

SECTIONS = {
    "bees": [
        "A forager bee returns to the hive after finding nectar.",
        "She performs a waggle dance on the comb for the other workers.",
        "The angle of the dance gives the direction of the flowers from the sun.",
        "The length of the waggle run tells the distance to the food.",
    ],
    "engine": [
        "A petrol engine burns fuel inside its cylinders.",
        "The piston moves down to draw in air and fuel.",
        "The spark plug ignites the compressed mixture.",
        "Exhaust gases leave through the exhaust valve.",
    ],
    "bread": [
        "Bread dough is made of flour, water, salt and yeast.",
        "Kneading develops the gluten that traps gas.",
        "The dough rises while the yeast ferments sugars.",
        "Baking sets the crumb and browns the crust.",
    ],
    "tides": [
        "Tides are caused mainly by the pull of the moon.",
        "The sun adds a smaller pull of its own.",
        "Spring tides come when sun and moon line up.",
        "Neap tides come when they pull at right angles.",
    ],
}
QUERY = "How does the waggle dance tell bees the distance and direction to food?"
PARENTS = {name: " ".join(sentences) for name, sentences in SECTIONS.items()}
CHUNKS = [
    Chunk(id=f"{name}-{i}", text=text, source=f"{name}.md", parent_id=name)
    for name, sentences in SECTIONS.items()
    for i, text in enumerate(sentences)
]


@pytest.fixture(scope="module")
def retriever() -> FaissRetriever:
    embed = LsaEmbedder([c.text for c in CHUNKS], n_components=8)
    index = faiss.IndexFlatIP(embed.dimension)
    index.add(embed.embed_many([c.text for c in CHUNKS]))
    return FaissRetriever(index, CHUNKS, embed, normalized=True)


def evaluator(
    chunk_partial: float = 0.0, chunk_relevant: float = 1.0, **weights: float
) -> Evaluator:
    """A linear gate whose chunk bands make every chunk PARTIAL (and the set RELEVANT:
    the fast path, so the chunks reaching parent expansion are the retrieval's)."""
    config = EvaluatorConfig.from_profile("synapse").replace(
        thresholds={"relevant": 0.0, "partial": 0.0},
        chunk_thresholds={"relevant": chunk_relevant, "partial": chunk_partial},
    )
    if weights:
        config = config.replace(weights=weights)
    return Evaluator(config)


def stable(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = result.to_dict()
    for key in ("timings_ms", "cache_hit", "web_cache_hit"):
        data.pop(key)
    return data


def both(crag: CRAG, k: int = 4) -> Any:
    """Sync and async agree (run twice: with a cache, the second run reads it)."""
    sync = crag.retrieve(QUERY, k)
    asynchronous = asyncio.run(crag.aretrieve(QUERY, k))
    assert stable(sync) == stable(asynchronous)
    json.dumps(sync.to_dict())
    return sync


class Lookup:
    """A parents lookup with both halves, counting calls."""

    def __init__(self, parents: dict[str, Any], fail: set[str] | None = None) -> None:
        self.parents = parents
        self.fail = fail or set()
        self.calls: list[str] = []

    def get(self, parent_id: str) -> Any:
        self.calls.append(parent_id)
        if parent_id in self.fail:
            raise ConnectionError(f"store down for {parent_id}")
        return self.parents.get(parent_id)

    async def aget(self, parent_id: str) -> Any:
        await asyncio.sleep(0)
        return self.get(parent_id)


@pytest.mark.parametrize("cache", [None, False], ids=["cache", "no-cache"])
def test_a_partial_chunk_is_replaced_by_its_better_parent(
    retriever: FaissRetriever, cache: Any
) -> None:
    retrieved = retriever.search(QUERY, 4)
    assert [c.parent_id for c in retrieved[:2]] == ["bees", "bees"]  # the bee sentences lead
    crag = CRAG(retriever, evaluator(), parents=PARENTS, cache=cache)
    result = both(crag)
    assert result.initial_evaluation.verdict is Verdict.RELEVANT
    bees = [c for c in result.chunks if c.id == "bees"]
    assert len(bees) == 1 and bees[0].text == PARENTS["bees"]
    # the parent takes the place of its first child and its other children go
    assert result.chunks[0].id == "bees"
    assert not any(c.parent_id == "bees" for c in result.chunks)
    children = [c.id for c in retrieved if c.parent_id == "bees"]
    assert bees[0].metadata["children"] == children
    assert bees[0].score == retrieved[0].score and bees[0].score_kind is retrieved[0].score_kind
    assert bees[0].source == "bees.md"
    # graded as the parent, better than any child alone
    first = {g.chunk_id: g.score for g in result.initial_evaluation.chunks}
    final = {g.chunk_id: g.score for g in result.evaluation.chunks}
    assert final["bees"] > max(first[c] for c in children)
    assert result.counts["parents_fetched"] >= 1 and result.counts["parents_used"] >= 1
    assert {"parents", "parent_evaluate"} <= set(result.timings_ms)
    assert any("replaced by its parent 'bees'" in note for note in result.notes)
    assert result.parent_error is None
    assert result.to_dict()["parent_error"] is None


def test_a_dict_of_chunks_or_mappings_is_a_lookup(retriever: FaissRetriever) -> None:
    parents: dict[str, Chunk | dict[str, str]] = {
        "bees": Chunk(id="bees", text=PARENTS["bees"], source="bees-section"),
        "engine": {"text": PARENTS["engine"], "title": "Engines"},
    }
    result = both(CRAG(retriever, evaluator(), parents=parents, cache=False))
    [bees] = [c for c in result.chunks if c.id == "bees"]
    assert bees.source == "bees-section"  # its own source wins over the child's


def test_no_parent_expansion_without_partial_chunks_or_when_off(
    retriever: FaissRetriever,
) -> None:
    lookup = Lookup(PARENTS)
    relevant = both(CRAG(retriever, evaluator(0.0, 0.0), parents=lookup, cache=False))
    assert lookup.calls == [] and relevant.chunks == relevant.retrieved
    off = both(
        CRAG(
            retriever,
            evaluator(),
            parents=lookup,
            cache=False,
            config={"expand_parents": False},
        )
    )
    assert lookup.calls == [] and off.chunks == off.retrieved
    assert "parents" not in off.timings_ms


def test_a_missing_parent_is_a_note(retriever: FaissRetriever) -> None:
    parents = {name: text for name, text in PARENTS.items() if name != "bees"}
    result = both(CRAG(retriever, evaluator(), parents=parents, cache=False))
    assert result.chunks == result.retrieved  # the bee chunks stay
    ids = ", ".join(c.id for c in result.retrieved)
    assert f"parent 'bees' not found: chunk {ids} stays" in result.notes
    assert result.counts["parents_missing"] == 1
    assert result.parent_error is None


def test_a_failing_lookup_is_a_note_and_a_flag(retriever: FaissRetriever) -> None:
    lookup = Lookup(PARENTS, fail={"bees"})
    result = both(CRAG(retriever, evaluator(), parents=lookup, cache=False))
    assert [c.id for c in result.chunks if c.parent_id == "bees"]
    assert result.parent_error == "ConnectionError: store down for bees"
    assert any("the parents lookup failed for 'bees'" in note for note in result.notes)


def test_an_unusable_answer_is_a_flag(retriever: FaissRetriever) -> None:
    result = both(CRAG(retriever, evaluator(), parents={"bees": 42}, cache=False))  # type: ignore[dict-item]
    assert result.parent_error is not None and "int" in result.parent_error
    assert [c.id for c in result.chunks if c.parent_id == "bees"]


def test_an_async_only_lookup_flags_the_sync_driver(retriever: FaissRetriever) -> None:
    class AsyncOnly:
        async def aget(self, parent_id: str) -> str | None:
            return PARENTS.get(parent_id)

    crag = CRAG(retriever, evaluator(), parents=AsyncOnly(), cache=False)
    assert asyncio.run(crag.aretrieve(QUERY, 4)).chunks[0].id == "bees"
    result = crag.retrieve(QUERY, 4)
    assert result.parent_error is not None and "async-only" in result.parent_error
    assert result.chunks[0].parent_id == "bees"


def test_a_parent_over_the_token_budget_is_not_used(retriever: FaissRetriever) -> None:
    result = both(
        CRAG(
            retriever,
            evaluator(),
            parents=PARENTS,
            cache=False,
            config={"parent_token_budget": 5},
        ),
        k=2,
    )
    assert not any(c.id in PARENTS for c in result.chunks)
    assert result.counts["parents_over_budget"] >= 1 and "parents_used" in result.counts
    # bees-1 and bees-3 retrieved; the parent adds bees-0 and bees-2: 10 + 14 words,
    # at 1.3 tokens per word 31.2 tokens more than the budget's 5
    assert [c.id for c in result.retrieved] == ["bees-1", "bees-3"]
    assert any("its 31 more tokens exceed the parent budget (5 left)" in n for n in result.notes)
    assert result.chunks == result.retrieved


def test_a_parent_that_grades_worse_is_not_used(retriever: FaissRetriever) -> None:
    # an off-topic "parent": its text shares nothing with the query. It carries its
    # child's similarity, so only the text's evidence can tell: a gate on keywords and
    # similarity (the linear one rewards length too: a longer text looks better to it)
    parents = dict.fromkeys(PARENTS, PARENTS["bread"])
    gate = evaluator(
        keyword_overlap=0.5, semantic_coherence=0.5, length_adequacy=0.0, source_diversity=0.0
    )
    result = both(CRAG(retriever, gate, parents=parents, cache=False))
    assert result.chunks == result.retrieved
    assert any("graded no better" in note for note in result.notes)


def test_bad_parents_arguments() -> None:
    with pytest.raises(InputError, match="parents must have get"):
        CRAG(FaissRetriever.__new__(FaissRetriever), parents=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        RouterConfig(parent_token_budget=-1)
    assert parent_chunk(None, "p", [Chunk(id="c", text="t")]) is None
