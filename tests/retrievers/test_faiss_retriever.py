"""FaissRetriever on real FAISS indexes: score conversion per metric, ids, errors."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import faiss
import numpy as np
import pytest

from crag_heuristic import (
    Chunk,
    Evaluator,
    InputError,
    InvalidQueryError,
    RetrieverError,
    ScoreKind,
)
from crag_heuristic._retrievers.faiss import FaissRetriever, FaissScores, detect_unit_vectors


def make(
    index: faiss.Index, vectors: np.ndarray, docs: list[dict[str, Any]], **kwargs: Any
) -> FaissRetriever:
    index.add(vectors)
    queries = {"q": vectors[3] * 0.9 + vectors[5] * 0.1}
    return FaissRetriever(index, docs, lambda q: queries.get(q, vectors[0]), **kwargs)


def test_inner_product_of_unit_vectors_is_cosine(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    retriever = make(faiss.IndexFlatIP(16), unit_vectors, docs)
    assert retriever.normalized is True and retriever.score_kind is ScoreKind.COSINE
    chunks = retriever.search("q", 5)
    query = unit_vectors[3] * 0.9 + unit_vectors[5] * 0.1
    query = query / np.linalg.norm(query)  # normalize_query defaults to normalized
    expected = sorted((float(v @ query), i) for i, v in enumerate(unit_vectors))[::-1][:5]
    assert [c.id for c in chunks] == [f"d{i}" for _, i in expected]
    assert [c.score for c in chunks] == pytest.approx([s for s, _ in expected], abs=1e-5)
    assert chunks[0].metadata["metric"] == "inner_product"


def test_squared_l2_of_unit_vectors_converts_to_the_same_cosines(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    ip = make(faiss.IndexFlatIP(16), unit_vectors, docs).search("q", 8)
    l2_retriever = make(faiss.IndexFlatL2(16), unit_vectors, docs)
    assert l2_retriever.score_kind is ScoreKind.COSINE
    assert "1 - d/2" in l2_retriever.score_semantics
    l2 = l2_retriever.search("q", 8)
    assert [c.id for c in l2] == [c.id for c in ip]
    assert [c.score for c in l2] == pytest.approx([c.score for c in ip], abs=1e-5)
    # FAISS gave SQUARED distances: d = 2 - 2 cos
    for chunk in l2:
        assert chunk.metadata["raw_score"] == pytest.approx(2 - 2 * (chunk.score or 0.0), abs=1e-5)
    # and the evaluator sees identical similarities whichever index it was
    a = Evaluator().evaluate("document topic", ip)
    b = Evaluator().evaluate("document topic", l2)
    assert a.score == pytest.approx(b.score, abs=1e-6)


def test_l2_of_unnormalised_vectors_is_a_euclidean_distance(docs: list[dict[str, Any]]) -> None:
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(40, 16)) * 3).astype("float32")
    retriever = make(faiss.IndexFlatL2(16), x, docs)
    assert retriever.normalized is False and retriever.score_kind is ScoreKind.DISTANCE
    chunk = retriever.search("q", 1)[0]
    query = x[3] * 0.9 + x[5] * 0.1
    best = min(range(40), key=lambda i: float(np.linalg.norm(x[i] - query)))
    assert chunk.id == f"d{best}"
    assert chunk.score == pytest.approx(float(np.linalg.norm(x[best] - query)), rel=1e-4)


def test_inner_product_of_unnormalised_vectors_is_not_called_cosine(
    docs: list[dict[str, Any]],
) -> None:
    x = (np.random.default_rng(2).normal(size=(40, 16)) * 3).astype("float32")
    retriever = make(faiss.IndexFlatIP(16), x, docs)
    assert retriever.score_kind is ScoreKind.INNER_PRODUCT
    assert "not a cosine" in retriever.score_semantics
    chunk = retriever.search("q", 1)[0]
    assert chunk.score == pytest.approx(
        float(x[int(chunk.metadata["faiss_id"])] @ (x[3] * 0.9 + x[5] * 0.1)), rel=1e-4
    )


def test_declared_normalisation_wins_over_detection(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    retriever = make(faiss.IndexFlatIP(16), unit_vectors, docs, normalized=False)
    assert retriever.score_kind is ScoreKind.INNER_PRODUCT


def test_detection_by_index_type(unit_vectors: np.ndarray) -> None:
    flat = faiss.IndexFlatIP(16)
    flat.add(unit_vectors)
    hnsw = faiss.IndexHNSWFlat(16, 8)
    hnsw.add(unit_vectors)
    idmap = faiss.IndexIDMap(faiss.IndexFlatL2(16))
    idmap.add_with_ids(unit_vectors, np.arange(40, dtype="int64") * 10)
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatL2(16), 16, 2)
    ivf.train(np.tile(unit_vectors, (4, 1)))
    ivf.add(unit_vectors)
    assert detect_unit_vectors(flat) is True
    assert detect_unit_vectors(hnsw) is True
    assert detect_unit_vectors(idmap) is True
    assert detect_unit_vectors(ivf) is None  # cannot tell: the user declares it
    assert detect_unit_vectors(faiss.IndexFlatL2(16)) is None  # empty


def test_ivf_returns_fewer_than_k_without_minus_one_ids(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatL2(16), 16, 8, faiss.METRIC_INNER_PRODUCT)
    ivf.train(np.tile(unit_vectors, (8, 1)))
    ivf.add(unit_vectors)
    ivf.nprobe = 1
    retriever = FaissRetriever(ivf, docs, lambda q: unit_vectors[0], normalized=True)
    chunks = retriever.search("q", 40)
    raw_ids = ivf.search(unit_vectors[:1], 40)[1][0]
    assert (raw_ids == -1).any()  # FAISS padded with -1 ...
    assert len(chunks) == int((raw_ids >= 0).sum()) < 40  # ... and those are dropped
    assert all(c.metadata["faiss_id"] >= 0 for c in chunks)


def test_hnsw_index(unit_vectors: np.ndarray, docs: list[dict[str, Any]]) -> None:
    hnsw = faiss.IndexHNSWFlat(16, 8, faiss.METRIC_INNER_PRODUCT)
    retriever = make(hnsw, unit_vectors, docs)
    assert retriever.score_kind is ScoreKind.COSINE
    assert retriever.search("q", 3)[0].id in {"d3", "d5"}


def test_id_map_with_a_mapping_docstore(unit_vectors: np.ndarray) -> None:
    index = faiss.IndexIDMap(faiss.IndexFlatIP(16))
    ids = np.arange(40, dtype="int64") * 100 + 7
    index.add_with_ids(unit_vectors, ids)
    store = {int(i): Chunk(id=f"doc-{i}", text=f"text {i}", source="s") for i in ids}
    retriever = FaissRetriever(index, store, lambda q: unit_vectors[4])
    top = retriever.search("anything", 2)[0]
    assert (
        top.id == "doc-407"
        and top.metadata["faiss_id"] == 407
        and top.score == pytest.approx(1.0, abs=1e-5)
    )
    assert top.score_kind is ScoreKind.COSINE


def test_docstore_entry_kinds(unit_vectors: np.ndarray) -> None:
    index = faiss.IndexFlatIP(16)
    index.add(unit_vectors[:3])
    store = [
        "a plain string",
        {"_id": "beir-1", "title": "Title", "text": "Body", "metadata": {"source": "meta.md"}},
        Chunk(id="chunk-2", text="a chunk", source="c.md", parent_id="p"),
    ]
    by_id = {
        c.id: c for c in FaissRetriever(index, store, lambda q: unit_vectors[0]).search("q", 3)
    }
    assert by_id["0"].text == "a plain string" and by_id["0"].source is None
    assert by_id["beir-1"].text == "Title\nBody" and by_id["beir-1"].source == "meta.md"
    assert by_id["chunk-2"].parent_id == "p" and by_id["chunk-2"].score_kind is ScoreKind.COSINE


def test_search_params_exclude_ids(unit_vectors: np.ndarray, docs: list[dict[str, Any]]) -> None:
    retriever = make(faiss.IndexFlatIP(16), unit_vectors, docs)
    top = retriever.search("q", 1)[0]
    selector = faiss.IDSelectorNot(
        faiss.IDSelectorBatch(np.array([top.metadata["faiss_id"]], dtype="int64"))
    )
    others = retriever.search("q", 5, search_params=faiss.SearchParameters(sel=selector))  # type: ignore[call-arg]
    assert top.id not in [c.id for c in others] and len(others) == 5


def test_errors_are_typed(unit_vectors: np.ndarray, docs: list[dict[str, Any]]) -> None:
    index = faiss.IndexFlatIP(16)
    index.add(unit_vectors)
    with pytest.raises(RetrieverError, match="8 dimensions"):
        FaissRetriever(index, docs, lambda q: np.ones(8)).search("q", 3)
    with pytest.raises(RetrieverError, match="embedder failed"):
        FaissRetriever(index, docs, lambda q: 1 / 0).search("q", 3)
    with pytest.raises(RetrieverError, match="NaN"):
        FaissRetriever(index, docs, lambda q: np.full(16, np.nan)).search("q", 3)
    with pytest.raises(RetrieverError, match="no entry in the docstore"):
        FaissRetriever(index, dict(enumerate(docs[:2])), lambda q: unit_vectors[30]).search("q", 1)
    with pytest.raises(InputError, match="holds 2 entries"):
        FaissRetriever(index, docs[:2], lambda q: unit_vectors[0])
    with pytest.raises(InputError):
        FaissRetriever("not an index", docs, lambda q: unit_vectors[0])
    retriever = FaissRetriever(index, docs, lambda q: unit_vectors[0])
    for bad_k in (0, -1, 2.5, True):
        with pytest.raises(InputError):
            retriever.search("q", bad_k)  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError):
        retriever.search("  ", 3)


def test_empty_index_returns_nothing(docs: list[dict[str, Any]]) -> None:
    assert FaissRetriever(faiss.IndexFlatIP(16), docs, lambda q: np.ones(16)).search("q", 3) == []


def test_async_search_equals_sync(unit_vectors: np.ndarray, docs: list[dict[str, Any]]) -> None:
    retriever = make(faiss.IndexFlatL2(16), unit_vectors, docs)
    assert asyncio.run(retriever.asearch("q", 5)) == retriever.search("q", 5)


def test_async_search_of_in_process_work_needs_no_thread(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    """An embedder that says it is bounded (in-process) over a small index: asearch runs
    in the calling coroutine (a hop to a thread cost more than the search); any other
    embedder, in a worker thread (it may hang, or wait on a network)."""
    import threading

    seen: list[str] = []

    class Embed:
        def __init__(self, bounded: bool) -> None:
            self.bounded = bounded

        def __call__(self, query: str) -> Any:
            seen.append(threading.current_thread().name)
            return unit_vectors[0]

    index = faiss.IndexFlatIP(16)
    index.add(unit_vectors)
    slow = FaissRetriever(index, docs, Embed(False))
    asyncio.run(slow.asearch("q", 3))
    quick = FaissRetriever(index, docs, Embed(True))
    assert quick.bounded and not slow.bounded
    assert asyncio.run(quick.asearch("q", 3)) == quick.search("q", 3)
    main = threading.current_thread().name
    assert seen[0] != main and seen[1:] == [main, main]


def test_corpus_stats_come_from_the_docstore(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    stats = make(faiss.IndexFlatIP(16), unit_vectors, docs).corpus_stats()
    assert stats is not None and stats.n_docs == 40
    # "topic 1" is in docs 1, 5, ..., 37 (doc 1 among them); "4" only as a doc number
    assert stats.df("document") == 40 and stats.df("1") == 10 and stats.df("4") == 1


def test_score_converter_formulas() -> None:
    ip = FaissScores(faiss.METRIC_INNER_PRODUCT, True)
    l2 = FaissScores(faiss.METRIC_L2, True)
    raw_l2 = FaissScores(faiss.METRIC_L2, False)
    l1 = FaissScores(faiss.METRIC_L1, None)
    assert ip(0.3) == 0.3
    assert l2(0.5) == pytest.approx(0.75)
    assert raw_l2(9.0) == pytest.approx(3.0)
    assert l1(2.5) == 2.5 and l1.kind is ScoreKind.DISTANCE
    with pytest.raises(ValueError):
        ip(math.inf)


# -- search parameters of IVF and HNSW indexes -------------------------------------------------


FAISS: Any = faiss  # its stubs lack SearchParametersHNSW and SearchParametersIVF's keywords


def _clustered(n: int = 2000, d: int = 16) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    x = rng.normal(size=(n, d)).astype("float32")
    faiss.normalize_L2(x)
    queries = (x[:20] + 0.05 * rng.normal(size=(20, d))).astype("float32")
    faiss.normalize_L2(queries)
    return x, queries


def _recall(retriever: FaissRetriever, exact: FaissRetriever, n: int, **kwargs: object) -> float:
    found = 0
    for i in range(n):
        truth = {c.id for c in exact.search(str(i), 10)}
        found += len(truth & {c.id for c in retriever.search(str(i), 10, **kwargs)})
    return found / (10 * n)


def test_ivf_nprobe_and_hnsw_ef_search_reach_faiss() -> None:
    x, queries = _clustered()
    docs = [f"doc {i}" for i in range(len(x))]

    def embed(q: str) -> np.ndarray:
        vector: np.ndarray = queries[int(q)]
        return vector

    flat = faiss.IndexFlatIP(16)
    flat.add(x)
    exact = FaissRetriever(flat, docs, embed)
    ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(16), 16, 64, faiss.METRIC_INNER_PRODUCT)
    ivf.train(x)
    ivf.add(x)
    low = FaissRetriever(ivf, docs, embed, normalized=True)  # FAISS's default nprobe = 1
    high = FaissRetriever(
        ivf, docs, embed, normalized=True, search_params=FAISS.SearchParametersIVF(nprobe=64)
    )
    assert _recall(high, exact, 20) == 1.0  # every list visited: exact
    assert _recall(low, exact, 20) < 0.9
    assert ivf.nprobe == 1  # per-search parameters leave the index as it was
    hnsw = faiss.IndexHNSWFlat(16, 4, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(x)
    graph = FaissRetriever(hnsw, docs, embed)
    wide = FAISS.SearchParametersHNSW(efSearch=256)
    narrow = FAISS.SearchParametersHNSW(efSearch=1)
    assert _recall(graph, exact, 20, search_params=wide) > _recall(
        graph, exact, 20, search_params=narrow
    )
    # the same through an ID map
    idmap = faiss.IndexIDMap(faiss.IndexHNSWFlat(16, 4, faiss.METRIC_INNER_PRODUCT))
    idmap.add_with_ids(x, np.arange(len(x), dtype="int64"))
    assert FaissRetriever(idmap, docs, embed, search_params=wide).search("0", 3)


def test_search_params_of_the_wrong_kind_are_refused(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    hnsw = faiss.IndexHNSWFlat(16, 8, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(unit_vectors)
    # FAISS itself would ignore an IVF nprobe on HNSW (or flat) without a word
    with pytest.raises(InputError, match="SearchParametersIVF only applies to IndexIVF"):
        FaissRetriever(hnsw, docs, np.ones, search_params=FAISS.SearchParametersIVF(nprobe=8))
    retriever = FaissRetriever(hnsw, docs, lambda q: unit_vectors[0])
    with pytest.raises(InputError, match="SearchParametersIVF"):
        retriever.search("q", 3, search_params=FAISS.SearchParametersIVF(nprobe=8))
    flat = faiss.IndexFlatIP(16)
    with pytest.raises(InputError, match="SearchParametersHNSW only applies"):
        FaissRetriever(flat, docs, np.ones, search_params=FAISS.SearchParametersHNSW(efSearch=8))
    with pytest.raises(InputError, match=r"faiss\.SearchParameters"):
        FaissRetriever(flat, docs, np.ones, search_params={"nprobe": 8})


# -- corpus statistics: built at construction or loaded, never on the first query ---------------


def test_statistics_are_built_at_construction_and_logged(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    from crag_heuristic.testing import capture_events

    with capture_events() as events:
        retriever = make(faiss.IndexFlatIP(16), unit_vectors, docs)
    [event] = [e for e in events if e["event"] == "crag.corpus_stats"]
    assert event["source"] == "built" and event["n_docs"] == 40 and event["seconds"] >= 0
    with capture_events() as events:
        retriever.search("q", 3)
        stats = retriever.corpus_stats()
    assert not [e for e in events if e["event"] == "crag.corpus_stats"]
    assert stats is not None and stats.n_docs == 40


def test_statistics_loaded_from_a_file(
    tmp_path: object, unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    from pathlib import Path

    from crag_heuristic.testing import capture_events
    from crag_heuristic.text import Analyzer, CorpusStats, CorpusStatsFileError

    path = Path(str(tmp_path)) / "stats.npz"
    built = CorpusStats.build([d["text"] for d in docs])
    built.save(path)
    with capture_events() as events:
        retriever = make(faiss.IndexFlatIP(16), unit_vectors, docs, corpus_stats=path)
    assert [e["source"] for e in events if e["event"] == "crag.corpus_stats"] == ["loaded"]
    loaded = retriever.corpus_stats()
    assert loaded is not None and loaded.fingerprint() == built.fingerprint()
    assert make(faiss.IndexFlatIP(16), unit_vectors, docs, corpus_stats=str(path)).corpus_stats()
    with pytest.raises(CorpusStatsFileError, match="analyzer"):
        make(
            faiss.IndexFlatIP(16),
            unit_vectors,
            docs,
            corpus_stats=path,
            analyzer=Analyzer(stop_words=["document"]),
        )
    with pytest.raises(InputError, match="corpus_stats must be"):
        make(faiss.IndexFlatIP(16), unit_vectors, docs, corpus_stats=42)
    off = make(faiss.IndexFlatIP(16), unit_vectors, docs, stats_from_docstore=False)
    assert off.corpus_stats() is None


def test_warm_up_search_at_construction(
    unit_vectors: np.ndarray, docs: list[dict[str, Any]]
) -> None:
    class Counting:  # a real flat index that counts searches (and can fail them)
        def __init__(self, fail: bool = False) -> None:
            self.inner = faiss.IndexFlatIP(16)
            self.inner.add(unit_vectors)
            self.metric_type, self.ntotal, self.d = faiss.METRIC_INNER_PRODUCT, 40, 16
            self.calls, self.fail = 0, fail

        def search(self, x: np.ndarray, k: int, **kwargs: object) -> object:
            self.calls += 1
            if self.fail:
                raise RuntimeError("index not ready")
            return self.inner.search(x, k)

    index = Counting()
    FaissRetriever(index, docs, lambda q: unit_vectors[0], normalized=True)
    assert index.calls == 1
    cold = Counting()
    FaissRetriever(cold, docs, lambda q: unit_vectors[0], normalized=True, warm_up=False)
    assert cold.calls == 0
    with pytest.raises(RetrieverError, match="at construction: index not ready"):
        FaissRetriever(Counting(fail=True), docs, lambda q: unit_vectors[0], normalized=True)
