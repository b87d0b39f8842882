"""The public API is pinned: a change here is a change users see."""

from __future__ import annotations

import crag_heuristic

EXPECTED = [
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


def test_all_is_pinned_and_sorted() -> None:
    assert crag_heuristic.__all__ == EXPECTED
    assert crag_heuristic.__all__ == sorted(crag_heuristic.__all__)


def test_every_name_resolves() -> None:
    for name in crag_heuristic.__all__:
        assert getattr(crag_heuristic, name) is not None


def test_every_error_is_a_crag_error() -> None:
    for name in crag_heuristic.__all__:
        obj = getattr(crag_heuristic, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, crag_heuristic.CragError), name


def test_py_typed_marker_is_shipped() -> None:
    from importlib import resources

    assert (resources.files("crag_heuristic") / "py.typed").is_file()
