"""LangChain and LangGraph: the CRAG router as a retriever, the gate as a graph node.

Needs the ``langchain`` extra (``pip install 'crag-heuristic[langchain]'``).

:class:`CRAGRetriever` is a ``langchain_core.retrievers.BaseRetriever``: put it
anywhere a retriever goes (``retriever.invoke(q)``, ``await
retriever.ainvoke(q)``, ``retriever | format_docs`` in an LCEL chain). It wraps
any LangChain vector store or retriever (see :class:`LangChainRetriever` for
how scores are read and converted), runs the :class:`~crag_heuristic.CRAG`
router on it and returns ``Document`` objects, web results included, each
with the decision in ``metadata["crag"]``:

=====================  ==============================================================
key                    value
=====================  ==============================================================
``chunk_id``           the id the gate used (the document's, else a stable digest)
``origin``             ``"retrieval"`` or ``"web"``
``verdict``            the final verdict of the set (``relevant`` / ``partial`` /
                       ``irrelevant``); ``initial_verdict`` the first retrieval's
``set_score``          the set's score in [0, 1]
``grade``              this chunk's own grade: ``{"score", "verdict", "similarity"}``
                       (``None`` for a chunk outside ``gate_k``)
``strategy``           the route: ``none``, ``query_expansion``, ``web_search``, ``combined``
``score``,             the chunk's retrieval score and its :class:`ScoreKind`, the
``score_kind``,        store's raw score and the conversion's name (``cosine``,
``raw_score``,         ``l2``, ``unknown`` ...)
``metric``
``web_search_used``,   the flags of the result: whether web results are in the list,
``web_error``,         why the web search failed, why the cache failed (``None``
``cache_error``,       when they did not), and the router's remarks
``notes``
=====================  ==============================================================

:class:`CRAGGradeNode` replaces the LLM "grade documents" step of the usual
CRAG graph in LangGraph (retrieve -> grade_documents -> decide (generate |
transform_query -> web_search) -> generate). It reads ``question`` and
``documents`` from the state and writes the documents it keeps, the
``web_search`` flag (``"Yes"`` / ``"No"``, as the usual ``decide_to_generate``
edge reads it) and the evaluation; ``examples/langgraph_crag.py`` builds the
whole graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "crag_heuristic.integrations.langchain needs langchain-core: "
        "pip install 'crag-heuristic[langchain]'"
    ) from exc

from .._checks import check_k
from .._config import EvaluatorConfig, RouterConfig
from .._corpus import CorpusStats
from .._evaluator import Evaluator
from .._exceptions import InputError, RetrieverError
from .._expansion import QueryExpander
from .._metrics import MetricsSink
from .._protocols import AsyncCache, AsyncRetriever, AsyncWebSearcher, Cache, Retriever, WebSearcher
from .._retrievers.langchain import LangChainRetriever, document_to_chunk
from .._router import CRAG, CRAGResult
from .._types import Chunk, ChunkEvaluation, Evaluation, ScoreKind, Verdict

__all__ = ["CRAGGradeNode", "CRAGRetriever", "LangChainRetriever", "result_documents"]

_ADAPTER_KEYS = ("raw_score", "metric")


def _grade_dict(grade: ChunkEvaluation | None) -> dict[str, Any] | None:
    if grade is None:
        return None
    return {"score": grade.score, "verdict": grade.verdict.value, "similarity": grade.similarity}


def _grade(evaluation: Evaluation, chunk_id: str) -> ChunkEvaluation | None:
    try:
        return evaluation.chunk(chunk_id)
    except KeyError:
        return None


def result_documents(result: CRAGResult) -> list[Document]:
    """The final chunks of a router result as LangChain documents, each with
    ``metadata["crag"]`` (see the module doc). The adapter's ``raw_score`` and
    ``metric`` move from the top level of the metadata into ``crag``."""
    retrieved = {chunk.id for chunk in result.retrieved}
    documents = []
    for chunk in result.chunks:
        metadata = dict(chunk.metadata)
        adapter = {key: metadata.pop(key, None) for key in _ADAPTER_KEYS}
        web = result.web_search_used and chunk.id not in retrieved
        if chunk.source is not None:
            metadata.setdefault("source", chunk.source)
        metadata["crag"] = {
            "chunk_id": chunk.id,
            "origin": "web" if web else "retrieval",
            "verdict": result.verdict.value,
            "initial_verdict": result.initial_evaluation.verdict.value,
            "set_score": result.evaluation.score,
            "grade": _grade_dict(_grade(result.evaluation, chunk.id)),
            "strategy": result.strategy.value,
            "score": chunk.score,
            "score_kind": chunk.score_kind.value,
            **adapter,
            "web_search_used": result.web_search_used,
            "web_error": result.web_error,
            "cache_error": result.cache_error,
            "notes": list(result.notes),
        }
        documents.append(Document(id=chunk.id, page_content=chunk.text, metadata=metadata))
    return documents


class CRAGRetriever(BaseRetriever):
    """The CRAG router as a LangChain retriever, over any vector store or retriever.

    Args:
        base: a LangChain ``VectorStore`` (scores read with
            ``similarity_search_with_score`` and converted by the store's
            convention), a ``BaseRetriever`` (no scores unless ``score_key``),
            or a crag-heuristic retriever (``search``/``asearch`` returning chunks,
            e.g. :class:`~crag_heuristic.integrations.qdrant.QdrantRetriever`).
        k: documents returned per query.
        evaluator, expander, web, cache, config, lexical, metrics, logger: the
            :class:`~crag_heuristic.CRAG` router's options, as there.
        score_kind, score_key, normalized, search_kwargs, require_scores: how
            the base's scores are read (see :class:`LangChainRetriever`).
        **kwargs: ``BaseRetriever`` fields (``tags``, ``metadata``).

    Attributes:
        router: the :class:`~crag_heuristic.CRAG` router (``router.retrieve(q)``
            gives the whole :class:`~crag_heuristic.CRAGResult`).
        retriever: the crag-heuristic view of ``base``.

    Raises:
        InputError: ``base`` is not a store or a retriever; a bad ``k`` or option.
        RetrieverError: (on invoke) the first retrieval failed.
    """

    k: int = 10
    _base: Any = PrivateAttr()
    _retriever: Retriever | AsyncRetriever = PrivateAttr()
    _router: CRAG = PrivateAttr()

    def __init__(
        self,
        *,
        base: VectorStore | BaseRetriever | Retriever | AsyncRetriever,
        k: int = 10,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        expander: QueryExpander | Literal[False] | None = None,
        web: WebSearcher | AsyncWebSearcher | None = None,
        cache: Cache | AsyncCache | Literal[False] | None = None,
        config: RouterConfig | Mapping[str, Any] | None = None,
        lexical: Retriever | AsyncRetriever | None = None,
        metrics: MetricsSink | None = None,
        logger: Any = None,
        score_kind: ScoreKind | str | None = None,
        score_key: str | None = None,
        normalized: bool | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        require_scores: bool = False,
        **kwargs: Any,
    ) -> None:
        check_k(k)
        router_evaluator = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        retriever: Retriever | AsyncRetriever
        if isinstance(base, VectorStore | BaseRetriever):
            retriever = LangChainRetriever(
                base,
                score_kind=score_kind,
                score_key=score_key,
                normalized=normalized,
                search_kwargs=search_kwargs,
                require_scores=require_scores,
                analyzer=router_evaluator.analyzer,
            )
        elif isinstance(base, Retriever | AsyncRetriever):
            given = {
                "score_kind": score_kind,
                "score_key": score_key,
                "normalized": normalized,
                "search_kwargs": search_kwargs,
                "require_scores": require_scores or None,
            }
            if any(value is not None for value in given.values()):
                names = ", ".join(name for name, value in given.items() if value is not None)
                raise InputError(
                    f"{names}: options for LangChain stores and retrievers; a crag-heuristic "
                    f"retriever ({type(base).__name__}) declares its own scores"
                )
            retriever = base
        else:
            raise InputError(
                "base must be a LangChain VectorStore or BaseRetriever, or a crag-heuristic "
                f"retriever (search/asearch), got {type(base).__name__}"
            )
        router = CRAG(
            retriever,
            router_evaluator,
            expander,
            web,
            cache,
            config,
            lexical=lexical,
            metrics=metrics,
            logger=logger,
        )
        fields: dict[str, Any] = {**kwargs, "k": k}  # BaseRetriever's own fields and ours
        super().__init__(**fields)
        self._base = base
        self._retriever = retriever
        self._router = router

    @property
    def router(self) -> CRAG:
        """The CRAG router behind this retriever."""
        return self._router

    @property
    def retriever(self) -> Retriever | AsyncRetriever:
        """The crag-heuristic retriever the router searches."""
        return self._retriever

    @property
    def score_semantics(self) -> str:
        """How the base's scores are converted, in words."""
        return str(getattr(self._retriever, "score_semantics", "declared by the retriever"))

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return result_documents(self._router.retrieve(query, self.k))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return result_documents(await self._router.aretrieve(query, self.k))


