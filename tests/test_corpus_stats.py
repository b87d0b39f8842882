"""CorpusStats at scale: the compact term table, build (in partitions), merge, save and load."""

from __future__ import annotations

import math
import pickle
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from crag_heuristic import ConfigError, InputError
from crag_heuristic._text.corpus import FORMAT_VERSION
from crag_heuristic._text.terms import TermTable
from crag_heuristic.testing import capture_events
from crag_heuristic.text import Analyzer, ChunkAnalyses, CorpusStats, CorpusStatsFileError

TEXTS = [
    "Cats chase mice; the cat sleeps.",
    "A dog and a cat.",
    "Dogs bark at the mailman.",
    "",
    "the of and",  # only stop words
    "Ünïcödé Straße ﬁnance x² 10–20",
    "cat " * 50,
]


def reference_doc_freq(texts: list[str], analyzer: Analyzer) -> Counter[str]:
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(set(analyzer.terms(text)))
    return counts


def test_build_counts_documents_not_occurrences() -> None:
    analyzer = Analyzer()
    stats = CorpusStats.build(TEXTS, analyzer=analyzer)
    assert stats.n_docs == len(TEXTS)
    assert dict(stats.doc_freq.items()) == reference_doc_freq(TEXTS, analyzer)
    assert stats.df("cat") == 3 and stats.df("dog") == 2 and stats.df("the") == 0
    n_terms = sum(len(analyzer.terms(t)) for t in TEXTS)
    assert stats.avg_doc_len == pytest.approx(n_terms / len(TEXTS))
    assert stats.analyzer == analyzer.fingerprint
    assert isinstance(stats.doc_freq, TermTable)


def test_from_texts_is_build_and_equals_a_plain_dict() -> None:
    built = CorpusStats.from_texts(TEXTS)
    plain = CorpusStats(
        n_docs=built.n_docs,
        doc_freq=dict(reference_doc_freq(TEXTS, Analyzer())),
        avg_doc_len=built.avg_doc_len,
        analyzer=built.analyzer,
    )
    assert built.fingerprint() == plain.fingerprint()
    assert built.doc_freq == plain.doc_freq  # Mapping equality
    for term in ("cat", "dog", "strass", "unseen", ""):
        assert built.idf(term) == plain.idf(term)


def test_idf_of_the_table_by_hand() -> None:
    stats = CorpusStats(n_docs=10, doc_freq=TermTable.from_counts({"solar": 1, "panel": 4}))
    assert stats.idf("solar") == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert stats.idf("panel") == pytest.approx(math.log(1 + 6.5 / 4.5))
    assert stats.idf("unseen") == pytest.approx(math.log(2 * 10 + 2))


def test_term_table_is_an_exact_read_only_mapping() -> None:
    counts = {"cat": 3, "dog": 2, "\udcff": 1, "ﬁ": 7, "a" * 500: 4}
    table = TermTable.from_counts(counts)
    assert len(table) == 5 and set(table) == set(counts) and dict(table.items()) == counts
    assert table["cat"] == 3 and table.get("bird") is None and table.get("bird", 0) == 0
    assert "dog" in table and "bird" not in table and 3 not in table
    assert table.get(3) is None
    with pytest.raises(KeyError):
        table["bird"]
    assert pickle.loads(pickle.dumps(table)) == table
    assert TermTable.from_counts(dict(reversed(counts.items()))).digest() == table.digest()


def test_term_table_keys_collide_without_a_wrong_count(monkeypatch: pytest.MonkeyPatch) -> None:
    import crag_heuristic._text.terms as terms

    # every term on one key: lookups must compare bytes, and the order stays canonical
    monkeypatch.setattr(terms, "key64", lambda data: 42)
    counts = {"dog": 2, "cat": 3, "cow": 5}
    table = TermTable.from_counts(counts)
    assert dict(table.items()) == counts and list(table) == ["cat", "cow", "dog"]
    assert table["cat"] == 3 and table["cow"] == 5 and table.get("bird") is None
    assert TermTable.from_counts(dict(reversed(counts.items()))).digest() == table.digest()


def test_term_table_is_compact() -> None:
    counts = {f"term{i}": i % 7 + 1 for i in range(50_000)}
    table = TermTable.from_counts(counts)
    assert table.nbytes < 40 * len(counts)  # a dict of str -> int takes ~130 bytes a term


def test_bad_document_frequencies() -> None:
    with pytest.raises(InputError, match="str -> int"):
        TermTable.from_counts({"cat": "three"})  # type: ignore[dict-item]


def test_partitioned_build_equals_the_whole() -> None:
    texts = [f"{TEXTS[i % len(TEXTS)]} word{i % 13} shared" for i in range(500)]
    whole = CorpusStats.build(texts, partition_size=10_000)
    cut = CorpusStats.build(iter(texts), partition_size=64)
    assert cut.fingerprint() == whole.fingerprint()
    assert cut.avg_doc_len == whole.avg_doc_len


