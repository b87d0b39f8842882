"""The cascade through the real router (a real FAISS index, a real MemoryCache and
a real Redis) and through Cascade: both drivers agree, answers are cached per
chunk, and every bad grader leaves the gate's verdict standing with a typed flag."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from crag_testkit import RedisServer

from crag_heuristic import (
    CRAG,
    Chunk,
    CRAGResult,
    Evaluator,
    EvaluatorConfig,
    InputError,
    MemoryCache,
    RedisCache,
    Verdict,
)
from crag_heuristic._cache.keys import grade_key
from crag_heuristic._config import LogisticStage, ModelTerm
from crag_heuristic._sample import sample_retriever
from crag_heuristic.grading import (
    CallableGrader,
    Cascade,
    CascadeReport,
    CascadeResult,
    Escalation,
    SetEscalation,
)

QUERY = "How do honeybees communicate the distance to food?"
EVERYTHING = Escalation(band=(0.0, 1.0), budget=1.0)


class Counting:
    """A grader that answers ``answer(texts)`` and counts what it was asked."""

    def __init__(self, answer: Callable[[list[str]], Any], name: str = "counting") -> None:
        self.answer = answer
        self.fingerprint = name
        self.asked: list[int] = []

    def grade(self, query: str, chunks: Sequence[Chunk]) -> Any:
        self.asked.append(len(chunks))
        return self.answer([c.text for c in chunks])


def waggle(texts: list[str]) -> list[float]:
    return [0.95 if "waggle" in t.lower() else 0.05 for t in texts]


@pytest.fixture(scope="module")
def retriever() -> Any:
    return sample_retriever()


def report_of(result: CRAGResult) -> CascadeReport:
    assert result.cascade is not None
    return result.cascade


def comparable(result: Any) -> dict[str, Any]:
    """A result without its timings (the only thing the drivers may differ in)."""
    data: dict[str, Any] = result.to_dict()
    data.pop("timings_ms", None)
    if data.get("cascade"):
        data["cascade"].pop("ms")
    return data


def both(crag: CRAG, k: int = 5) -> tuple[Any, Any]:
    return crag.retrieve(QUERY, k), asyncio.run(crag.aretrieve(QUERY, k))


def test_sync_and_async_agree_and_the_answers_are_applied(retriever: Any) -> None:
    grader = Counting(waggle)
    sync = CRAG(
        retriever,
        expander=False,
        cache=False,
        grader=grader,
        escalation={"band": [0, 1], "budget": 0.4},
    )
    first, second = both(sync)
    assert comparable(first) == comparable(second)
    report = first.cascade
    assert report is not None and report.error is None and first.grader_error is None
    assert len(report.escalated) == 2 and report.share == 0.4 and report.candidates == 5
    assert report.grades == {
        i: waggle([c.text for c in first.retrieved if c.id == i])[0] for i in report.escalated
    }
    for chunk_id, grade in report.grades.items():  # the answers replace the gate's grades
        assert first.initial_evaluation.chunk(chunk_id).score == grade
    assert first.initial_evaluation.details["external_grades"] == dict(report.grades)
    assert grader.asked == [2, 2]  # no cache: asked each time
    assert "grade" in first.timings_ms
    plain = CRAG(retriever, expander=False, cache=False).retrieve(QUERY, 5)
    assert report.gate_verdict is plain.initial_evaluation.verdict
    assert set(report.gate_scores) == set(report.escalated)


def _reads_the_chunk_stage(base: EvaluatorConfig) -> EvaluatorConfig:
    """The default gate with a set stage that reads the chunk stage (its best chunk's
    probability): the kind of gate whose route a chunk cascade can change."""
    assert base.model is not None
    stage = LogisticStage(
        intercept=0.0, terms=(ModelTerm(feature="best_chunk", weight=4.0, mean=0.5, scale=0.25),)
    )
    return base.replace(model=dataclasses.replace(base.model, set=stage, fallbacks=()))


def test_the_grader_can_change_the_route(retriever: Any) -> None:
    reading = _reads_the_chunk_stage(EvaluatorConfig())
    # bands just above the gate's own score for this query: PARTIAL on its own
    score = (
        CRAG(retriever, Evaluator(reading), expander=False, cache=False)
        .retrieve(QUERY, 5)
        .initial_evaluation.score
    )
    gate = Evaluator(reading.replace(thresholds={"relevant": score + 1e-9, "partial": 0.0}))
    plain = CRAG(retriever, gate, expander=False, cache=False).retrieve(QUERY, 5)
    assert plain.initial_evaluation.verdict is Verdict.PARTIAL
    assert plain.strategy.value == "none"  # (with nothing to expand with)
    sure = Counting(lambda texts: [1.0] * len(texts), "all-relevant")
    for result in both(
        CRAG(retriever, gate, expander=False, cache=False, grader=sure, escalation=EVERYTHING)
    ):
        assert report_of(result).gate_verdict is Verdict.PARTIAL
        assert report_of(result).verdict is Verdict.RELEVANT
        assert result.initial_evaluation.verdict is Verdict.RELEVANT
        assert result.strategy.value == "none"  # the route follows the cascaded verdict
    kept = Escalation(band=(0.0, 1.0), budget=1.0, recompute_set=False)
    for result in both(
        CRAG(retriever, gate, expander=False, cache=False, grader=sure, escalation=kept)
    ):
        assert result.initial_evaluation.verdict is Verdict.PARTIAL
        assert all(g.score == 1.0 for g in result.initial_evaluation.chunks)


def test_with_the_default_gate_a_chunk_cascade_regrades_chunks_and_a_set_one_the_route(
    retriever: Any,
) -> None:
    """The default set stage reads the similarity and BM25, not the chunk stage: a
    chunk cascade changes the chunks' grades, not the set's; a SetEscalation settles
    the set verdict of an uncertain list from the grader's answers."""
    score = CRAG(retriever, expander=False, cache=False).retrieve(QUERY, 5).initial_evaluation.score
    gate = Evaluator(
        EvaluatorConfig().replace(thresholds={"relevant": score + 1e-9, "partial": 0.0})
    )
    sure = Counting(lambda texts: [1.0] * len(texts), "all-relevant")
    for result in both(
        CRAG(retriever, gate, expander=False, cache=False, grader=sure, escalation=EVERYTHING)
    ):
        assert all(g.score == 1.0 for g in result.initial_evaluation.chunks)
        assert result.initial_evaluation.score == pytest.approx(score)
        assert result.initial_evaluation.verdict is Verdict.PARTIAL
    lists = SetEscalation(band=(0.0, 1.0))
    for result in both(
        CRAG(retriever, gate, expander=False, cache=False, grader=sure, escalation=lists)
    ):
        report = report_of(result)
        assert report.level == "set" and report.candidates == 1 and len(report.escalated) == 5
        assert report.gate_verdict is Verdict.PARTIAL and report.verdict is Verdict.RELEVANT
        assert result.initial_evaluation.verdict is Verdict.RELEVANT
        assert result.strategy.value == "none"
        # noisy-or of five grades of 1.0, each counted at most 0.95 sure
        assert result.initial_evaluation.score == pytest.approx(1 - 0.05**5)
    doubtful = Counting(lambda texts: [0.0] * len(texts), "none-relevant")
    crag = CRAG(
        retriever,
        gate,
        expander=False,
        cache=False,
        grader=doubtful,
        escalation=SetEscalation(band=(0.0, 1.0), trust=2.0),
    )
    for result in both(crag):  # trust 2: the log-odds move down by 2, not to zero
        z = math.log(score / (1 - score)) - 2.0
        assert result.initial_evaluation.score == pytest.approx(1 / (1 + math.exp(-z)))
        assert result.initial_evaluation.verdict is Verdict.PARTIAL
    outside = SetEscalation(band=(0.0, score / 2))
    for result in both(
        CRAG(retriever, gate, expander=False, cache=False, grader=sure, escalation=outside)
    ):
        assert report_of(result).candidates == 0 and report_of(result).escalated == ()
        assert result.initial_evaluation.verdict is Verdict.PARTIAL


