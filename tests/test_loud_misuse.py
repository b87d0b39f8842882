"""Misuse is loud: scores outside their kind's range, numbers beyond float, a huge
``k``, deep JSON, a hanging retriever, parts that are not parts (issue 18, item 1)."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from crag_heuristic import (
    CRAG,
    Chunk,
    ConfigError,
    Evaluator,
    EvaluatorConfig,
    InputError,
    InvalidChunkError,
    MemoryCache,
    RedisCache,
    RetrieverError,
    RouterConfig,
    ScoreKind,
    SearxngConfig,
    Strategy,
)
from crag_heuristic._checks import MAX_K
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_BAD_INPUT, EXIT_OK, MAX_NESTING, read_records
from crag_heuristic._expansion.fusion import reciprocal_rank_fusion
from crag_heuristic._sample import sample_retriever
from crag_heuristic._types import check_chunk
from crag_heuristic.grading import Escalation
from crag_heuristic.testing import ListRetriever, StaticExpander

HUGE = 10**400  # an integer no float can hold

# -- scores outside their kind's range --------------------------------------------------


@pytest.mark.parametrize("score", [5.0, -5, 1e308, 1.0002, -1.0002])
def test_a_cosine_outside_minus_one_one_is_refused(score: float) -> None:
    with pytest.raises(InvalidChunkError) as info:
        Chunk(id="a", text="t", score=score, score_kind="cosine")
    assert info.value.field == "score" and "[-1, 1]" in str(info.value)


@pytest.mark.parametrize("distance", [1.2, 1.9, 3.5])
def test_a_distance_declared_as_a_cosine_names_the_distance_kinds(distance: float) -> None:
    with pytest.raises(InvalidChunkError, match="looks like a distance") as info:
        Chunk(id="a", text="t", score=distance, score_kind=ScoreKind.COSINE)
    assert "squared_l2" in str(info.value) and "Chroma" in str(info.value)


@pytest.mark.parametrize(
    ("kind", "score", "named"),
    [
        ("squared_l2", 4.01, "'distance'"),
        ("l2", 2.01, "'distance'"),
        ("probability", 1.01, "[0, 1]"),
        ("bm25", -0.5, "negative"),
        ("rrf", -0.1, "negative"),
    ],
)
def test_each_kind_has_its_range(kind: str, score: float, named: str) -> None:
    with pytest.raises(InvalidChunkError, match=named.replace("[", r"\[").replace("]", r"\]")):
        Chunk(id="a", text="t", score=score, score_kind=kind)


@pytest.mark.parametrize(
    ("kind", "score"),
    [
        ("cosine", 1.00005),  # float32 rounding of a unit vector's dot product
        ("cosine", -1.0),
        ("squared_l2", 4.0),
        ("l2", 2.0),
        ("inner_product", 1e6),
        ("distance", 1e6),
        ("bm25", 1e4),
        ("unknown", -1e300),
        ("web", 1e300),
    ],
)
def test_scores_inside_their_range_are_kept(kind: str, score: float) -> None:
    assert Chunk(id="a", text="t", score=score, score_kind=kind).score == score


def test_a_chunk_changed_to_an_out_of_range_cosine_is_caught_at_the_door() -> None:
    chunk = Chunk(id="a", text="t", score=0.5, score_kind="cosine")
    object.__setattr__(chunk, "score", 1.5)
    with pytest.raises(InvalidChunkError, match="looks like a distance"):
        check_chunk(chunk)
    with pytest.raises(InvalidChunkError):
        Evaluator().evaluate("solar", [chunk])


# -- numbers beyond float ------------------------------------------------------------------


@pytest.mark.parametrize("score", [HUGE, -HUGE, 10**5000], ids=["401", "-401", "5001"])
def test_a_score_beyond_float_is_an_invalid_chunk(score: int) -> None:
    with pytest.raises(InvalidChunkError, match="finite") as info:
        Chunk(id="a", text="t", score=score, score_kind="unknown")
    assert "digits" in str(info.value)  # named by its size, not printed


@pytest.mark.parametrize(
    "field",
    [
        "k",
        "gate_k",
        "fetch_k",
        "rrf_k",
        "expansion_weight",
        "lexical_weight",
        "parent_token_budget",
        "evaluation_ttl",
        "web_ttl",
        "web_timeout",
        "retriever_timeout",
        "web_max_results",
        "max_retries",
    ],
)
@pytest.mark.parametrize("value", [HUGE, 10**5000], ids=["401-digits", "5001-digits"])
def test_router_fields_beyond_float_are_config_errors(field: str, value: int) -> None:
    with pytest.raises(ConfigError) as info:
        CRAG(ListRetriever([]), config={field: value})
    assert info.value.field == f"router.{field}"


@pytest.mark.parametrize(
    "override",
    [
        {"thresholds": {"relevant": HUGE}},
        {"weights": {"keyword_overlap": HUGE}},
        {"coherence": {"bm25_saturation": HUGE}},
        {"length": {"min_tokens": HUGE}},
        {"refine": {"token_budget": 10**5000}},
        {"keyword": {"bm25_k1": HUGE}},
    ],
)
def test_evaluator_fields_beyond_float_are_config_errors(override: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        EvaluatorConfig().replace(**override)


def test_other_numbers_beyond_float_are_typed_errors() -> None:
    with pytest.raises(ConfigError):
        Escalation(timeout=HUGE)
    with pytest.raises(ConfigError):
        MemoryCache(default_ttl=HUGE)
    with pytest.raises(ConfigError):
        RedisCache(url="redis://localhost:1/0", default_ttl=HUGE, unsigned="allow")
    with pytest.raises(ConfigError):
        SearxngConfig(timeout=HUGE)
    with pytest.raises(InputError):
        MemoryCache().set("k", "1", ttl=HUGE)
    chunks = [Chunk(id="a", text="t")]
    with pytest.raises(InputError):
        reciprocal_rank_fusion([chunks], k=HUGE)
    with pytest.raises(InputError):
        reciprocal_rank_fusion([chunks], weights=[10**5000])


def test_values_too_long_to_print_still_make_a_message() -> None:
    chunks = [Chunk(id="a", text="solar")]
    for grades in (10**5000, {"a": 10**5000}, {10**5000: 0.5}):
        with pytest.raises(InputError, match="digits"):
            Evaluator().evaluate("solar", chunks, chunk_grades=grades)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="digits"):
        MemoryCache().get(10**5000)  # type: ignore[arg-type]


def test_a_chunks_file_with_a_401_digit_score_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_text('{"id": "a", "text": "solar", "score": ' + "9" * 401 + "}\n")
    assert main(["evaluate", "-q", "solar", "-c", str(path)], out=io.StringIO()) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{path}:1:" in err and "finite" in err and "Traceback" not in err
    path.write_text('{"id": "a", "text": "solar", "score": ' + "9" * 5000 + "}\n")
    assert main(["evaluate", "-q", "solar", "-c", str(path)], out=io.StringIO()) == EXIT_BAD_INPUT
    assert f"{path}:1:" in capsys.readouterr().err


def test_a_set_override_beyond_float_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chunks.jsonl"
    path.write_text('{"id": "a", "text": "solar"}\n')
    for value in ("1" * 401, "1" * 5000, "[" * 5000):
        argv = ["evaluate", "-q", "solar", "-c", str(path), "--set", f"thresholds.relevant={value}"]
        assert main(argv, out=io.StringIO()) == EXIT_BAD_INPUT
        assert "Traceback" not in capsys.readouterr().err


# -- k ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["k", "gate_k", "fetch_k"])
def test_k_beyond_the_ceiling_is_refused(name: str) -> None:
    RouterConfig.from_dict({name: MAX_K})
    with pytest.raises(ConfigError, match=f"<= {MAX_K}"):
        RouterConfig.from_dict({name: MAX_K + 1})


def test_a_per_call_k_beyond_the_ceiling_is_refused() -> None:
    crag = CRAG(ListRetriever([Chunk(id="a", text="solar")]))
    with pytest.raises(InputError, match=f"at most {MAX_K}"):
        crag.retrieve("solar", 10**9)
    with pytest.raises(InputError):
        asyncio.run(crag.aretrieve("solar", HUGE))


def test_k_larger_than_the_index_is_capped_with_a_note() -> None:
    retriever = sample_retriever()
    size = len(retriever)
    result = CRAG(retriever).retrieve("solar panels in winter", 5000)
    assert len(result.retrieved) == size
    assert any(f"more than the retriever holds ({size})" in note for note in result.notes)
    assert len(retriever.search("solar panels", MAX_K)) == size  # FAISS itself asked for 64


def test_cli_retrieve_with_a_billion_k_answers_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["retrieve", "-q", "solar panels", "--k", "1000000000"], out=io.StringIO())
    assert code == EXIT_BAD_INPUT  # refused at the door, before any search (was > 120 s)
    assert f"must be <= {MAX_K}" in capsys.readouterr().err
    out = io.StringIO()
    assert main(["retrieve", "-q", "solar panels", "--k", "5000"], out=out) == EXIT_OK
    assert len(json.loads(out.getvalue())["retrieved"]) == 64


# -- deep JSON -------------------------------------------------------------------------------


def test_deeply_nested_metadata_is_a_line_numbered_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chunks.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(
        '{"id": "a", "text": "solar"}\n'
        + '{"id": "b", "text": "x", "metadata": {"m": '
        + deep
        + "}}\n"
    )
    assert main(["evaluate", "-q", "solar", "-c", str(path)], out=io.StringIO()) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{path}:2: arrays and objects nest deeper than {MAX_NESTING}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 900, 100_000])
def test_deep_nesting_in_a_json_array_file_names_its_line(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "chunks.json"
    path.write_text(
        '[\n{"id": "a", "text": "t"},\n{"id": "b", "text": "t", "metadata": {"m": '
        + "[" * depth
        + "]" * depth
        + "}}\n]"
    )
    with pytest.raises(InputError, match=r"chunks\.json:3: arrays and objects nest deeper"):
        read_records(path)


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "chunks.jsonl"
    inner = MAX_NESTING - 2  # the record and its metadata object are two levels
    path.write_text(
        '{"id": "b", "text": "t", "metadata": {"m": ' + "[" * inner + "]" * inner + "}}\n"
    )
    assert len(read_records(path)) == 1


# -- a hanging retriever -----------------------------------------------------------------------


class HangingRetriever:
    """A retriever that answers only when ``release`` is set (a stuck service)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = 0  # searches still waiting for the release
        self._lock = threading.Lock()

    def search(self, query: str, k: int) -> list[Chunk]:
        with self._lock:
            self.waiting += 1
        self.release.wait(30)
        with self._lock:
            self.waiting -= 1
        return [Chunk(id="late", text="too late")]