def test_terms_sharing_a_key_are_merged_by_the_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    import crag_heuristic._text.counting as counting

    texts = [f"{TEXTS[i % len(TEXTS)]} word{i % 13} shared" for i in range(300)]
    usual = CorpusStats.build(texts, analyses=True, partition_size=50)

    def colliding(vocab: list[str]) -> np.ndarray:
        return np.asarray([len(term) for term in vocab], dtype=np.uint64)  # many share one

    monkeypatch.setattr(counting, "vocab_keys", colliding)
    merged = CorpusStats.build(texts, analyses=True, partition_size=50)
    assert merged.fingerprint() == usual.fingerprint()
    assert merged.analyses is not None and usual.analyses is not None
    assert merged.analyses.digest() == usual.analyses.digest()


def test_build_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="at least one"):
        CorpusStats.build([])
    with pytest.raises(InputError, match="not a string"):
        CorpusStats.build(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InputError, match="text #3 is NoneType"):
        CorpusStats.build(["a", "b", "c", None], partition_size=2)  # type: ignore[list-item]
    with pytest.raises(InputError, match="one string"):
        CorpusStats.build("a text")
    with pytest.raises(InputError, match="partition_size"):
        CorpusStats.build(TEXTS, partition_size=0)
    with pytest.raises(InputError, match="fewer ids"):
        CorpusStats.build(TEXTS, ids=["a"], analyses=True)
    with pytest.raises(InputError, match="more ids"):
        CorpusStats.build(TEXTS[:1], ids=["a", "b"], analyses=True)
    with pytest.raises(ConfigError, match="engine"):
        CorpusStats.build(TEXTS, engine="spark")


def test_merge_of_shards_equals_the_whole() -> None:
    whole = CorpusStats.build(TEXTS)
    merged = CorpusStats.merge(CorpusStats.build(TEXTS[:3]), CorpusStats.build(TEXTS[3:]))
    assert merged.fingerprint() == whole.fingerprint()
    assert merged.avg_doc_len == pytest.approx(whole.avg_doc_len)
    other = CorpusStats.build(TEXTS, analyzer=Analyzer(stop_words=["cat"]))
    with pytest.raises(InputError, match="different analyzers"):
        CorpusStats.merge(whole, other)
    with pytest.raises(InputError, match="at least one"):
        CorpusStats.merge()


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    stats = CorpusStats.build(TEXTS)
    path = stats.save(tmp_path / "sub" / "stats.npz")
    assert path == tmp_path / "sub" / "stats.npz" and path.exists()
    assert not [p for p in path.parent.iterdir() if p != path]  # no temporary left
    with capture_events() as events:
        loaded = CorpusStats.load(path)
    assert loaded.fingerprint() == stats.fingerprint()
    assert loaded.n_docs == stats.n_docs and loaded.avg_doc_len == stats.avg_doc_len
    assert dict(loaded.doc_freq.items()) == dict(stats.doc_freq.items())
    [event] = [e for e in events if e["event"] == "crag.corpus_stats"]
    assert event["source"] == "loaded" and event["n_docs"] == len(TEXTS)
    assert event["seconds"] >= 0
    # the path is used as given: no suffix appended
    assert CorpusStats.build(TEXTS).save(tmp_path / "stats.bin").name == "stats.bin"
    # numpy reads it without pickle
    with np.load(path, allow_pickle=False) as data:
        assert int(data["format_version"]) == FORMAT_VERSION


def test_build_logs_an_event() -> None:
    with capture_events() as events:
        CorpusStats.build(TEXTS)
    [event] = [e for e in events if e["event"] == "crag.corpus_stats"]
    assert event["source"] == "built" and event["n_docs"] == len(TEXTS)
    assert event["n_terms"] > 0 and event["engine"] == "local"


def _rewrite(path: Path, **changes: object) -> None:
    with np.load(path, allow_pickle=False) as data:
        fields = {key: data[key] for key in data.files}
    fields.update({k: np.asarray(v) for k, v in changes.items()})
    with path.open("wb") as out:
        np.savez(out, **fields)


def test_load_refuses_another_analyzer(tmp_path: Path) -> None:
    path = CorpusStats.build(TEXTS).save(tmp_path / "s.npz")
    custom = Analyzer(stop_words=["cat"])
    with pytest.raises(CorpusStatsFileError, match="analyzer") as caught:
        CorpusStats.load(path, analyzer=custom)
    error = caught.value
    assert error.field == "analyzer"
    assert error.found == Analyzer().fingerprint and error.expected == custom.fingerprint
    assert "rebuild" in str(error)
    assert isinstance(error, InputError)
    # the same analyzer, given by fingerprint, is accepted
    assert CorpusStats.load(path, analyzer=Analyzer().fingerprint).n_docs == len(TEXTS)


