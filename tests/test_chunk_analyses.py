"""Chunk analyses made at index time: the same analysis, the same evaluation, never stale."""

from __future__ import annotations

import json
import random
from pathlib import Path

import faiss
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crag_heuristic import BM25Retriever, Chunk, Evaluator, FaissRetriever, InputError, ScoreKind
from crag_heuristic._text.analyses import ChunkAnalyses
from crag_heuristic.text import Analyzer, CorpusStats

TEXTS = [
    "Honeybees dance; the bees follow the dancer.",
    "A cell and a membrane.",
    "",
    "of the and to",  # only stop words
    "Ünïcödé Straße ﬁnance x² 10–20 ± 3 µm",
    "cat " * 300,  # a count past 255
    "İstanbul ΣΊΣΥΦΟΣ lone \ud800 surrogate",
]


def _fields(stats: object) -> tuple[object, ...]:
    names = ("term_set", "stop_set", "n_tokens", "term_counts", "n_terms")
    return tuple(getattr(stats, name) for name in names)


def test_a_stored_analysis_is_the_analyzers() -> None:
    stats = CorpusStats.build(TEXTS, analyses=True)
    assert stats.analyses is not None and len(stats.analyses) == len(TEXTS)
    analyzer = Analyzer()
    for position, text in enumerate(TEXTS):
        stored = stats.analyses.get(str(position), text)
        assert stored == analyzer.analyze(text)
        assert _fields(stored) == _fields(analyzer.analyze(text))
        assert _fields(analyzer.analyze_lazily(text)) == _fields(analyzer.analyze(text))


def test_a_changed_text_is_never_served_and_a_known_text_whatever_its_id() -> None:
    stats = CorpusStats.build(TEXTS, ids=[f"doc-{i}" for i in range(len(TEXTS))], analyses=True)
    assert stats.analyses is not None
    analyzer = Analyzer()
    assert stats.analyses.get("doc-0", TEXTS[0]) is not None
    assert stats.analyses.get("doc-0", TEXTS[0] + " and more") is None  # stale: tokenise
    assert stats.analyses.get("new", "a text the corpus never held") is None
    # the digest decides: another document's text under this id, a known text under
    # another id, are that text's analysis
    assert stats.analyses.get("doc-0", TEXTS[1]) == analyzer.analyze(TEXTS[1])
    assert stats.analyses.get("0", TEXTS[0]) == analyzer.analyze(TEXTS[0])
    assert stats.analyses.get_many([]) == []


def test_statistics_built_without_ids_find_the_chunks_by_their_text() -> None:
    """``build(texts, analyses=True)`` without ids keys the rows by position; a chunk of
    another id is found by its text's digest (it was not: 0 of 10 real ids found)."""
    stats = CorpusStats.from_texts(TEXTS)
    assert stats.analyses is not None  # from_texts keeps the analyses by default
    analyzer = Analyzer()
    found = stats.analyses.get_many([(f"real-{i}", text) for i, text in enumerate(TEXTS)])
    assert [_fields(f) for f in found] == [_fields(analyzer.analyze(t)) for t in TEXTS]
    # rows sharing their digest's first 8 bytes (the index's key) are told apart by the
    # whole digest
    arrays = dict(stats.analyses.arrays())
    digests = arrays["digests"].copy()
    digests[1, :8] = digests[0, :8]
    arrays["digests"] = digests
    forged = ChunkAnalyses(arrays, stats.analyses.stop_words, stats.analyses.terms)
    wanted = [bytes(digests[1]), bytes(digests[0]), bytes(digests[0, :8]) + b"\x00" * 8]
    assert forged._rows_of_digests(wanted) == [1, 0, None]
    assert CorpusStats.from_texts(TEXTS, analyses=False).analyses is None


def test_integer_ids_are_their_decimal_strings() -> None:
    stats = CorpusStats.build(["alpha text", "beta text"], ids=[7, 3], analyses=True)  # type: ignore[list-item]
    assert stats.analyses is not None
    assert stats.analyses.get("7", "alpha text") is not None
    assert stats.analyses.get("3", "beta text") is not None
    assert stats.analyses.get("0", "beta text") is not None  # found by its text


def test_repeated_ids_are_told_apart_by_their_texts() -> None:
    stats = CorpusStats.build(["one text", "another text"], ids=["same", "same"], analyses=True)
    assert stats.analyses is not None
    analyzer = Analyzer()
    assert stats.analyses.get("same", "one text") == analyzer.analyze("one text")
    assert stats.analyses.get("same", "another text") == analyzer.analyze("another text")


def _chunks(rng: random.Random, texts: list[str], k: int) -> list[Chunk]:
    picked = rng.sample(range(len(texts)), k)
    return [
        Chunk(
            id=str(i),
            text=texts[i],
            score=round(rng.uniform(0.2, 0.9), 3),
            score_kind=ScoreKind.COSINE,
            source=f"s{i % 3}",
        )
        for i in picked
    ]


