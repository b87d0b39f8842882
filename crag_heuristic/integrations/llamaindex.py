"""LlamaIndex: the gate as a node postprocessor.

Needs the ``llamaindex`` extra (``pip install 'crag-heuristic[llamaindex]'``).

:class:`CRAGPostprocessor` is a ``BaseNodePostprocessor``: pass it to a query
engine (``index.as_query_engine(node_postprocessors=[CRAGPostprocessor()])``)
and it grades the retrieved ``NodeWithScore`` list with the
:class:`~crag_heuristic.Evaluator`, drops the nodes graded IRRELEVANT on their
own (unless all are: then it keeps them all, and the set verdict says so) and
annotates each node it returns. The annotations go into a copy of the node's
metadata and are excluded from what the LLM and the embedder see:

====================  ===========================================================
key                   value
====================  ===========================================================
``crag_verdict``      the set's verdict (``relevant`` / ``partial`` / ``irrelevant``)
``crag_set_score``    the set's score in [0, 1]
``crag_grade``        this node's own score in [0, 1]
``crag_chunk_verdict``  this node's own verdict
``crag_score_kind``   how the node's retrieval score was read (see below)
====================  ===========================================================

Score semantics. A ``NodeWithScore.score`` is whatever the retriever put
there: LlamaIndex's ``SimpleVectorStore`` returns a cosine similarity in its
default query mode, other vector stores their own similarity, BM25 retrievers
BM25, rerankers a relevance. Nothing on the node says which, so the score is
read as ``score_kind``, ``UNKNOWN`` by default (the gate then has no
similarity evidence and its reasoning says so: a documented degraded result,
never a guessed cosine). Declare it (``CRAGPostprocessor(score_kind="cosine")``)
or let :meth:`CRAGPostprocessor.for_index` look it up from the index's vector
store: ``SimpleVectorStore`` -> ``COSINE`` (valid for the default query mode;
MMR and the learner modes return other scores), any other store -> ``UNKNOWN``.

Corpus statistics (the document frequencies behind the IDF weights) are ready
before the first query: :meth:`CRAGPostprocessor.for_index` builds them from the
index's docstore at construction (the nodes' texts), so its verdicts are the
router's with statistics; ``corpus_stats=`` gives them (or the path of saved
ones) instead. An index whose nodes live only in an external vector store has
an empty docstore: give its statistics, else the gate grades without them.
"""

from __future__ import annotations

import os
from typing import Any

from .._optional import requires

with requires("llamaindex", "crag_heuristic.integrations.llamaindex"):
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
    from llama_index.core.vector_stores.simple import SimpleVectorStore
    from pydantic import PrivateAttr

from .._checks import check_query
from .._config import EvaluatorConfig
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError
from .._text.corpus import CorpusStats, resolve_corpus_stats
from .._types import Chunk, ScoreKind, Verdict

__all__ = ["CRAGPostprocessor", "vector_store_score_kind"]

_KEYS = ("crag_verdict", "crag_set_score", "crag_grade", "crag_chunk_verdict", "crag_score_kind")


def vector_store_score_kind(vector_store: Any) -> tuple[ScoreKind, str]:
    """The kind of the scores a LlamaIndex vector store returns, and why.

    ``SimpleVectorStore`` (exactly that class) computes cosine similarities in
    its default query mode; for any other store the scale is not known.
    """
    if type(vector_store) is SimpleVectorStore:
        return ScoreKind.COSINE, "cosine similarity (SimpleVectorStore, default query mode)"
    return ScoreKind.UNKNOWN, (
        f"unknown: {type(vector_store).__name__} does not say what its scores mean; they are "
        "kept as UNKNOWN and the gate has no similarity evidence (declare score_kind=...)"
    )


def _source(node: NodeWithScore) -> str | None:
    inner = node.node
    ref = inner.ref_doc_id
    if ref:
        return str(ref)
    metadata = inner.metadata or {}
    for key in ("source", "file_path", "file_name", "url"):
        value = metadata.get(key)
        if value:
            return str(value)
    return None


