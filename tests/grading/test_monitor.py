"""The guarantee at run time: audits, the grade log (a file and a real Redis stream),
the monitor's breach test, and the router giving it every result."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import random
from pathlib import Path
from typing import Any

import pytest
import redis
from cascade_helpers import grade_record
from crag_testkit import RedisServer

from crag_heuristic import CRAG, ConfigError, InputError
from crag_heuristic._grading.lists import audited
from crag_heuristic._grading.monitor import RECORD_FIELDS, check_record
from crag_heuristic.config import Guarantee
from crag_heuristic.grading import (
    GuaranteeMonitor,
    JsonlGradeLog,
    RedisGradeLog,
    SetEscalation,
    audited_labels,
    binomial_lower,
    guaranteed_band,
)
from crag_heuristic.sample import load_sample_queries, sample_retriever

GUARANTEE = Guarantee(
    target="recall", eps=0.1, delta=0.1, band=(0.0, 0.6), n=300, counted=60,
    violations=2, risk=2 / 60, risk_bound=0.09, escalated=0.5,
)  # fmt: skip


_QUERIES = itertools.count()


def _record(score: float, good: bool, *, audited: bool = True) -> dict[str, Any]:
    """A whole grade-log record, of a query of its own."""
    return grade_record(next(_QUERIES), score=score, good=good, audited=audited)


def test_the_audit_sample_is_a_seeded_hash_of_the_query() -> None:
    queries = [f"query number {i}" for i in range(4000)]
    policy = SetEscalation(audit=0.25)
    chosen = [q for q in queries if audited(q, policy)]
    assert abs(len(chosen) / len(queries) - 0.25) < 0.03
    assert chosen == [q for q in queries if audited(q, policy)]  # the same every time
    other = [q for q in queries if audited(q, SetEscalation(audit=0.25, audit_seed=1))]
    assert other != chosen
    assert not any(audited(q, SetEscalation()) for q in queries[:100])
    assert all(audited(q, SetEscalation(audit=1.0)) for q in queries[:100])
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match="audit"):
            SetEscalation(audit=bad)
    # any text, a lone surrogate too (a query the router takes): no UnicodeEncodeError
    assert audited("honeybee waggle dance \ud800", SetEscalation(audit=1.0))


def test_an_audited_query_with_a_lone_surrogate_is_answered() -> None:
    class Everything:
        fingerprint = "all:v1"

        def grade(self, query: str, chunks: Any) -> list[float]:
            return [1.0 for _ in chunks]

    crag = CRAG(
        sample_retriever(),
        grader=Everything(),
        escalation=SetEscalation.guaranteed(GUARANTEE, audit=1.0),
        monitor=GuaranteeMonitor(GUARANTEE),
    )
    result = crag.retrieve("honeybee waggle dance \ud800", k=3)
    assert result.cascade is not None and result.cascade.audited


def test_the_monitor_counts_recall_on_the_audit_sample_only() -> None:
    monitor = GuaranteeMonitor(GUARANTEE)
    monitor.count(_record(0.9, False, audited=False))  # not audited: not counted
    monitor.count(_record(0.9, True))  # good: recall does not count it
    monitor.count(_record(0.6, False))  # failed, in the band (inclusive): no violation
    monitor.count(_record(0.61, False))  # failed above the band: a violation
    status = monitor.status()
    assert (status.records, status.audited, status.counted, status.violations) == (4, 3, 2, 1)
    assert status.observed == 0.5
    assert status.lower_bound == pytest.approx(binomial_lower(1, 2, 0.1))
    assert not status.breached and status.tested_at is None  # the first test is at 20


def test_the_monitor_counts_agreement() -> None:
    agreement = Guarantee(
        target="agreement", eps=0.1, delta=0.1, band=(0.3, 0.6), n=300, counted=300,
        violations=10, risk=1 / 30, risk_bound=0.05, escalated=0.4, centre=0.45,
    )  # fmt: skip
    monitor = GuaranteeMonitor(agreement)
    for score, good in ((0.7, True), (0.7, False), (0.2, True), (0.2, False), (0.5, False)):
        monitor.count(_record(score, good))
    status = monitor.status()
    assert (status.counted, status.violations) == (5, 2)  # 0.7 failed, 0.2 good
    # on the band's edges the grader decides (inclusive): no violation either side
    edges = GuaranteeMonitor(agreement)
    for score, good in ((0.3, True), (0.6, False), (0.3, False), (0.6, True)):
        edges.count(_record(score, good))
    assert (edges.status().counted, edges.status().violations) == (4, 0)
    recall = GuaranteeMonitor(GUARANTEE)
    recall.count(_record(0.6, False))  # exactly at the top: inside, sent to the grader
    assert recall.status().violations == 0


def test_the_breach_test_follows_its_schedule() -> None:
    """Tests at 20, 40, 80 ... lists counted, at delta / 2, delta / 6, delta / 12 ...: 2
    violations in 2 lists prove nothing yet; at a risk of eps exactly a breach is rare."""
    from crag_heuristic._grading.monitor import SCHEDULE_START, breach_p_value

    assert SCHEDULE_START == 20
    # by hand: P(Bin(20, 0.1) >= 5) = 1 - P(<= 4)
    assert breach_p_value(5, 20, 0.1) == pytest.approx(1 - sum(
        math.comb(20, i) * 0.1**i * 0.9 ** (20 - i) for i in range(5)
    ))  # fmt: skip
    assert breach_p_value(0, 20, 0.1) == 1.0
    early = GuaranteeMonitor(GUARANTEE)
    for _ in range(19):
        early.count(_record(0.9, False))  # 19 violations in 19: not tested yet
    assert not early.status().breached
    assert early.count(_record(0.9, False))  # the 20th: tested, breached
    assert early.status().tested_at == 20
    # at a risk of exactly eps, over 2,000 lists: a breach in few of 200 runs
    rng = random.Random(3)
    false_alarms = 0
    for _ in range(200):
        monitor = GuaranteeMonitor(GUARANTEE)
        breached = False
        for _ in range(2000):
            breached |= monitor.count(_record(0.9 if rng.random() < 0.1 else 0.1, False))
        false_alarms += breached
    assert false_alarms / 200 <= 0.1 + 3 * math.sqrt(0.09 / 200)


def test_a_breach_is_an_event_and_a_metric_once(caplog: pytest.LogCaptureFixture) -> None:
    breaches: list[str] = []

    class Metrics:
        def guarantee_breach(self, target: str) -> None:
            breaches.append(target)

    monitor = GuaranteeMonitor(GUARANTEE, metrics=Metrics())
    caplog.set_level(logging.DEBUG, logger="crag_heuristic")
    for i in range(40):  # failed lists passing alone one time in two: far above 0.1
        monitor.count(_record(0.9 if i % 2 else 0.1, False))
    status = monitor.status()
    assert status.breached and status.lower_bound > 0.1
    assert breaches == ["recall"]
    events = [r.getMessage() for r in caplog.records]
    assert sum("crag.guarantee.breach" in e for e in events) == 1
    for _ in range(400):  # then many failed lists kept in the band: restored
        monitor.count(_record(0.1, False))
    assert not monitor.status().breached
    assert any("crag.guarantee.restored" in r.getMessage() for r in caplog.records)
    with pytest.raises(InputError, match="grader_good"):
        monitor.count({k: v for k, v in _record(0.5, True).items() if k != "grader_good"})
    with pytest.raises(InputError, match="score"):
        monitor.count({**_record(0.5, True), "score": "high"})


def test_the_file_log_appends_and_reads_back(tmp_path: Path) -> None:
    log = JsonlGradeLog(tmp_path / "grades.jsonl")
    records = [_record(0.1 * i, i % 2 == 0) for i in range(5)]
    for record in records:
        log.append(record)
    assert list(log.records()) == records
    with open(log.path, "a", encoding="utf-8") as f:
        f.write('{"v": 1, "score"')  # a crash mid-write: the cut line is skipped
    assert list(log.records()) == records
    log.append(records[0])  # appended after the cut line: on the same line, unreadable
    assert list(log.records()) == records and log.skipped == 1
    log.append(records[1])  # later records read again
    assert list(log.records()) == [*records, records[1]] and log.skipped == 1
    good = json.dumps(records[2])
    (tmp_path / "bad.jsonl").write_text(f'{good}\nnot json\n[1]\n{{"v": 1}}\n{good}\n')
    bad = JsonlGradeLog(tmp_path / "bad.jsonl")
    assert list(bad.records()) == [records[2], records[2]] and bad.skipped == 3
    assert bad.skipped_by_kind == {"unreadable": 1, "invalid": 2}
    with pytest.raises(ConfigError, match="folder"):
        JsonlGradeLog(tmp_path / "missing" / "grades.jsonl")


def test_the_redis_log_is_a_stream_on_a_real_server() -> None:
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        log = RedisGradeLog(client, stream="test:grades", maxlen=None, unsigned="allow")
        records = [_record(i / 2500, i % 3 != 0) for i in range(2500)]  # > one XRANGE page
        for record in records:
            log.append(record)
        assert list(log.records()) == records
        assert "test:grades" in repr(log) and server.url not in repr(log)
        client.close()


def test_audited_records_choose_a_band_again() -> None:
    records = [_record(0.1 + 0.01 * i, False) for i in range(30)]
    records += [_record(0.9, True) for _ in range(30)]
    records.append(_record(0.95, False, audited=False))  # not in the sample: ignored
    scores, good, grader = audited_labels(records)
    assert len(scores) == 60 and grader == "g"
    assert guaranteed_band(scores, good).band[1] >= 0.39
    with pytest.raises(InputError, match="no audited"):
        audited_labels([_record(0.5, True, audited=False)])
    with pytest.raises(InputError, match="mixes graders"):
        audited_labels([_record(0.5, True), {**_record(0.5, True), "grader": "h"}])
    with pytest.raises(InputError, match="version"):
        audited_labels([{**_record(0.5, True), "v": 2}])
    with pytest.raises(InputError, match="grader_good"):
        audited_labels([{**_record(0.5, True), "grader_good": "yes"}])
    # the audit follows the query: a query audited twice is one label
    twice = [{**_record(0.5, True), "query": "ab" * 32}, {**_record(0.5, True), "query": "ab" * 32}]
    assert len(audited_labels(twice)[0]) == 1


def test_a_list_on_the_band_edge_goes_to_the_grader(tmp_path: Path) -> None:
    """The band is inclusive at run time: a list whose gate score is exactly the band's
    high (recall: it would otherwise pass alone) or its low (agreement: it would be
    decided failed alone) is escalated, and its grade-log record says it was in the
    band (not audited)."""
    query = load_sample_queries()[0]["text"]
    score = CRAG(sample_retriever()).retrieve(query, k=5).initial_evaluation.score
    assert 0.0 < score < 1.0

    class Everything:
        fingerprint = "all:v1"

        def grade(self, query: str, chunks: Any) -> list[float]:
            return [1.0] * len(chunks)

    for target, band in (("recall", (0.0, score)), ("agreement", (score, 1.0))):
        guarantee = dataclasses.replace(GUARANTEE, target=target, band=band)
        log = JsonlGradeLog(tmp_path / f"{target}.jsonl")
        crag = CRAG(
            sample_retriever(),
            grader=Everything(),
            escalation=SetEscalation.guaranteed(guarantee),
            monitor=GuaranteeMonitor(guarantee, log=log),
        )
        result = crag.retrieve(query, k=5)
        assert result.evaluation.details["set_escalation"]["gate_score"] == score
        assert result.cascade is not None and result.cascade.grades, target
        (record,) = log.records()
        # the record holds the gate's score (what a band is chosen on and the monitor
        # counts), not the score after the grader's answers (1.0 here)
        assert record["score"] == score and result.initial_evaluation.score > score
        assert record["in_band"] is True and record["audited"] is False


def test_the_router_gives_the_monitor_every_result(tmp_path: Path) -> None:
    """The sample corpus, a grader answering from its labels, a band from a
    guarantee and an audit of half the lists: every list the grader answered is a
    record (the query's digest, never its text), the audited ones flagged; signed,
    each holds the required fields of RECORD_FIELDS, and reads back only with its
    secret."""
    queries = load_sample_queries()
    relevant = {q["text"]: set(q["metadata"]["relevant"]) for q in queries}

    class LabelGrader:
        fingerprint = "sample-labels:v1"

        def grade(self, query: str, chunks: Any) -> list[float]:
            return [1.0 if c.id in relevant[query] else 0.0 for c in chunks]

    log = JsonlGradeLog(tmp_path / "grades.jsonl", secret="a-grade-log-secret-of-32-chars!!")
    monitor = GuaranteeMonitor(GUARANTEE, log=log, profile="minilm-multi")
    crag = CRAG(
        sample_retriever(),
        grader=LabelGrader(),
        escalation=SetEscalation.guaranteed(GUARANTEE, audit=0.5),
        monitor=monitor,
    )
    results = [crag.retrieve(q["text"], k=5) for q in queries]
    records = list(log.records())
    answered = [r for r in results if r.cascade is not None and r.cascade.grades]
    assert len(records) == len(answered) > 0
    assert monitor.status().records == len(records)
    audits = [r for r in results if r.cascade is not None and r.cascade.audited]
    assert sum(rec["audited"] for rec in records) == len(audits) > 0
    # audited lists outside the band were graded too
    assert any(not rec["in_band"] for rec in records if rec["audited"])
    text = log.path.read_text()
    for q in queries:
        assert json.dumps(q["text"])[1:-1] not in text
    assert all(rec["grader"] == "sample-labels:v1" and len(rec["query"]) == 64 for rec in records)
    required = {name for name, field in RECORD_FIELDS.items() if field.required}
    assert monitor.status().log_errors == 0 and log.skipped == 0
    assert all(set(rec) == required and check_record(rec) == rec for rec in records)
    assert all(json.loads(line).keys() == {"mac", "exp", "v"} for line in text.splitlines())
    other = JsonlGradeLog(log.path, secret="another-secret-of-32-characters!")
    assert list(other.records()) == [] and other.skipped == len(records)
    with pytest.raises(InputError, match="monitor"):
        CRAG(sample_retriever(), monitor=object())  # type: ignore[arg-type]


def test_a_failing_monitor_never_fails_a_query(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def observe(self, result: Any) -> None:
            raise RuntimeError("disk full")

    caplog.set_level(logging.DEBUG, logger="crag_heuristic")
    result = CRAG(sample_retriever(), monitor=Broken()).retrieve("honeybee waggle dance")
    assert result.chunks
    assert any("crag.monitor_error" in r.getMessage() for r in caplog.records)