def test_evaluations_are_bit_identical_with_and_without_the_store() -> None:
    rng = random.Random(5)
    words = ["cell", "cells", "dance", "bee", "honey", "the", "of", "µm", "Straße", "x-ray"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 40))) for _ in range(60)]
    with_store = CorpusStats.build(texts, analyses=True)
    without = CorpusStats.build(texts)
    assert with_store.fingerprint() == without.fingerprint()
    for trial in range(40):
        query = " ".join(rng.sample(words, 3))
        chunks = _chunks(rng, texts, rng.choice([1, 5, 10]))
        assert with_store.analyses is not None
        assert None not in with_store.analyses.get_many([(c.id, c.text) for c in chunks])
        stored = Evaluator(all_evidence=True).evaluate(query, chunks, with_store)
        tokenised = Evaluator(all_evidence=True).evaluate(query, chunks, without)
        assert json.dumps(stored.to_dict(), sort_keys=True) == json.dumps(
            tokenised.to_dict(), sort_keys=True
        ), trial
    # a chunk whose text changed since is tokenised: the evaluation is that of its new text
    changed = [chunks[0].replace(text=chunks[0].text + " honey bee"), *chunks[1:]]
    assert (
        Evaluator().evaluate("honey bee", changed, with_store).to_dict()
        == Evaluator().evaluate("honey bee", changed, without).to_dict()
    )


def test_the_store_is_used_only_with_its_own_analyzer(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = CorpusStats.build(TEXTS, analyses=True)
    chunks = [Chunk(id=str(i), text=t) for i, t in enumerate(TEXTS) if t.strip()]
    served: list[int] = []
    real = ChunkAnalyses.get_many

    def counting(
        self: ChunkAnalyses, pairs: list[tuple[str, str]], terms: tuple[str, ...] = ()
    ) -> list[object]:
        served.append(len(pairs))
        return real(self, pairs, terms)  # type: ignore[return-value]

    monkeypatch.setattr(ChunkAnalyses, "get_many", counting)
    Evaluator().evaluate("cats", chunks, stats)
    assert served == [len(chunks)]
    other = Evaluator(analyzer=Analyzer(stop_words=["cat"]))
    other.evaluate("cats", chunks, CorpusStats.build(TEXTS, analyses=True))
    assert served == [len(chunks)]  # another analyzer's terms: tokenised, never looked up


def test_save_load_and_merge_keep_the_analyses(tmp_path: Path) -> None:
    stats = CorpusStats.build(TEXTS, analyses=True)
    loaded = CorpusStats.load(stats.save(tmp_path / "stats.npz"))
    assert loaded.fingerprint() == stats.fingerprint()
    assert loaded.analyses is not None and stats.analyses is not None
    assert loaded.analyses.digest() == stats.analyses.digest()
    for position, text in enumerate(TEXTS):
        assert loaded.analyses.get(str(position), text) == Analyzer().analyze(text)
    extra = CorpusStats.build(["new words here"], ids=["x"], analyses=True)
    merged = CorpusStats.merge(loaded, extra)
    assert merged.analyses is not None and len(merged.analyses) == len(TEXTS) + 1
    assert merged.analyses.get("x", "new words here") == Analyzer().analyze("new words here")
    assert merged.analyses.get("5", TEXTS[5]) == Analyzer().analyze(TEXTS[5])
    assert CorpusStats.merge(loaded, CorpusStats.build(["plain"])).analyses is None


def test_analyses_belong_to_their_own_table() -> None:
    stats = CorpusStats.build(TEXTS, analyses=True)
    with pytest.raises(InputError, match="ChunkAnalyses built with this doc_freq"):
        CorpusStats(n_docs=stats.n_docs, doc_freq=dict(stats.doc_freq), analyses=stats.analyses)


def test_retrievers_that_hold_the_corpus_build_analyses_their_chunks_find() -> None:
    docs = [{"id": f"d{i}", "title": "T", "text": t} for i, t in enumerate(TEXTS)]
    vectors = np.random.default_rng(0).standard_normal((len(docs), 8)).astype(np.float32)
    faiss.normalize_L2(vectors)
    index = faiss.IndexFlatIP(8)
    index.add(vectors)
    dense = FaissRetriever(index, docs, lambda q: vectors[0], normalized=True)
    lexical = BM25Retriever(docs)
    for retriever in (dense, lexical):
        stats = retriever.corpus_stats()
        assert stats is not None and stats.analyses is not None
        chunks = dense.search("cats", 8) if retriever is dense else lexical.search("cat", 3)
        assert chunks
        for chunk in chunks:
            assert stats.analyses.get(chunk.id, chunk.text) == Analyzer().analyze(chunk.text)
    plain = FaissRetriever(index, docs, lambda q: vectors[0], chunk_analyses=False)
    assert plain.corpus_stats() is not None and plain.corpus_stats().analyses is None  # type: ignore[union-attr]


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60),
        min_size=1,
        max_size=8,
    )
)
def test_any_text_is_stored_as_it_is_analysed(texts: list[str]) -> None:
    stats = CorpusStats.build(texts, analyses=True, partition_size=3)
    assert stats.analyses is not None
    for position, text in enumerate(texts):
        assert stats.analyses.get(str(position), text) == _ANALYZER.analyze(text)