class HangingAsyncRetriever:
    async def asearch(self, query: str, k: int) -> list[Chunk]:
        await asyncio.sleep(30)
        return []


def test_a_sync_retriever_that_hangs_is_a_retriever_error_after_the_timeout() -> None:
    retriever = HangingRetriever()
    crag = CRAG(retriever, config={"retriever_timeout": 0.2, "first_search_timeout": 0.2})
    with pytest.raises(RetrieverError, match=r"within 0\.2 s") as info:
        crag.retrieve("solar")  # an answer would have come after the release only
    assert retriever.waiting == 1  # the search still hangs: the router did not wait for it
    assert info.value.timeout == 0.2 and info.value.retriever == "HangingRetriever"
    with pytest.raises(
        RetrieverError, match=r"within 0\.2 s"
    ):  # a sync retriever, driven by the async router
        asyncio.run(crag.aretrieve("solar"))
    retriever.release.set()  # the abandoned threads end


def test_hung_sync_searches_do_not_hold_the_event_loops_threads() -> None:
    retriever = HangingRetriever()
    crag = CRAG(retriever, config={"retriever_timeout": 0.1, "first_search_timeout": 0.1})

    async def many_then_a_thread() -> int:
        outcomes = await asyncio.gather(
            *(crag.aretrieve(f"solar {i}") for i in range(40)), return_exceptions=True
        )
        assert all(isinstance(o, RetrieverError) and o.timeout == 0.1 for o in outcomes)
        # the default executor (a handful of threads) is still free for the next call
        return await asyncio.wait_for(asyncio.to_thread(lambda: 1), 5)

    assert asyncio.run(many_then_a_thread()) == 1
    assert retriever.waiting > 0  # asyncio.run returned with the hung searches still waiting
    retriever.release.set()


