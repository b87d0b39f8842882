"""The retrievals a benchmark grades: natural top-k lists and leave-relevant-out probes.

* natural: each judged query's dense top-k;
* probe: the same search with the query's relevant documents removed from the
  index (a FAISS ``IDSelectorNot``): on-topic neighbours, nothing that
  answers; every probe is a failure by construction.

A retrieval "failed" when none of its top ``k`` documents is relevant. Each
is a :class:`~crag_heuristic.bench.GateExample` (grouped by query id), the form
calibration takes too.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._calibration.gate import GateExample
from .._types import Chunk, ScoreKind
from .data import Collection
from .dense import DenseIndex, Vector
from .sentences import SentenceCache


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
    sentences: SentenceCache | None = None,
) -> list[GateExample]:
    """Natural (and probe) retrievals of depth ``k`` for ``qids``, in that order;
    with ``sentences``, each chunk carries its best sentence's cosine to the query."""
    import numpy as np

    matrix = np.stack([vectors[q] for q in qids])
    runs = [("natural", index.search(matrix, k))]
    if probes:
        banned = [relevant.get(q, set()) for q in qids]
        runs.append(("probe", index.search(matrix, k, exclude=banned)))
    if sentences is not None:
        sentences.need(d for _, rows in runs for hits in rows for d, _ in hits)
    out = []
    for kind, rows in runs:
        for q, hits in zip(qids, rows, strict=True):
            chunks = chunks_of(collection, hits)
            if sentences is not None:
                chunks = tuple(
                    c.replace(sentence_score=sentences.best(vectors[q], c.id)) for c in chunks
                )
            out.append(
                GateExample(
                    group=q,
                    kind=kind,
                    query=collection.queries[q],
                    chunks=chunks,
                    relevant=frozenset(relevant.get(q, ())),
                )
            )
    return out