def test_answers_are_cached_per_chunk_and_reused_by_overlapping_lists(retriever: Any) -> None:
    grader = Counting(waggle)
    crag = CRAG(
        retriever, expander=False, cache=MemoryCache(), grader=grader, escalation=EVERYTHING
    )
    first = crag.retrieve(QUERY, 5)
    assert grader.asked == [5] and report_of(first).cache_hits == ()
    again = asyncio.run(crag.aretrieve(QUERY, 5))
    assert grader.asked == [5] and set(report_of(again).cache_hits) == set(
        report_of(first).escalated
    )
    assert comparable(again)["initial_evaluation"] == comparable(first)["initial_evaluation"]
    deeper = crag.retrieve(QUERY, 8)  # the 5 first chunks again, 3 new ones
    assert grader.asked == [5, 3] and len(report_of(deeper).cache_hits) == 5
    assert report_of(deeper).grades["honeybees-4"] == report_of(first).grades["honeybees-4"]
    other = Counting(waggle, "another-grader")  # another fingerprint never reads these
    CRAG(retriever, expander=False, cache=crag.cache, grader=other, escalation=EVERYTHING).retrieve(
        QUERY, 5
    )
    assert other.asked == [5]


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as running:
        yield running


def test_a_real_redis_shares_answers_between_routers(retriever: Any, server: RedisServer) -> None:
    a, b = Counting(waggle), Counting(waggle)
    first = CRAG(
        retriever,
        cache=RedisCache(url=server.url, namespace="g", unsigned="allow"),
        grader=a,
        escalation=EVERYTHING,
    ).retrieve(QUERY, 5)
    crag_b = CRAG(
        retriever,
        expander=False,
        cache=RedisCache(url=server.url, namespace="g", unsigned="allow"),
        grader=b,
        escalation=EVERYTHING,
    )
    sync, asynchronous = both(crag_b)
    assert a.asked == [5] and b.asked == []
    assert len(report_of(sync).cache_hits) == len(report_of(asynchronous).cache_hits) == 5
    assert comparable(sync) == comparable(asynchronous)
    assert report_of(sync).grades == report_of(first).grades
    keys = server.client().keys("g:crag:v*:grade:*")
    assert len(keys) == 5
    chunk = first.retrieved[0]
    key = "g:" + grade_key(QUERY, chunk, grader_fingerprint="counting")
    stored = server.client().get(key)
    assert stored is not None
    assert json.loads(stored) == {"key": key[2:], "value": report_of(first).grades[chunk.id]}


