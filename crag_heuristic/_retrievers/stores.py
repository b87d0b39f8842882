"""What a framework's vector store returns as a score, read from the store itself.

A store that says what its scores are is read, never guessed (duck-typed: no
framework is imported here). :func:`read_store_scores` knows:

====================================  ==============================================
store                                 read from, and the conversion
====================================  ==============================================
Chroma (``langchain_chroma.Chroma``,  the collection's space: its
LlamaIndex ``ChromaVectorStore``)     ``configuration["hnsw"]["space"]`` (or
                                      ``spann``), else ``metadata["hnsw:space"]``,
                                      else Chroma's default ``l2``:
                                      :class:`ChromaScores`
Qdrant (``langchain_qdrant``'s        the store's ``distance`` (``distance_strategy``
``QdrantVectorStore`` and             for the older class), or the collection's
``Qdrant``, LlamaIndex                (LlamaIndex); dense retrieval only (a sparse or
``QdrantVectorStore``)                hybrid search returns fused scores):
                                      :class:`~crag_heuristic.retrievers.QdrantScores`
FAISS (LlamaIndex ``FaissVectorStore``)  ``index.metric_type``:
                                      :class:`~crag_heuristic.retrievers.FaissScores`
====================================  ==============================================

Whether the stored vectors have unit norm (it decides whether an L2 distance
or an inner product is a cosine) is read from a sample of up to 64 of them.
The store embeds the query itself, with the model that made the stored
vectors: unit stored vectors are taken to mean a unit query too.

A store none of these matches returns ``None``: the caller keeps its scores as
``UNKNOWN`` and warns (:func:`warn_unknown_scores`) naming the fix.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._exceptions import InputError, UnknownScoresWarning
from .._types import ScoreKind
from .base import DeclaredScores, ScoreConversion, unit_norm

_SAMPLE = 64
_CHROMA_DEFAULT_SPACE = "l2"  # what Chroma uses when a collection names none
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ChromaScores(ScoreConversion):
    """The conversion of Chroma distances for one space.

    Chroma returns a distance ``d`` per space: ``cosine`` ``1 - cos``; ``ip``
    ``1 - <q, v>``; ``l2`` the squared Euclidean distance. So:

    =========  =============  ==================================================
    space      unit vectors?  chunk score and kind
    =========  =============  ==================================================
    ``cosine`` (any)          ``cos = 1 - d``: ``COSINE``
    ``ip``     yes            ``cos = 1 - d``: ``COSINE``
    ``ip``     no / unknown   the inner product ``1 - d``: ``INNER_PRODUCT``
    ``l2``     yes            ``cos = 1 - d/2`` (``|a-b|^2 = 2 - 2 cos``): ``COSINE``
    ``l2``     no / unknown   the Euclidean distance ``sqrt(d)``: ``DISTANCE``
    =========  =============  ==================================================

    Args:
        space: the collection's space (``"cosine"``, ``"ip"`` or ``"l2"``).
        normalized: whether the stored vectors have unit norm (``None``: unknown).
        exponential: the store reports ``exp(-d)`` in place of ``d`` (LlamaIndex's
            ``ChromaVectorStore``): ``d = -ln(score)`` first.
        where: where the space was read, for :attr:`semantics`.
    """

    backend = "Chroma"

    def __init__(
        self,
        space: str,
        normalized: bool | None,
        *,
        exponential: bool = False,
        where: str = "the collection",
    ) -> None:
        self.space = space
        self.normalized = normalized
        self.exponential = exponential
        self.metric_name = f"chroma-{space}"
        why = "not unit vectors" if normalized is False else "unit norm not known"
        read = f"Chroma space {space!r} ({where})"
        if exponential:
            read += ", from exp(-d)"
        if space == "cosine":
            self.kind, self.semantics = ScoreKind.COSINE, f"cosine = 1 - d: {read}"
        elif space == "ip" and normalized:
            self.kind = ScoreKind.COSINE
            self.semantics = f"cosine = 1 - d, inner product of unit vectors: {read}"
        elif space == "ip":
            self.kind = ScoreKind.INNER_PRODUCT
            self.semantics = f"inner product = 1 - d ({why}; not a cosine): {read}"
        elif space == "l2" and normalized:
            self.kind = ScoreKind.COSINE
            self.semantics = f"cosine = 1 - d/2 from squared L2 of unit vectors: {read}"
        elif space == "l2":
            self.kind = ScoreKind.DISTANCE
            self.semantics = f"Euclidean distance sqrt(d) ({why}): {read}"
        else:
            self.kind = ScoreKind.UNKNOWN
            self.semantics = f"unknown: {read} is not one crag-heuristic knows"

    @property
    def raw_kind(self) -> ScoreKind:
        """The raw Chroma score's kind: ``1 - cos`` is ``COSINE_DISTANCE``, a squared
        L2 of unit vectors ``SQUARED_L2``, another L2 a ``DISTANCE``; ``1 - ip`` of
        other vectors and ``exp(-d)`` are no kind (``UNKNOWN``)."""
        if self.exponential or self.kind is ScoreKind.UNKNOWN:
            return ScoreKind.UNKNOWN
        if self.kind is ScoreKind.COSINE:
            return ScoreKind.SQUARED_L2 if self.space == "l2" else ScoreKind.COSINE_DISTANCE
        return ScoreKind.DISTANCE if self.space == "l2" else ScoreKind.UNKNOWN

    def _convert(self, raw: float) -> float:
        d = -math.log(max(raw, 1e-300)) if self.exponential else raw
        if self.space in ("cosine", "ip"):
            return 1.0 - d
        if self.space == "l2":
            squared = max(d, 0.0)
            return 1.0 - squared / 2.0 if self.normalized else math.sqrt(squared)
        return raw

    def __repr__(self) -> str:
        return f"ChromaScores({self.semantics!r})"


def read_store_scores(store: Any, *, normalized: bool | None = None) -> ScoreConversion | None:
    """The conversion of ``store``'s scores, read from the store (see the module
    doc); ``None`` when it is none of the stores read here.

    Args:
        store: a LangChain or LlamaIndex vector store.
        normalized: whether the stored vectors have unit norm (``None``: read
            from a sample).
    """
    module = type(store).__module__
    name = type(store).__name__
    if name == "Chroma" and module.startswith(("langchain_chroma", "langchain_community")):
        return _chroma(store, normalized, exponential=False)
    if name == "ChromaVectorStore" and module.startswith("llama_index"):
        return _chroma(store, normalized, exponential=True)
    if name in ("QdrantVectorStore", "Qdrant") and module.startswith(
        ("langchain_qdrant", "langchain_community")
    ):
        return _langchain_qdrant(store, normalized)
    if name == "QdrantVectorStore" and module.startswith("llama_index"):
        return _llamaindex_qdrant(store, normalized)
    if name in ("FaissVectorStore", "FaissMapVectorStore") and module.startswith("llama_index"):
        from .faiss import FaissScores, detect_unit_vectors

        index: Any = getattr(store, "client", None)
        if not hasattr(index, "metric_type"):
            return None
        if normalized is None:
            normalized = detect_unit_vectors(index)
        return FaissScores(index.metric_type, normalized)
    return None


def _chroma_space(collection: Any) -> tuple[str, str]:
    """The collection's space and where it was read."""
    try:
        configuration = collection.configuration
    except Exception:  # noqa: BLE001 - an older Chroma, no configuration: read on
        configuration = None
    if isinstance(configuration, Mapping):
        for index in ("hnsw", "spann"):
            options = configuration.get(index)
            if isinstance(options, Mapping) and options.get("space"):
                return str(options["space"]), f"configuration[{index!r}]"
    metadata = getattr(collection, "metadata", None)
    if isinstance(metadata, Mapping) and metadata.get("hnsw:space"):
        return str(metadata["hnsw:space"]), "metadata['hnsw:space']"
    return _CHROMA_DEFAULT_SPACE, "Chroma's default"


