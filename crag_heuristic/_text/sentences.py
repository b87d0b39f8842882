"""Sentence vectors made at index time: each chunk's best sentence against the query.

A bi-encoder embeds a whole chunk in one vector, truncated at its model's
token cap (256 word pieces for all-MiniLM-L6-v2) and averaged over every
topic the chunk touches: a chunk that answers in one sentence among ten can
score like its on-topic neighbours that answer nothing. Embedding each
sentence once, at index time, with the same embedder gives at search time,
for a few dot products per chunk, the cosine of the chunk's best sentence::

    sentence_score(q, chunk) = max_s  q . s / (|q| |s|)      s: the chunk's sentences

(the evaluator's ``sentence_similarity`` evidence; a chunk's sentences are
:func:`crag_heuristic._text.analyzer.split_sentences` of its text). Measured on the
failure benchmark (``python -m research.evidence_probe --sentences``): alone it
beats the chunk's own cosine on SciFact and NFCorpus by about 0.04 AUC.

:class:`SentenceVectors` holds the vectors of a corpus (float16, unit length,
one block of rows per document), looked up by document id and a digest of the
text: a chunk whose text is not the one indexed gets no score, never another
text's. It saves to one ``.npz`` file (format versioned, checked on load).
Memory: ``sentences x dimensions x 2`` bytes (a million 10-sentence chunks at
384 dimensions: 7.7 GB), which is why it is opt-in.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._exceptions import InputError, _short
from .._types import Chunk
from .analyzer import split_sentences
from .npz import read_npz

SENTENCES_FORMAT = 1
"""The version of the sentence vectors' file format."""
_KIND = "crag_heuristic.SentenceVectors"

EmbedMany = Callable[[Sequence[str]], Any]
"""``texts -> [n, d]`` vectors (an embedder's batch call)."""


