"""crag-heuristic: an LLM-free Corrective RAG gate.

Grade what a retriever returned, in about a millisecond, before it reaches a
generator::

    from crag_heuristic import Chunk, Evaluator, ScoreKind

    chunks = [Chunk(id="a", text="...", score=0.71, score_kind=ScoreKind.COSINE)]
    evaluation = Evaluator().evaluate("what is ...?", chunks)
    evaluation.verdict      # Verdict.RELEVANT / PARTIAL / IRRELEVANT

The implementation lives in private modules; this module is the public API.
"""

from ._config import (
    CoherenceConfig,
    EvaluatorConfig,
    KeywordConfig,
    LengthConfig,
    RefineConfig,
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
    CragError,
    DuplicateChunkError,
    InputError,
    InvalidChunkError,
    InvalidQueryError,
    RetrieverError,
    WebSearchError,
    WebSearchFormatDisabled,
    WebSearchHTTPError,
    WebSearchRateLimited,
    WebSearchResponseError,
    WebSearchTimeout,
)
from ._text import Analyzer
from ._types import Chunk, ChunkEvaluation, Evaluation, ScoreKind, Signals, Verdict
from ._version import __version__

__all__ = [
    "Analyzer",
    "CacheError",
    "Chunk",
    "ChunkEvaluation",
    "CircuitOpenError",
    "CoherenceConfig",
    "ConfigError",
    "CorpusStats",
    "CragError",
    "DuplicateChunkError",
    "Evaluation",
    "Evaluator",
    "EvaluatorConfig",
    "InputError",
    "InvalidChunkError",
    "InvalidQueryError",
    "KeywordConfig",
    "LengthConfig",
    "RefineConfig",
    "Refinement",
    "RetrieverError",
    "ScoreKind",
    "SignalWeights",
    "Signals",
    "Strip",
    "Thresholds",
    "Verdict",
    "WebSearchError",
    "WebSearchFormatDisabled",
    "WebSearchHTTPError",
    "WebSearchRateLimited",
    "WebSearchResponseError",
    "WebSearchTimeout",
    "__version__",
    "available_profiles",
    "load_config",
    "refine",
]
