"""The adapter base: a toy adapter over a numpy matrix that fills only the hooks gets
the checked query embedding, the checked score conversion, the statistics and the
search template (FAISS, Qdrant and the LangChain stores are tested on the real
backends in their own files)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from crag_heuristic import Chunk, InputError, InvalidQueryError, RetrieverError, ScoreKind
from crag_heuristic._retrievers.base import ScoreConversion, VectorRetriever
from crag_heuristic.retrievers import DeclaredScores, FaissScores, QdrantScores
from crag_heuristic.text import CorpusStats

Rows = tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]


class DistanceScores(ScoreConversion):
    """Euclidean distances, kept as distances (negative ones clipped)."""

    backend = "the matrix"
    kind = ScoreKind.DISTANCE
    semantics = "Euclidean distance"
    metric_name = "l2"

    def _convert(self, raw: float) -> float:
        return max(raw, 0.0)


class MatrixRetriever(VectorRetriever[npt.NDArray[np.float64], Rows]):
    """Exact nearest rows of a matrix: the hooks and nothing else."""

    holder = "the matrix"
    backend = "Matrix"

    def __init__(self, matrix: npt.NDArray[np.float64], embed: Any, *, unit: bool) -> None:
        self.matrix = matrix
        self._embed = embed
        self.unit = unit
        self.name = "matrix"
        self.scores = DistanceScores()
        rows = [f"row {i}" for i in range(len(matrix))]
        self._stats = CorpusStats.build(rows) if rows else None
        self.seen: list[npt.NDArray[np.float64]] = []

    def _dimension(self) -> int:
        return int(self.matrix.shape[1])

    def _unit_query(self) -> bool:
        return self.unit

    def _query_vector(self, vector: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float64]:
        return np.asarray(vector, dtype=np.float64)

    def _size(self) -> int:
        return len(self.matrix)

    def _check_options(self, options: Mapping[str, Any]) -> None:
        if options.get("boom") not in (None, True):
            raise InputError("boom must be True or None")

    def _raw_search(
        self, vector: npt.NDArray[np.float64], k: int, options: Mapping[str, Any]
    ) -> Rows:
        if options.get("boom"):
            raise OSError("disk gone")
        self.seen.append(vector)
        distances = np.linalg.norm(self.matrix - vector, axis=1)
        order = np.argsort(distances, kind="stable")[:k]
        return distances[order], order

    def _chunks(self, raw: Rows, vector: npt.NDArray[np.float64]) -> list[Chunk]:
        distances, ids = raw
        return [
            Chunk(
                id=str(i), text=f"row {i}", score=self._score(float(d)), score_kind=self.score_kind
            )
            for d, i in zip(distances, ids, strict=True)
        ]

    def search(self, query: str, k: int, *, boom: bool | None = None) -> list[Chunk]:
        return self._search(query, k, {"boom": boom})

    async def asearch(self, query: str, k: int, *, boom: bool | None = None) -> list[Chunk]:
        return await self._asearch(query, k, {"boom": boom})


MATRIX = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]])


def _retriever(embed: Any = None, *, unit: bool = True) -> MatrixRetriever:
    return MatrixRetriever(MATRIX, embed or (lambda q: [3.0, 4.0, 0.0]), unit=unit)


def test_the_template_embeds_normalises_searches_and_converts() -> None:
    retriever = _retriever()
    chunks = retriever.search("bees", 10)  # k capped to the four rows
    assert [c.id for c in chunks] == ["3", "1", "0", "2"]
    assert np.allclose(retriever.seen[0], [0.6, 0.8, 0.0])  # scaled to unit norm
    assert chunks[0].score == pytest.approx(0.0, abs=1e-12)
    assert all(c.score_kind is ScoreKind.DISTANCE for c in chunks)
    assert retriever.score_kind is ScoreKind.DISTANCE
    assert retriever.score_semantics == "Euclidean distance"
    assert retriever.corpus_stats() is retriever._stats
    assert [c.id for c in asyncio.run(retriever.asearch("bees", 2))] == ["3", "1"]


def test_the_query_is_normalised_only_when_the_hook_says_so() -> None:
    retriever = _retriever(unit=False)
    retriever.search("bees", 1)
    assert np.array_equal(retriever.seen[0], [3.0, 4.0, 0.0])


def test_an_empty_backend_answers_nothing_without_embedding() -> None:
    def embed(query: str) -> list[float]:
        raise AssertionError("not called")

    retriever = MatrixRetriever(np.zeros((0, 3)), embed, unit=True)
    assert retriever.search("bees", 3) == []


@pytest.mark.parametrize(
    ("embed", "message"),
    [
        (lambda q: 1 / 0, r"the embedder failed: ZeroDivisionError"),
        (lambda q: {"not": "a vector"}, "the embedder returned dict, not a vector"),
        (lambda q: [1.0, 2.0], "the embedder returned 2 dimensions; the matrix has 3"),
        (lambda q: [1.0, float("nan"), 0.0], "the query vector has NaN or inf values"),
    ],
)
def test_a_bad_embedding_is_a_retriever_error(embed: Any, message: str) -> None:
    with pytest.raises(RetrieverError, match=message) as info:
        _retriever(embed).search("bees", 2)
    assert info.value.retriever == "matrix"


def test_the_inputs_are_checked_before_the_backend() -> None:
    retriever = _retriever()
    with pytest.raises(InvalidQueryError):
        retriever.search("  ", 2)
    with pytest.raises(InputError):
        retriever.search("bees", 0)
    with pytest.raises(InputError, match="boom must be"):
        retriever.search("bees", 2, boom=False)
    assert retriever.seen == []


def test_a_backend_failure_is_a_retriever_error_naming_the_backend() -> None:
    retriever = _retriever()
    with pytest.raises(RetrieverError, match=r"Matrix search failed: OSError\('disk gone'\)"):
        retriever.search("bees", 2, boom=True)
    with pytest.raises(RetrieverError, match="Matrix search failed"):
        asyncio.run(retriever.asearch("bees", 2, boom=True))


def test_a_non_finite_raw_score_is_refused_by_every_conversion() -> None:
    import faiss
    from qdrant_client.http import models

    conversions: list[ScoreConversion] = [
        DistanceScores(),
        FaissScores(faiss.METRIC_L2, True),
        QdrantScores(models.Distance.DOT, None),
        DeclaredScores(ScoreKind.COSINE, "declared", "cosine"),
    ]
    for conversion, backend in zip(
        conversions, ("the matrix", "FAISS", "Qdrant", "the store"), strict=True
    ):
        with pytest.raises(ValueError, match=f"^{backend} returned a non-finite score inf$"):
            conversion(float("inf"))
    retriever = _retriever()
    with pytest.raises(RetrieverError, match="the matrix returned a non-finite score nan"):
        retriever._score(float("nan"))
    assert DistanceScores()(-0.5) == 0.0