def text_digest(text: str) -> bytes:
    """Eight bytes of BLAKE2b of a text's UTF-8: what a stored document is checked against."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


class SentenceVectors:
    """The sentence vectors of a corpus, by document id (see the module doc).

    Build with :meth:`build` (or load with :meth:`load`); score a search's
    chunks with :meth:`scores`.
    """

    def __init__(
        self,
        ids: Sequence[str],
        digests: Sequence[bytes],
        offsets: npt.NDArray[np.int64],
        vectors: npt.NDArray[np.float16],
        *,
        embedder: str = "",
    ) -> None:
        if len(ids) != len(digests) or len(offsets) != len(ids) + 1:
            raise InputError("sentence vectors: ids, digests and offsets do not match")
        if vectors.ndim != 2 or int(offsets[-1]) != vectors.shape[0]:
            raise InputError("sentence vectors: the offsets do not cover the vectors")
        self._row = {doc: i for i, doc in enumerate(ids)}
        if len(self._row) != len(ids):
            raise InputError("sentence vectors: document ids repeat")
        self.ids = list(ids)
        self.digests = list(digests)
        self.offsets = offsets
        self.vectors = vectors
        self.embedder = embedder

    @property
    def dimensions(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return (
            f"SentenceVectors(documents={len(self)}, sentences={self.vectors.shape[0]}, "
            f"dimensions={self.dimensions})"
        )

    @classmethod
    def build(
        cls,
        documents: Iterable[tuple[str, str] | Chunk],
        embed_many: EmbedMany,
        *,
        batch_size: int = 256,
        embedder: str = "",
    ) -> SentenceVectors:
        """Split each document into sentences and embed them, ``batch_size`` at a time.

        Args:
            documents: ``(id, text)`` pairs or chunks (their ``id`` and ``text``).
            embed_many: the embedder the index was made with, as a batch call
                ``texts -> [n, d]`` vectors.
            batch_size: sentences per call.
            embedder: a name for it, kept in the saved file.

        Raises:
            InputError: repeated ids, or an embedder that answers the wrong
                number of vectors, vectors of changing width or non-finite ones.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, got {_short(batch_size)}")
        ids: list[str] = []
        digests: list[bytes] = []
        counts: list[int] = []
        sentences: list[str] = []
        for item in documents:
            doc, text = (item.id, item.text) if isinstance(item, Chunk) else item
            found = [s for s in split_sentences(text) if s.strip()] or [text]
            ids.append(str(doc))
            digests.append(text_digest(text))
            counts.append(len(found))
            sentences += found
        blocks: list[npt.NDArray[np.float16]] = []
        for start in range(0, len(sentences), batch_size):
            batch = sentences[start : start + batch_size]
            try:
                raw = np.asarray(embed_many(batch), dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise InputError(f"the embedder returned no vectors: {exc}") from exc
            if raw.ndim != 2 or raw.shape[0] != len(batch):
                raise InputError(f"the embedder answered {raw.shape} for {len(batch)} sentences")
            if blocks and raw.shape[1] != blocks[0].shape[1]:
                raise InputError("the embedder's vectors change width")
            if not np.all(np.isfinite(raw)):
                raise InputError("the embedder returned NaN or inf values")
            norms = np.linalg.norm(raw, axis=1, keepdims=True)
            blocks.append((raw / np.where(norms > 0, norms, 1.0)).astype(np.float16))
        dims = blocks[0].shape[1] if blocks else 0
        vectors = np.concatenate(blocks) if blocks else np.zeros((0, dims), dtype=np.float16)
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(ids, digests, offsets, vectors, embedder=embedder)

    def best(self, query: npt.ArrayLike, doc: str, text: str) -> float | None:
        """The cosine of ``doc``'s best sentence to ``query``; ``None`` when the
        document is unknown or its text is not the one indexed."""
        row = self._row.get(doc)
        if row is None or self.digests[row] != text_digest(text):
            return None
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm == 0 or q.shape[0] != self.dimensions:
            return None
        block = self.vectors[self.offsets[row] : self.offsets[row + 1]]
        best = float((block.astype(np.float32) @ (q / norm)).max())
        return min(1.0, max(-1.0, best))  # float16 rounding may step just past 1

    def scores(self, query: npt.ArrayLike, chunks: Sequence[Chunk]) -> list[float | None]:
        """:meth:`best` of each chunk."""
        return [self.best(query, c.id, c.text) for c in chunks]

    # -- the file ---------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write one ``.npz`` (atomic: a temporary file renamed)."""
        target = Path(path)
        if target.suffix != ".npz":
            target = target.with_suffix(".npz")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        with partial.open("wb") as handle:
            np.savez(
                handle,
                kind=np.array(_KIND),
                format_version=np.array(SENTENCES_FORMAT),
                embedder=np.array(self.embedder),
                ids=np.array(self.ids, dtype=str),
                digests=np.frombuffer(b"".join(self.digests), dtype=np.uint8).reshape(-1, 8),
                offsets=self.offsets,
                vectors=self.vectors,
            )
        partial.replace(target)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SentenceVectors:
        """Read a file written by :meth:`save`.

        Raises:
            InputError: not such a file, another format version, or parts
                that do not fit together.
        """
        source = Path(path)
        try:
            fields = read_npz(source)
        except (OSError, ValueError) as exc:
            raise InputError(f"{source}: not a sentence vectors file ({exc})") from exc
        if fields.get("kind") is None or str(fields["kind"]) != _KIND:
            raise InputError(f"{source} holds no sentence vectors")
        try:
            version = int(fields["format_version"])
            if version != SENTENCES_FORMAT:
                raise InputError(
                    f"{source}: sentence vectors format {version}; this library reads "
                    f"{SENTENCES_FORMAT}"
                )
            return cls(
                [str(i) for i in fields["ids"]],
                [bytes(d) for d in fields["digests"]],
                np.asarray(fields["offsets"], dtype=np.int64),
                np.asarray(fields["vectors"], dtype=np.float16),
                embedder=str(fields["embedder"]),
            )
        except KeyError as exc:
            raise InputError(f"{source}: the sentence vectors file lacks {exc}") from None
        except (TypeError, ValueError, OverflowError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"{source}: damaged sentence vectors ({exc})") from exc
