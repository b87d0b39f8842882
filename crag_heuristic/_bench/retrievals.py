"""The retrievals a benchmark grades: natural top-k lists and leave-relevant-out probes.

* natural: each judged query's dense top-k;
* probe: the same search with the query's relevant documents removed from the
  index (a FAISS ``IDSelectorNot``): on-topic neighbours, nothing that
  answers; every probe is a failure by construction.

A retrieval "failed" when none of its top ``k`` documents is relevant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .._types import Chunk, ScoreKind
from .data import Collection
from .dense import DenseIndex, Vector

__all__ = ["Retrieval", "chunks_of", "make_retrievals"]

Kind = Literal["natural", "probe"]


@dataclass(frozen=True)
class Retrieval:
    """One ranked list to grade, with its labels."""

    qid: str
    kind: Kind
    query: str
    chunks: tuple[Chunk, ...]
    relevant: frozenset[str]

    @property
    def failed(self) -> bool:
        """No relevant document in the list."""
        return not any(chunk.id in self.relevant for chunk in self.chunks)

    def labels(self) -> list[bool]:
        """Per chunk: is it relevant?"""
        return [chunk.id in self.relevant for chunk in self.chunks]


def chunks_of(collection: Collection, hits: Sequence[tuple[str, float]]) -> tuple[Chunk, ...]:
    """Chunks (cosine scores, ``source`` = doc id) for (doc id, cosine) hits."""
    return tuple(
        Chunk(
            id=doc_id,
            text=collection.doc_text(doc_id),
            score=score,
            score_kind=ScoreKind.COSINE,
            source=doc_id,
        )
        for doc_id, score in hits
    )


def make_retrievals(
    collection: Collection,
    index: DenseIndex,
    qids: Sequence[str],
    vectors: dict[str, Vector],
    relevant: dict[str, set[str]],
    k: int,
    *,
    probes: bool = True,
) -> list[Retrieval]:
    """Natural (and probe) retrievals of depth ``k`` for ``qids``, in that order."""
    import numpy as np

    matrix = np.stack([vectors[q] for q in qids])
    natural = index.search(matrix, k)
    out = [
        Retrieval(
            q,
            "natural",
            collection.queries[q],
            chunks_of(collection, hits),
            frozenset(relevant.get(q, ())),
        )
        for q, hits in zip(qids, natural, strict=True)
    ]
    if probes:
        banned = [relevant.get(q, set()) for q in qids]
        probed = index.search(matrix, k, exclude=banned)
        out += [
            Retrieval(
                q,
                "probe",
                collection.queries[q],
                chunks_of(collection, hits),
                frozenset(relevant.get(q, ())),
            )
            for q, hits in zip(qids, probed, strict=True)
        ]
    return out