_ANALYZER = Analyzer()


_WEB = [
    "Zürich’s café serves crème brûlée at 10–20 °C — “naïve” ± 3 µm ﬁnance.",
    "İstanbul ΣΊΣΥΦΟΣ Straße: x² × 4, the cells’ membrane and the bee’s dance.",
]


def _json(evaluation: object) -> str:
    return json.dumps(evaluation.to_dict(), sort_keys=True)  # type: ignore[attr-defined]


def test_cold_stored_cold_tokenised_and_warm_evaluations_are_bit_identical() -> None:
    """The same evaluation, every feature, verdict and score, whether its chunks were
    looked up in the analyses (first sight), tokenised (no analyses), decoded on a
    second sight or read from the evaluator's cache; corpus chunks mixed with web text."""
    from crag_heuristic._sample import load_sample_corpus

    corpus = [*load_sample_corpus()[:40], *(Chunk(id=f"w{i}", text=t) for i, t in enumerate(_WEB))]
    with_store = CorpusStats.build(
        [c.text for c in corpus], ids=[c.id for c in corpus], analyses=True
    )
    without = CorpusStats.build([c.text for c in corpus])
    rng = random.Random(11)
    web = [Chunk(id="new", text="Crème brûlée in Zürich — µm-scale bees, not in the corpus.")]
    queries = [
        "how do honey bees dance",
        "crème brûlée Zürich µm",
        "of the and",  # only stop words
        "zebra quasar",  # terms the corpus never held
        "bees bees dance bees",
    ]
    default = Evaluator()  # the gate's features only: stored rows never decoded
    for trial in range(30):
        picked = rng.sample(corpus, rng.choice([1, 3, 10]))
        chunks = [
            c.replace(score=round(rng.uniform(0.2, 0.9), 3), score_kind=ScoreKind.COSINE)
            for c in picked + (web if trial % 3 == 0 else [])
        ]
        query = queries[trial % len(queries)]
        assert with_store.analyses is not None
        assert None not in with_store.analyses.get_many([(c.id, c.text) for c in picked])
        stored = Evaluator(all_evidence=True)
        tokenised = Evaluator(all_evidence=True)
        expected = _json(tokenised.evaluate(query, chunks, without))
        assert _json(stored.evaluate(query, chunks, with_store)) == expected, trial  # cold
        assert _json(stored.evaluate(query, chunks, with_store)) == expected, trial  # decoded
        assert _json(stored.evaluate(query, chunks, with_store)) == expected, trial  # warm
        assert _json(tokenised.evaluate(query, chunks, without)) == expected, trial  # warm
        # seen before with other queries (decoded then), or analysed without a query
        plain = Evaluator().evaluate(query, chunks, without).to_dict()
        assert default.evaluate(query, chunks, with_store).to_dict() == plain, trial
        unread = Evaluator()
        unread.analyze_chunks(chunks, with_store)
        assert unread.evaluate(query, chunks, with_store).to_dict() == plain, trial


def test_query_counts_are_the_term_counts_of_the_rows() -> None:
    stats = CorpusStats.build(TEXTS, analyses=True)
    assert stats.analyses is not None
    analyzer = Analyzer()
    found = stats.analyses.get_many([(str(i), t) for i, t in enumerate(TEXTS)])
    rows = [s.row for s in found]  # type: ignore[union-attr]
    terms = ["cat", "bee", "zebra", "strass", "μm", "σίσυφοσ", "financ", "cat"]  # unknown; twice
    counts = stats.analyses.query_counts(rows, terms)
    assert counts == [[analyzer.analyze(t).term_counts.get(w, 0) for w in terms] for t in TEXTS]
    assert counts[5][0] == 300  # a count past 255
    assert stats.analyses.query_counts([], terms) == []
    assert stats.analyses.query_counts(rows, []) == [[] for _ in rows]
    looked_up = stats.analyses.get_many([("5", TEXTS[5])], ("cat", "zebra"))[0]
    assert looked_up is not None and looked_up.query == (("cat", "zebra"), [300, 0])  # type: ignore[attr-defined]
