"""crag-heuristic: an LLM-free Corrective RAG gate.

Grade what a retriever returned, in about a millisecond, before it reaches a
generator::

    from crag_heuristic import Chunk, Evaluator, ScoreKind

    chunks = [Chunk(id="a", text="...", score=0.71, score_kind=ScoreKind.COSINE)]
    evaluation = Evaluator().evaluate("what is ...?", chunks)
    evaluation.verdict      # Verdict.RELEVANT / PARTIAL / IRRELEVANT

The implementation lives in private modules; this module is the public API.
"""

from ._bench import calibrate, run_bench
from ._cache import CacheStats, MemoryCache, RedisCache
from ._calibrate import CalibrationResult, GateExample, fit_gate
from ._config import (
    DEFAULT_PROFILE,
    CoherenceConfig,
    EvaluatorConfig,
    KeywordConfig,
    LengthConfig,
    LogisticStage,
    ModelConfig,
    ModelTerm,
    RefineConfig,
    RouterConfig,
    SignalWeights,
    Thresholds,
    available_profiles,
    load_config,
)
from ._corpus import CorpusStats
from ._evaluator import Evaluator, Refinement, Strip, refine
from ._exceptions import (
    CacheError,
    CircuitOpenError,
    ConfigError,
    CorpusStatsFileError,
    CragError,
    DuplicateChunkError,
    InputError,
    InvalidChunkError,
    InvalidQueryError,
    RedisServerError,
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
from ._expansion import (
    Expansion,
    PRFExpander,
    QueryExpander,
    SynonymExpander,
    SynonymSet,
    load_synonyms,
    parse_synonyms,
)
from ._fusion import reciprocal_rank_fusion
from ._metrics import MetricsSink, PrometheusMetrics
from ._protocols import AsyncCache, AsyncRetriever, AsyncWebSearcher, Cache, Retriever, WebSearcher
from ._retrievers import BM25Retriever, FaissRetriever, LangChainFaissRetriever
from ._router import CRAG, CRAGResult, Strategy, keyword_query
from ._sample import LsaEmbedder, load_sample_corpus, load_sample_queries, sample_retriever
from ._text import Analyzer
from ._types import Chunk, ChunkEvaluation, Evaluation, ScoreKind, Signals, Verdict
from ._version import __version__
from ._web import (
    CircuitBreaker,
    CircuitState,
    SearxngClient,
    SearxngConfig,
    WebResults,
    WebSearchInfo,
)

__all__ = [
    "Analyzer",
    "AsyncCache",
    "AsyncRetriever",
    "AsyncWebSearcher",
    "BM25Retriever",
    "CRAG",
    "CRAGResult",
    "Cache",
    "CacheError",
    "CacheStats",
    "CalibrationResult",
    "Chunk",
    "ChunkEvaluation",
    "CircuitBreaker",
    "CircuitOpenError",
    "CircuitState",
    "CoherenceConfig",
    "ConfigError",
    "CorpusStats",
    "CorpusStatsFileError",
    "CragError",
    "DEFAULT_PROFILE",
    "DuplicateChunkError",
    "Evaluation",
    "Evaluator",
    "EvaluatorConfig",
    "Expansion",
    "FaissRetriever",
    "GateExample",
    "InputError",
    "InvalidChunkError",
    "InvalidQueryError",
    "KeywordConfig",
    "LangChainFaissRetriever",
    "LengthConfig",
    "LogisticStage",
    "LsaEmbedder",
    "MemoryCache",
    "MetricsSink",
    "ModelConfig",
    "ModelTerm",
    "PRFExpander",
    "PrometheusMetrics",
    "QueryExpander",
    "RedisCache",
    "RedisServerError",
    "RefineConfig",
    "Refinement",
    "Retriever",
    "RetrieverError",
    "RouterConfig",
    "ScoreKind",
    "SearxngClient",
    "SearxngConfig",
    "SignalWeights",
    "Signals",
    "Strategy",
    "Strip",
    "SynonymExpander",
    "SynonymFormatError",
    "SynonymSet",
    "Thresholds",
    "Verdict",
    "WebResults",
    "WebSearchConnectionError",
    "WebSearchEnginesFailed",
    "WebSearchError",
    "WebSearchFormatDisabled",
    "WebSearchHTTPError",
    "WebSearchInfo",
    "WebSearchRateLimited",
    "WebSearchResponseError",
    "WebSearchTimeout",
    "WebSearcher",
    "__version__",
    "available_profiles",
    "calibrate",
    "fit_gate",
    "keyword_query",
    "load_config",
    "load_sample_corpus",
    "load_sample_queries",
    "load_synonyms",
    "parse_synonyms",
    "reciprocal_rank_fusion",
    "refine",
    "run_bench",
    "sample_retriever",
]
