"""Every error class crosses a process boundary with its attributes (issue 26).

An exception raised in a worker of a ``ProcessPoolExecutor`` (or
``multiprocessing.Pool``) is pickled there and unpickled in the parent. The
default pickling of an exception calls its class with the message alone, which
the errors' keyword-only constructors refuse: 14 of 25 classes broke the pool
(``BrokenProcessPool``) or hung ``Pool.get()``. Each class is raised here in a
real worker process, with every attribute set to something other than its
default, and must come back equal: same class, message, attributes, notes.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from crag_heuristic import _exceptions as errors

CAUSE = "http://searx.test/search"
MAKERS: dict[str, Callable[[], errors.CragError]] = {
    "CragError": lambda: errors.CragError("plain", 2),
    "ConfigError": lambda: errors.ConfigError("weights.x", [1.5, None], "must be >= 0"),
    "MissingDependencyError": lambda: errors.MissingDependencyError("redis", "redis", "RedisCache"),
    "InputError": lambda: errors.InputError("k must be >= 1"),
    "InvalidQueryError": lambda: errors.InvalidQueryError("  ", "blank"),
    "ScopeError": lambda: errors.ScopeError("a lexical retriever outside the scope"),
    "InvalidChunkError": lambda: errors.InvalidChunkError(
        "score", 7.5, "a cosine lies in [-1, 1]", chunk_id="c1", index=3
    ),
    "DuplicateChunkError": lambda: errors.DuplicateChunkError("c1", 0, 4),
    "ScoreOrderError": lambda: errors.ScoreOrderError(
        "cosine", ("cosine_distance", "squared_l2"), (0.1, 0.2, 0.3), "they rise"
    ),
    "SynonymFormatError": lambda: errors.SynonymFormatError("syn.txt", 12, "a =>", "no target"),
    "CorpusStatsFileError": lambda: errors.CorpusStatsFileError(
        "stats.npz", "analyzer", "abc", "def", note="rebuild"
    ),
    "RetrieverError": lambda: errors.RetrieverError("slow", retriever="Faiss", timeout=2.5),
    "ParentLookupError": lambda: errors.ParentLookupError(
        "store down", parent_id="p1", cause_type="ConnectionError"
    ),
    "StatsEngineError": lambda: errors.StatsEngineError("no scheduler", engine="dask"),
    "GraderError": lambda: errors.GraderError("raised", grader="ce:v1"),
    "GraderTimeout": lambda: errors.GraderTimeout("late", grader="ce:v1"),
    "GraderOutputError": lambda: errors.GraderOutputError("NaN", grader="ce:v1"),
    "WebSearchError": lambda: errors.WebSearchError("x", query="q", url=CAUSE, detail="d"),
    "WebSearchTimeout": lambda: errors.WebSearchTimeout("late", query="q", url=CAUSE),
    "WebSearchHTTPError": lambda: errors.WebSearchHTTPError(
        "500", status_code=500, query="q", url=CAUSE, detail="boom"
    ),
    "WebSearchRateLimited": lambda: errors.WebSearchRateLimited("429", status_code=429, url=CAUSE),
    "WebSearchFormatDisabled": lambda: errors.WebSearchFormatDisabled(
        "403", status_code=403, query="q"
    ),
    "WebSearchConnectionError": lambda: errors.WebSearchConnectionError("refused", url=CAUSE),
    "WebSearchResponseError": lambda: errors.WebSearchResponseError("html", detail="<html>"),
    "WebSearchEnginesFailed": lambda: errors.WebSearchEnginesFailed(
        "all failed", engines=("a", "b"), reasons=("timeout", "403"), query="q", url=CAUSE
    ),
    "CircuitOpenError": lambda: errors.CircuitOpenError("open", retry_after=4.5, url=CAUSE),
    "InsufficientLabelsError": lambda: errors.InsufficientLabelsError(
        "recall 0.1 needs 22 failed lists; got 3", needed=22, have=3
    ),
    "IndexDirectoryError": lambda: errors.IndexDirectoryError(
        "/index", "file", "docs.jsonl changed", "sha256 0123abcd", note="rebuild"
    ),
    "GraderHTTPError": lambda: errors.GraderHTTPError(
        "503", status_code=503, retry_after=2.0, grader="openai:gpt"
    ),
    "GraderConnectionError": lambda: errors.GraderConnectionError("reset", grader="openai:gpt"),
    "ServiceError": lambda: errors.ServiceError("no route GET /v2", status=404),
    "UnauthorizedError": lambda: errors.UnauthorizedError("no valid API key", status=401),
    "RequestTooLargeError": lambda: errors.RequestTooLargeError("body", limit=1024, status=413),
    "OverloadedError": lambda: errors.OverloadedError("busy", retry_after=1.0, status=503),
    "RequestTimeoutError": lambda: errors.RequestTimeoutError("slow", timeout=2.5, status=504),
    "CacheError": lambda: errors.CacheError(
        "down", backend="redis", operation="get", kind="down", retry_after=0.75
    ),
}


def made(name: str) -> errors.CragError:
    error = MAKERS[name]()
    setattr(error, "__notes__", [f"note on {name}"])  # noqa: B010 - add_note is 3.11+
    return error


def raise_in_worker(name: str) -> None:
    raise made(name)


def state(error: BaseException) -> tuple[Any, ...]:
    extra = (error.name, error.path) if isinstance(error, ImportError) else ()
    return (type(error), str(error), error.args, vars(error), *extra)


def test_every_error_class_has_a_case() -> None:
    assert set(MAKERS) == set(errors.error_classes())


def test_every_error_survives_a_process_pool() -> None:
    with ProcessPoolExecutor(max_workers=1) as pool:
        futures = {name: pool.submit(raise_in_worker, name) for name in sorted(MAKERS)}
        for name, future in futures.items():
            error = future.exception(timeout=60)
            assert error is not None
            assert state(error) == state(made(name)), name
            assert isinstance(error, errors.CragError)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_every_error_survives_pickle(name: str) -> None:
    error = made(name)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(error, protocol))
        assert state(again) == state(error)
