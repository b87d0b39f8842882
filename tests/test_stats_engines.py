"""Corpus statistics on a real Dask cluster equal the one-process build, bit for bit."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import ConfigError, InputError
from crag_heuristic._cli import main
from crag_heuristic.text import CorpusStats, DaskEngine, LocalEngine, StatsEngineError

distributed = pytest.importorskip("dask.distributed")  # the test extra installs it


def _corpus(n: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    words = ["cell", "cells", "bee", "dance", "the", "of", "Straße", "µm", "x-ray", "ﬁnance"]
    words += [f"w{i}" for i in range(400)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(n)]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A two-worker LocalCluster in threads of this process: seconds to start."""
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        dashboard_address="127.0.0.1:0",
        worker_dashboard_address="127.0.0.1:0",
    )
    with distributed.Client(cluster) as dask_client:
        yield dask_client
    cluster.close()


def _same(a: CorpusStats, b: CorpusStats) -> None:
    assert a.fingerprint() == b.fingerprint()
    assert a.n_docs == b.n_docs and a.avg_doc_len == b.avg_doc_len  # exactly
    assert (a.analyses is None) == (b.analyses is None)
    if a.analyses is not None and b.analyses is not None:
        assert a.analyses.digest() == b.analyses.digest()


def test_texts_on_dask_equal_the_one_process_build(client: Any) -> None:
    texts = _corpus(1200)
    ids = [f"doc-{i}" for i in range(len(texts))]
    local = CorpusStats.build(texts, ids=ids, analyses=True, partition_size=5000)
    engine = DaskEngine(client=client, in_flight=3)
    on_dask = CorpusStats.build(
        iter(texts), ids=iter(ids), analyses=True, partition_size=97, engine=engine
    )
    _same(on_dask, local)
    _same(
        CorpusStats.build(texts, engine=engine, partition_size=200),
        CorpusStats.build(texts, engine=LocalEngine()),
    )
    assert client.run(lambda: 1)  # the client passed in is left open


def test_a_documents_file_on_dask_equals_the_one_process_build(client: Any, tmp_path: Path) -> None:
    texts = _corpus(600, seed=8)
    path = tmp_path / "docs.jsonl"
    lines = []
    for i, text in enumerate(texts):
        record = {"text": text, "title": "T"} if i % 3 else {"_id": f"d{i}", "text": text}
        lines.append(json.dumps(record))
        if i % 50 == 0:
            lines.append("")  # a blank line is no document
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    local = CorpusStats.from_jsonl(path, analyses=True)
    on_dask = CorpusStats.from_jsonl(
        path, analyses=True, engine=DaskEngine(client=client), partition_bytes=2048
    )
    _same(on_dask, local)
    assert local.n_docs == len(texts)
    analyses = on_dask.analyses
    assert analyses is not None
    # a document without an id is known by its position among the documents, as retrieve does
    assert analyses.get("4", f"T\n{texts[4]}") is not None
    assert analyses.get("d3", texts[3]) is not None


def test_errors_reach_the_caller_typed(client: Any, tmp_path: Path) -> None:
    engine = DaskEngine(client=client)
    with pytest.raises(InputError, match="text #5 is int"):
        CorpusStats.build(["a"] * 5 + [7], engine=engine, partition_size=2)  # type: ignore[list-item]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(InputError, match="the line at byte 17"):
        CorpusStats.from_jsonl(bad, engine=engine)
    with pytest.raises(InputError, match="cannot read"):
        CorpusStats.from_jsonl(tmp_path / "missing.jsonl", engine=engine)
    unreachable = DaskEngine("tcp://127.0.0.1:1", timeout=1)
    with pytest.raises(StatsEngineError, match="cannot reach") as caught:
        CorpusStats.build(["a text"], engine=unreachable)
    assert caught.value.engine == "dask"
    with pytest.raises(ConfigError, match="n_workers"):
        DaskEngine(n_workers=0)
    with pytest.raises(ConfigError, match="not both"):
        DaskEngine("tcp://127.0.0.1:1", client=client)


def test_the_stats_command_on_a_two_worker_local_cluster(tmp_path: Path) -> None:
    texts = _corpus(300, seed=11)
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)),
        encoding="utf-8",
    )
    summaries = []
    for engine in ("local", "dask"):
        out = io.StringIO()
        target = tmp_path / f"{engine}.npz"
        args = ["stats", "--docs", str(docs), "--out", str(target), "--engine", engine]
        assert main([*args, "--partition-mb", "1"], out=out) == 0
        summaries.append(json.loads(out.getvalue()))
    local, dask = summaries
    assert local["fingerprint"] == dask["fingerprint"] and local["documents"] == 300
    assert local["analyses"] == dask["analyses"] == 300
    _same(CorpusStats.load(tmp_path / "local.npz"), CorpusStats.load(tmp_path / "dask.npz"))
    assert main(["stats", "--docs", str(docs), "--out", "x.npz", "--scheduler", "tcp://h:1"]) == 2


def test_the_stats_command_reads_a_json_array_and_refuses_bad_input(tmp_path: Path) -> None:
    docs = tmp_path / "docs.json"
    docs.write_text(json.dumps([{"id": "a", "text": "bees dance"}, "a plain text"]), "utf-8")
    out = io.StringIO()
    assert main(["stats", "--docs", str(docs), "--out", str(tmp_path / "s.npz")], out=out) == 0
    stats = CorpusStats.load(tmp_path / "s.npz")
    assert stats.n_docs == 2 and stats.analyses is not None
    assert stats.analyses.get("a", "bees dance") is not None
    assert stats.analyses.get("1", "a plain text") is not None  # no id: its position
    missing = ["stats", "--docs", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "x.npz")]
    assert main(missing) == 2
