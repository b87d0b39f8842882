"""Distances declared as similarities are refused, naming the kind they likely are
(issue 26).

Chroma's cosine space returns ``1 - cos`` (in [0, 2]) and FAISS ``IndexFlatL2``
squared L2 distances; declared ``"cosine"``, both graded a retrieval by its worst
chunk as its best (a tomato-growing text RELEVANT for an aspirin question). The
lists here come from real FAISS searches of clustered unit vectors (near
neighbours at cosine 0.8 to 0.95, as a sentence model's are), for 50 queries: an
``IndexFlatIP`` search gives the cosines, from which the Chroma-style ``1 -
cos`` is made; an ``IndexFlatL2`` search gives squared L2 distances. Every one
of them declared ``"cosine"`` is refused, by the evaluator and by the router;
declared as what it is, it grades as the cosines do.
"""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np
import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    Evaluator,
    InvalidChunkError,
    RetrieverError,
    ScoreKind,
)
from crag_heuristic._scores import similarity
from crag_heuristic._types import check_ranking
from crag_heuristic.retrievers import ScoreOrderError
from crag_heuristic.sample import load_sample_corpus
from crag_heuristic.testing import ListRetriever

K = 5


Ranking = tuple[list[float], list[Chunk]]  # raw scores, the chunks they rank


def clustered(rng: np.random.Generator, centers: np.ndarray, n: int, noise: float) -> np.ndarray:
    """``n`` unit vectors around random ``centers`` (neighbours at cosine 0.8 to 0.95,
    as a sentence model's near answers are)."""
    picks = centers[rng.integers(0, len(centers), size=n)]
    points = picks + rng.normal(scale=noise, size=picks.shape)
    unit: np.ndarray = (points / np.linalg.norm(points, axis=1, keepdims=True)).astype("float32")
    return unit


@pytest.fixture(scope="module")
def searches() -> dict[str, list[Ranking]]:
    """For each of 50 queries: the cosine ranking, the Chroma-style ``1 - cos``
    ranking and the squared-L2 ranking, from real FAISS searches over clustered
    unit vectors (the sample corpus's passages as their texts)."""
    corpus = load_sample_corpus()
    rng = np.random.default_rng(26)
    centers = rng.normal(size=(8, 32))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    vectors = clustered(rng, centers, len(corpus), 0.06)
    queries = clustered(rng, centers, 50, 0.06)
    inner, l2 = faiss.IndexFlatIP(32), faiss.IndexFlatL2(32)
    inner.add(vectors)
    l2.add(vectors)
    cosines, ids = inner.search(queries, K)
    distances, l2_ids = l2.search(queries, K)
    found: dict[str, list[Ranking]] = {"cosine": [], "chroma_cosine": [], "squared_l2": []}
    for row in range(50):
        by_cosine = [corpus[i] for i in ids[row]]
        found["cosine"].append(([float(s) for s in cosines[row]], by_cosine))
        found["chroma_cosine"].append(([1.0 - float(s) for s in cosines[row]], by_cosine))
        found["squared_l2"].append(
            ([max(0.0, float(s)) for s in distances[row]], [corpus[i] for i in l2_ids[row]])
        )
    return found


def scored(ranking: Ranking, kind: ScoreKind | str) -> list[Chunk]:
    scores, chunks = ranking
    return [c.replace(score=s, score_kind=kind) for s, c in zip(scores, chunks, strict=True)]


@pytest.mark.parametrize("style", ["chroma_cosine", "squared_l2"])
def test_distances_declared_as_cosines_are_refused_on_50_of_50_queries(
    searches: dict[str, list[Ranking]], style: str
) -> None:
    """A distance above 1 is no cosine (refused as the chunk is made, since before);
    one list of distances all within [0, 1] is refused by its direction."""
    evaluator = Evaluator()
    by_range = by_direction = 0
    for ranking in searches[style]:
        if max(ranking[0]) > 1.0 + 1e-4:
            with pytest.raises(InvalidChunkError, match="a cosine lies in"):
                scored(ranking, ScoreKind.COSINE)
            by_range += 1
            continue
        chunks = scored(ranking, ScoreKind.COSINE)
        with pytest.raises(ScoreOrderError) as info:
            evaluator.evaluate("a question", chunks)
        assert info.value.declared == "cosine"
        assert info.value.likely == ("cosine_distance", "squared_l2")
        assert "declare score_kind='cosine_distance' or 'squared_l2'" in str(info.value)
        by_direction += 1
    assert by_range + by_direction == 50
    assert by_direction >= 40  # the lists the range alone let through


