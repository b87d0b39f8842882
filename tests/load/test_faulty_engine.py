"""FaultyEngine: which texts fail is a pure function of the text, and it tells the truth."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from crag_testkit._faulty_engine import FAULT_KINDS, OK, FaultyEngine

from crag_heuristic import ConfigError


def by_hand(query: str, seed: str, share: float, kinds: tuple[str, ...]) -> str:
    """The module docstring's formula, written out again."""
    digest = hashlib.sha256(seed.encode() + b"\x00" + query.encode()).digest()
    if int.from_bytes(digest[:8], "big") / 2**64 >= share:
        return OK
    return kinds[digest[8] % len(kinds)]


def fetch(engine: FaultyEngine, query: str) -> tuple[int, bytes]:
    url = f"{engine.url}/api?{urlencode({'q': query, 'engine': 'fixture'})}"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture
def engine() -> Iterator[FaultyEngine]:
    with FaultyEngine(failure_share=0.5, slow_delay=0.05, seed="s") as running:
        yield running


def test_planned_follows_the_formula_and_the_share() -> None:
    engine = FaultyEngine(failure_share=0.25, seed="7")
    try:
        texts = [f"how to fold a tent {i}" for i in range(4000)]
        plans = [engine.planned(t) for t in texts]
        assert plans == [by_hand(t, "7", 0.25, FAULT_KINDS) for t in texts]
        assert plans == [engine.planned(t) for t in texts]  # the same every time
        counts = Counter(plans)
        assert 0.22 < (len(texts) - counts[OK]) / len(texts) < 0.28
        assert set(counts) == {OK, *FAULT_KINDS}
        other = FaultyEngine(seed="8")  # binds its own port: stopped below
        assert [other.planned(t) for t in texts] != plans  # the seed matters
    finally:
        engine.stop()
        if "other" in locals():
            other.stop()


def test_share_and_kinds_bounds() -> None:
    texts = [f"q{i}" for i in range(200)]
    never, always = FaultyEngine(failure_share=0.0), FaultyEngine(failure_share=1, kinds=["slow"])
    try:
        assert {never.planned(t) for t in texts} == {OK}
        assert {always.planned(t) for t in texts} == {"slow"}
    finally:
        never.stop()
        always.stop()


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("failure_share", 1.5),
        ("failure_share", True),
        ("kinds", ()),
        ("kinds", ("teapot",)),
        ("slow_delay", 0),
        ("results", 0),
        ("seed", 3),
    ],
)
def test_bad_arguments_name_the_field(argument: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        FaultyEngine(**{argument: value})  # type: ignore[arg-type]
    assert info.value.field == argument


def test_each_reply_is_what_was_planned_and_is_recorded(engine: FaultyEngine) -> None:
    texts: dict[str, str] = {}
    for i in range(400):  # one text of each outcome, found by the formula
        text = f"repair a canoe paddle {i}"
        texts.setdefault(by_hand(text, "s", 0.5, FAULT_KINDS), text)
        if len(texts) == 4:
            break
    assert set(texts) == {OK, *FAULT_KINDS}

    status, body = fetch(engine, texts[OK])
    items = json.loads(body)["items"]
    assert status == 200 and len(items) == 3
    assert len({item["link"] for item in items}) == 3
    status, _ = fetch(engine, texts["http_500"])
    assert status == 500
    status, body = fetch(engine, texts["garbage"])
    assert status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    status, body = fetch(engine, texts["slow"])  # late (slow_delay), but complete
    assert status == 200 and len(json.loads(body)["items"]) == 3
    fetch(engine, texts["http_500"])

    assert engine.served[texts["http_500"]] == ["http_500", "http_500"]
    assert engine.failed_texts() == {texts[kind]: kind for kind in FAULT_KINDS}
    assert engine.served_counts() == {OK: 1, "http_500": 2, "garbage": 1, "slow": 1}
    assert len(engine.requests) == 5
    engine.reset()
    assert engine.served == {} and engine.requests == []
