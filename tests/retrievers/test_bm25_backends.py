"""The sparse BM25 backend gives rank-bm25's scores and rankings, for every variant."""

from __future__ import annotations

import random

import numpy as np
import pytest

from crag_heuristic import InputError
from crag_heuristic._retrievers.bm25 import BM25Retriever, _top_k


def corpus(n: int = 300, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(60)] + ["solar", "panels", "panel", "the", "of", "and"]
    texts = []
    for i in range(n):
        if i % 37 == 0:
            texts.append("")  # empty documents: length 1 for rank-bm25 too
        elif i % 41 == 0:
            texts.append("the of and")  # stop words only
        else:
            length = rng.randint(1, 40)
            texts.append(" ".join(rng.choice(words[: 10 + i % 50]) for _ in range(length)))
    return texts


QUERIES = [
    "w1",
    "w3 w7 w11",
    "solar panels",
    "w2 w2 w2",  # a repeated term counts each time
    "w59 unknownterm",  # an unknown term adds nothing
    "panel of the w0",
]


@pytest.mark.parametrize("variant", ["lucene", "okapi", "plus"])
def test_sparse_equals_rank_bm25(variant: str) -> None:
    texts = corpus()
    sparse = BM25Retriever(texts, variant=variant)
    reference = BM25Retriever(texts, variant=variant, backend="rank-bm25")
    for query in QUERIES:
        assert np.allclose(sparse.scores(query), reference.scores(query), rtol=1e-6, atol=1e-9)
        got, want = sparse.search(query, 10), reference.search(query, 10)
        assert [c.id for c in got] == [c.id for c in want]
        assert [c.score for c in got] == pytest.approx([c.score for c in want], rel=1e-6)
    for term in ("w1", "solar", "w59", "never"):
        assert sparse.idf(term) == pytest.approx(reference.idf(term), rel=1e-9)
    assert sparse.corpus_stats().fingerprint() == reference.corpus_stats().fingerprint()
    assert sparse.corpus_stats().avg_doc_len == pytest.approx(reference.corpus_stats().avg_doc_len)


def test_sparse_backend_parameters_change_scores_as_rank_bm25() -> None:
    texts = corpus(120)
    for k1, b in ((0.9, 0.4), (2.0, 1.0), (1.2, 0.0)):
        sparse = BM25Retriever(texts, k1=k1, b=b)
        reference = BM25Retriever(texts, k1=k1, b=b, backend="rank-bm25")
        assert np.allclose(sparse.scores("w4 w5"), reference.scores("w4 w5"), rtol=1e-6)


def test_k1_zero_scores_idf_per_present_term() -> None:
    # rank-bm25 computes 0 / 0 = NaN for documents without the term when k1 = 0;
    # the sparse backend gives them 0 (the limit), and both rank the same documents
    texts = corpus(120)
    sparse = BM25Retriever(texts, k1=0.0)
    assert np.isfinite(sparse.scores("w4 w5")).all()
    with np.errstate(invalid="ignore"):
        reference = BM25Retriever(texts, k1=0.0, backend="rank-bm25")
        want = reference.search("w4 w5", 20)
    got = sparse.search("w4 w5", 20)
    assert [c.id for c in got] == [c.id for c in want]
    assert [c.score for c in got] == pytest.approx([c.score for c in want], rel=1e-6)


def test_top_k_equals_a_full_stable_sort() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 6, size=5000).astype(np.float64)  # many ties and zeros
    positive = np.flatnonzero(scores > 0)
    full = positive[np.argsort(-scores[positive], kind="stable")]
    for k in (1, 7, 100, 4000, 10_000):
        assert list(_top_k(scores, k)) == list(full[:k])
    assert list(_top_k(np.zeros(10), 3)) == []


def test_the_sparse_index_is_compact() -> None:
    texts = corpus(500)
    retriever = BM25Retriever(texts)
    postings = sum(len(set(retriever.analyzer.terms(t))) or 1 for t in texts)
    assert retriever.nbytes is not None and retriever.nbytes < 8 * postings + 2000 * 60
    assert BM25Retriever(texts, backend="rank-bm25").nbytes is None


def test_bad_backend() -> None:
    with pytest.raises(InputError, match="backend"):
        BM25Retriever(["a"], backend="lucene")