def test_the_router_refuses_the_ranking_with_a_retriever_error(
    searches: dict[str, list[Ranking]],
) -> None:
    near = next(r for r in searches["chroma_cosine"] if max(r[0]) <= 1)
    crag = CRAG(ListRetriever(scored(near, "cosine")), cache=False)
    with pytest.raises(RetrieverError) as info:
        crag.retrieve("a question", K)
    assert isinstance(info.value.__cause__, ScoreOrderError)
    assert "cosine_distance" in str(info.value)


def test_declared_as_what_they_are_they_grade_as_the_cosines(
    searches: dict[str, list[Ranking]],
) -> None:
    evaluator = Evaluator()
    for cosine, distance, squared in zip(
        searches["cosine"], searches["chroma_cosine"], searches["squared_l2"], strict=True
    ):
        cosines = scored(cosine, ScoreKind.COSINE)
        check_ranking(cosines)  # a cosine ranking falls: accepted
        check_ranking(scored(squared, ScoreKind.SQUARED_L2))
        as_distances = scored(distance, ScoreKind.COSINE_DISTANCE)
        check_ranking(as_distances)
        mine = evaluator.evaluate("a question", as_distances)
        reference = evaluator.evaluate("a question", cosines)
        assert [g.similarity for g in mine.chunks] == pytest.approx(
            [g.similarity for g in reference.chunks], abs=1e-6
        )
        assert mine.verdict is reference.verdict


def test_cosine_distance_converts_by_hand() -> None:
    def sim(score: float, kind: str, **band: Any) -> float | None:
        return similarity(Chunk(id="a", text="t", score=score, score_kind=kind), **band)

    assert sim(0.25, "cosine_distance") == 0.75
    assert sim(0.0, "cosine_distance") == 1.0
    assert sim(1.5, "cosine_distance") == 0.0  # cos = -0.5, clipped
    assert sim(0.4, "cosine_distance", cosine_floor=0.1, cosine_ceiling=0.7) == 0.5 / 0.6
    assert ScoreKind.COSINE_DISTANCE.is_distance and ScoreKind.COSINE_DISTANCE.is_comparable
    with pytest.raises(ValueError, match="lies in \\[0, 2\\]"):
        Chunk(id="a", text="t", score=2.5, score_kind="cosine_distance")


def ranked(*scores: float, kind: str = "cosine") -> list[Chunk]:
    return [
        Chunk(id=f"c{i}", text=f"text {i}", score=s, score_kind=kind) for i, s in enumerate(scores)
    ]


@pytest.mark.parametrize(
    ("scores", "kind", "refused"),
    [
        ((0.1, 0.2), "cosine", False),  # two scores say nothing
        ((0.1, 0.2, 0.3), "cosine", True),
        ((0.2, 0.2, 0.3), "cosine", True),  # a tie on the way up
        ((0.5, 0.5, 0.5), "cosine", False),  # flat: no direction
        ((0.3, 0.2, 0.25), "cosine", False),  # reordered, not reversed
        ((0.9, 0.8, 0.7), "cosine", False),
        ((1.0, 2.0, 3.0), "bm25", True),
        ((0.3, 0.2, 0.1), "squared_l2", True),  # a distance that falls: a similarity
        ((0.1, 0.2, 0.3), "squared_l2", False),
        ((0.1, 0.2, 0.3), "rrf", False),  # not a kind with a direction
    ],
)
def test_a_ranking_is_refused_only_when_every_step_runs_the_wrong_way(
    scores: tuple[float, ...], kind: str, refused: bool
) -> None:
    chunks = ranked(*scores, kind=kind)
    if refused:
        with pytest.raises(ScoreOrderError):
            check_ranking(chunks)
        with pytest.raises(ScoreOrderError):
            Evaluator().evaluate("a question", chunks)
    else:
        check_ranking(chunks)
    Evaluator().evaluate("a question", chunks, ranked=False)  # reordered after scoring: fine


def test_a_similarity_declared_as_a_distance_names_cosine() -> None:
    with pytest.raises(ScoreOrderError) as info:
        check_ranking(ranked(0.9, 0.6, 0.3, kind="cosine_distance"))
    assert info.value.likely == ("cosine",)
    with pytest.raises(ScoreOrderError) as info:
        check_ranking(ranked(9.0, 6.0, 3.0, kind="distance"))
    assert info.value.likely == ("inner_product",)


def test_mixed_kinds_are_checked_each_on_its_own() -> None:
    web = [Chunk(id=f"w{i}", text="web", score=float(i), score_kind="web") for i in range(3)]
    check_ranking([*web, *ranked(0.9, 0.8, 0.7)])
    with pytest.raises(ScoreOrderError):
        check_ranking(
            [*ranked(0.1, 0.2), *web, Chunk(id="z", text="z", score=0.3, score_kind="cosine")]
        )
