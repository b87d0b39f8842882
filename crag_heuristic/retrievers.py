"""The retrievers: every adapter in front of what users already run, in one place.

:class:`FaissRetriever` (a ``faiss.Index`` and a docstore), :class:`BM25Retriever`
(lexical, over chunks), :class:`LangChainRetriever` and
:class:`LangChainFaissRetriever` (any LangChain vector store or retriever,
duck-typed: LangChain need not be installed) come with the core install;
:class:`QdrantRetriever` needs the ``qdrant`` extra and is imported on first use,
so ``import crag_heuristic.retrievers`` needs only the core install and a missing
extra raises :class:`~crag_heuristic.MissingDependencyError` naming it.

Each vector adapter converts its backend's raw scores with a
:class:`ScoreConversion` (:class:`FaissScores`, :class:`QdrantScores`,
:class:`DeclaredScores`) and says which in ``score_semantics``. A ranking whose
scores run the wrong way for their kind (a distance declared as a similarity)
is refused with :class:`ScoreOrderError` (an ``InvalidChunkError``), which
names the kind the scores likely are. Scores that are neither declared nor
read from the store (Chroma's space, Qdrant's distance, FAISS's metric) are
kept as ``UNKNOWN``, and the adapter issues :class:`UnknownScoresWarning`
naming the fix.

A retriever filtered to one tenant names its filter in ``scope``; the router
refuses parts beside it that are not filtered (``ScopeError``):
:meth:`BM25Retriever.with_filter` filters the lexical retriever,
:class:`ScopedParents` a parents lookup.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._exceptions import ScopeError, ScoreOrderError, UnknownScoresWarning
from ._retrievers.base import DeclaredScores, ScoreConversion
from ._retrievers.bm25 import BM25Retriever
from ._retrievers.faiss import FaissRetriever, FaissScores
from ._retrievers.langchain import LangChainFaissRetriever, LangChainRetriever
from ._retrievers.scope import ScopedParents

if TYPE_CHECKING:  # imported on first use (the ``qdrant`` extra)
    from ._retrievers.qdrant import QdrantRetriever, QdrantScores

__all__ = [
    "BM25Retriever",
    "DeclaredScores",
    "FaissRetriever",
    "FaissScores",
    "LangChainFaissRetriever",
    "LangChainRetriever",
    "QdrantRetriever",
    "QdrantScores",
    "ScopeError",
    "ScopedParents",
    "ScoreConversion",
    "ScoreOrderError",
    "UnknownScoresWarning",
]

# Names whose module needs an extra: imported on first use (the module's import names the extra).
_LAZY = dict.fromkeys(("QdrantRetriever", "QdrantScores"), "._retrievers.qdrant")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name: str) -> Any:
    """A name whose extra is imported now.

    Raises:
        MissingDependencyError: its extra is not installed.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crag_heuristic.retrievers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, "crag_heuristic"), name)
    globals()[name] = value
    return value