def test_an_async_retriever_that_hangs_is_cancelled() -> None:
    crag = CRAG(
        HangingAsyncRetriever(), config={"retriever_timeout": 0.2, "first_search_timeout": 0.2}
    )
    with pytest.raises(RetrieverError, match=r"within 0\.2 s"):  # it sleeps 30 s, then answers
        asyncio.run(crag.aretrieve("solar"))


def test_a_hanging_re_retrieval_is_a_note() -> None:
    lexical = HangingRetriever()
    first = [Chunk(id="a", text="wind turbines", score=0.3, score_kind="cosine")]
    never_good = Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": 1.0, "partial": 0.0}
        )
    )
    crag = CRAG(
        ListRetriever(first),
        never_good,
        lexical=lexical,
        config={"retriever_timeout": 0.2, "first_search_timeout": 0.2},
    )
    result = crag.retrieve("solar panels")
    lexical.release.set()
    assert result.strategy is Strategy.QUERY_EXPANSION
    assert any("no answer within 0.2 s" in note for note in result.notes)
    assert [c.id for c in result.chunks] == ["a"]


def test_without_a_timeout_a_sync_search_runs_in_the_calling_thread() -> None:
    seen: list[str] = []

    class Recording(ListRetriever):
        def search(self, query: str, k: int) -> list[Chunk]:
            seen.append(threading.current_thread().name)
            return super().search(query, k)

    chunks = [Chunk(id="a", text="solar")]
    CRAG(Recording(chunks), config={"retriever_timeout": None}).retrieve("solar")
    assert seen == [threading.current_thread().name]
    with CRAG(Recording(chunks)) as bounded:  # 10 s by default: on one of the router's threads
        bounded.retrieve("solar")
    assert seen[1].startswith("crag-router-")


