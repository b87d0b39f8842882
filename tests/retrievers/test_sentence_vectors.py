"""Sentence vectors made at index time: the store, the FAISS retriever's scores, the
evidence they feed and the gate's fallback when they are missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crag_heuristic import Chunk, Evaluator, EvaluatorConfig, FaissRetriever, InputError
from crag_heuristic._cache.keys import evaluation_key
from crag_heuristic._calibration.gate import GateExample, fit_gate
from crag_heuristic._sample import load_sample_lsa
from crag_heuristic._text.analyzer import split_sentences
from crag_heuristic.sample import load_sample_corpus, load_sample_queries
from crag_heuristic.text import SentenceVectors


@pytest.fixture(scope="module")
def lsa():  # the sample's shipped LSA projection: a real embedder with a batch call
    projection, vectors, _ids = load_sample_lsa()
    return projection, vectors


@pytest.fixture(scope="module")
def store(lsa) -> SentenceVectors:
    projection, _ = lsa
    return SentenceVectors.build(load_sample_corpus(), projection.embed_many, embedder="lsa")


def test_the_best_sentence_by_hand(lsa, store) -> None:
    projection, _ = lsa
    doc = load_sample_corpus()[0]
    query = projection("How does a honeybee find food?")
    sentences = [s for s in split_sentences(doc.text) if s.strip()]
    vectors = projection.embed_many(sentences)
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    expected = float((vectors @ (query / np.linalg.norm(query))).max())
    assert store.best(query, doc.id, doc.text) == pytest.approx(expected, abs=2e-3)  # float16
    assert store.best(query, doc.id, doc.text + " changed") is None  # not the text indexed
    assert store.best(query, "no-such-doc", doc.text) is None
    assert store.best(np.zeros_like(query), doc.id, doc.text) is None


def test_the_store_saves_and_loads(store, tmp_path: Path) -> None:
    path = store.save(tmp_path / "sentences")
    assert path.suffix == ".npz"
    loaded = SentenceVectors.load(path)
    assert loaded.ids == store.ids and loaded.embedder == "lsa"
    assert np.array_equal(loaded.vectors, store.vectors)
    (tmp_path / "other.npz").write_bytes(b"not a file")
    with pytest.raises(InputError, match="not a sentence vectors file"):
        SentenceVectors.load(tmp_path / "other.npz")
    np.savez(tmp_path / "foreign.npz", kind=np.array("something else"))
    with pytest.raises(InputError, match="holds no sentence vectors"):
        SentenceVectors.load(tmp_path / "foreign.npz")


def test_a_bad_embedder_is_an_input_error() -> None:
    docs = [("a", "One sentence. Two sentences.")]
    with pytest.raises(InputError, match="answered"):
        SentenceVectors.build(docs, lambda texts: np.ones((1, 4)))
    with pytest.raises(InputError, match="NaN"):
        SentenceVectors.build(docs, lambda texts: np.full((len(texts), 4), np.nan))
    with pytest.raises(InputError, match="batch_size"):
        SentenceVectors.build(docs, lambda texts: np.ones((len(texts), 4)), batch_size=0)


def test_the_faiss_retriever_scores_each_chunk_s_best_sentence(lsa, store) -> None:
    import faiss

    projection, vectors = lsa
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    corpus = load_sample_corpus()
    plain = FaissRetriever(index, corpus, projection, normalized=True)
    with_sentences = FaissRetriever(index, corpus, projection, normalized=True, sentences=store)
    query = "Why do bees dance?"
    hits = with_sentences.search(query, 5)
    assert [c.id for c in hits] == [c.id for c in plain.search(query, 5)]
    q = projection(query)
    for chunk in hits:
        assert chunk.sentence_score == pytest.approx(store.best(q, chunk.id, chunk.text))
    assert all(c.sentence_score is None for c in plain.search(query, 5))
    with pytest.raises(InputError, match="dimensions"):
        FaissRetriever(
            index,
            corpus,
            projection,
            sentences=SentenceVectors.build([("a", "x.")], lambda texts: np.ones((len(texts), 3))),
        )


CHUNKS = [
    Chunk(id="a", text="solar panel power", score=0.9, score_kind="cosine", sentence_score=0.6),
    Chunk(id="b", text="solar wind power", score=0.6, score_kind="cosine", sentence_score=0.8),
    Chunk(id="c", text="coffee bean", score=0.3, score_kind="cosine"),
]


def test_sentence_evidence_by_hand() -> None:
    ev = Evaluator("synapse", all_evidence=True).evaluate("solar power", CHUNKS)
    assert [g.features["sentence_similarity"] for g in ev.chunks] == [0.6, 0.8, None]
    assert ev.details["features"]["sentence_similarity_max"] == 0.8
    assert ev.details["features"]["sentence_similarity_top"] == 0.6
    bare = [c.replace(sentence_score=None) for c in CHUNKS]
    ev = Evaluator("synapse", all_evidence=True).evaluate("solar power", bare)
    assert ev.details["features"]["sentence_similarity_max"] is None


def test_the_cache_key_tells_sentence_scores_apart() -> None:
    keys = {
        evaluation_key("q", chunks, config_fingerprint="f")
        for chunks in (CHUNKS, [c.replace(sentence_score=None) for c in CHUNKS])
    }
    assert len(keys) == 2


def test_a_gate_reading_sentences_falls_back_without_them(lsa, store) -> None:
    import faiss

    projection, vectors = lsa
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    retriever = FaissRetriever(
        index, load_sample_corpus(), projection, normalized=True, sentences=store
    )
    examples = []
    for q in load_sample_queries():
        relevant = frozenset(q["metadata"]["relevant"])
        hits = retriever.search(q["text"], 5)
        examples.append(GateExample(q["_id"], "natural", q["text"], tuple(hits), relevant))
        gap = [h for h in retriever.search(q["text"], 5 + len(relevant)) if h.id not in relevant]
        examples.append(GateExample(q["_id"], "probe", q["text"], tuple(gap[:5]), relevant))
    result = fit_gate(
        examples,
        base=EvaluatorConfig.from_profile("synapse"),
        corpus_stats=retriever.corpus_stats(),
        set_features=("similarity_top", "sentence_similarity_max", "bm25_raw_max"),
    )
    model = result.config.model
    assert model is not None
    assert {f.missing for f in model.fallbacks} >= {("sentences",), ("sentences", "similarity")}
    evaluator = Evaluator(result.config)
    query = "Why do bees dance?"
    with_sentences = evaluator.evaluate(query, retriever.search(query, 5), retriever.corpus_stats())
    assert with_sentences.details["bands"]["fallback_for"] == []
    without = [c.replace(sentence_score=None) for c in retriever.search(query, 5)]
    fell_back = evaluator.evaluate(query, without, retriever.corpus_stats())
    assert fell_back.details["bands"]["fallback_for"] == ["sentences"]
    fallback = model.for_missing(frozenset({"sentences"}))
    assert fallback is not None
    assert "sentence_similarity_max" not in [t.feature for t in fallback.set.terms]