def test_redis_down_is_a_cache_flag_and_the_grader_still_counts(
    retriever: Any, server: RedisServer
) -> None:
    cache = RedisCache(url=server.url, namespace="down", unsigned="allow")
    grader = Counting(waggle)
    server.stop()
    for result in both(
        CRAG(retriever, expander=False, cache=cache, grader=grader, escalation=EVERYTHING)
    ):
        assert result.cache_error is not None and result.grader_error is None
        assert report_of(result).applied and len(report_of(result).grades) == 5
    assert grader.asked == [5, 5]


def test_a_corrupt_cached_answer_is_flagged_and_asked_again(retriever: Any) -> None:
    cache, grader = MemoryCache(), Counting(waggle)
    crag = CRAG(retriever, expander=False, cache=cache, grader=grader, escalation=EVERYTHING)
    first = crag.retrieve(QUERY, 5)
    chunk = first.retrieved[0]
    key = grade_key(QUERY, chunk, grader_fingerprint="counting")
    cache.set(key, json.dumps({"key": key, "value": 1.7}), 60)
    again = crag.retrieve(QUERY, 5)
    assert again.cache_error is not None and "not a number in [0, 1]" in again.cache_error
    assert grader.asked == [5, 1] and report_of(again).grades == report_of(first).grades


NEVER = threading.Event()  # never set: a grader that waits on it answers after its timeout


