"""``Failure``: a stage and a typed error; its text; its JSON form, read back as untrusted
input; and no error string parsed anywhere (the type is on the failure)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import CragError, Failure, FailureStage, InputError
from crag_heuristic import _exceptions as errors
from crag_heuristic._failures import wrap

ROOT = Path(__file__).resolve().parents[1]

# one of each of the library's errors, with its structured attributes set
ERRORS: list[CragError] = [
    CragError("something"),
    errors.ConfigError("weights.keyword_overlap", -1, "must be >= 0"),
    InputError("k must be a positive integer"),
    errors.InvalidQueryError("   ", "blank"),
    errors.ScopeError("a lexical retriever outside the scope"),
    errors.InvalidChunkError("score", object(), "not a number", chunk_id="a", index=2),
    errors.DuplicateChunkError("a", 0, 3),
    errors.InsufficientLabelsError("recall 0.1 needs 22 failed lists; got 3", needed=22, have=3),
    errors.ScoreOrderError("cosine", ("cosine_distance",), (0.1, 0.2, 0.3), "they rise"),
    errors.SynonymFormatError("syn.txt", 4, "car =>", "nothing after =>"),
    errors.CorpusStatsFileError("/stats.json", "analyzer", "english:1", "english:2"),
    errors.IndexDirectoryError("/index", "file", "docs.jsonl changed", "sha256 0123abcd"),
    errors.RetrieverError("FaissRetriever.search gave no answer", retriever="Faiss", timeout=0.5),
    errors.StatsEngineError("the scheduler is gone", engine="dask"),
    errors.ParentLookupError("store down", parent_id="bees", cause_type="ConnectionError"),
    errors.GraderError("the grader raised RuntimeError: 500", grader="llm:1"),
    errors.GraderTimeout("no grades within 0.05 s", grader="llm:1"),
    errors.GraderOutputError("grade 0 is nan", grader="llm:1"),
    errors.GraderHTTPError("answered 429", status_code=429, retry_after=1.5, grader="llm:1"),
    errors.GraderConnectionError("connection failed (ConnectError)", grader="llm:1"),
    errors.WebSearchError("x", query="bees", url="http://user:pw@searx:8080/search"),
    errors.WebSearchTimeout("slow", url="http://searx/search"),
    errors.WebSearchHTTPError("HTTP 502", status_code=502),
    errors.WebSearchRateLimited("HTTP 429", status_code=429),
    errors.WebSearchFormatDisabled("HTTP 403", status_code=403),
    errors.WebSearchConnectionError("cannot connect to http://a:b@searx/"),
    errors.WebSearchResponseError("not JSON"),
    errors.WebSearchEnginesFailed("all failed", engines=("ddg", "bing"), reasons=("timeout", "")),
    errors.CircuitOpenError("open", retry_after=12.5, url="http://searx"),
    errors.CacheError("redis down", backend="redis", operation="get", kind="connection"),
    errors.CacheError("later", backend="redis", operation="set", kind="down", retry_after=0.25),
    errors.MissingDependencyError("redis", "redis", "RedisCache"),
    errors.ServiceError("no route GET /v2", status=404),
    errors.UnauthorizedError("no valid API key"),
    errors.RequestTooLargeError("a body of 2,000,000 bytes", limit=1_048_576),
    errors.OverloadedError("every slot busy", retry_after=1.0),
    errors.RequestTimeoutError("no answer within 30 s", timeout=30.0),
]


def test_every_library_error_has_a_sample() -> None:
    library = set(errors.error_classes().values())
    assert {type(error) for error in ERRORS} == library


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_a_failure_round_trips_through_json(error: CragError) -> None:
    failure = Failure(FailureStage.WEB, error)
    data = json.loads(json.dumps(failure.to_dict()))
    assert set(data) == {"stage", "type", "message", "attributes"}
    assert data["type"] == type(error).__name__ and data["stage"] == "web"
    back = Failure.from_dict(data)
    assert back == failure and hash(back) == hash(failure)
    assert type(back.error) is type(error) and back.text == failure.text
    assert back.type_name == failure.type_name and back.error.__cause__ is None
    for name, value in vars(error).items():
        if isinstance(value, str | int | float | tuple | type(None)) and "pw" not in str(value):
            assert getattr(back.error, name) == value, name


def test_the_text_is_the_old_flag() -> None:
    error = errors.WebSearchConnectionError("cannot connect to http://user:pw@searx:8080/search")
    failure = Failure("web", error)  # type: ignore[arg-type]  # the value is taken
    assert failure.stage is FailureStage.WEB
    assert (
        failure.text == "WebSearchConnectionError: cannot connect to http://***@searx:8080/search"
    )
    assert failure.message == "cannot connect to http://***@searx:8080/search"
    assert str(failure) == f"web: {failure.text}"
    assert "pw" not in json.dumps(failure.to_dict())  # attributes masked too
    parent = Failure(
        FailureStage.PARENTS, errors.ParentLookupError("'bees'", cause_type="KeyError")
    )
    assert (parent.type_name, parent.text) == ("KeyError", "KeyError: 'bees'")


def test_a_failure_takes_only_a_stage_and_a_library_error() -> None:
    with pytest.raises(InputError, match="unknown failure stage 'moon'"):
        Failure("moon", CragError("x"))  # type: ignore[arg-type]
    with pytest.raises(InputError, match="must be a CragError, got KeyError"):
        Failure(FailureStage.CACHE, KeyError("x"))  # type: ignore[arg-type]


def test_wrap_keeps_a_parts_own_exception_as_the_cause() -> None:
    cause = OSError("disk full")
    for stage, expected in (
        (FailureStage.WEB, errors.WebSearchError),
        (FailureStage.CACHE, errors.CacheError),
        (FailureStage.GRADER, errors.GraderError),
        (FailureStage.PARENTS, errors.ParentLookupError),
        (FailureStage.RE_RETRIEVAL, errors.RetrieverError),
        (FailureStage.EXPANSION, CragError),
    ):
        error = wrap(stage, cause)
        assert type(error) is expected and error.__cause__ is cause
        assert "raised OSError: disk full" in str(error)
    own = errors.GraderTimeout("slow")
    assert wrap(FailureStage.GRADER, own) is own


GOOD: dict[str, Any] = {
    "stage": "cache",
    "type": "CacheError",
    "message": "down",
    "attributes": {"backend": "redis", "operation": "get"},
}


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([], "a failure is a dict"),
        ({**GOOD, "cause": "x"}, "a failure is a dict"),
        ({"stage": "cache", "type": "CacheError"}, "a failure is a dict"),
        ({**GOOD, "stage": "moon"}, "unknown failure stage"),
        ({**GOOD, "type": "ValueError"}, "unknown error type 'ValueError'"),
        ({**GOOD, "type": "CalibrationWarning"}, "unknown error type"),  # not a CragError
        ({**GOOD, "type": "__class__"}, "unknown error type"),
        ({**GOOD, "type": 3}, "unknown error type 3"),
        ({**GOOD, "message": None}, "message must be a string"),
        ({**GOOD, "attributes": ["kind"]}, "attributes must be a dict"),
        ({**GOOD, "attributes": {"password": "x"}}, "CacheError takes no attribute password"),
        ({**GOOD, "attributes": {**GOOD["attributes"], "kind": {"a": 1}}}, "kind must be a JSON"),
        ({**GOOD, "attributes": {**GOOD["attributes"], "kind": [[1]]}}, "kind must be a JSON"),
    ],
)
def test_reading_back_refuses_what_it_did_not_write(data: Any, match: str) -> None:
    with pytest.raises(InputError, match=match):
        Failure.from_dict(data)


def test_attributes_left_out_take_their_defaults_or_are_refused() -> None:
    bare = {"stage": "grader", "type": "GraderTimeout", "message": "slow"}
    error = Failure.from_dict(bare).error
    assert isinstance(error, errors.GraderTimeout) and error.grader is None
    with pytest.raises(InputError, match="CacheError needs the attribute backend, operation"):
        Failure.from_dict({k: v for k, v in GOOD.items() if k != "attributes"})
    full = {**GOOD, "attributes": {"backend": "redis", "operation": "get"}}
    cache = Failure.from_dict(full).error
    assert isinstance(cache, errors.CacheError) and (cache.kind, cache.retry_after) == (
        "error",
        None,
    )


# The colon splits the package and the benchmarks may make: on cache keys, a
# "module:attribute" spec, a "DIR:SPLIT" argument, a benchmark's "name: detail"
# labels. An error's type is read from its Failure, never from its text.
ALLOWED_COLON_SPLITS = {"key", "spec", "text", "t"}


def colon_splits(path: Path) -> list[tuple[int, str]]:
    """(line, receiver) of each ``<receiver>.split(":")`` / ``rsplit`` / ``partition`` /
    ``rpartition`` (on ``":"`` or ``": "``) in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("split", "rsplit", "partition", "rpartition")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in (":", ": ")
        ):
            found.append((node.lineno, ast.unparse(node.func.value)))
    return found


def test_no_error_string_is_split_on_its_colon() -> None:
    paths = sorted((ROOT / "crag_heuristic").rglob("*.py")) + sorted(
        (ROOT / "benchmarks").rglob("*.py")
    )
    splits = [(p.relative_to(ROOT), line, what) for p in paths for line, what in colon_splits(p)]
    assert splits, "the scan finds the splits that are allowed"
    unexpected = [s for s in splits if s[2] not in ALLOWED_COLON_SPLITS]
    assert unexpected == [], "read the type from the Failure (failure.type_name), not the text"
