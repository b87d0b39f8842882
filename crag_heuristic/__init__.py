"""crag-heuristic: an LLM-free Corrective RAG gate.

Grade what a retriever returned, in about a millisecond, before it reaches a
generator::

    from crag_heuristic import Chunk, Evaluator, ScoreKind

    chunks = [Chunk(id="a", text="...", score=0.71, score_kind=ScoreKind.COSINE)]
    evaluation = Evaluator().evaluate("what is ...?", chunks)
    evaluation.verdict      # Verdict.RELEVANT / PARTIAL / IRRELEVANT

The implementation lives in private modules; this module is the public API's
core: the data model, the errors, the evaluator, the configuration, the
router, the retrievers, the caches, the web client and the seams they plug
into. Each area's other names live in a public submodule:

=============================  ===============================================================
module                         what
=============================  ===============================================================
``crag_heuristic.cache``       the caches (``TieredCache`` too) and their counters
``crag_heuristic.config``      the configuration sections (``Thresholds``, ``SignalWeights``
                               ...) and the fitted model's parts
``crag_heuristic.web``         ``CircuitState``, ``WebResults``, ``WebSearchInfo``,
                               ``keyword_query``
``crag_heuristic.events``      the stage events ``CRAG.stream`` / ``astream`` yield
``crag_heuristic.expansion``   the query expanders, synonym sets, ``reciprocal_rank_fusion``
``crag_heuristic.refinement``  knowledge refinement (``refine``, ``Refinement``, ``Strip``)
``crag_heuristic.grading``     the cascade: expensive graders (cross-encoder, any callable),
                               the escalation policy, ``Cascade``, the grader errors
``crag_heuristic.text``        ``Analyzer``, ``CorpusStats`` (+ ``ChunkAnalyses``), the engines
                               that count them (``LocalEngine``, ``DaskEngine``), their errors
``crag_heuristic.metrics``     ``MetricsSink``, ``PrometheusMetrics``
``crag_heuristic.protocols``   every seam (retriever, web, cache, expander, metrics, logger)
``crag_heuristic.sample``      the bundled sample corpus and its retriever
``crag_heuristic.bench``       the benchmark harness, calibration from labels (scikit-learn),
                               query simulation and leave-one-collection-out
``crag_heuristic.testing``     light helpers for tests (fakes, event capture, call tracing)
=============================  ===============================================================

``import crag_heuristic`` imports neither the benchmark harness nor scikit-learn, nor
httpx (the web client's names load on first use) nor structlog (loaded with the
first event a logger lets through). The core install (numpy, structlog, PyStemmer,
faiss-cpu) runs the gate, the router and the bundled demo; every other feature
names its extra when it is missing (:class:`MissingDependencyError`, an
``ImportError``): ``pip install 'crag-heuristic[redis]'``.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._cache import CacheStats, MemoryCache, RedisCache
from ._config import DEFAULT_PROFILE, EvaluatorConfig, RouterConfig, available_profiles, load_config
from ._evaluator import Evaluator
from ._exceptions import (
    CacheError,
    CircuitOpenError,
    ConfigError,
    CragError,
    DuplicateChunkError,
    InputError,
    InvalidChunkError,
    InvalidQueryError,
    MissingDependencyError,
    ParentLookupError,
    RetrieverError,
    SynonymFormatError,
    WebSearchConnectionError,
    WebSearchEnginesFailed,
    WebSearchError,
    WebSearchFormatDisabled,
    WebSearchHTTPError,
    WebSearchRateLimited,
    WebSearchResponseError,
    WebSearchTimeout,
)
from ._failures import Failure, FailureStage
from ._protocols import AsyncCache, AsyncRetriever, AsyncWebSearcher, Cache, Retriever, WebSearcher
from ._retrievers import BM25Retriever, FaissRetriever, LangChainFaissRetriever
from ._router import CRAG, CRAGResult, Strategy, WebOutcome
from ._self_calibrate import calibrate_self
from ._types import Chunk, ChunkEvaluation, Evaluation, ScoreKind, Signals, Verdict
from ._version import __version__

if TYPE_CHECKING:  # imported on first use (httpx takes a tenth of a second to import)
    from ._web import CircuitBreaker, SearxngClient, SearxngConfig

__all__ = [
    "AsyncCache",
    "AsyncRetriever",
    "AsyncWebSearcher",
    "BM25Retriever",
    "CRAG",
    "CRAGResult",
    "Cache",
    "CacheError",
    "CacheStats",
    "Chunk",
    "ChunkEvaluation",
    "CircuitBreaker",
    "CircuitOpenError",
    "ConfigError",
    "CragError",
    "DEFAULT_PROFILE",
    "DuplicateChunkError",
    "Evaluation",
    "Evaluator",
    "EvaluatorConfig",
    "Failure",
    "FailureStage",
    "FaissRetriever",
    "InputError",
    "InvalidChunkError",
    "InvalidQueryError",
    "LangChainFaissRetriever",
    "MemoryCache",
    "MissingDependencyError",
    "ParentLookupError",
    "RedisCache",
    "Retriever",
    "RetrieverError",
    "RouterConfig",
    "ScoreKind",
    "SearxngClient",
    "SearxngConfig",
    "Signals",
    "Strategy",
    "SynonymFormatError",
    "Verdict",
    "WebOutcome",
    "WebSearchConnectionError",
    "WebSearchEnginesFailed",
    "WebSearchError",
    "WebSearchFormatDisabled",
    "WebSearchHTTPError",
    "WebSearchRateLimited",
    "WebSearchResponseError",
    "WebSearchTimeout",
    "WebSearcher",
    "__version__",
    "available_profiles",
    "calibrate_self",
    "load_config",
]

# Names that were top-level before 0.2 and where they live now (an AttributeError says so).
_MOVED = {
    **dict.fromkeys(
        ("CalibrationResult", "GateExample", "calibrate", "fit_gate", "run_bench"),
        "crag_heuristic.bench",
    ),
    **dict.fromkeys(
        ("LsaEmbedder", "load_sample_corpus", "load_sample_queries", "sample_retriever"),
        "crag_heuristic.sample",
    ),
    **dict.fromkeys(
        (
            "CoherenceConfig",
            "KeywordConfig",
            "LengthConfig",
            "LogisticStage",
            "ModelConfig",
            "ModelTerm",
            "RefineConfig",
            "SignalWeights",
            "Thresholds",
        ),
        "crag_heuristic.config",
    ),
    **dict.fromkeys(
        ("CircuitState", "WebResults", "WebSearchInfo", "keyword_query"), "crag_heuristic.web"
    ),
    **dict.fromkeys(
        (
            "Expansion",
            "PRFExpander",
            "QueryExpander",
            "SynonymExpander",
            "SynonymSet",
            "load_synonyms",
            "parse_synonyms",
            "reciprocal_rank_fusion",
        ),
        "crag_heuristic.expansion",
    ),
    **dict.fromkeys(("Refinement", "Strip", "refine"), "crag_heuristic.refinement"),
    **dict.fromkeys(("Analyzer", "CorpusStats"), "crag_heuristic.text"),
    **dict.fromkeys(("MetricsSink", "PrometheusMetrics"), "crag_heuristic.metrics"),
}


# Top-level names whose module is imported on first use (the web client needs httpx).
_LAZY = dict.fromkeys(("CircuitBreaker", "SearxngClient", "SearxngConfig"), "._web")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name: str) -> Any:
    """A lazily imported name; or say where a name that moved to a submodule lives now."""
    lazy = _LAZY.get(name)
    if lazy is not None:
        value = getattr(importlib.import_module(lazy, __name__), name)
        globals()[name] = value
        return value
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'crag_heuristic' has no attribute {name!r}")
    raise AttributeError(
        f"crag_heuristic.{name} is not a top-level name: from {module} import {name}"
    )
