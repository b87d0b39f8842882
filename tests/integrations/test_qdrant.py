"""QdrantRetriever on qdrant-client's local in-process mode (no server).

Each distance is checked against numpy on the same vectors: the converted
cosine must equal the cosine numpy computes, and what cannot be a cosine must
not be declared one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from crag_heuristic import CRAG, Chunk, InputError, RetrieverError, ScoreKind, Strategy
from crag_heuristic.integrations.qdrant import QdrantRetriever, QdrantScores
from crag_heuristic.sample import LsaEmbedder, load_sample_queries, sample_retriever
from crag_heuristic.testing import capture_events
from crag_heuristic.text import Analyzer

DIM = 12
N = 30
ANSWERED = "How were Roman roads built?"


@pytest.fixture(scope="module")
def vectors() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    raw = rng.normal(size=(N, DIM)) * 3.0  # norms around 10: not unit
    return raw / np.linalg.norm(raw, axis=1, keepdims=True), raw


@pytest.fixture(scope="module")
def query() -> np.ndarray:
    return np.random.default_rng(12).normal(size=DIM) * 2.0


def make(
    client: QdrantClient, vectors: np.ndarray, distance: models.Distance, **payload: str
) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    client.create_collection(name, vectors_config=models.VectorParams(size=DIM, distance=distance))
    client.upsert(
        name,
        points=[
            models.PointStruct(
                id=i,
                vector=v.tolist(),
                payload={"text": f"document {i}", "source": f"s{i % 4}", **payload},
            )
            for i, v in enumerate(vectors)
        ],
    )
    return name


def constant(vector: np.ndarray) -> Callable[[str], list[float]]:
    return lambda _query: vector.tolist()


@pytest.fixture
def client() -> QdrantClient:
    return QdrantClient(":memory:")


def cosines(stored: np.ndarray, query: np.ndarray) -> np.ndarray:
    unit = stored / np.linalg.norm(stored, axis=1, keepdims=True)
    result: np.ndarray = unit @ (query / np.linalg.norm(query))
    return result


@pytest.mark.parametrize(
    "distance", [models.Distance.COSINE, models.Distance.DOT, models.Distance.EUCLID]
)
def test_unit_vectors_give_the_numpy_cosine_for_every_distance(
    client: QdrantClient, vectors: tuple[np.ndarray, np.ndarray], query: np.ndarray,
    distance: models.Distance,
) -> None:  # fmt: skip
    unit, _ = vectors
    retriever = QdrantRetriever(client, make(client, unit, distance), constant(query))
    assert retriever.normalized is True  # detected from the stored vectors
    assert retriever.score_kind is ScoreKind.COSINE
    chunks = retriever.search("q", 10)
    expected = cosines(unit, query)
    order = np.argsort(-expected)[:10]
    assert [c.id for c in chunks] == [str(i) for i in order]
    assert [c.score for c in chunks] == pytest.approx(expected[order].tolist(), abs=1e-5)
    assert chunks[0].metadata["distance"] == distance.value.lower()
    assert chunks[0].metadata["qdrant_id"] == chunks[0].id
    assert chunks[0].text == f"document {chunks[0].id}" and chunks[0].source is not None


def test_euclid_formula_by_hand(
    client: QdrantClient, vectors: tuple[np.ndarray, np.ndarray]
) -> None:
    unit, _ = vectors
    retriever = QdrantRetriever(
        client, make(client, unit, models.Distance.EUCLID), constant(unit[0])
    )
    top = retriever.search("q", 1)[0]
    assert top.id == "0" and top.metadata["raw_score"] == pytest.approx(0.0, abs=1e-6)
    assert top.score == pytest.approx(1.0, abs=1e-6)  # cos = 1 - 0^2/2
    scores = QdrantScores(models.Distance.EUCLID, normalized=True)
    assert scores(1.0) == pytest.approx(0.5)  # d = 1: cos = 1 - 1/2
    assert scores(2.0) == pytest.approx(-1.0)  # opposite unit vectors: d = 2
    assert scores.semantics == "cosine = 1 - d^2/2 from the Euclidean distance of unit vectors"


def test_vectors_that_are_not_unit_length_are_not_called_cosines(
    client: QdrantClient, vectors: tuple[np.ndarray, np.ndarray], query: np.ndarray
) -> None:
    _, raw = vectors
    cosine = QdrantRetriever(client, make(client, raw, models.Distance.COSINE), constant(query))
    assert cosine.score_kind is ScoreKind.COSINE  # Qdrant normalises Cosine collections itself
    expected = cosines(raw, query)
    assert cosine.search("q", 1)[0].score == pytest.approx(float(expected.max()), abs=1e-5)

    dot = QdrantRetriever(client, make(client, raw, models.Distance.DOT), constant(query))
    assert dot.score_kind is ScoreKind.INNER_PRODUCT
    assert "not unit vectors" in dot.score_semantics
    products = raw @ query
    assert dot.search("q", 1)[0].score == pytest.approx(float(products.max()), rel=1e-5)

    euclid = QdrantRetriever(client, make(client, raw, models.Distance.EUCLID), constant(query))
    assert euclid.score_kind is ScoreKind.DISTANCE
    distances = np.linalg.norm(raw - query, axis=1)
    assert euclid.search("q", 1)[0].score == pytest.approx(float(distances.min()), rel=1e-5)

    manhattan = QdrantRetriever(
        client, make(client, raw, models.Distance.MANHATTAN), constant(query)
    )
    assert manhattan.score_kind is ScoreKind.DISTANCE
    l1 = np.abs(raw - query).sum(axis=1)
    assert manhattan.search("q", 1)[0].score == pytest.approx(float(l1.min()), rel=1e-5)


def test_declared_distance_or_norm_that_the_collection_contradicts(
    client: QdrantClient, vectors: tuple[np.ndarray, np.ndarray], query: np.ndarray
) -> None:
    unit, raw = vectors
    euclid = make(client, unit, models.Distance.EUCLID)
    with pytest.raises(InputError, match="uses Euclid distance, not the declared Cosine"):
        QdrantRetriever(client, euclid, constant(query), distance="Cosine")
    assert (
        QdrantRetriever(client, euclid, constant(query), distance="euclid").distance.value
        == "Euclid"
    )
    with pytest.raises(InputError, match="distance must be one of"):
        QdrantRetriever(client, euclid, constant(query), distance="cosine-ish")
    dot = make(client, raw, models.Distance.DOT)
    with pytest.raises(InputError, match=r"normalized=True, but stored vectors .* not unit length"):
        QdrantRetriever(client, dot, constant(query), normalized=True)


def test_named_vectors_need_a_vector_name(
    client: QdrantClient, vectors: tuple[np.ndarray, np.ndarray], query: np.ndarray
) -> None:
    unit, raw = vectors
    client.create_collection(
        "named",
        vectors_config={
            "dense": models.VectorParams(size=DIM, distance=models.Distance.DOT),
            "title": models.VectorParams(size=DIM, distance=models.Distance.EUCLID),
        },
    )
    client.upsert(
        "named",
        points=[
            models.PointStruct(id=i, vector={"dense": unit[i].tolist(), "title": raw[i].tolist()},
                               payload={"text": f"doc {i}"})
            for i in range(N)
        ],
    )  # fmt: skip
    with pytest.raises(InputError, match=r"named vectors \['dense', 'title'\]: pass vector_name"):
        QdrantRetriever(client, "named", constant(query))
    with pytest.raises(InputError, match="no vector named 'body'"):
        QdrantRetriever(client, "named", constant(query), vector_name="body")
    dense = QdrantRetriever(client, "named", constant(query), vector_name="dense")
    assert dense.score_kind is ScoreKind.COSINE  # Dot over unit vectors
    top = dense.search("q", 3)
    assert [c.score for c in top] == pytest.approx(
        np.sort(cosines(unit, query))[::-1][:3].tolist(), abs=1e-5
    )
    title = QdrantRetriever(client, "named", constant(query), vector_name="title")
    assert title.score_kind is ScoreKind.DISTANCE  # Euclid over raw vectors
    single = make(client, unit, models.Distance.COSINE)
    with pytest.raises(InputError, match="one unnamed vector"):
        QdrantRetriever(client, single, constant(query), vector_name="dense")


def test_payload_and_query_errors(
    client: QdrantClient, vectors: tuple[np.ndarray, np.ndarray], query: np.ndarray
) -> None:
    unit, _ = vectors
    client.create_collection(
        "no-text", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    client.upsert(
        "no-text", points=[models.PointStruct(id=7, vector=unit[0].tolist(), payload={"body": "x"})]
    )
    retriever = QdrantRetriever(client, "no-text", constant(query))
    with pytest.raises(
        RetrieverError, match=r"point 7 has no text payload 'text' \(payload keys: \['body'\]\)"
    ):
        retriever.search("q", 1)
    assert (
        QdrantRetriever(client, "no-text", constant(query), text_key="body").search("q", 1)[0].text
        == "x"
    )
    wrong_size = QdrantRetriever(client, "no-text", constant(query[:5]))
    with pytest.raises(RetrieverError, match="returned 5 dimensions; the collection has 12"):
        wrong_size.search("q", 1)
    with pytest.raises(RetrieverError, match="cannot read Qdrant collection 'missing'"):
        QdrantRetriever(client, "missing", constant(query))
    with pytest.raises(InputError, match=r"client must be a qdrant_client\.QdrantClient"):
        QdrantRetriever(object(), "no-text", constant(query))  # type: ignore[arg-type]
    client.create_collection(
        "multi",
        vectors_config=models.VectorParams(
            size=DIM, distance=models.Distance.COSINE,
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
        ),
    )  # fmt: skip
    with pytest.raises(InputError, match="multivectors"):
        QdrantRetriever(client, "multi", constant(query))


def test_string_ids_empty_collections_and_corpus_stats(
    client: QdrantClient, query: np.ndarray
) -> None:
    client.create_collection(
        "empty", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT)
    )
    empty = QdrantRetriever(client, "empty", constant(query))
    assert empty.normalized is None and empty.score_kind is ScoreKind.INNER_PRODUCT
    assert "unit norm not known" in empty.score_semantics
    assert empty.search("q", 3) == [] and empty.build_corpus_stats() is None
    point = str(uuid.UUID(int=5))
    client.upsert(
        "empty",
        points=[models.PointStruct(id=point, vector=query.tolist(), payload={"text": "roads"})],
    )
    assert empty.search("q", 1)[0].id == point
    stats = empty.build_corpus_stats(batch_size=1)
    assert stats is not None and stats.n_docs == 1 and empty.corpus_stats() is stats
    assert stats.analyses is not None  # by point id: what the search gives the chunk
    assert stats.analyses.get(point, "roads") == Analyzer().analyze("roads")


def sample_points(corpus: list[Chunk], lsa: LsaEmbedder) -> list[models.PointStruct]:
    return [
        models.PointStruct(id=i, vector=v.tolist(), payload={"text": c.text, "source": c.source, "doc": c.id})
        for i, (c, v) in enumerate(zip(corpus, lsa.embed_many([c.text for c in corpus]), strict=True))
    ]  # fmt: skip


def sample_collection(client: QdrantClient, corpus: list[Chunk], lsa: LsaEmbedder) -> str:
    client.create_collection(
        "sample",
        vectors_config=models.VectorParams(size=lsa.dimension, distance=models.Distance.COSINE),
    )
    client.upsert("sample", points=sample_points(corpus, lsa))
    return "sample"


def test_crag_router_end_to_end(
    client: QdrantClient, corpus: list[Chunk], lsa: LsaEmbedder
) -> None:
    retriever = QdrantRetriever(client, sample_collection(client, corpus, lsa), lsa)
    retriever.build_corpus_stats()
    crag = CRAG(retriever)
    answered = crag.retrieve(ANSWERED, 4)
    assert answered.strategy is Strategy.NONE and answered.verdict.value == "relevant"
    assert answered.chunks[0].metadata["doc"] == "rome-4"
    assert answered.initial_evaluation.details["idf_weighted"] is True
    assert answered.initial_evaluation.details["score_kinds"] == ["cosine"]
    unanswered = crag.retrieve("Which chess openings are best for beginners?", 4)
    assert unanswered.initial_evaluation.verdict.value == "irrelevant"


async def test_async_client_and_its_collection_check(
    client: QdrantClient, corpus: list[Chunk], lsa: LsaEmbedder
) -> None:
    aclient = AsyncQdrantClient(":memory:")  # a separate in-process store: fill it too
    name = sample_collection(client, corpus, lsa)
    await aclient.create_collection(
        name,
        vectors_config=models.VectorParams(size=lsa.dimension, distance=models.Distance.COSINE),
    )
    await aclient.upsert(name, points=sample_points(corpus, lsa))
    retriever = QdrantRetriever(client, name, lsa, aclient=aclient)
    sync = retriever.search(ANSWERED, 3)
    asynchronous = await retriever.asearch(ANSWERED, 3)
    assert [c.id for c in asynchronous] == [c.id for c in sync]
    assert [c.score for c in asynchronous] == pytest.approx([c.score for c in sync], abs=1e-6)
    result = await CRAG(retriever).aretrieve(ANSWERED, 3)
    assert result.verdict.value == "relevant"

    other = AsyncQdrantClient(":memory:")
    await other.create_collection(
        name,
        vectors_config=models.VectorParams(size=lsa.dimension, distance=models.Distance.EUCLID),
    )
    mismatched = QdrantRetriever(client, name, lsa, aclient=other)
    with pytest.raises(RetrieverError, match="the async client's 'sample' has Euclid distance"):
        await mismatched.asearch(ANSWERED, 3)
    no_async = QdrantRetriever(client, name, lsa)
    assert [c.id for c in await no_async.asearch(ANSWERED, 3)] == [c.id for c in sync]
    await aclient.close()
    await other.close()


def test_statistics_are_built_at_construction_and_verdicts_equal_the_router(
    client: QdrantClient, corpus: list[Chunk], lsa: LsaEmbedder, tmp_path: Path
) -> None:
    """As the README shows it, CRAG(QdrantRetriever(...)) graded without statistics
    (48 of 50 verdicts as the router with them): they are built now, at construction."""
    name = sample_collection(client, corpus, lsa)
    with capture_events() as events:
        retriever = QdrantRetriever(client, name, lsa)
    built = [e for e in events if e["event"] == "crag.corpus_stats"]
    assert [e["source"] for e in built] == ["built"] and built[0]["n_docs"] == len(corpus)
    stats = retriever.corpus_stats()
    assert stats is not None
    crag, core = CRAG(retriever, cache=False), CRAG(sample_retriever(), cache=False)
    with capture_events() as events:
        for query in [q["text"] for q in load_sample_queries()]:
            ours, theirs = crag.retrieve(query, 5), core.retrieve(query, 5)
            assert ours.initial_evaluation.verdict is theirs.initial_evaluation.verdict, query
            assert ours.initial_evaluation.details["idf_weighted"] is True
    assert not [e for e in events if e["event"] == "crag.corpus_stats"]  # none on a query
    assert QdrantRetriever(client, name, lsa, stats_from_collection=False).corpus_stats() is None
    stats.save(tmp_path / "stats.npz")
    loaded = QdrantRetriever(client, name, lsa, corpus_stats=tmp_path / "stats.npz")
    assert loaded.corpus_stats() is not None
    assert loaded.corpus_stats().fingerprint() == stats.fingerprint()  # type: ignore[union-attr]


def by_doc(*ids: str) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key="doc", match=models.MatchAny(any=list(ids)))]
    )


async def test_per_call_filters(
    client: QdrantClient, corpus: list[Chunk], lsa: LsaEmbedder
) -> None:
    name = sample_collection(client, corpus, lsa)
    retriever = QdrantRetriever(client, name, lsa)
    hits = retriever.search(ANSWERED, 3, query_filter=by_doc("rome-6", "solar-1"))
    assert [c.metadata["doc"] for c in hits] == ["rome-6", "solar-1"]
    assert await retriever.asearch(ANSWERED, 3, query_filter=by_doc("rome-6")) == hits[:1]
    with pytest.warns(UserWarning, match="search_params"):  # passed on: local mode says so
        exact = retriever.search(ANSWERED, 1, search_params=models.SearchParams(exact=True))
    assert exact[0].metadata["doc"] == "rome-4"
    own = QdrantRetriever(client, name, lsa, query_filter=by_doc("rome-6", "rome-8", "solar-1"))
    both = own.search(ANSWERED, 5, query_filter=by_doc("rome-8", "solar-1", "heart-1"))
    assert sorted(c.metadata["doc"] for c in both) == ["rome-8", "solar-1"]  # both apply
    view = retriever.with_filter(by_doc("rome-8"))
    assert [c.metadata["doc"] for c in view.search(ANSWERED, 3)] == ["rome-8"]
    assert view.corpus_stats() is retriever.corpus_stats() and retriever.query_filter is None
    result = CRAG(view, cache=False).retrieve(ANSWERED, 3)
    assert [c.metadata["doc"] for c in result.retrieved] == ["rome-8"]
    with pytest.raises(InputError, match=r"query_filter must be a models\.Filter"):
        retriever.search(ANSWERED, 3, query_filter={"doc": "rome-4"})  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"search_params must be a models\.SearchParams"):
        retriever.search(ANSWERED, 3, search_params={"exact": True})  # type: ignore[arg-type]


async def test_an_async_client_alone(
    client: QdrantClient, corpus: list[Chunk], lsa: LsaEmbedder
) -> None:
    aclient = AsyncQdrantClient(":memory:")
    await aclient.create_collection(
        "sample",
        vectors_config=models.VectorParams(size=lsa.dimension, distance=models.Distance.COSINE),
    )
    await aclient.upsert("sample", points=sample_points(corpus, lsa))
    with pytest.raises(InputError, match=r"use `await QdrantRetriever.acreate\(aclient"):
        QdrantRetriever(aclient, "sample", lsa)  # type: ignore[arg-type]
    with capture_events() as events:
        retriever = await QdrantRetriever.acreate(aclient, "sample", lsa)
    assert [e["source"] for e in events if e["event"] == "crag.corpus_stats"] == ["built"]
    sync = QdrantRetriever(client, sample_collection(client, corpus, lsa), lsa)
    assert retriever.corpus_stats().fingerprint() == sync.corpus_stats().fingerprint()  # type: ignore[union-attr]
    assert retriever.score_kind is ScoreKind.COSINE and retriever.client is None
    asynchronous = await CRAG(retriever, cache=False).aretrieve(ANSWERED, 3)
    expected = CRAG(sync, cache=False).retrieve(ANSWERED, 3)
    assert [c.id for c in asynchronous.chunks] == [c.id for c in expected.chunks]
    assert asynchronous.initial_evaluation.verdict is expected.initial_evaluation.verdict
    with pytest.raises(RetrieverError, match="AsyncQdrantClient only: use asearch"):
        CRAG(retriever).retrieve(ANSWERED, 3)
    assert await retriever.abuild_corpus_stats() is not None
    with pytest.raises(RetrieverError, match="cannot read Qdrant collection 'missing'"):
        await QdrantRetriever.acreate(aclient, "missing", lsa)
    await aclient.close()


async def test_both_doors_take_one_set_of_options(
    client: QdrantClient, vectors: tuple[np.ndarray, np.ndarray], query: np.ndarray
) -> None:
    """The constructor and ``acreate`` share one definition of their options (a
    default for each); an option either door does not know is a TypeError."""
    from crag_heuristic._retrievers.qdrant import _DEFAULTS, QdrantOptions

    assert set(_DEFAULTS) == QdrantOptions.__optional_keys__
    name = make(client, vectors[1], models.Distance.DOT)
    options: QdrantOptions = {"text_key": "text", "normalized": False, "name": "mine"}
    sync = QdrantRetriever(client, name, constant(query), **options)
    aclient = AsyncQdrantClient(":memory:")
    await aclient.create_collection(
        name, vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT)
    )
    await aclient.upsert(name, points=[models.PointStruct(id=0, vector=[1.0] * DIM)])
    alone = await QdrantRetriever.acreate(aclient, name, constant(query), **options)
    assert sync.name == alone.name == "mine" and sync.normalized is alone.normalized is False
    with pytest.raises(TypeError, match="unexpected keyword argument 'text'"):
        QdrantRetriever(client, name, constant(query), text="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'aclient'"):
        await QdrantRetriever.acreate(aclient, name, constant(query), aclient=aclient)  # type: ignore[misc]
    await aclient.close()
