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
default query mode, other vector stores their own similarity or distance,
BM25 retrievers BM25, rerankers a relevance, MMR a similarity less a penalty
for likeness to the nodes above. Nothing on the node says which, so the score
is read as ``score_kind``: declare it (``CRAGPostprocessor(score_kind="cosine")``)
or let :meth:`CRAGPostprocessor.for_index` read it from the index's vector
store (:func:`vector_store_score_kind`): ``SimpleVectorStore`` -> ``COSINE``;
``FaissVectorStore`` -> from the FAISS index's metric; ``QdrantVectorStore``
-> from the collection's distance; MMR and the learner query modes
(``vector_store_query_mode="mmr"``, ``"svm"`` ...) -> ``UNKNOWN``. Undeclared
and unread, the score is ``UNKNOWN`` (the gate then has no similarity
evidence and its reasoning says so: a documented default, never a guessed
cosine), and the postprocessor warns once
(:class:`~crag_heuristic.retrievers.UnknownScoresWarning`) naming the fix.

Abstaining. With ``abstain=True`` a list the gate grades IRRELEVANT as a whole
yields no node: LlamaIndex's synthesizer then answers "Empty Response" without
calling the LLM, as after its own ``SimilarityPostprocessor`` drops every node.
With ``abstain_note="..."`` too, one node holding that note (and the verdict
in its metadata) takes the nodes' place, so the LLM reads that nothing
relevant was found and the response's ``source_nodes`` carry the verdict.

