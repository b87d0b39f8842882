"""Reading a collection in BEIR layout, with optional precomputed vectors.

    DIR/corpus.jsonl                      {"_id", "title", "text", "metadata"}
    DIR/queries.jsonl                     {"_id", "text", "metadata"}
    DIR/qrels/<split>.tsv                 query-id TAB corpus-id TAB score (header line)
    DIR/corpus_<model>.npy (+ .ids.txt)   float32 [n_docs, dim], row i = id on line i
    DIR/queries_<split>_<model>.npy (+ .ids.txt)

The first three and the corpus vectors are required (the dense retrieval
searches them; ``tools/beir_folder.py`` makes them from a BEIR download,
docs/data.md); query vectors that are missing are encoded (and cached) by the
harness with the ``bench`` extra.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._exceptions import InputError

Qrels = dict[str, dict[str, int]]
MODEL_TAG = "minilm_l6_v2"


def _jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{number}: invalid JSON: {exc.msg}") from exc


def read_qrels(path: Path) -> Qrels:
    """``query id -> {doc id: grade}`` from a TREC-style TSV with a header line."""
    qrels: Qrels = {}
    with path.open(encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter="\t")
        header = next(reader, None)
        if header is None:
            return qrels
        for row in reader:
            if len(row) < 3:
                continue
            qrels.setdefault(row[0], {})[row[1]] = int(float(row[2]))
    return qrels


def _vectors(stem: Path) -> tuple[npt.NDArray[np.float32], list[str]] | None:
    npy, ids = stem.with_suffix(".npy"), stem.with_suffix(".ids.txt")
    if not (npy.exists() and ids.exists()):
        return None
    vectors = np.load(npy).astype(np.float32, copy=False)
    names = ids.read_text(encoding="utf-8").split()
    if len(names) != vectors.shape[0]:
        raise InputError(f"{npy}: {vectors.shape[0]} rows but {len(names)} ids")
    return vectors, names


@dataclass
class Collection:
    """A BEIR collection in memory.

    Attributes:
        name: the folder name.
        doc_ids: corpus ids in file order.
        titles, texts: per doc id.
        queries: query id -> text.
        qrels: split -> query id -> {doc id: grade}.
        relevant_min: the grade from which a document counts as relevant.
        doc_vectors: corpus vectors aligned with ``doc_ids``, if present.
        query_vectors: query id -> vector, for the queries that have one.
    """

    name: str
    path: Path
    doc_ids: list[str]
    titles: dict[str, str]
    texts: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, Qrels]
    relevant_min: int = 1
    doc_vectors: npt.NDArray[np.float32] | None = None
    query_vectors: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)

    def doc_text(self, doc_id: str) -> str:
        """Title and text, as the MiniLM vectors were made (title + " " + text)."""
        title = self.titles.get(doc_id, "")
        return f"{title} {self.texts[doc_id]}".strip() if title else self.texts[doc_id]

    def relevant(self, split: str = "test") -> dict[str, set[str]]:
        """query id -> ids of its relevant documents (grade >= ``relevant_min``)."""
        return {
            qid: {d for d, g in docs.items() if g >= self.relevant_min}
            for qid, docs in self.qrels.get(split, {}).items()
        }

    def split_queries(self, split: str = "test") -> list[str]:
        """Ids of the queries judged in ``split`` that have a text, in a stable order."""
        return sorted(
            (q for q, docs in self.relevant(split).items() if docs and q in self.queries),
            key=_natural,
        )


def _natural(value: str) -> tuple[int, str]:
    digits = "".join(ch for ch in value if ch.isdigit())
    return (int(digits) if digits else 0, value)


RELEVANCE_FILE = "relevance.json"
"""A folder may declare its threshold: ``{"relevant_min": 2}`` in this file."""


def relevance_threshold(root: Path, qrels: dict[str, Qrels], declared: int | None = None) -> int:
    """The grade from which a judged document counts as relevant.

    In order: ``declared`` (the ``--relevant-min`` option); the folder's
    ``relevance.json``; else the convention of the grading scale: 2 on a 0-3
    scale (TREC's graded judgments, where 1 means "related": any grade 3
    seen), 1 otherwise (binary qrels, and BEIR's graded ones such as
    NFCorpus's 1-2, which BEIR counts from 1).

    Raises:
        InputError: an unreadable declaration or a threshold below 1.
    """
    if declared is None:
        file = root / RELEVANCE_FILE
        if file.exists():
            try:
                declared = json.loads(file.read_text(encoding="utf-8"))["relevant_min"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(f'{file}: expected {{"relevant_min": N}} ({exc})') from exc
    if declared is not None:
        if isinstance(declared, bool) or not isinstance(declared, int) or declared < 1:
            raise InputError(f"the relevance threshold must be an integer >= 1, got {declared!r}")
        return declared
    top = max(
        (g for split in qrels.values() for d in split.values() for g in d.values()), default=1
    )
    return 2 if top >= 3 else 1


def load_collection(
    path: str | Path, *, relevant_min: int | None = None, corpus_only: bool = False
) -> Collection:
    """Load the folder; the relevance threshold is ``relevant_min`` or the
    folder's own (see :func:`relevance_threshold`).

    ``corpus_only``: read the corpus (and its vectors) alone; ``queries.jsonl``
    and ``qrels/`` are neither required nor read (what self-calibration needs).

    Raises:
        InputError: a required file is missing or malformed.
    """
    root = Path(path)
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise InputError(f"{root} {what} (a folder in BEIR layout was expected)")
    required = ("corpus.jsonl",) if corpus_only else ("corpus.jsonl", "queries.jsonl", "qrels")
    for name in required:
        if not (root / name).exists():
            raise InputError(f"{root} is not in BEIR layout: {name} is missing")
    doc_ids, titles, texts = [], {}, {}
    for row in _jsonl(root / "corpus.jsonl"):
        doc_id = str(row["_id"])
        doc_ids.append(doc_id)
        titles[doc_id] = row.get("title") or ""
        texts[doc_id] = row.get("text") or ""
    queries: dict[str, str] = {}
    qrels: dict[str, Qrels] = {}
    if not corpus_only:
        queries = {str(row["_id"]): row["text"] for row in _jsonl(root / "queries.jsonl")}
        qrels = {p.stem: read_qrels(p) for p in sorted((root / "qrels").glob("*.tsv"))}
    relevant_min = 1 if corpus_only else relevance_threshold(root, qrels, relevant_min)
    collection = Collection(
        name=root.name,
        path=root,
        doc_ids=doc_ids,
        titles=titles,
        texts=texts,
        queries=queries,
        qrels=qrels,
        relevant_min=relevant_min,
    )
    corpus = _vectors(root / f"corpus_{MODEL_TAG}")
    if corpus is not None:
        vectors, ids = corpus
        if ids != doc_ids:
            order = {d: i for i, d in enumerate(ids)}
            missing = [d for d in doc_ids if d not in order]
            if missing:
                raise InputError(f"corpus vectors lack {len(missing)} documents, e.g. {missing[0]}")
            vectors = vectors[[order[d] for d in doc_ids]]
        collection.doc_vectors = vectors
    for split in qrels:
        found = _vectors(root / f"queries_{split}_{MODEL_TAG}")
        if found is not None:
            vectors, ids = found
            collection.query_vectors.update(zip(ids, vectors, strict=True))
    return collection