def hang(texts: list[str]) -> list[float]:
    NEVER.wait(10)
    return [0.5] * len(texts)


def timeout_for(case: str) -> float:
    """The grader's timeout: 0.05 s where it hangs (it waits 10 s), else one no load
    reaches (a fast bad answer is then never a timeout on a busy machine)."""
    return 0.05 if case == "times out" else 30.0


def boom(texts: list[str]) -> list[float]:
    raise RuntimeError("the LLM service said 500")


BAD = {
    "raises": (boom, "GraderError: the grader raised RuntimeError"),
    "times out": (hang, "GraderTimeout: no grades within 0.05 s"),
    "NaN": (lambda t: [math.nan] * len(t), "GraderOutputError: grade 0 is nan"),
    "wrong count": (lambda t: [0.5] * (len(t) + 1), "GraderOutputError: the grader returned 6"),
    "above 1": (lambda t: [1.5] * len(t), "GraderOutputError: grade 0 is 1.5, outside"),
    "below 0": (lambda t: [-2.0] * len(t), "GraderOutputError: grade 0 is -2.0, outside"),
    "not numbers": (lambda t: ["yes"] * len(t), "GraderOutputError: grade 0 is str"),
    "None": (lambda t: None, "GraderOutputError: the grader returned NoneType"),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_bad_grader_is_a_typed_flag_and_nothing_is_lost(
    retriever: Any, case: str, driver: str
) -> None:
    answer, flag = BAD[case]
    grader = Counting(answer, "bad")
    policy = Escalation(band=(0.0, 1.0), budget=1.0, timeout=timeout_for(case))
    cache = MemoryCache()
    crag = CRAG(retriever, expander=False, cache=cache, grader=grader, escalation=policy)
    run = crag.retrieve if driver == "sync" else lambda q, k: asyncio.run(crag.aretrieve(q, k))
    result = run(QUERY, 5)
    plain = CRAG(retriever, expander=False, cache=False).retrieve(QUERY, 5)
    assert result.grader_error is not None and result.grader_error.startswith(flag)
    assert report_of(result).error == result.grader_error and not report_of(result).applied
    assert report_of(result).grades == {} and len(report_of(result).escalated) == 5
    # the gate's verdict stands and nothing is lost
    assert result.initial_evaluation.to_dict() == plain.initial_evaluation.to_dict()
    assert report_of(result).verdict is report_of(result).gate_verdict is plain.verdict
    assert [c.id for c in result.chunks] == [c.id for c in plain.chunks]
    assert result.strategy is plain.strategy
    assert "the grader failed: the gate's verdict stands" in result.notes
    run(QUERY, 5)  # a failure is never cached: the grader is asked again
    assert grader.asked == [5, 5]


def test_bad_router_arguments(retriever: Any) -> None:
    with pytest.raises(InputError, match="grader must have"):
        CRAG(retriever, grader=object())  # type: ignore[arg-type]
    with pytest.raises(InputError, match="escalation needs a grader"):
        CRAG(retriever, escalation=EVERYTHING)
    crag = CRAG(
        retriever,
        expander=False,
        grader=Counting(waggle),
        escalation={"budget": 0.2, "timeout": None},
    )
    assert crag.escalation == Escalation(budget=0.2, timeout=None)
    assert CRAG(retriever, expander=False).retrieve(QUERY, 5).cascade is None


def test_gate_k_bounds_what_is_escalated(retriever: Any) -> None:
    grader = Counting(waggle)
    crag = CRAG(
        retriever,
        expander=False,
        cache=False,
        grader=grader,
        escalation=EVERYTHING,
        config={"gate_k": 3},
    )
    result = crag.retrieve(QUERY, 6)
    assert grader.asked == [3] and report_of(result).share == 1.0
    assert set(report_of(result).escalated) == {c.id for c in result.retrieved[:3]}


def test_an_async_grader_through_the_async_router(retriever: Any) -> None:
    async def judge(query: str, texts: list[str]) -> list[float]:
        await asyncio.sleep(0)
        return waggle(texts)

    crag = CRAG(
        retriever,
        expander=False,
        grader=CallableGrader(judge, name="judge-v1"),
        escalation=EVERYTHING,
    )
    result = asyncio.run(crag.aretrieve(QUERY, 5))
    assert result.grader_error is None and len(report_of(result).grades) == 5
    sync = CRAG(
        retriever,
        expander=False,
        grader=CallableGrader(judge, name="judge-v1"),
        escalation=EVERYTHING,
    )
    flag = sync.retrieve(QUERY, 5).grader_error
    assert flag is not None and flag.startswith("GraderError: this grader is async-only")


# -- Cascade, without the router ---------------------------------------------------------


def test_cascade_sync_and_async_agree(retriever: Any) -> None:
    chunks = retriever.search(QUERY, 5)
    grader = Counting(waggle)
    cascade = Cascade(None, grader, EVERYTHING, cache=MemoryCache())
    stats = retriever.corpus_stats()  # as the router gives its evaluator
    first = cascade.evaluate(QUERY, chunks, stats)
    second = asyncio.run(cascade.aevaluate(QUERY, chunks, stats))
    assert isinstance(first, CascadeResult) and grader.asked == [5]
    assert second.report.cache_hits == first.report.escalated
    assert first.evaluation == second.evaluation and first.gate_evaluation == second.gate_evaluation
    assert first.verdict is first.evaluation.verdict and first.grader_error is None
    router = CRAG(
        retriever, expander=False, cache=False, grader=Counting(waggle), escalation=EVERYTHING
    )
    assert router.retrieve(QUERY, 5).initial_evaluation == first.evaluation
    data = json.loads(json.dumps(first.to_dict()))
    assert data["cascade"]["grades"] == dict(first.report.grades)


@pytest.mark.parametrize("case", sorted(BAD))
def test_cascade_with_a_bad_grader(retriever: Any, case: str) -> None:
    chunks = retriever.search(QUERY, 5)
    answer, flag = BAD[case]
    policy = Escalation(band=(0, 1), budget=1.0, timeout=timeout_for(case))
    cascade = Cascade(None, Counting(answer), policy)
    for result in (cascade.evaluate(QUERY, chunks), asyncio.run(cascade.aevaluate(QUERY, chunks))):
        assert result.grader_error is not None and result.grader_error.startswith(flag)
        assert result.evaluation == result.gate_evaluation


def test_cascade_bad_arguments_and_empty_lists() -> None:
    with pytest.raises(InputError):
        Cascade(None, None)
    with pytest.raises(InputError):
        Cascade(None, Counting(waggle), cache=object())  # type: ignore[arg-type]
    cascade = Cascade(None, Counting(waggle))
    empty = cascade.evaluate(QUERY, [])
    assert empty.report.escalated == () and empty.verdict is Verdict.IRRELEVANT
    with pytest.raises(InputError):
        cascade.evaluate("  ", [])


def test_grade_events_carry_no_query_text(retriever: Any, caplog: pytest.LogCaptureFixture) -> None:
    def echo(texts: list[str]) -> list[float]:
        raise RuntimeError(f"the model refused: {QUERY}")  # an error that echoes the prompt

    crag = CRAG(
        retriever, expander=False, cache=False, grader=Counting(echo), escalation=EVERYTHING
    )
    with caplog.at_level(logging.DEBUG, logger="crag_heuristic"):
        result = crag.retrieve(QUERY, 5)
    assert result.grader_error is not None and QUERY in result.grader_error  # on the result
    records: dict[str, Any] = {r.getMessage(): r for r in caplog.records}
    grade, final = records["crag.grade"], records["crag.result"]
    assert (grade.escalated, grade.candidates, grade.cache_hits) == (5, 5, 0)
    assert grade.error == "GraderError" and final.grader_error == "GraderError"
    assert grade.gate_verdict == grade.verdict == result.verdict.value
    for record in caplog.records:  # events: a hash of the query, never its text
        assert QUERY not in str(record.__dict__)