Corpus statistics (the document frequencies behind the IDF weights) are ready
before the first query: :meth:`CRAGPostprocessor.for_index` builds them from the
index's docstore at construction (the nodes' texts), so its verdicts are the
router's with statistics; ``corpus_stats=`` gives them (or the path of saved
ones) instead. An index whose nodes live only in an external vector store has
an empty docstore: give its statistics, else the gate grades without them.
``to_dict`` / ``from_dict`` keep the statistics (and the gate's configuration);
``to_json`` writes statistics given as a path (those built in memory: save
them, ``stats.save(path)``, and pass ``corpus_stats=path``).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .._optional import requires

with requires("llamaindex", "crag_heuristic.integrations.llamaindex"):
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
    from llama_index.core.vector_stores.simple import SimpleVectorStore
    from pydantic import PrivateAttr

from .._checks import check_query
from .._config import EvaluatorConfig
from .._evaluator.evaluator import Evaluator
from .._exceptions import InputError
from .._retrievers.stores import read_store_scores, warn_unknown_scores
from .._text.corpus import CorpusStats, resolve_corpus_stats
from .._types import Chunk, Evaluation, ScoreKind, Verdict

__all__ = ["CRAGPostprocessor", "vector_store_score_kind"]

_KEYS = ("crag_verdict", "crag_set_score", "crag_grade", "crag_chunk_verdict", "crag_score_kind")


def vector_store_score_kind(
    vector_store: Any, vector_store_query_mode: Any = None
) -> tuple[ScoreKind, str]:
    """The kind of the scores a LlamaIndex vector store returns, and why.

    ``SimpleVectorStore`` (exactly that class) computes cosine similarities in
    its default query mode; ``FaissVectorStore`` and ``QdrantVectorStore`` are
    read (the FAISS index's metric, the collection's distance, and whether the
    stored vectors have unit norm, from a sample: see
    :mod:`crag_heuristic._retrievers.stores`). MMR scores (a similarity less a
    penalty for likeness to the nodes ranked above) and the learner modes'
    are no similarity; any other store's scale is not known: ``UNKNOWN``.

    Args:
        vector_store: the index's vector store.
        vector_store_query_mode: the retriever's query mode
            (``index.as_retriever(vector_store_query_mode=...)``; ``None``: default).
    """
    mode = str(getattr(vector_store_query_mode, "value", vector_store_query_mode or "default"))
    if mode == "mmr":
        return ScoreKind.UNKNOWN, (
            "unknown: MMR scores (query mode 'mmr') are a similarity less a penalty for "
            "likeness to the nodes ranked above: not a similarity"
        )
    if mode != "default":
        return ScoreKind.UNKNOWN, f"unknown: query mode {mode!r} does not return similarities"
    if type(vector_store) is SimpleVectorStore:
        return ScoreKind.COSINE, "cosine similarity (SimpleVectorStore, default query mode)"
    read = read_store_scores(vector_store)
    if read is not None and read.raw_kind is not ScoreKind.UNKNOWN:
        return read.raw_kind, f"{read.raw_kind.value}, read from the store: {read.semantics}"
    if read is not None:
        return ScoreKind.UNKNOWN, (
            f"unknown: {type(vector_store).__name__}'s scores ({read.semantics}) are no score kind"
        )
    return ScoreKind.UNKNOWN, (
        f"unknown: {type(vector_store).__name__} does not say what its scores mean; they are "
        "kept as UNKNOWN and the gate has no similarity evidence (declare score_kind=...)"
    )


_KINDS = "cosine, cosine_distance, squared_l2, l2, inner_product, distance, bm25 or probability"


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
            (never all of them: ``abstain`` is for that).
        min_chunk_verdict: the lowest own grade a node needs to be kept.
        abstain: when the gate grades the whole list IRRELEVANT, return no
            node (or the ``abstain_note``) instead of the least bad ones.
        abstain_note: with ``abstain``, the text of the one node returned in
            the nodes' place (its metadata carries the verdict), so the LLM
            is told that nothing relevant was found; ``None``: no node.
        corpus_stats: document frequencies for IDF weights: a
            :class:`~crag_heuristic.text.CorpusStats` or the path of a saved
            one (loaded now); :meth:`for_index` builds them from the index.

    Warns:
        UnknownScoresWarning: no ``score_kind`` declared (the nodes' scores
            are then graded as ``UNKNOWN``).

    Raises:
        InputError: an unknown ``score_kind`` or verdict; unusable
            ``corpus_stats``; (on postprocessing) no query.
    """

    score_kind: ScoreKind = ScoreKind.UNKNOWN
    score_semantics: str = "unknown: the node scores are not declared"
    drop_irrelevant: bool = True
    min_chunk_verdict: Verdict = Verdict.PARTIAL
    abstain: bool = False
    abstain_note: str | None = None
    _evaluator: Evaluator = PrivateAttr()
    _corpus_stats: CorpusStats | None = PrivateAttr(default=None)
    _corpus_stats_path: str | None = PrivateAttr(default=None)

    def __init__(
        self,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        *,
        score_kind: ScoreKind | str | None = None,
        score_semantics: str | None = None,
        drop_irrelevant: bool = True,
        min_chunk_verdict: Verdict | str = Verdict.PARTIAL,
        abstain: bool = False,
        abstain_note: str | None = None,
        corpus_stats: CorpusStats | str | os.PathLike[str] | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        try:
            kind = ScoreKind.UNKNOWN if score_kind is None else ScoreKind(score_kind)
            minimum = Verdict(min_chunk_verdict)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        if abstain_note is not None and (not isinstance(abstain_note, str) or not abstain_note):
            raise InputError("abstain_note must be a non-empty string or None")
        # a config's dict too (what to_dict writes)
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
            "abstain": bool(abstain),
            "abstain_note": abstain_note,
        }
        if callback_manager is not None:
            fields["callback_manager"] = callback_manager
        super().__init__(**fields)
        self._evaluator = gate
        self._corpus_stats = stats
        if isinstance(corpus_stats, str | os.PathLike):
            self._corpus_stats_path = os.fspath(corpus_stats)
        if score_kind is None:
            warn_unknown_scores(
                "CRAGPostprocessor has no score kind: the nodes' scores are graded as UNKNOWN, "
                "without similarity evidence. Read it from the index's vector store, "
                "CRAGPostprocessor.for_index(index), or declare it: score_kind='cosine' (or "
                f"what your retriever returns: {_KINDS})"
            )

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """The fields, with the gate's configuration and the corpus statistics (the
        path they were loaded from, else the statistics): :meth:`from_dict` keeps them."""
        data = super().to_dict(**kwargs)
        data["evaluator"] = self._evaluator.config.to_dict()
        data["corpus_stats"] = self._corpus_stats_path or self._corpus_stats
        return data

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON.

        Raises:
            InputError: statistics built in memory (no path to write): save them
                (``stats.save(path)``) and pass ``corpus_stats=path``.
        """
        data = self.to_dict(**kwargs)
        if isinstance(data["corpus_stats"], CorpusStats):
            raise InputError(
                "the corpus statistics were built in memory and cannot be written as JSON: "
                "save them (postprocessor.corpus_stats.save(path)) and pass corpus_stats=path"
            )
        return json.dumps(data)

    @classmethod
    def class_name(cls) -> str:
        return "CRAGPostprocessor"

    @classmethod
    def for_index(
        cls,
        index: Any,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        *,
        vector_store_query_mode: Any = None,
        corpus_stats: CorpusStats | str | os.PathLike[str] | None = None,
        **kwargs: Any,
    ) -> CRAGPostprocessor:
        """A postprocessor whose ``score_kind`` is looked up from ``index.vector_store``
        and the retriever's query mode (the ``vector_store_query_mode`` you give
        ``index.as_retriever`` or ``as_query_engine``; see
        :func:`vector_store_score_kind`) and whose corpus statistics are built
        now from the index's docstore (unless ``corpus_stats`` gives them);
        ``kwargs`` as for the constructor.

        Warns:
            UnknownScoresWarning: the store's scores are no kind it can read.
        """
        store = getattr(index, "vector_store", None)
        if store is None:
            raise InputError(f"{type(index).__name__} has no vector_store")
        kind, semantics = vector_store_score_kind(store, vector_store_query_mode)
        if kind is ScoreKind.UNKNOWN:
            warn_unknown_scores(
                f"{semantics}. The nodes' scores are graded as UNKNOWN, without similarity "
                "evidence: use the default query mode, or declare what they are "
                f"(CRAGPostprocessor(score_kind=...): {_KINDS})"
            )
        gate = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        documents = _docstore_documents(index)
        stats = resolve_corpus_stats(
            corpus_stats,
            analyzer=gate.analyzer,
            documents=(lambda: documents) if documents else None,
        )
        made = cls(gate, score_kind=kind, score_semantics=semantics, corpus_stats=stats, **kwargs)
        if isinstance(corpus_stats, str | os.PathLike):
            made._corpus_stats_path = os.fspath(corpus_stats)
        return made

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
        if self.abstain and evaluation.verdict is Verdict.IRRELEVANT:
            return self._abstained(evaluation)
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

    def _abstained(self, evaluation: Evaluation) -> list[NodeWithScore]:
        """What an IRRELEVANT list becomes with ``abstain``: no node, or the note."""
        if self.abstain_note is None:
            return []
        metadata = {
            "crag_verdict": evaluation.verdict.value,
            "crag_set_score": evaluation.score,
            "crag_abstained": len(evaluation.chunks),
        }
        note = TextNode(
            text=self.abstain_note,
            metadata=metadata,
            excluded_llm_metadata_keys=list(metadata),
            excluded_embed_metadata_keys=list(metadata),
        )
        return [NodeWithScore(node=note, score=None)]


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