# -- parts that are not parts ------------------------------------------------------------------


def test_crag_without_a_retriever_is_refused() -> None:
    with pytest.raises(InputError, match="retriever is required"):
        CRAG(None)  # type: ignore[arg-type]


def test_a_part_that_cannot_be_compared_is_refused_as_any_other() -> None:
    with pytest.raises(InputError, match="expander must have expand"):  # was InvalidOperation
        CRAG(ListRetriever([]), expander=Decimal("sNaN"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="safesearch"):
        SearxngConfig(safesearch=Decimal("sNaN"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cache_size": "x"}, "cache_size"),
        ({"cache_size": -1}, "cache_size"),
        ({"cache_size": 1.5}, "cache_size"),
        ({"cache_size": True}, "cache_size"),
        ({"all_evidence": "no"}, "all_evidence"),
        ({"analyzer": "english"}, "analyzer"),
    ],
)
def test_evaluator_arguments_are_checked(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        Evaluator(**kwargs)
    assert info.value.field == field


def test_cache_size_zero_still_means_no_cache() -> None:
    evaluator = Evaluator(cache_size=0)
    evaluator.evaluate("solar", [Chunk(id="a", text="solar panels")])
    assert len(evaluator._cache) == 0


# -- an honest strategy ------------------------------------------------------------------------


def always_irrelevant() -> Evaluator:
    return Evaluator(
        EvaluatorConfig.from_profile("synapse").replace(
            thresholds={"relevant": 1.0, "partial": 1.0}
        )
    )


@pytest.mark.parametrize("asynchronous", [False, True])
def test_no_web_and_nothing_to_expand_with_claims_no_web_search(asynchronous: bool) -> None:
    crag = CRAG(ListRetriever([Chunk(id="a", text="basalt columns")]), always_irrelevant())
    result = asyncio.run(crag.aretrieve("bees")) if asynchronous else crag.retrieve("bees")
    assert result.verdict.value == "irrelevant"
    assert result.strategy is Strategy.NONE
    assert result.web_search_used is False and result.web_query  # what would have been asked
    assert "no web searcher configured: the original chunks are kept" in result.notes


def test_no_web_but_an_expander_says_query_expansion() -> None:
    crag = CRAG(
        ListRetriever([Chunk(id="a", text="basalt columns")]),
        always_irrelevant(),
        expander=StaticExpander(["honeybee dance"]),
    )
    result = crag.retrieve("bees")
    assert result.strategy is Strategy.QUERY_EXPANSION and not result.web_search_used
