"""A grade log others can write to (issue 32): records signed, read strictly, injected
ones refused and counted, on a real Redis stream and a file.

The threat: anyone who can write to the Redis (or the file) adds records; the audited
ones choose a guaranteed band again (``calibrate --grade-log``, ``audited_labels``), so
300 injected records moved a certified recall band, and a record with
``"audited": "false"`` counted as audited. With a secret every record is a signed
envelope and an unsigned, forged or edited one is skipped; without one, every record is
still read against the one list of its fields (``RECORD_FIELDS``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from cascade_helpers import grade_record
from crag_testkit import RedisServer

from crag_heuristic import ConfigError, EvaluatorConfig, InputError
from crag_heuristic._cache.signing import Signer
from crag_heuristic._cli import main
from crag_heuristic._grading.monitor import SIGNED_KEY, check_record
from crag_heuristic.cache import UnsignedStoreWarning
from crag_heuristic.config import Guarantee
from crag_heuristic.grading import (
    GuaranteeMonitor,
    JsonlGradeLog,
    RedisGradeLog,
    audited_labels,
)

SECRET = "a-grade-log-secret-of-32-chars!!"
OTHER_SECRET = "another-secret-of-32-characters!"
PROFILE = EvaluatorConfig().fingerprint()
GUARANTEE = Guarantee(
    target="recall", eps=0.1, delta=0.1, band=(0.0, 0.6), n=300, counted=60,
    violations=2, risk=2 / 60, risk_bound=0.09, escalated=0.5,
)  # fmt: skip


def record(i: int, *, good: bool, score: float) -> dict[str, Any]:
    """Record number ``i``: a list of the default gate, graded by "g:1"."""
    return grade_record(i, score=score, good=good, grader="g:1", profile=PROFILE)


GENUINE = [
    record(i, good=i % 2 == 0, score=(0.7 if i % 2 == 0 else 0.3) + 0.001 * i) for i in range(60)
]
# What an attacker adds: failed lists the gate scored high, each a query of its own (the
# band's upper end moves up with them: more failed lists would pass without the grader).
INJECTED = [record(10_000 + i, good=False, score=0.95 - 0.0001 * i) for i in range(300)]


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as running:
        yield running


@pytest.fixture
def client(server: RedisServer, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(server.url)
    yield connection
    connection.delete(f"test:{request.node.name}")
    connection.close()


def stream(request: pytest.FixtureRequest) -> str:
    return f"test:{request.node.name}"


def forgeries() -> list[str]:
    """Injected entries of every kind an attacker can write without the secret."""
    other = Signer(OTHER_SECRET)
    mine = Signer(SECRET)
    edited = mine.sign(SIGNED_KEY, json.dumps(GENUINE[1])).replace(
        '"grader_good": false', '"grader_good": true'
    )
    assert edited != mine.sign(SIGNED_KEY, json.dumps(GENUINE[1]))
    return [
        *(json.dumps(r) for r in INJECTED[:100]),  # unsigned
        *(other.sign(SIGNED_KEY, json.dumps(r)) for r in INJECTED[100:200]),  # another secret
        *(
            mine.sign(SIGNED_KEY, json.dumps(GENUINE[1])).replace(
                json.dumps(GENUINE[1]), json.dumps(r)
            )
            for r in INJECTED[200:299]
        ),  # a genuine signature over another record
        edited,  # a genuine record edited
    ]


def test_injected_records_are_refused_and_counted_in_a_signed_stream(
    client: redis.Redis, request: pytest.FixtureRequest
) -> None:
    log = RedisGradeLog(client, stream=stream(request), secret=SECRET)
    for genuine in GENUINE:
        log.append(genuine)
    for text in forgeries():  # an attacker's XADD
        client.xadd(stream(request), {"record": text})
    read = list(log.records())
    assert read == GENUINE
    assert log.skipped == 300 and log.skipped_by_kind == {"signature": 300}
    assert audited_labels(read) == audited_labels(GENUINE)
    # without the check the injected records would have moved the band's labels
    assert audited_labels([*GENUINE, *INJECTED]) != audited_labels(GENUINE)
    # a genuine record copied (a replay) is the same query again: one label
    client.xadd(
        stream(request), {"record": Signer(SECRET).sign(SIGNED_KEY, json.dumps(GENUINE[0]))}
    )
    again = list(log.records())
    assert len(again) == 61 and audited_labels(again) == audited_labels(GENUINE)
    # read without the secret: signed records cannot be checked, so none is read
    with pytest.warns(UnsignedStoreWarning):
        blind = RedisGradeLog(client, stream=stream(request))
    assert [r["query"] for r in blind.records()] == [r["query"] for r in INJECTED[:100]]
    assert blind.skipped_by_kind == {"signature": 261}


def test_records_are_strictly_typed_without_a_secret(
    client: redis.Redis, request: pytest.FixtureRequest
) -> None:
    log = RedisGradeLog(client, stream=stream(request), unsigned="allow")
    log.append(GENUINE[0])
    wrong = {
        "audited-as-a-string": {**GENUINE[1], "audited": "false"},
        "score-as-a-string": {**GENUINE[1], "score": "0.3"},
        "score-out-of-range": {**GENUINE[1], "score": 1.5},
        "good-as-a-number": {**GENUINE[1], "grader_good": 1},
        "a-missing-field": {k: v for k, v in GENUINE[1].items() if k != "band"},
        "an-unknown-field": {**GENUINE[1], "weight": 100},
        "nan": json.dumps(GENUINE[1]).replace('"score": 0.301', '"score": NaN'),
        "features-of-text": {**GENUINE[1], "features": {"a": "b"}},
        "chunks-as-bool": {**GENUINE[1], "chunks": True},
        "another-version": {**GENUINE[1], "v": 2},
        "an-array": [GENUINE[1]],
    }
    for value in wrong.values():
        client.xadd(
            stream(request), {"record": value if isinstance(value, str) else json.dumps(value)}
        )
    client.xadd(stream(request), {"other": "field"})
    client.xadd(stream(request), {"record": b"\xff\xfe"})
    assert list(log.records()) == [GENUINE[0]]
    assert log.skipped_by_kind == {"invalid": len(wrong), "unreadable": 2}
    # a record that says "audited": "false" is never counted as audited
    with pytest.raises(InputError, match="'audited' must be a bool"):
        audited_labels([{**GENUINE[1], "audited": "false"}])
    with pytest.raises(InputError, match="'audited'"):
        GuaranteeMonitor(GUARANTEE).count({**GENUINE[1], "audited": "false"})
    with pytest.raises(InputError, match="unknown weight"):
        log.append({**GENUINE[1], "weight": 100})  # refused on the way in too
    labels = {"source": "calibrate", "query_id": "q1", "list": "ab" * 8, "grades": [0.0, 1.0]}
    assert check_record({**GENUINE[1], **labels}) == {**GENUINE[1], **labels}
    with pytest.raises(InputError, match="'grades' must be a list of numbers"):
        check_record({**GENUINE[1], **labels, "grades": [0.5, True]})


def test_calibrate_reads_only_signed_records(tmp_path: Path) -> None:
    log = JsonlGradeLog(tmp_path / "grades.jsonl", secret=SECRET)
    for genuine in GENUINE:
        log.append(genuine)
    clean = tmp_path / "clean.toml"
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n")
    base = ["calibrate", "--grade-log", str(log.path), "--guarantee", "recall:0.1"]
    signed = [*base, "--grade-log-secret-file", str(secret_file)]
    out = io.StringIO()
    assert main([*signed, "--out", str(clean)], out=out) == 0
    first = json.loads(out.getvalue())
    assert first["audited_lists"] == 60 and first["skipped"] == {} and first["signed"]
    with log.path.open("a") as handle:  # 300 records injected by someone without the secret
        handle.writelines(text + "\n" for text in forgeries())
    out = io.StringIO()
    assert main([*signed, "--out", str(tmp_path / "again.toml")], out=out) == 0
    again = json.loads(out.getvalue())
    assert again["audited_lists"] == 60 and again["skipped"] == {"signature": 300}
    assert again["guarantee"] == first["guarantee"]
    assert EvaluatorConfig.from_file(tmp_path / "again.toml").guarantee == (
        EvaluatorConfig.from_file(clean).guarantee
    )
    # without the secret the signed log has no record to read (and says so)
    assert main([*base, "--out", str(tmp_path / "blind.toml")]) == 2
    assert main([*base, "--grade-log-secret-file", str(tmp_path / "missing"), "--out", "x"]) == 2


def test_shared_logs_warn_or_refuse_without_a_secret(client: redis.Redis) -> None:
    with pytest.warns(UnsignedStoreWarning, match="RedisGradeLog has no secret"):
        RedisGradeLog(client)
    with pytest.raises(ConfigError, match="needs a secret"):
        RedisGradeLog(client, unsigned="refuse")
    with pytest.raises(ConfigError, match="unsigned"):
        RedisGradeLog(client, unsigned="never")  # type: ignore[arg-type]
    assert RedisGradeLog(client, secret=SECRET, unsigned="refuse").signed
    assert not RedisGradeLog(client, unsigned="allow").signed
    with pytest.raises(ConfigError) as info:
        RedisGradeLog(client, secret="short")
    assert "short" not in str(info.value)
    JsonlGradeLog(Path("grades.jsonl"))  # a file of this process's: no warning
