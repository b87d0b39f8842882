"""Cache keys: deterministic across processes, sensitive to what changes an evaluation."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest

from crag_heuristic import (
    Chunk,
    ConfigError,
    DuplicateChunkError,
    EvaluatorConfig,
    InputError,
    InvalidQueryError,
    ScoreKind,
    __version__,
)
from crag_heuristic._cache.codec import dumps, loads
from crag_heuristic._cache.keys import (
    KEY_SCHEMA,
    ChunkDigests,
    cache_key,
    canonical_json,
    checked_evaluation_key,
    chunk_digest,
    evaluation_key,
    text_digest,
    web_key,
)
from crag_heuristic._cache.stats import CacheStats
from crag_heuristic._exceptions import CacheError

SHA256_OF_HI = "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4"


def _chunks() -> list[Chunk]:
    return [
        Chunk(
            id="a",
            text="Solar panels lose efficiency when hot.",
            score=0.8,
            score_kind="cosine",
            source="s1",
        ),
        Chunk(id="b", text="Wind turbines spin.", score=0.4, score_kind="cosine", source="s2"),
    ]


def _key(query: str = "solar heat", chunks: list[Chunk] | None = None, **kwargs: object) -> str:
    kwargs.setdefault("config_fingerprint", "cfg1")
    return evaluation_key(query, _chunks() if chunks is None else chunks, **kwargs)  # type: ignore[arg-type]


def test_key_layout_names_namespace_version_and_kind() -> None:
    key = _key()
    assert re.fullmatch(rf"crag:v{re.escape(__version__)}:eval:[0-9a-f]{{64}}", key)
    web = web_key("solar", 5, searcher_fingerprint="searx:en")
    assert re.fullmatch(rf"crag:v{re.escape(__version__)}:web:[0-9a-f]{{64}}", web)
    assert _key(namespace="app1", version="9.9").startswith("app1:v9.9:eval:")


def test_hand_checked_digest_of_a_tiny_payload() -> None:
    # The header and the chunk's part, written out by hand: sorted keys, no spaces;
    # the chunk's fields then its text, after a NUL byte (schema 4).
    assert hashlib.sha256(b"hi").hexdigest() == SHA256_OF_HI == text_digest("hi")
    header = (
        '{"analyzer":null,"chunks":1,"config":"cfg","corpus":null,"evidence":"gate",'
        '"query":"q","schema":4,"type":"eval"}'
    )
    chunk_part = hashlib.sha256(b'["a","cosine",null,0.5,null,null]\x00hi').digest()
    digest = hashlib.sha256(header.encode("ascii") + b"\x00" + chunk_part).hexdigest()
    chunk = Chunk(id="a", text="hi", score=0.5, score_kind=ScoreKind.COSINE)
    key = evaluation_key("q", [chunk], config_fingerprint="cfg", version="0.1.0")
    assert key == f"crag:v0.1.0:eval:{digest}"
    assert KEY_SCHEMA == 4


def test_the_router_computes_each_chunks_part_once_and_the_same() -> None:
    """The memo gives the digest the key function computes, and a chunk whose text
    changed is another entry (never a stale digest)."""
    digests = ChunkDigests(size=2)
    chunk = Chunk(id="a", text="hi", score=0.5, score_kind=ScoreKind.COSINE)
    assert digests(chunk) == chunk_digest(chunk)
    changed = chunk.replace(text="hi!")
    assert digests(changed) == chunk_digest(changed) != digests(chunk)
    assert digests(chunk.replace(score=-0.0)) == digests(chunk.replace(score=0.0))
    digests(chunk.replace(id="b"))  # a third entry empties the memo: still right
    assert digests(chunk) == chunk_digest(chunk)
    keyed = checked_evaluation_key(
        "q",
        [chunk, changed.replace(id="c")],
        config_fingerprint="cfg",
        corpus_fingerprint=None,
        analyzer_fingerprint=None,
        all_evidence=False,
        digest=digests,
    )
    assert keyed == evaluation_key("q", [chunk, changed.replace(id="c")], config_fingerprint="cfg")


def test_hand_checked_web_key() -> None:
    payload = '{"max_results":5,"query":"solar","schema":4,"searcher":"sx","type":"web"}'
    digest = hashlib.sha256(payload.encode("ascii")).hexdigest()
    assert (
        web_key("solar", 5, searcher_fingerprint="sx", version="0.1.0")
        == f"crag:v0.1.0:web:{digest}"
    )


def test_same_input_same_key_in_another_process() -> None:
    code = (
        "from crag_heuristic import Chunk\n"
        "from crag_heuristic._cache.keys import evaluation_key, web_key\n"
        "chunks = [Chunk(id='a', text='Solar panels lose efficiency when hot.', score=0.8,"
        " score_kind='cosine', source='s1'), Chunk(id='b', text='Wind turbines spin.',"
        " score=0.4, score_kind='cosine', source='s2')]\n"
        "print(evaluation_key('solar heat', chunks, config_fingerprint='cfg1'))\n"
        "print(web_key('solar heat', 3, searcher_fingerprint='sx'))\n"
    )
    keys = set()
    for seed in ("1", "2"):  # a different str hash salt in each process
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        keys.add(tuple(out.stdout.split()))
    assert keys == {(_key(), web_key("solar heat", 3, searcher_fingerprint="sx"))}


def test_every_input_that_changes_an_evaluation_changes_the_key() -> None:
    base = _chunks()
    variants = {
        "base": _key(),
        "query": _key("solar heat?"),
        "text": _key(
            chunks=[base[0].replace(text="Solar panels lose efficiency when hot!"), base[1]]
        ),
        "score": _key(chunks=[base[0].replace(score=0.81), base[1]]),
        "score_none": _key(chunks=[base[0].replace(score=None), base[1]]),
        "kind": _key(chunks=[base[0].replace(score_kind="inner_product"), base[1]]),
        "source": _key(chunks=[base[0].replace(source="s2"), base[1]]),
        "parent": _key(chunks=[base[0].replace(parent_id="p"), base[1]]),
        "id": _key(chunks=[base[0].replace(id="a2"), base[1]]),
        "order": _key(chunks=[base[1], base[0]]),
        "fewer": _key(chunks=[base[0]]),
        "config": _key(config_fingerprint="cfg2"),
        "corpus": _key(corpus_fingerprint="corpus1"),
        "analyzer": _key(analyzer_fingerprint="english:abc"),
        "all_evidence": _key(all_evidence=True),
        "namespace": _key(namespace="other"),
        "version": _key(version="0.2.0"),
    }
    assert len(set(variants.values())) == len(variants)


def test_what_the_evaluator_ignores_does_not_change_the_key() -> None:
    base = _chunks()
    with_metadata = [base[0].replace(metadata={"page": 3}), base[1]]
    assert _key(chunks=with_metadata) == _key()
    zero, negative_zero = (
        Chunk(id="z", text="t", score=s, score_kind="cosine") for s in (0.0, -0.0)
    )
    assert _key(chunks=[zero]) == _key(chunks=[negative_zero])


def test_real_config_fingerprints_separate_profiles() -> None:
    synapse = EvaluatorConfig.from_profile("synapse").fingerprint()
    crag = EvaluatorConfig.from_profile("crag").fingerprint()
    assert _key(config_fingerprint=synapse) != _key(config_fingerprint=crag)


def test_unpaired_surrogates_and_unicode_hash() -> None:
    lone = "caf\udce9 \ud800"
    chunk = Chunk(id="s", text=lone, score=0.5, score_kind="cosine")
    key = evaluation_key(lone, [chunk], config_fingerprint="cfg")
    assert key.startswith("crag:")
    assert text_digest(lone) == hashlib.sha256(lone.encode("utf-8", "surrogatepass")).hexdigest()
    assert text_digest(lone) != text_digest("café ")
    assert canonical_json({"q": "\ud800é"}) == b'{"q":"\\ud800\\u00e9"}'
    assert web_key(lone, 3, searcher_fingerprint="sx") != web_key(
        "caf", 3, searcher_fingerprint="sx"
    )


def test_web_key_is_sensitive_to_each_part() -> None:
    keys = {
        web_key("q", 5, searcher_fingerprint="a"),
        web_key("q2", 5, searcher_fingerprint="a"),
        web_key("q", 6, searcher_fingerprint="a"),
        web_key("q", 5, searcher_fingerprint="b"),
        web_key("q", 5, searcher_fingerprint="a", namespace="n"),
    }
    assert len(keys) == 5


def test_bad_key_inputs_raise_typed_errors() -> None:
    with pytest.raises(InvalidQueryError):
        evaluation_key(b"bytes", _chunks(), config_fingerprint="c")  # type: ignore[arg-type]
    dup = Chunk(id="a", text="x")
    with pytest.raises(DuplicateChunkError):
        evaluation_key("q", [dup, dup], config_fingerprint="c")
    with pytest.raises(ConfigError) as info:
        evaluation_key("q", [], config_fingerprint="")
    assert info.value.field == "config_fingerprint"
    with pytest.raises(ConfigError) as info:
        _key(namespace="has space")
    assert info.value.field == "namespace"
    with pytest.raises(ConfigError) as info:
        web_key("q", 0, searcher_fingerprint="s")
    assert info.value.field == "max_results"
    with pytest.raises(ConfigError):
        web_key("q", True, searcher_fingerprint="s")
    with pytest.raises(ConfigError):
        cache_key("Bad Kind", {})
    with pytest.raises(InputError):
        cache_key("x", {"nan": float("nan")})


def test_empty_chunk_list_has_a_key() -> None:
    assert _key(chunks=[]) != _key()


def test_dumps_and_loads_round_trip_and_refuse_with_cache_error() -> None:
    value = {"b": [1, 2.5, None], "a": "é\u2603"}
    text = dumps(value)
    assert text == '{"a":"\\u00e9\\u2603","b":[1,2.5,null]}'  # ASCII: always valid UTF-8
    assert loads(text) == value
    assert loads(text.encode("utf-8")) == value
    assert loads(dumps("lone \ud800")) == "lone \ud800"  # escaped, so storable
    with pytest.raises(CacheError) as info:
        dumps({"x": object()})
    assert info.value.kind == "payload" and info.value.operation == "encode"
    with pytest.raises(CacheError) as info:
        dumps(float("inf"))
    assert info.value.kind == "payload"
    for bad in (b"\x80\x04\x95", "{not json", b"\xff\xfe"):
        with pytest.raises(CacheError) as info:
            loads(bad)
        assert info.value.kind == "payload" and info.value.operation == "decode"


def test_cache_stats_snapshot_reports_hit_rate() -> None:
    stats = CacheStats(backend="memory", hits=3, misses=1, errors=2, errors_by_kind={"payload": 2})
    assert stats.lookups == 4
    assert stats.hit_rate == 0.75
    assert CacheStats(backend="memory").hit_rate is None
    data = stats.to_dict()
    assert data["hit_rate"] == 0.75 and data["errors_by_kind"] == {"payload": 2}
    json.dumps(data)  # JSON-ready
