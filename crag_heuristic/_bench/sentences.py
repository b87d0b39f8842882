"""Sentence vectors for the harness: MiniLM, encoded on first use, cached on disk.

The library's :class:`~crag_heuristic._text.sentences.SentenceVectors`
embeds a whole corpus at index time; a benchmark needs only the documents its
retrievals return, so this cache encodes those (the sentences of
:func:`~crag_heuristic._text.analyzer.split_sentences`, as the library splits them)
and keeps them in ``DIR/sentences_<collection>.npz`` for the next run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._text.analyzer import split_sentences
from .data import Collection
from .dense import MiniLM


class SentenceCache:
    """The unit sentence vectors of a collection's documents, by document id."""

    def __init__(self, collection: Collection, cache_dir: Path | None) -> None:
        self.collection = collection
        self.path = None if cache_dir is None else cache_dir / f"sentences_{collection.name}.npz"
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        if self.path is not None and self.path.exists():
            with np.load(self.path) as stored:
                self.vectors = {key: stored[key] for key in stored.files}
        self._encoder: MiniLM | None = None

    def sentences(self, doc: str) -> list[str]:
        text = self.collection.doc_text(doc)
        return [s for s in split_sentences(text) if s.strip()] or [text]

    def need(self, docs: Iterable[str]) -> None:
        """Encode the documents of ``docs`` not cached yet (one batch), and save."""
        missing = sorted({d for d in docs if d not in self.vectors})
        if not missing:
            return
        if self._encoder is None:
            self._encoder = MiniLM()
        texts: list[str] = []
        counts: list[int] = []
        for doc in missing:
            found = self.sentences(doc)
            texts += found
            counts.append(len(found))
        encoded = self._encoder.encode(texts, batch_size=64)
        start = 0
        for doc, n in zip(missing, counts, strict=True):
            block = np.asarray(encoded[start : start + n], dtype=np.float32)
            norms = np.linalg.norm(block, axis=1, keepdims=True)
            self.vectors[doc] = (block / np.where(norms > 0, norms, 1.0)).astype(np.float32)
            start += n
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            arrays: dict[str, Any] = dict(self.vectors)
            np.savez(self.path, **arrays)

    def best(self, query: npt.NDArray[np.float32], doc: str) -> float:
        """The cosine of ``doc``'s best sentence to ``query`` (clipped to [-1, 1])."""
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        value = float((self.vectors[doc] @ (q / norm if norm > 0 else q)).max())
        return min(1.0, max(-1.0, value))

    def scores(self, query: npt.NDArray[np.float32], docs: Sequence[str]) -> list[float]:
        self.need(docs)
        return [self.best(query, d) for d in docs]
