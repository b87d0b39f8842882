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

===============================  ===============================================================
module                           what
===============================  ===============================================================
``crag_heuristic.cache``         the caches (``TieredCache`` too) and their counters
``crag_heuristic.config``        the configuration sections (``Thresholds``, ``SignalWeights``
                                 ...) and the fitted model's parts
``crag_heuristic.web``           ``CircuitState``, ``WebResults``, ``WebSearchInfo``,
                                 ``keyword_query``
``crag_heuristic.events``        the stage events ``CRAG.stream`` / ``astream`` yield
``crag_heuristic.expansion``     the query expanders, synonym sets, ``reciprocal_rank_fusion``
``crag_heuristic.refinement``    knowledge refinement (``refine``, ``Refinement``, ``Strip``)
``crag_heuristic.grading``       the cascade: expensive graders (cross-encoder, any callable),
                                 the escalation policy, ``Cascade``, the grader errors
``crag_heuristic.text``          ``Analyzer``, ``CorpusStats`` (+ ``ChunkAnalyses``), the engines
                                 that count them (``LocalEngine``, ``DaskEngine``), their errors
``crag_heuristic.metrics``       ``MetricsSink``, ``PrometheusMetrics``
``crag_heuristic.protocols``     every seam (retriever, web, cache, expander, metrics, logger)
``crag_heuristic.sample``        the bundled sample corpus and its retriever
``crag_heuristic.calibration``   fitting the gate: from labels, self-calibration (simulated
                                 queries), on a grader's labels, a stage refitted on new labels
``crag_heuristic.bench``         the benchmark harness on a BEIR-layout folder (scikit-learn)
``crag_heuristic.testing``       light helpers for tests (fakes, event capture, call tracing)
===============================  ===============================================================

``import crag_heuristic`` imports neither the calibration nor the benchmark harness, nor
scikit-learn, nor httpx (the web client loads on first use) nor structlog (loaded with
the first event a logger lets through). The core install (numpy, structlog, PyStemmer,
faiss-cpu) runs the gate, the router and the bundled demo; every other feature
names its extra when it is missing (:class:`MissingDependencyError`, an
``ImportError``): ``pip install 'crag-heuristic[redis]'``.
"""

import functools
import importlib
import importlib.util
import pkgutil
from typing import TYPE_CHECKING, Any

from ._cache.memory import MemoryCache
from ._cache.redis import RedisCache
from ._cache.stats import CacheStats
from ._config import DEFAULT_PROFILE, EvaluatorConfig, RouterConfig, available_profiles, load_config
from ._evaluator.evaluator import Evaluator
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
from ._retrievers.bm25 import BM25Retriever
from ._retrievers.faiss import FaissRetriever
from ._retrievers.langchain import LangChainFaissRetriever
from ._router.result import CRAGResult, Strategy, WebOutcome
from ._router.router import CRAG
from ._types import Chunk, ChunkEvaluation, Evaluation, ScoreKind, Signals, Verdict
from ._version import __version__
from ._web.circuit import CircuitBreaker
from ._web.config import SearxngConfig

if TYPE_CHECKING:  # imported on first use: httpx takes a tenth of a second to import;
    # self-calibration with the gate's fitting (``crag_heuristic.calibration``)
    from ._calibration.self_calibration import calibrate_self
    from ._web.searxng import SearxngClient

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

# Top-level names whose module is imported on first use (the web client needs httpx;
# ``import crag_heuristic`` imports neither the calibration room ``_calibration`` nor the
# benchmark harness ``_bench``).
_LAZY = {"SearxngClient": "._web.searxng", "calibrate_self": "._calibration.self_calibration"}

# Public packages whose modules each need a framework's extra (not searched for a name).
_FACES_WITH_EXTRAS = frozenset({f"{__name__}.integrations"})


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name: str) -> Any:
    """A lazily imported name; or say where a name that moved to a submodule lives now."""
    lazy = _LAZY.get(name)
    if lazy is not None:
        value = getattr(importlib.import_module(lazy, __name__), name)
        globals()[name] = value
        return value
    module = None if name.startswith("_") else _face_of(name)
    if module is None:
        raise AttributeError(f"module 'crag_heuristic' has no attribute {name!r}")
    raise AttributeError(
        f"crag_heuristic.{name} is not a top-level name: from {module} import {name}"
    )


def _face_of(name: str) -> str | None:
    """The first public submodule (by name) whose ``__all__`` lists ``name``: where
    a name that is not top-level lives (37 names left the top level in 0.2)."""
    return _face_names().get(name)


@functools.cache
def _face_names() -> dict[str, str]:
    """Each public submodule's names -> the first submodule (by name) that lists it.
    The faces are found by walking the package and their ``__all__`` read from their
    source: nothing is imported, so a failed look-up (a ``hasattr`` probe) loads
    neither the benchmark harness nor httpx."""
    import ast

    homes: dict[str, str] = {}
    for info in pkgutil.iter_modules(__path__, f"{__name__}."):
        if info.name.rpartition(".")[2].startswith("_") or info.name in _FACES_WITH_EXTRAS:
            continue
        spec = importlib.util.find_spec(info.name)
        if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8") as source:
            tree = ast.parse(source.read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
            ):
                for listed in ast.literal_eval(node.value):
                    homes.setdefault(listed, info.name)
    return homes
