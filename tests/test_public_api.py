"""The public API is pinned: a change here is a change users see."""

from __future__ import annotations

import crag_heuristic

EXPECTED = [
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