class CRAGGradeNode:
    """A LangGraph node (state in, state update out) that grades documents without an LLM.

    It replaces the ``grade_documents`` step of the CRAG graph. It reads
    ``state[question_key]`` (a string) and ``state[documents_key]`` (LangChain
    documents, or strings), grades them with the :class:`Evaluator`, and
    returns the update:

    ``documents_key``
        the documents whose own grade is at least ``min_chunk_verdict``
        (PARTIAL by default), in order, each with ``metadata["crag"]``
        (``chunk_id``, ``grade``, ``verdict``, ``set_score``);
    ``flag_key`` (``"web_search"``)
        ``"Yes"`` when the set is not RELEVANT (the retrieval needs
        correcting: rewrite the query and search the web), else ``"No"``;
    ``evaluation_key`` (``"crag"``)
        ``{"verdict", "score", "needs_correction", "reasoning", "kept",
        "dropped", "evaluation"}``, ``evaluation`` being the JSON-ready
        :meth:`Evaluation.to_dict` (state stays serialisable for checkpointers).

    Scores: a document from :class:`CRAGRetriever` carries its score and kind in
    ``metadata["crag"]``; otherwise ``metadata[score_key]`` is read as
    ``score_kind`` (``UNKNOWN`` unless declared: the gate then has no
    similarity evidence, and the reasoning says so). Documents without an id
    get :func:`~crag_heuristic._retrievers.langchain.stable_document_id`;
    repeats of one id keep the first.

    Args:
        evaluator: an :class:`Evaluator`, or a config / profile name for one.
        score_key: the metadata field with a document's retrieval score.
        score_kind: what that score is (e.g. ``"cosine"``).
        min_chunk_verdict: the lowest chunk grade kept.
        keep_all_if_none: when no document reaches ``min_chunk_verdict``,
            keep them all instead of none (the flag still says to correct).
        corpus_stats: document frequencies for IDF weights.

    Raises:
        InputError: (on call) the state has no question or its documents are
            not documents.
    """

    def __init__(
        self,
        evaluator: Evaluator | EvaluatorConfig | str | None = None,
        *,
        question_key: str = "question",
        documents_key: str = "documents",
        flag_key: str = "web_search",
        evaluation_key: str = "crag",
        score_key: str = "score",
        score_kind: ScoreKind | str | None = None,
        min_chunk_verdict: Verdict | str = Verdict.PARTIAL,
        keep_all_if_none: bool = False,
        corpus_stats: CorpusStats | None = None,
    ) -> None:
        self.evaluator = evaluator if isinstance(evaluator, Evaluator) else Evaluator(evaluator)
        self.question_key = question_key
        self.documents_key = documents_key
        self.flag_key = flag_key
        self.evaluation_key = evaluation_key
        self.score_key = score_key
        try:
            self.score_kind = ScoreKind.UNKNOWN if score_kind is None else ScoreKind(score_kind)
            self.min_chunk_verdict = Verdict(min_chunk_verdict)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        self.keep_all_if_none = bool(keep_all_if_none)
        if corpus_stats is not None and not isinstance(corpus_stats, CorpusStats):
            raise InputError("corpus_stats must be a CorpusStats or None")
        self.corpus_stats = corpus_stats

    def __repr__(self) -> str:
        return f"CRAGGradeNode(evaluator={self.evaluator!r}, score_kind={self.score_kind.value})"

    def _chunk(self, document: Any, position: int) -> tuple[Chunk, Document]:
        if isinstance(document, str):
            document = Document(page_content=document)
        if not isinstance(document, Document):
            raise InputError(
                f"state[{self.documents_key!r}][{position}] is a {type(document).__name__}, "
                "not a Document or a string"
            )
        metadata = document.metadata or {}
        ours = metadata.get("crag")
        score: Any
        if isinstance(ours, Mapping) and ours.get("score_kind") is not None:
            score, key = ours.get("score"), "crag.score"
            try:
                kind = ScoreKind(ours["score_kind"])
            except ValueError:
                raise InputError(
                    f"document #{position}: unknown metadata['crag']['score_kind'] "
                    f"{ours['score_kind']!r}"
                ) from None
        else:
            score, kind, key = metadata.get(self.score_key), self.score_kind, self.score_key
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise InputError(f"document #{position}: metadata {key} = {score!r} is not a number")
        try:
            chunk = document_to_chunk(
                document,
                score=score,
                score_kind=kind if score is not None else ScoreKind.UNKNOWN,
                retriever="langgraph-state",
                position=position,
            )
        except RetrieverError as exc:  # a score the chunk rejects: the state's fault
            raise InputError(f"state[{self.documents_key!r}]: {exc}") from None
        return chunk, document

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Grade ``state``'s documents; return the state update (see the class doc)."""
        if not isinstance(state, Mapping) or self.question_key not in state:
            raise InputError(f"the graph state has no {self.question_key!r}")
        question = state[self.question_key]
        documents = state.get(self.documents_key) or []
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            raise InputError(f"state[{self.documents_key!r}] must be a list of documents")
        pairs: list[tuple[Chunk, Document]] = []
        seen: set[str] = set()
        for position, document in enumerate(documents):
            chunk, doc = self._chunk(document, position)
            if chunk.id not in seen:
                seen.add(chunk.id)
                pairs.append((chunk, doc))
        evaluation = self.evaluator.evaluate(
            question, [chunk for chunk, _ in pairs], self.corpus_stats
        )
        annotated = []
        for (chunk, doc), grade in zip(pairs, evaluation.chunks, strict=True):
            keep = grade.verdict.rank >= self.min_chunk_verdict.rank
            crag = {
                **dict((doc.metadata or {}).get("crag") or {}),
                "chunk_id": chunk.id,
                "grade": _grade_dict(grade),
                "verdict": evaluation.verdict.value,
                "set_score": evaluation.score,
            }
            new = Document(
                id=doc.id or chunk.id,
                page_content=doc.page_content,
                metadata={**(doc.metadata or {}), "crag": crag},
            )
            annotated.append((keep, new))
        kept = [doc for keep, doc in annotated if keep]
        if not kept and self.keep_all_if_none:
            kept = [doc for _, doc in annotated]
        needs_correction = evaluation.verdict is not Verdict.RELEVANT
        return {
            self.documents_key: kept,
            self.flag_key: "Yes" if needs_correction else "No",
            self.evaluation_key: {
                "verdict": evaluation.verdict.value,
                "score": evaluation.score,
                "needs_correction": needs_correction,
                "reasoning": evaluation.reasoning,
                "kept": len(kept),
                "dropped": len(annotated) - len(kept),
                "evaluation": evaluation.to_dict(),
            },
        }