def test_load_refuses_another_format_version(tmp_path: Path) -> None:
    path = CorpusStats.build(TEXTS).save(tmp_path / "s.npz")
    _rewrite(path, format_version=FORMAT_VERSION + 1)
    with pytest.raises(CorpusStatsFileError, match="format_version") as caught:
        CorpusStats.load(path)
    assert caught.value.found == FORMAT_VERSION + 1 and caught.value.expected == FORMAT_VERSION
    assert "rebuild the statistics with this version" in str(caught.value)


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        ({"kind": "something.else"}, "kind"),
        ({"counts": np.array([99] * 40)}, "content"),  # lengths no longer agree
        ({"n_docs": 1}, "content"),  # counts above n_docs
        ({"fingerprint": "0" * 16}, "fingerprint"),
        ({"blob": np.frombuffer(b"x" * 10, dtype=np.uint8)}, "content"),
    ],
)
def test_load_refuses_a_damaged_or_foreign_file(
    tmp_path: Path, damage: dict[str, object], field: str
) -> None:
    path = CorpusStats.build(TEXTS).save(tmp_path / "s.npz")
    _rewrite(path, **damage)
    with pytest.raises(CorpusStatsFileError) as caught:
        CorpusStats.load(path)
    assert caught.value.field == field


def test_load_refuses_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(CorpusStatsFileError, match="missing") as caught:
        CorpusStats.load(tmp_path / "nope.npz")
    assert caught.value.field == "file"
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")
    with pytest.raises(CorpusStatsFileError) as caught:
        CorpusStats.load(junk)
    assert caught.value.field == "kind"
    empty_zip = tmp_path / "empty.npz"
    with zipfile.ZipFile(empty_zip, "w"):
        pass
    with pytest.raises(CorpusStatsFileError) as caught:
        CorpusStats.load(empty_zip)
    assert caught.value.field == "kind"


def test_damaged_analyses_are_refused(tmp_path: Path) -> None:
    stats = CorpusStats.build(TEXTS, analyses=True)
    assert stats.analyses is not None
    arrays = stats.analyses.arrays()
    path = stats.save(tmp_path / "a.npz")
    counts = np.array(arrays["term_counts"])
    counts[0] += 1  # consistent shape, another count
    _rewrite(path, analyses_term_counts=counts)
    with pytest.raises(CorpusStatsFileError, match="analyses are damaged"):
        CorpusStats.load(path)
    path = stats.save(tmp_path / "b.npz")
    _rewrite(path, analyses_term_offsets=arrays["term_offsets"][:-1])
    with pytest.raises(CorpusStatsFileError, match="do not cut term_ids"):
        CorpusStats.load(path)
    path = stats.save(tmp_path / "c.npz")
    ids = np.array(arrays["term_ids"])
    ids[0] = len(stats.doc_freq) + 5
    _rewrite(path, analyses_term_ids=ids)
    with pytest.raises(CorpusStatsFileError, match="outside the table"):
        CorpusStats.load(path)
    # types the C extension and numpy would read differently: refused at load
    for name, values, said in (
        ("term_ids", arrays["term_ids"].astype(">u4"), "term_ids of type >u4"),
        ("term_ids", arrays["term_ids"].astype(np.uint64), "term ids of type <u8"),
        ("term_counts", arrays["term_counts"].astype(np.uint64), "counts of type <u8"),
        ("stop_ids", arrays["stop_ids"].astype(">u2"), "stop_ids of type >u2"),
    ):
        path = stats.save(tmp_path / f"d_{name}.npz")
        _rewrite(path, **{f"analyses_{name}": values})
        with pytest.raises(CorpusStatsFileError, match=said):
            CorpusStats.load(path)


def test_every_count_width_the_builder_writes_is_taken() -> None:
    stats = CorpusStats.build(TEXTS, analyses=True)
    assert stats.analyses is not None
    arrays = dict(stats.analyses.arrays())
    for kind in (np.uint8, np.uint16, np.uint32):  # 1, 2 and 4 bytes; 8 are refused above
        arrays["term_counts"] = arrays["term_counts"].astype(kind)
        found = ChunkAnalyses(arrays, stats.analyses.stop_words, stats.analyses.terms)
        assert found.problems(len(arrays["id_keys"])) == [], kind


def test_a_version_1_file_loads_without_analyses(tmp_path: Path) -> None:
    stats = CorpusStats.build(TEXTS)
    path = stats.save(tmp_path / "v1.npz")
    _rewrite(path, format_version=np.int64(1))
    loaded = CorpusStats.load(path)
    assert loaded.fingerprint() == stats.fingerprint() and loaded.analyses is None