def _chroma(store: Any, normalized: bool | None, *, exponential: bool) -> ScoreConversion | None:
    collection = getattr(store, "_collection", None)
    if collection is None:
        return None
    space, where = _chroma_space(collection)
    if normalized is None and space != "cosine":
        try:
            sample = collection.get(limit=_SAMPLE, include=["embeddings"])
            vectors = np.asarray(sample["embeddings"], dtype=np.float64)
            normalized = unit_norm(vectors) if vectors.ndim == 2 and len(vectors) else None
        except Exception:  # noqa: BLE001 - no sample: the norm stays unknown
            normalized = None
    return ChromaScores(space, normalized, exponential=exponential, where=where)


def _dense(mode: Any) -> bool:
    """Whether a retrieval mode (an enum or a string) is the dense one."""
    value = getattr(mode, "value", mode)
    return mode is None or str(value).lower() == "dense"


def _langchain_qdrant(store: Any, normalized: bool | None) -> ScoreConversion | None:
    from .qdrant import _distance, sampled_scores

    if not _dense(getattr(store, "retrieval_mode", None)):
        mode = getattr(store.retrieval_mode, "value", store.retrieval_mode)
        return DeclaredScores(
            ScoreKind.UNKNOWN,
            f"unknown: a {mode} search returns sparse or fused (RRF) scores, not similarities",
            "unknown",
        )
    distance = getattr(store, "distance", None) or getattr(store, "distance_strategy", None)
    if distance is None:
        return None
    return sampled_scores(
        store.client,
        store.collection_name,
        _distance(distance),
        getattr(store, "vector_name", None) or None,
        normalized,
    )


def _llamaindex_qdrant(store: Any, normalized: bool | None) -> ScoreConversion | None:
    from .qdrant import _vector_params, sampled_scores

    if getattr(store, "enable_hybrid", False):
        return DeclaredScores(
            ScoreKind.UNKNOWN,
            "unknown: a hybrid search returns fused scores, not similarities",
            "unknown",
        )
    client, collection = store.client, store.collection_name
    try:
        info = client.get_collection(collection_name=collection)
        try:
            vector_name, params = _vector_params(info, collection, None)
        except InputError:  # named vectors: the store's dense one
            vector_name, params = _vector_params(info, collection, store.dense_vector_name)
    except Exception:  # noqa: BLE001 - not created yet, or unreadable: nothing read
        return None
    return sampled_scores(client, collection, params.distance, vector_name, normalized)


def warn_unknown_scores(message: str) -> None:
    """Issue :class:`~crag_heuristic.retrievers.UnknownScoresWarning` with
    ``message`` (what is unknown, and the fix), attributed to the first caller
    outside crag-heuristic (the line that made the retriever)."""
    level, frame = 2, sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UnknownScoresWarning, stacklevel=level)