class CRAGPostprocessor(BaseNodePostprocessor):
    """Grade, filter and annotate retrieved nodes with the CRAG gate (no LLM).

    Args:
        evaluator: an :class:`~crag_heuristic.Evaluator`, or a config /
            profile name for one (default: the default profile).
        score_kind: what the nodes' scores are (default ``UNKNOWN``; see the
            module doc and :meth:`for_index`).
        drop_irrelevant: drop the nodes graded below ``min_chunk_verdict``
            (never all of them).
        min_chunk_verdict: the lowest own grade a node needs to be kept.
        corpus_stats: document frequencies for IDF weights: a
            :class:`~crag_heuristic.text.CorpusStats` or the path of a saved
            one (loaded now); :meth:`for_index` builds them from the index.

    Raises:
        InputError: an unknown ``score_kind`` or verdict; unusable
            ``corpus_stats``; (on postprocessing) no query.
    """

    score_kind: ScoreKind = ScoreKind.UNKNOWN
    score_semantics: str = "unknown: the node scores are not declared"
    drop_irrelevant: bool = True
    min_chunk_verdict: Verdict = Verdict.PARTIAL
    _evaluator: Evaluator = PrivateAttr()
    _corpus_stats: CorpusStats | None = PrivateAttr(default=None)

    def __init__(
        self,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        *,
        score_kind: ScoreKind | str | None = None,
        score_semantics: str | None = None,
        drop_irrelevant: bool = True,
        min_chunk_verdict: Verdict | str = Verdict.PARTIAL,
        corpus_stats: CorpusStats | str | os.PathLike[str] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        try:
            kind = ScoreKind.UNKNOWN if score_kind is None else ScoreKind(score_kind)
            minimum = Verdict(min_chunk_verdict)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        gate = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        stats = resolve_corpus_stats(corpus_stats, analyzer=gate.analyzer, documents=None)
        if score_semantics is None:
            score_semantics = (
                f"declared by the caller: {kind.value}"
                if score_kind is not None
                else "unknown: the node scores are not declared; the gate has no similarity "
                "evidence (declare score_kind=... or use CRAGPostprocessor.for_index)"
            )
        fields: dict[str, Any] = {
            "score_kind": kind,
            "score_semantics": score_semantics,
            "drop_irrelevant": bool(drop_irrelevant),
            "min_chunk_verdict": minimum,
        }
        if callback_manager is not None:
            fields["callback_manager"] = callback_manager
        super().__init__(**fields)
        self._evaluator = gate
        self._corpus_stats = stats

    @classmethod
    def class_name(cls) -> str:
        return "CRAGPostprocessor"

    @classmethod
    def for_index(
        cls,
        index: Any,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        *,
        corpus_stats: CorpusStats | str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> CRAGPostprocessor:
        """A postprocessor whose ``score_kind`` is looked up from ``index.vector_store``
        (see :func:`vector_store_score_kind`) and whose corpus statistics are built
        now from the index's docstore (unless ``corpus_stats`` gives them);
        ``kwargs`` as for the constructor."""
        store = getattr(index, "vector_store", None)
        if store is None:
            raise InputError(f"{type(index).__name__} has no vector_store")
        kind, semantics = vector_store_score_kind(store)
        gate = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        documents = _docstore_documents(index)
        stats = resolve_corpus_stats(
            corpus_stats,
            analyzer=gate.analyzer,
            documents=(lambda: documents) if documents else None,
        )
        return cls(gate, score_kind=kind, score_semantics=semantics, corpus_stats=stats, **kwargs)

    @property
    def corpus_stats(self) -> CorpusStats | None:
        """The document frequencies the gate uses (``None``: none)."""
        return self._corpus_stats

    @property
    def evaluator(self) -> Evaluator:
        """The gate."""
        return self._evaluator

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise InputError("CRAGPostprocessor needs the query (query_bundle or query_str)")
        query = check_query(query_bundle.query_str)
        if not nodes:
            return []
        chunks: list[Chunk] = []
        unique: list[NodeWithScore] = []
        seen: set[str] = set()
        for node in nodes:
            node_id = str(node.node.node_id)
            if node_id in seen:  # one node twice: keep the best-ranked
                continue
            seen.add(node_id)
            unique.append(node)
            chunks.append(
                Chunk(
                    id=node_id,
                    text=node.node.get_content(metadata_mode=MetadataMode.NONE),
                    score=node.score,
                    score_kind=self.score_kind if node.score is not None else ScoreKind.UNKNOWN,
                    source=_source(node),
                )
            )
        evaluation = self._evaluator.evaluate(query, chunks, self._corpus_stats)
        keep = [
            not self.drop_irrelevant or grade.verdict.rank >= self.min_chunk_verdict.rank
            for grade in evaluation.chunks
        ]
        if not any(keep):
            keep = [True] * len(unique)
        out = []
        for node, grade, kept in zip(unique, evaluation.chunks, keep, strict=True):
            if not kept:
                continue
            inner = node.node
            metadata = {
                **(inner.metadata or {}),
                "crag_verdict": evaluation.verdict.value,
                "crag_set_score": evaluation.score,
                "crag_grade": grade.score,
                "crag_chunk_verdict": grade.verdict.value,
                "crag_score_kind": self.score_kind.value,
            }
            copy = inner.model_copy(
                update={
                    "metadata": metadata,
                    "excluded_llm_metadata_keys": _union(inner.excluded_llm_metadata_keys),
                    "excluded_embed_metadata_keys": _union(inner.excluded_embed_metadata_keys),
                }
            )
            out.append(NodeWithScore(node=copy, score=node.score))
        return out


def _docstore_documents(index: Any) -> list[tuple[str, str]]:
    """The (node id, text) of the nodes in an index's docstore, as the postprocessor
    grades them (with each node's analysis, looked up by id and text digest)."""
    docs = getattr(getattr(index, "docstore", None), "docs", None)
    if not isinstance(docs, dict):
        return []
    return [
        (str(node.node_id), node.get_content(metadata_mode=MetadataMode.NONE))
        for node in docs.values()
    ]


def _union(keys: list[str] | None) -> list[str]:
    current = list(keys or [])
    return current + [key for key in _KEYS if key not in current]
