"""Index directories: built once, loaded whole, and refused when they do not match."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crag_heuristic import (
    CRAG,
    BM25Retriever,
    Chunk,
    Evaluator,
    InputError,
    MissingDependencyError,
)
from crag_heuristic.index import DocStore, IndexDirectory, IndexDirectoryError, IndexManifest
from crag_heuristic.sample import load_sample_corpus, load_sample_queries, sample_retriever
from crag_heuristic.text import Analyzer


def _stable(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = result.to_dict()
    for name in ("timings_ms", "cache_hit"):
        data.pop(name)
    return data


def test_the_loaded_router_answers_as_the_one_built_in_memory(built: IndexDirectory) -> None:
    """The directory's router (its LSA projection, vectors, BM25 side and statistics, read
    back) answers every sample query as the router built from the corpus in memory."""
    loaded = CRAG.from_index_dir(built.path, cache=False)
    memory = CRAG(sample_retriever(), lexical=BM25Retriever(load_sample_corpus()), cache=False)
    for query in [q["text"] for q in load_sample_queries()]:
        a, b = loaded.retrieve(query, 5), memory.retrieve(query, 5)
        assert [c.id for c in a.chunks] == [c.id for c in b.chunks], query
        assert [c.score for c in a.retrieved] == pytest.approx(
            [c.score for c in b.retrieved], abs=1e-5
        )
        assert (a.verdict, a.strategy, a.evaluation.score) == (
            b.verdict,
            b.strategy,
            pytest.approx(b.evaluation.score, abs=1e-6),
        )


def test_its_parts_are_whole_and_agree(built: IndexDirectory) -> None:
    loaded = IndexDirectory.load(built.path)
    manifest = loaded.manifest
    assert manifest.documents == 64 == len(loaded.docs) == loaded.corpus_stats.n_docs
    assert manifest.embedder == {"kind": "lsa", "file": "embedder.npz", "dimension": 63}
    assert set(manifest.files) == {
        "vectors.faiss", "docs.jsonl", "docs.index.npz", "stats.npz", "bm25.npz", "embedder.npz",
    }  # fmt: skip
    assert manifest.corpus_stats["fingerprint"] == loaded.corpus_stats.fingerprint()
    corpus = load_sample_corpus()
    # the statistics hold every document's analysis keyed by its id: a retrieved chunk
    # is looked up, never tokenised
    analyses = loaded.corpus_stats.analyses
    assert analyses is not None
    found = analyses.get_many([(c.id, c.text) for c in corpus])
    analyzer = Analyzer()
    assert all(f == analyzer.analyze(c.text) for f, c in zip(found, corpus, strict=True))
    # the BM25 side read back scores as the one built from the corpus, nothing recomputed
    lexical, fresh = loaded.lexical(), BM25Retriever(corpus)
    for query in ("queen honeybee colony", "roman roads", "espresso caffeine"):
        assert lexical.search(query, 5) == fresh.search(query, 5)
    assert lexical.get("honeybees-1") == fresh.get("honeybees-1") is not None
    assert lexical.get("nope") is None
    assert lexical.corpus_stats() is loaded.corpus_stats
    assert [loaded.docs[i].id for i in range(64)] == [c.id for c in corpus] == loaded.docs.ids


def test_the_manifest_is_checked_and_a_changed_directory_refused(
    built: IndexDirectory, tmp_path: Path
) -> None:
    def copy() -> Path:
        target = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(built.path, target)
        return target

    def refused(path: Path, field: str, **options: Any) -> IndexDirectoryError:
        with pytest.raises(IndexDirectoryError) as caught:
            IndexDirectory.load(path, **options)
        assert caught.value.field == field and isinstance(caught.value, InputError)
        return caught.value

    assert refused(tmp_path / "none", "manifest").found == "no such directory"
    missing = copy()
    (missing / "manifest.json").unlink()
    assert refused(missing, "manifest").found == "missing"
    for change, field in (
        ({"kind": "something.else"}, "kind"),
        ({"format_version": 2}, "format_version"),
        ({"documents": "many"}, "manifest"),
    ):
        path = copy()
        data = json.loads((path / "manifest.json").read_text())
        (path / "manifest.json").write_text(json.dumps({**data, **change}))
        refused(path, field)
    (copy() / "manifest.json").write_text("{not json")
    gone = copy()
    (gone / "bm25.npz").unlink()
    assert refused(gone, "file").found == "bm25.npz missing"
    longer = copy()
    with open(longer / "docs.jsonl", "ab") as handle:
        handle.write(b"\n")
    assert "docs.jsonl of" in refused(longer, "file").found
    # one byte changed, the size the same: the SHA-256 tells, unless only sizes are checked
    changed = copy()
    data = bytearray((changed / "docs.jsonl").read_bytes())
    data[data.index(b"honey")] = ord("m")
    (changed / "docs.jsonl").write_bytes(bytes(data))
    error = refused(changed, "file")
    assert error.found == "docs.jsonl of another SHA-256" and "rebuild it" in str(error)
    assert IndexDirectory.load(changed, verify=False).manifest.documents == 64
    again = pickle.loads(pickle.dumps(error))  # a worker's error, sent back whole
    assert (type(again), str(again), vars(again)) == (type(error), str(error), vars(error))
    refused(built.path, "analyzer", analyzer=Analyzer(stop_words=["the"]))
    with pytest.raises(IndexDirectoryError, match="analyzer"):
        CRAG.from_index_dir(built.path, Evaluator(analyzer=Analyzer(stop_words=["the"])))


def test_a_build_writes_a_new_directory_or_replaces_an_index_whole(tmp_path: Path) -> None:
    stages: list[tuple[str, int, int | None]] = []
    docs = [
        {"_id": "a", "title": "Bees", "text": "Honeybees dance to tell where flowers are."},
        {"id": "b", "text": "Ünïcödé café\nnotes", "metadata": {"lang": "fr"}, "source": "s"},
        "A plain string: its position is its id.",
    ]
    built = IndexDirectory.build(
        docs, tmp_path / "idx", progress=lambda *event: stages.append(event), batch_size=2
    )
    assert [s for s in stages if s[0] == "embedding"] == [
        ("embedding", 0, 3), ("embedding", 2, 3), ("embedding", 3, 3),
    ]  # fmt: skip
    assert [s[0] for s in stages] == sorted(
        (s[0] for s in stages), key=["analysing", "fitting", "embedding", "writing"].index
    )
    store = IndexDirectory.load(built.path).docs
    assert [c.id for c in store] == ["a", "b", "2"] == store.ids
    assert store[0].text == "Bees\nHoneybees dance to tell where flowers are."
    assert (store[1].metadata, store[1].source) == ({"lang": "fr"}, "s")
    assert store[-1] == store[2] and [c.id for c in store[1:]] == ["b", "2"]
    with pytest.raises(IndexError):
        store[3]
    before = (built.path / "manifest.json").read_text()
    IndexDirectory.build(docs[:2], tmp_path / "idx")  # replaced whole
    assert json.loads((tmp_path / "idx" / "manifest.json").read_text())["documents"] == 2
    assert before != (tmp_path / "idx" / "manifest.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no temporary left


@pytest.mark.parametrize(
    ("documents", "match"),
    [
        ([], "at least one document"),
        ("a text", "a sequence"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "duplicate document id 'a'"),
        ([{"id": "a"}], "document 0"),
        ([Chunk(id="a", text="x", metadata={"when": object()})], "metadata is not JSON"),
    ],
)
def test_bad_documents_are_refused_and_nothing_is_left(
    tmp_path: Path, documents: Any, match: str
) -> None:
    with pytest.raises(InputError, match=match):
        IndexDirectory.build(documents, tmp_path / "idx", embedder=f"{__name__}:HashEmbedder")
    assert list(tmp_path.iterdir()) == []


class HashEmbedder:
    """A model of one's own: 16 dimensions from the words' hashes; a batch method."""

    calls: list[int] = []  # noqa: RUF012 - the batches' sizes, for the test

    def embed_many(self, texts: list[str]) -> np.ndarray[Any, Any]:
        HashEmbedder.calls.append(len(texts))
        return np.stack([self(text) for text in texts])

    def __call__(self, text: str) -> np.ndarray[Any, Any]:
        vector = np.zeros(16)
        for word in text.lower().split():
            vector[sum(map(ord, word)) % 16] += 1.0
        return vector


def nan_embedder(text: str) -> list[float]:
    return [float("nan")] * 4


def test_an_embedder_of_ones_own_is_named_by_its_spec(tmp_path: Path) -> None:
    corpus = load_sample_corpus()
    HashEmbedder.calls.clear()
    built = IndexDirectory.build(
        corpus, tmp_path / "idx", embedder=f"{__name__}:HashEmbedder", batch_size=50
    )
    assert HashEmbedder.calls == [50, 14]
    assert built.manifest.embedder == {
        "kind": "spec", "spec": f"{__name__}:HashEmbedder", "dimension": 16,
    }  # fmt: skip
    assert "embedder.npz" not in built.manifest.files
    # the loaded router embeds the query with the same model: the top 3 by cosine
    embed = HashEmbedder()
    matrix = np.stack([embed(c.text) for c in corpus])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    query = embed("honeybee queen colony")
    best = np.argsort(-(matrix @ (query / np.linalg.norm(query))), kind="stable")[:3]
    spec = f"{__name__}:HashEmbedder"
    crag = CRAG.from_index_dir(built.path, embedder=spec)  # named again by the operator
    retrieved = crag.retrieve("honeybee queen colony", 3).retrieved
    assert {c.id for c in retrieved} == {corpus[i].id for i in best}
    for options in ({}, {"embedder": "lsa"}, {"embedder": f"{__name__}:Other"}):
        with pytest.raises(IndexDirectoryError, match="code it would import") as refused:
            CRAG.from_index_dir(built.path, **options)  # type: ignore[arg-type]
        assert refused.value.field == "embedder"
    assert CRAG.from_index_dir(built.path, trust_embedder=True).retriever is not None
    for spec, match in (
        ("no_such_module_x:f", "cannot load embedder"),
        ("json", "'lsa' or 'package.module:attribute'"),
        (f"{__name__}:nan_embedder", "NaN or inf"),
        ("json:__doc__", "neither callable nor has embed_query"),
    ):
        with pytest.raises(InputError, match=match):
            IndexDirectory.build(corpus, tmp_path / "bad", embedder=spec)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]
    # a spec that no longer loads where the directory is read: refused when first needed
    manifest = json.loads((built.path / "manifest.json").read_text())
    manifest["embedder"]["spec"] = "no_such_module_x:f"
    (built.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexDirectoryError, match="cannot load embedder"):
        IndexDirectory.load(built.path, trust_embedder=True).retriever()


def test_lsa_without_scikit_learn_names_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "sklearn", None)  # an install without scikit-learn
    monkeypatch.setitem(sys.modules, "sklearn.decomposition", None)
    with pytest.raises(MissingDependencyError, match="calibrate"):
        IndexDirectory.build(["a text", "another"], tmp_path / "idx")


def test_a_docstore_reads_what_it_is_asked_for(built: IndexDirectory) -> None:
    store = DocStore.open(built.path)
    assert len(store) == 64 and repr(store).endswith("documents=64)")
    assert store[5] == load_sample_corpus()[5]
    with pytest.raises(TypeError):
        store["5"]  # type: ignore[call-overload]
    store.close()
    manifest = IndexManifest.read(built.path)
    assert (
        manifest.dimension == 63 and manifest.to_dict()["kind"] == "crag_heuristic.IndexDirectory"
    )
