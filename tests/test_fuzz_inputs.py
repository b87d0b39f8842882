"""An invalid-heavy fuzz of the public doors: only the library's own typed errors
may come out (issue 18).

Every example builds the public objects (``Chunk``, ``EvaluatorConfig`` /
``RouterConfig`` and their sections, ``Evaluator``, ``CRAG``) from values that
are mostly wrong (wrong types, NaN, infinities, integers beyond float, huge and
negative ``k``, deep nesting, parts that are not parts, caches that return
junk), calls ``Evaluator.evaluate``, ``CRAG.retrieve`` / ``aretrieve`` and the
command line's input readers, and accepts exactly two outcomes: a result, or a
:class:`~crag_heuristic.CragError` (whose input and configuration kinds are
the documented ``ValueError`` subclasses). Anything else (``OverflowError``,
``RecursionError``, ``AttributeError``, a plain ``TypeError``) fails.

The suite runs a few hundred examples in all. The full fuzz is one command::

    CRAG_FUZZ_EXAMPLES=20000 pytest tests/test_fuzz_inputs.py --hypothesis-show-statistics

``CRAG_FUZZ_EXAMPLES`` is the total over the tests of this file (at least), shared
equally; the statistics print how many examples each test ran.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import tempfile
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from crag_heuristic import (
    CRAG,
    BM25Retriever,
    Chunk,
    ChunkEvaluation,
    CircuitBreaker,
    CragError,
    Evaluation,
    Evaluator,
    EvaluatorConfig,
    Failure,
    FaissRetriever,
    MemoryCache,
    RedisCache,
    RouterConfig,
    ScoreKind,
    SearxngClient,
    SearxngConfig,
    Signals,
    WebOutcome,
    load_config,
)
from crag_heuristic import config as sections
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_INTERNAL, read_chunks, read_docs, read_records
from crag_heuristic._text.corpus import CorpusStats
from crag_heuristic.cache import TieredCache, evaluation_key
from crag_heuristic.expansion import (
    Expansion,
    PRFExpander,
    SynonymExpander,
    load_synonyms,
    parse_synonyms,
    reciprocal_rank_fusion,
)
from crag_heuristic.grading import (
    CallableGrader,
    Cascade,
    Escalation,
    OpenAIGrader,
    RecordedGrader,
    SetEscalation,
    binomial_lower,
    binomial_upper,
    guaranteed_band,
)
from crag_heuristic.index import IndexDirectory
from crag_heuristic.metrics import PrometheusMetrics
from crag_heuristic.refinement import refine
from crag_heuristic.retrievers import LangChainRetriever
from crag_heuristic.sample import LsaEmbedder
from crag_heuristic.serve import ServeSettings
from crag_heuristic.testing import ListRetriever, RecordingWebSearcher, StaticExpander
from crag_heuristic.text import Analyzer, SentenceVectors
from crag_heuristic.web import keyword_query

TESTS = 7  # the tests below, which share the examples with the doors (test_public_doors)
UNITS = TESTS + 51  # the tests and the doors (checked in test_every_door_is_counted)
TOTAL = int(os.environ.get("CRAG_FUZZ_EXAMPLES", "420"))
FUZZ = settings(
    max_examples=max(1, -(-TOTAL // UNITS)),  # at least TOTAL in all
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

# -- values, mostly wrong ---------------------------------------------------------------------


def five_thousand_digits() -> int:
    return 10**5000  # built, not listed: Python will not print it (over 4,300 digits)


HUGE_INTS = [10**400, -(10**400), 2**1024, 10**9, -1, 0]
numbers = st.one_of(
    st.floats(),  # NaN and infinities included
    st.integers(),
    st.sampled_from(HUGE_INTS),
    st.builds(five_thousand_digits),
    st.floats(min_value=-2, max_value=2),
    st.decimals(),
    st.fractions(max_denominator=10),
    st.sampled_from([Fraction(10**400), Decimal("1e400"), complex(1, 1), True, False]),
)
scalars = st.one_of(
    st.none(),
    numbers,
    st.text(max_size=12),
    st.binary(max_size=8),
    st.sampled_from(["", " ", "\x00", "\ud800", "cosine", "nan", "1e400", "relevant"]),
    st.just(object()),
)
junk = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=6), inner, max_size=3),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=8,
)


def sometimes(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A valid value one time in three, junk otherwise."""
    return st.one_of(valid, junk, junk)


def deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


kinds = sometimes(st.sampled_from([*ScoreKind, *(k.value for k in ScoreKind)]))
good_text = st.text(alphabet="abcdefghij solar panel wind bees ", min_size=1, max_size=60)


@st.composite
def chunk_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    fields = {
        "id": sometimes(st.text(min_size=1, max_size=8)),
        "text": sometimes(good_text),
        "score": sometimes(st.floats(min_value=-1, max_value=1)),
        "score_kind": kinds,
        "source": sometimes(st.none() | st.text(max_size=8)),
        "metadata": st.one_of(
            sometimes(st.dictionaries(st.text(max_size=4), scalars, max_size=2)),
            st.sampled_from([{"m": deep(50)}, {"m": deep(2000)}]),
        ),
        "parent_id": sometimes(st.none() | st.text(min_size=1, max_size=8)),
    }
    chosen = draw(st.sets(st.sampled_from(sorted(fields))))
    out = {name: draw(fields[name]) for name in chosen}
    out.setdefault("id", "c")
    out.setdefault("text", "t")
    return out


@st.composite
def valid_chunks(draw: st.DrawFn, max_size: int = 6) -> list[Chunk]:
    n = draw(st.integers(min_value=0, max_value=max_size))
    chunks = []
    for i in range(n):
        kind = draw(st.sampled_from([ScoreKind.COSINE, ScoreKind.BM25, ScoreKind.UNKNOWN]))
        score = draw(st.none() | st.floats(min_value=0, max_value=1))
        chunks.append(
            Chunk(
                id=f"c{i}", text=draw(good_text), score=score, score_kind=kind, source=f"s{i % 3}"
            )
        )
    return chunks


def outcome(call: Callable[[], Any]) -> Any:
    """``call()``; a CragError is a fine answer to bad input, anything else fails."""
    try:
        return call()
    except CragError as exc:
        return exc


# -- constructors --------------------------------------------------------------------------------


@FUZZ
@given(
    kwargs=chunk_kwargs(), data=sometimes(st.dictionaries(st.text(max_size=8), junk, max_size=6))
)
def test_chunks(kwargs: dict[str, Any], data: Any) -> None:
    made = outcome(lambda: Chunk(**kwargs))
    if isinstance(made, Chunk):
        again = Chunk.from_dict(made.to_dict())
        assert again.id == made.id and again.score == made.score
        assert made.score is None or math.isfinite(made.score)
    outcome(lambda: Chunk.from_dict(data))


SECTIONS: dict[type, list[str]] = {
    sections.SignalWeights: [
        "keyword_overlap",
        "semantic_coherence",
        "length_adequacy",
        "source_diversity",
    ],
    sections.Thresholds: ["relevant", "partial"],
    sections.KeywordConfig: ["use_idf", "aggregate", "bm25_k1", "bm25_b"],
    sections.CoherenceConfig: [
        "mean",
        "top",
        "gap",
        "variance_cap",
        "cosine_floor",
        "cosine_ceiling",
        "bm25_saturation",
    ],
    sections.LengthConfig: ["min_tokens", "tokens_per_word"],
    sections.RefineConfig: ["strip_threshold", "token_budget"],
    sections.ModelTerm: ["feature", "weight", "mean", "scale"],
    sections.LogisticStage: ["intercept", "terms"],
    sections.FallbackModel: ["missing", "chunk", "set", "thresholds", "chunk_thresholds"],
    sections.ModelConfig: ["chunk", "set", "fitted_on", "fallbacks"],
    RouterConfig: [f.name for f in RouterConfig.__dataclass_fields__.values()],
    EvaluatorConfig: [f.name for f in EvaluatorConfig.__dataclass_fields__.values() if f.init],
}


@st.composite
def section_call(draw: st.DrawFn) -> tuple[type, dict[str, Any]]:
    cls = draw(st.sampled_from(sorted(SECTIONS, key=lambda c: c.__name__)))
    names = draw(st.sets(st.sampled_from(SECTIONS[cls]), max_size=4))
    values = sometimes(st.floats(min_value=0, max_value=1) | st.integers(min_value=0, max_value=20))
    kwargs = {name: draw(values) for name in names}
    required: dict[type, dict[str, Any]] = {
        sections.FallbackModel: {"missing": ["similarity"]},
        sections.ModelTerm: {"feature": "rank", "weight": 1},
    }
    for name, valid in required.get(cls, {}).items():  # a missing one is a call error
        kwargs.setdefault(name, draw(sometimes(st.just(valid))))
    return cls, kwargs


@st.composite
def config_dicts(draw: st.DrawFn) -> Any:
    keys = st.sampled_from(
        [*SECTIONS[EvaluatorConfig], "profile", "unknown_field", "thresholds", "weights", "model"]
    )
    inner = st.dictionaries(
        st.sampled_from(["relevant", "partial", "keyword_overlap", "mean", "terms", "chunk", "x"]),
        sometimes(st.floats(min_value=0, max_value=1)),
        max_size=3,
    )
    return draw(sometimes(st.dictionaries(keys, st.one_of(inner, junk), max_size=4)))


@FUZZ
@given(
    call=section_call(),
    config=config_dicts(),
    router=sometimes(
        st.dictionaries(
            st.sampled_from([*SECTIONS[RouterConfig], "kk"]), numbers | junk, max_size=4
        )
    ),
)
def test_configs(call: tuple[type, dict[str, Any]], config: Any, router: Any) -> None:
    cls, kwargs = call
    outcome(lambda: cls(**kwargs))
    made = outcome(lambda: EvaluatorConfig.from_dict(config))
    if isinstance(made, EvaluatorConfig):
        assert EvaluatorConfig.from_dict(made.to_dict()).fingerprint() == made.fingerprint()
    outcome(lambda: load_config(config))
    outcome(lambda: RouterConfig.from_dict(router))
    outcome(lambda: RouterConfig().replace(**router) if isinstance(router, dict) else None)


# -- the evaluator ------------------------------------------------------------------------------

queries = sometimes(st.text(max_size=40) | st.just("solar panels in winter"))


@st.composite
def chunk_lists(draw: st.DrawFn) -> Any:
    good = draw(valid_chunks())
    mixed = st.lists(st.one_of(st.sampled_from([*good, None]), junk), max_size=4)
    return draw(st.one_of(st.just(good), st.just(good), mixed, junk, st.just(good + good)))


@FUZZ
@given(
    config=sometimes(st.sampled_from([None, "synapse", "crag", "minilm-scifact"])),
    cache_size=sometimes(st.integers(min_value=0, max_value=8)),
    all_evidence=sometimes(st.booleans()),
    analyzer=st.one_of(st.none(), junk),
)
def test_evaluator_constructor(
    config: Any, cache_size: Any, all_evidence: Any, analyzer: Any
) -> None:
    made = outcome(
        lambda: Evaluator(
            config, cache_size=cache_size, all_evidence=all_evidence, analyzer=analyzer
        )
    )
    if isinstance(made, Evaluator):
        outcome(lambda: made.evaluate("solar panels", [Chunk(id="a", text="solar panels")]))


EVALUATOR = Evaluator()
STATS = CorpusStats.build(["solar panels convert light", "wind turbines", "bees dance"])


@FUZZ
@given(
    query=queries,
    chunks=chunk_lists(),
    stats=st.one_of(st.none(), st.just(STATS), junk),
    config=st.one_of(st.none(), config_dicts()),
    grades=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["c0", "c1", "zz"]) | st.text(max_size=3), numbers | junk, max_size=3
        ),
        junk,
    ),
)
def test_evaluate(query: Any, chunks: Any, stats: Any, config: Any, grades: Any) -> None:
    evaluation = outcome(
        lambda: EVALUATOR.evaluate(query, chunks, stats, config=config, chunk_grades=grades)
    )
    if not isinstance(evaluation, CragError):
        assert 0.0 <= evaluation.score <= 1.0
        assert len(evaluation.chunks) == len(chunks)


# -- the router -------------------------------------------------------------------------------


class JunkRetriever:
    """A retriever that answers whatever it was given (a list of chunks, or junk)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def search(self, query: str, k: int) -> Any:
        return self.answer


class JunkCache:
    """A cache whose reads return junk: a tampered or foreign store."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self, key: str) -> Any:
        return self.value

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        json.loads(value)  # what the router writes is JSON text


class TamperingCache:
    """A cache that hands back what was stored, edited: ``edits`` are (seed, value)
    pairs, each replacing one element (picked by the seed) of the stored JSON."""

    def __init__(self, edits: list[tuple[int, Any]]) -> None:
        self.edits = edits
        self.stored: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        text = self.stored.get(key)
        if text is None:
            return None
        data = json.loads(text)
        for seed, value in self.edits:
            data = _edited(data, seed, value)
        return _json(data)

    def set(self, key: str, value: str, ttl: float | None = None) -> None:
        self.stored[key] = value


def _edited(data: Any, seed: int, value: Any) -> Any:
    """``data`` with one element, at a depth and place chosen by ``seed``, replaced."""
    depth = seed % 7
    if depth == 0 or not isinstance(data, dict | list) or not data:
        return value
    node = data
    for step in range(depth):
        places = list(node) if isinstance(node, dict) else list(range(len(node)))
        place = places[(seed >> step) % len(places)]
        child = node[place]
        if step == depth - 1 or not isinstance(child, dict | list) or not child:
            node[place] = value
            break
        node = child
    return data


def _json(value: Any) -> str:
    """JSON text of anything (what ``json`` cannot write, by its ``repr``; an integer
    too long to print, as 5,000 nines)."""
    try:
        return json.dumps(value, default=repr)
    except ValueError:
        return '{"id": "a", "text": "t", "score": ' + "9" * 5000 + "}"


cached_values = st.one_of(
    junk,
    st.text(max_size=30),
    junk.map(_json),
    st.sampled_from(['{"key": "x", "value": 1}', "[" * 5000, "1" * 5000, "NaN", '{"key": 1}']),
)


@st.composite
def routers(draw: st.DrawFn) -> Any:
    chunks = draw(valid_chunks(max_size=5))
    retriever = draw(
        st.one_of(
            st.just(ListRetriever(chunks)),
            st.just(ListRetriever(chunks)),
            st.builds(JunkRetriever, st.one_of(junk, st.just(chunks + chunks))),
            junk,
        )
    )
    cache = draw(
        st.one_of(
            st.none(),
            st.just(False),
            st.builds(lambda: MemoryCache()),
            st.builds(JunkCache, cached_values),
            st.builds(
                TamperingCache,
                st.lists(st.tuples(st.integers(min_value=0, max_value=2**16), junk), max_size=3),
            ),
            junk,
        )
    )
    web = draw(
        st.one_of(
            st.none(),
            st.builds(
                lambda: RecordingWebSearcher([("Bees", "https://example.org/b", "bees dance")])
            ),
            junk,
        )
    )
    evaluator = draw(
        st.one_of(
            st.none(),
            st.just(EVALUATOR),
            st.just(
                Evaluator(
                    EvaluatorConfig.from_profile("synapse").replace(
                        thresholds={"relevant": 1.0, "partial": 0.5}
                    )
                )
            ),
            junk,
        )
    )
    expander = draw(st.one_of(st.none(), st.just(StaticExpander(["bees", ""])), junk))
    lexical = draw(st.one_of(st.none(), st.just(ListRetriever(chunks[::-1])), junk))
    config = draw(
        st.one_of(
            st.none(),
            st.dictionaries(
                st.sampled_from(
                    [
                        "k",
                        "gate_k",
                        "fetch_k",
                        "rrf_k",
                        "max_retries",
                        "retriever_timeout",
                        "web_ttl",
                        "refine",
                    ]
                ),
                numbers | junk,
                max_size=3,
            ),
            junk,
        )
    )
    return lambda: CRAG(retriever, evaluator, expander, web, cache, config, lexical=lexical)


ks = st.one_of(
    st.none(),
    st.integers(min_value=-3, max_value=12),
    st.sampled_from(HUGE_INTS),
    st.builds(five_thousand_digits),
    junk,
)


@FUZZ
@given(build=routers(), query=queries, k=ks)
def test_retrieve(build: Callable[[], CRAG], query: Any, k: Any) -> None:
    crag = outcome(build)
    if isinstance(crag, CRAG):
        for _ in range(2):  # the second reads what the first stored (a tampering cache edits it)
            result = outcome(lambda: crag.retrieve(query, k))
            if not isinstance(result, CragError):
                json.dumps(result.to_dict())  # the result serialises


@FUZZ
@given(build=routers(), query=queries, k=ks)
def test_aretrieve(build: Callable[[], CRAG], query: Any, k: Any) -> None:
    crag = outcome(build)
    if isinstance(crag, CRAG):
        for _ in range(2):
            outcome(lambda: asyncio.run(crag.aretrieve(query, k)))


# -- the command line's readers ----------------------------------------------------------------

record = st.dictionaries(
    st.sampled_from(
        [
            "id",
            "_id",
            "text",
            "title",
            "score",
            "score_kind",
            "source",
            "metadata",
            "parent_id",
            "x",
        ]
    ),
    junk,
    max_size=6,
)


file_texts = st.one_of(
    st.lists(record.map(_json), max_size=4).map("\n".join),
    st.lists(record, max_size=4).map(_json),
    st.text(max_size=80),
    st.lists(
        st.sampled_from(
            [
                '{"id": "a", "text": "t", "score": ' + "9" * 401 + "}",
                '{"id": "a", "text": "t", "score": ' + "9" * 5000 + "}",
                "[" * 3000,
                '{"id": "a", "text": "t", "metadata": ' + "[" * 70 + "]" * 70 + "}",
                '{"id": "a", "text": "t", "score": 1.5, "score_kind": "cosine"}',
                "",
                "null",
                "[1, 2]",
            ]
        ),
        max_size=3,
    ).map("\n".join),
)


@FUZZ
@given(
    text=file_texts,
    raw=st.binary(max_size=40),
    use_raw=st.booleans(),
    kind=st.none() | st.sampled_from(list(ScoreKind)),
)
def test_cli_readers(text: str, raw: bytes, use_raw: bool, kind: ScoreKind | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input.jsonl"
        path.write_bytes(raw if use_raw else text.encode("utf-8", "surrogatepass"))
        for reader in (read_records, read_docs, lambda p: read_chunks(p, default_kind=kind)):
            outcome(lambda: reader(path))  # noqa: B023 - called at once
        argv = [
            "evaluate",
            "-q",
            "solar",
            "-c",
            str(path),
            "--set",
            f"thresholds.relevant={text[:50]}",
        ]
        code = main(argv, out=io.StringIO())
        assert code != EXIT_INTERNAL


# -- every other public door ------------------------------------------------------------------
# Each door draws its arguments (mostly wrong) and calls one public entry point; a result
# or a CragError are the only outcomes taken. Found by this fuzz (issue 26) and now typed:
# TieredCache (OverflowError), load_config (TypeError), keyword_query (TypeError),
# Evaluation.from_dict (KeyError), the SearXNG client (UnicodeEncodeError, ExceptionGroup).

Door = Callable[[st.DrawFn], Callable[[], Any]]
DOORS: dict[str, Door] = {}


def door(name: str) -> Callable[[Door], Door]:
    def register(make: Door) -> Door:
        DOORS[name] = make
        return make

    return register


def kwargs_of(draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """Some of ``fields``, each drawn (mostly junk, see :func:`sometimes`)."""
    chosen = draw(st.sets(st.sampled_from(sorted(fields))))
    return {name: draw(fields[name]) for name in chosen}


ttls = sometimes(st.none() | st.floats(min_value=0.001, max_value=100))
keys = sometimes(st.just("crag:v0:eval:abc") | st.text(min_size=1, max_size=12))
values = sometimes(st.just('{"a": 1}') | st.text(max_size=12))
secrets_ = st.one_of(st.none(), st.just("s" * 32), junk)
timeouts = sometimes(st.floats(min_value=0.001, max_value=5) | st.none())


def _dict_door(name: str, load: Callable[[Any], Any], fields: list[str]) -> None:
    @door(name)
    def make(draw: st.DrawFn) -> Callable[[], Any]:
        data = draw(sometimes(st.dictionaries(st.sampled_from([*fields, "x"]), junk, max_size=6)))
        return lambda: load(data)


def _grade_dict() -> dict[str, Any]:
    return {"chunk_id": "a", "score": 0.5, "verdict": "partial", "signals": {}, "features": {}}


_dict_door("Chunk.from_dict", Chunk.from_dict, ["id", "_id", "text", "title", "score", "metadata"])
_dict_door("Signals.from_dict", Signals.from_dict, list(Signals.NAMES))
_dict_door(
    "ChunkEvaluation.from_dict",
    ChunkEvaluation.from_dict,
    ["chunk_id", "score", "verdict", "signals", "similarity", "features"],
)
_dict_door(
    "Evaluation.from_dict",
    Evaluation.from_dict,
    ["verdict", "score", "signals", "chunks", "reasoning", "profile", "details"],
)
_dict_door("Failure.from_dict", Failure.from_dict, ["stage", "type", "message", "attributes"])
_dict_door("Expansion.from_dict", Expansion.from_dict, ["original", "queries", "method", "terms"])
_dict_door(
    "Escalation.from_dict", Escalation.from_dict, ["band", "budget", "timeout", "max_chunks"]
)
_dict_door("SetEscalation.from_dict", SetEscalation.from_dict, ["band", "timeout", "max_chunks"])
_dict_door("EvaluatorConfig.from_dict", EvaluatorConfig.from_dict, SECTIONS[EvaluatorConfig])
_dict_door("RouterConfig.from_dict", RouterConfig.from_dict, SECTIONS[RouterConfig])


@door("load_config")
def _load_config(draw: st.DrawFn) -> Callable[[], Any]:
    source = draw(
        st.one_of(
            junk,
            st.sampled_from(["synapse", "crag", "nope", "", "/no/such/file.toml", Path("/x")]),
            st.builds(lambda: EvaluatorConfig()),
        )
    )
    return lambda: load_config(source)  # type: ignore[arg-type]


@door("EvaluatorConfig.from_profile")
def _from_profile(draw: st.DrawFn) -> Callable[[], Any]:
    name = draw(sometimes(st.sampled_from(["synapse", "crag", "minilm-scifact"])))
    return lambda: EvaluatorConfig.from_profile(name)


@door("MemoryCache")
def _memory_cache(draw: st.DrawFn) -> Callable[[], Any]:
    options = kwargs_of(
        draw,
        {"max_entries": sometimes(st.integers(1, 5)), "default_ttl": ttls, "clock": junk},
    )
    key, value, ttl = draw(keys), draw(values), draw(ttls)

    def call() -> Any:
        cache = MemoryCache(**options)
        outcome(lambda: cache.set(key, value, ttl))
        outcome(lambda: cache.get(key))
        outcome(lambda: asyncio.run(cache.aget(key)))
        return cache.delete(key)

    return call


@door("TieredCache")
def _tiered_cache(draw: st.DrawFn) -> Callable[[], Any]:
    options = kwargs_of(
        draw,
        {
            "near_ttl": sometimes(st.floats(0.01, 10)),
            "max_entries": sometimes(st.integers(1, 5)),
            "near_kinds": sometimes(st.just(("eval",))),
            "far_kinds": sometimes(st.just(("web",)) | st.none()),
            "secret": secrets_,
        },
    )
    far = draw(st.one_of(st.builds(lambda: MemoryCache()), junk))
    key, value, ttl = draw(keys), draw(values), draw(ttls)

    def call() -> Any:
        cache = TieredCache(far, **options)
        outcome(lambda: cache.set(key, value, ttl))
        outcome(lambda: asyncio.run(cache.aset(key, value, ttl)))
        outcome(lambda: cache.get(key))
        return asyncio.run(cache.aget(key))

    return call


@door("RedisCache")
def _redis_cache(draw: st.DrawFn) -> Callable[[], Any]:
    url = draw(
        st.one_of(
            junk,
            st.sampled_from(
                [
                    "redis://127.0.0.1:1/0",  # nothing listens: refused at once
                    "redis://:p/w?d#x@127.0.0.1:1/0",
                    "redis://h:notaport/0",
                    "redis://h:99999999/0",
                    "rediss://[::1/0",
                    "http://h",
                    "redis://\udc80@h",
                ]
            ),
        )
    )
    options = kwargs_of(
        draw,
        {
            "namespace": sometimes(st.just("ns")),
            "default_ttl": ttls,
            "socket_timeout": sometimes(st.just(0.05)),
            "retry_interval": sometimes(st.just(0.05)),
            "secret": secrets_,
            "client_options": st.one_of(st.none(), st.dictionaries(st.text(max_size=5), junk)),
        },
    )
    key, value = draw(keys), draw(values)
    # never "warn": the suite's warnings are errors (tests/cache/test_unsigned_stores.py)
    options["unsigned"] = draw(st.sampled_from(["allow", "refuse"]) | junk)

    def call() -> Any:
        cache = RedisCache(url=url, **options)
        outcome(lambda: cache.set(key, value))
        return cache.get(key)

    return call


@door("evaluation_key")
def _evaluation_key(draw: st.DrawFn) -> Callable[[], Any]:
    query, chunks = draw(queries), draw(chunk_lists())
    options = kwargs_of(
        draw,
        {
            "corpus_fingerprint": sometimes(st.none() | st.just("c")),
            "analyzer_fingerprint": sometimes(st.none() | st.just("a")),
            "all_evidence": sometimes(st.booleans()),
            "namespace": sometimes(st.just("crag")),
            "version": sometimes(st.just("1.0")),
        },
    )
    fingerprint = draw(sometimes(st.just("f")))
    return lambda: evaluation_key(query, chunks, config_fingerprint=fingerprint, **options)


@door("keyword_query")
def _keyword_query(draw: st.DrawFn) -> Callable[[], Any]:
    query = draw(queries)
    options = kwargs_of(
        draw,
        {
            "analyzer": st.one_of(st.none(), st.just(EVALUATOR.analyzer), junk),
            "corpus_stats": st.one_of(st.none(), st.just(STATS), junk),
            "max_terms": sometimes(st.integers(0, 10)),
        },
    )
    return lambda: keyword_query(query, **options)


WEB_OPTIONS = {
    "timeout": sometimes(st.floats(0.01, 5)),
    "max_retries": sometimes(st.integers(0, 2)),
    "categories": sometimes(st.just(["general"])),
    "engines": sometimes(st.just("a,b")),
    "language": sometimes(st.just("de")),
    "safesearch": sometimes(st.sampled_from([0, 1, 2])),
    "max_content_chars": sometimes(st.integers(1, 50)),
    "headers": sometimes(st.just({"X-Token": "t"})),
}


@door("SearxngConfig")
def _searxng_config(draw: st.DrawFn) -> Callable[[], Any]:
    options = kwargs_of(draw, WEB_OPTIONS)
    return lambda: repr(SearxngConfig(**options))


def _searx_answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200, json={"results": [{"url": "https://a.org/", "title": "t", "content": "c"}]}
    )


@door("SearxngClient")
def _searxng_client(draw: st.DrawFn) -> Callable[[], Any]:
    base = draw(
        st.one_of(
            junk,
            st.sampled_from(
                [
                    "http://searx.test",
                    "http://u:p/w?#@searx.test:8080/",
                    "http://searx.test:port",
                    "http://searx.test/?q=1",
                    "http://sea rx.test",
                    "http://\u00fcber.test",
                    "ftp://searx.test",
                ]
            ),
        )
    )
    options = kwargs_of(draw, WEB_OPTIONS)
    query, max_results = draw(queries), draw(sometimes(st.integers(1, 10)))
    asynchronous = draw(st.booleans())
    transport = httpx.MockTransport(_searx_answer)

    def call() -> Any:
        with SearxngClient(
            base,
            client=httpx.Client(transport=transport),
            async_client=httpx.AsyncClient(transport=transport),
            sleep=lambda s: None,
            **options,
        ) as client:
            if asynchronous:
                return asyncio.run(client.asearch(query, max_results))
            return client.search(query, max_results)

    return call


@door("CircuitBreaker")
def _breaker(draw: st.DrawFn) -> Callable[[], Any]:
    options = kwargs_of(
        draw,
        {
            "failure_threshold": sometimes(st.integers(1, 5)),
            "window": sometimes(st.floats(0.1, 60)),
            "cooldown": sometimes(st.floats(0.1, 60)),
            "failure_rate": sometimes(st.none() | st.floats(0.1, 1)),
            "name": sometimes(st.just("web")),
            "clock": junk,
        },
    )
    return lambda: CircuitBreaker(**options).acquire()


@door("Analyzer")
def _analyzer(draw: st.DrawFn) -> Callable[[], Any]:
    options = kwargs_of(
        draw,
        {
            "language": sometimes(st.sampled_from(["english", "german", "klingon"])),
            "stop_words": sometimes(st.just(["the"])),
            "native": sometimes(st.none() | st.booleans()),
        },
    )
    text = draw(queries)
    return lambda: Analyzer(**options).analyze(text)


@door("CorpusStats.build")
def _stats_build(draw: st.DrawFn) -> Callable[[], Any]:
    texts = draw(sometimes(st.lists(good_text, max_size=4)))
    options = kwargs_of(
        draw,
        {
            "ids": sometimes(st.lists(st.text(min_size=1, max_size=3), max_size=4)),
            "analyses": sometimes(st.booleans()),
            "engine": sometimes(st.just("local")),
            "partition_size": sometimes(st.integers(1, 4)),
        },
    )
    return lambda: CorpusStats.build(texts, **options)


@door("CorpusStats.load")
def _stats_load(draw: st.DrawFn) -> Callable[[], Any]:
    raw = draw(st.binary(max_size=64) | st.just(b"PK\x03\x04" + b"\x00" * 30))
    return lambda: _with_file(raw, CorpusStats.load)


@door("SentenceVectors.load")
def _vectors_load(draw: st.DrawFn) -> Callable[[], Any]:
    raw = draw(st.binary(max_size=64) | st.just(b"PK\x03\x04" + b"\x00" * 30))
    return lambda: _with_file(raw, SentenceVectors.load)


def _with_file(raw: bytes, load: Callable[[Path], Any]) -> Any:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "data.npz"
        path.write_bytes(raw)
        return load(path)


@door("parse_synonyms")
def _parse_synonyms(draw: st.DrawFn) -> Callable[[], Any]:
    text = draw(
        sometimes(
            st.lists(
                st.sampled_from(["a, b", "a => b", "a,b => c", "=>", "# x", "a, , b", "\ud800"]),
                max_size=4,
            ).map("\n".join)
        )
    )
    return lambda: parse_synonyms(text)


@door("SynonymExpander")
def _synonym_expander(draw: st.DrawFn) -> Callable[[], Any]:
    synonyms = draw(st.one_of(st.none(), junk, st.just(["/no/such/file.txt"])))
    options = kwargs_of(
        draw,
        {"max_per_term": sometimes(st.integers(1, 3)), "max_queries": sometimes(st.integers(1, 3))},
    )
    query, chunks = draw(queries), draw(chunk_lists())
    return lambda: SynonymExpander(synonyms, **options).expand(query, chunks=chunks)


@door("PRFExpander")
def _prf_expander(draw: st.DrawFn) -> Callable[[], Any]:
    options = kwargs_of(
        draw,
        {"n_docs": sometimes(st.integers(1, 3)), "n_terms": sometimes(st.integers(1, 3))},
    )
    query, chunks = draw(queries), draw(chunk_lists())
    stats = draw(st.one_of(st.none(), st.just(STATS), junk))
    return lambda: PRFExpander(**options).expand(query, chunks=chunks, corpus_stats=stats)


@door("reciprocal_rank_fusion")
def _rrf(draw: st.DrawFn) -> Callable[[], Any]:
    rankings = draw(st.one_of(st.lists(chunk_lists(), max_size=3), junk))
    k, weights = draw(sometimes(st.integers(0, 60))), draw(st.none() | junk)
    keep = draw(sometimes(st.booleans()))
    return lambda: reciprocal_rank_fusion(rankings, k, weights, keep_scores=keep)


@door("refine")
def _refine(draw: st.DrawFn) -> Callable[[], Any]:
    query, chunks = draw(queries), draw(chunk_lists())
    options = kwargs_of(
        draw,
        {
            "corpus_stats": st.one_of(st.none(), st.just(STATS), junk),
            "token_budget": sometimes(st.none() | st.integers(1, 50)),
            "threshold": sometimes(st.none() | st.floats(0, 1)),
        },
    )
    return lambda: refine(query, chunks, **options)


def _grade_by_length(query: str, texts: list[str]) -> list[float]:
    return [min(1.0, len(text) / 100) for text in texts]


@door("Cascade")
def _cascade(draw: st.DrawFn) -> Callable[[], Any]:
    grader = draw(st.one_of(st.just(CallableGrader(_grade_by_length, name="by-length")), junk))
    escalation = draw(
        st.one_of(st.none(), st.dictionaries(st.sampled_from(["band", "budget"]), junk))
    )
    query, chunks = draw(queries), draw(chunk_lists())
    return lambda: Cascade(None, grader, escalation, cache=MemoryCache()).evaluate(query, chunks)


@door("CallableGrader")
def _callable_grader(draw: st.DrawFn) -> Callable[[], Any]:
    fn = draw(st.one_of(st.just(_grade_by_length), junk))
    name = draw(st.none() | sometimes(st.just("g")))
    chunks = draw(valid_chunks())
    return lambda: CallableGrader(fn, name=name).grade("q", chunks)


@door("BM25Retriever")
def _bm25(draw: st.DrawFn) -> Callable[[], Any]:
    documents = draw(st.one_of(st.lists(st.one_of(good_text, junk), max_size=4), junk))
    options = kwargs_of(
        draw,
        {
            "k1": sometimes(st.floats(0, 3)),
            "b": sometimes(st.floats(0, 1)),
            "variant": sometimes(st.sampled_from(["lucene", "okapi", "atire"])),
            "backend": sometimes(st.sampled_from(["sparse", "dense"])),
        },
    )
    query, k = draw(queries), draw(ks)
    return lambda: BM25Retriever(documents, **options).search(query, k)  # type: ignore[arg-type]


@door("FaissRetriever")
def _faiss(draw: st.DrawFn) -> Callable[[], Any]:
    index, docstore, embed = draw(junk), draw(junk), draw(junk)
    return lambda: FaissRetriever(index, docstore, embed)


@door("Evaluator.refine")
def _evaluator_refine(draw: st.DrawFn) -> Callable[[], Any]:
    query, chunks = draw(queries), draw(chunk_lists())
    budget = draw(sometimes(st.none() | st.integers(1, 50)))
    ranked = draw(sometimes(st.booleans()))
    return lambda: (
        EVALUATOR.refine(query, chunks, token_budget=budget),
        EVALUATOR.evaluate(query, chunks, ranked=ranked),
    )


@door("CRAG.stream")
def _stream(draw: st.DrawFn) -> Callable[[], Any]:
    chunks = draw(valid_chunks(max_size=4))
    secret = draw(secrets_)
    query, k = draw(queries), draw(ks)
    asynchronous = draw(st.booleans())

    async def collect(crag: CRAG) -> list[Any]:
        return [event async for event in crag.astream(query, k)]

    def call() -> Any:
        with CRAG(ListRetriever(chunks), cache_secret=secret) as crag:
            if asynchronous:
                return asyncio.run(collect(crag))
            return list(crag.stream(query, k))

    return call


def _kwargs_door(name: str, make: Callable[..., Any], fields: dict[str, Any]) -> None:
    @door(name)
    def draw_call(draw: st.DrawFn) -> Callable[[], Any]:
        options = kwargs_of(draw, fields)
        return lambda: make(**options)


_kwargs_door(
    "Escalation",
    Escalation,
    {
        "band": sometimes(st.tuples(st.floats(0, 1), st.floats(0, 1))),
        "budget": sometimes(st.floats(0, 1)),
        "max_chunks": sometimes(st.none() | st.integers(1, 5)),
        "timeout": timeouts,
        "grade_ttl": sometimes(st.floats(1, 100)),
    },
)
_kwargs_door(
    "SetEscalation",
    SetEscalation,
    {
        "band": sometimes(st.tuples(st.floats(0, 1), st.floats(0, 1))),
        "combine": sometimes(st.sampled_from(["noisy_or", "max", "mean"])),
        "certainty": sometimes(st.floats(0, 1)),
        "trust": sometimes(st.none() | st.floats(0, 1)),
        "timeout": timeouts,
    },
)
_kwargs_door(
    "Expansion",
    lambda **options: Expansion(**{"original": "q", **options}),
    {
        "original": queries,
        "queries": sometimes(st.tuples(good_text)),
        "added": junk,
        "weights": junk,
        "method": sometimes(st.just("prf")),
    },
)
_kwargs_door(
    "WebOutcome",
    WebOutcome,
    {"query": queries, "used": sometimes(st.booleans()), "results": numbers, "failure": junk},
)
_kwargs_door(
    "LsaEmbedder",
    lambda **options: LsaEmbedder(**{"texts": ["solar panels", "wind", "bees"], **options}),
    {
        "texts": sometimes(st.lists(good_text, min_size=2, max_size=5)),
        "n_components": sometimes(st.integers(1, 4)),
        "seed": sometimes(st.integers(0, 5)),
    },
)


@door("Failure")
def _failure(draw: st.DrawFn) -> Callable[[], Any]:
    stage = draw(sometimes(st.sampled_from(["web", "cache", "grader"])))
    error = draw(st.one_of(junk, st.just(CragError("x")), st.just(ValueError("x"))))
    return lambda: Failure(stage, error).to_dict()  # type: ignore[arg-type]


@door("CorpusStats.from_jsonl")
def _stats_jsonl(draw: st.DrawFn) -> Callable[[], Any]:
    text = draw(file_texts)
    size = draw(sometimes(st.integers(1, 64)))
    return lambda: _with_file(
        text.encode("utf-8", "surrogatepass"),
        lambda p: CorpusStats.from_jsonl(p, partition_bytes=size),
    )


@door("load_synonyms")
def _load_synonyms(draw: st.DrawFn) -> Callable[[], Any]:
    raw = draw(st.binary(max_size=40) | st.just(b"a, b\nc => d"))
    return lambda: _with_file(raw, load_synonyms)


@door("LangChainRetriever")
def _langchain_retriever(draw: st.DrawFn) -> Callable[[], Any]:
    base = draw(junk)
    kind = draw(st.none() | kinds)
    return lambda: LangChainRetriever(base, score_kind=kind)


@door("PrometheusMetrics")
def _prometheus(draw: st.DrawFn) -> Callable[[], Any]:
    namespace = draw(sometimes(st.just("crag_fuzz")))
    registry = draw(st.one_of(st.builds(CollectorRegistry), junk))
    return lambda: PrometheusMetrics(registry, namespace=namespace).decision("relevant")


@door("IndexDirectory.load")
def _index_directory(draw: st.DrawFn) -> Callable[[], Any]:
    manifest = draw(st.one_of(junk.map(_json), st.binary(max_size=40), st.just(b"{}")))
    verify = draw(sometimes(st.booleans()))

    def call() -> Any:
        with tempfile.TemporaryDirectory() as folder:
            raw = (
                manifest
                if isinstance(manifest, bytes)
                else manifest.encode("utf-8", "surrogatepass")
            )
            (Path(folder) / "manifest.json").write_bytes(raw)
            return IndexDirectory.load(folder, verify=verify)

    return call


_kwargs_door(
    "ServeSettings",
    ServeSettings,
    {
        "api_keys": sometimes(st.just(("k" * 32,))),
        "api_key_header": sometimes(st.just("X-API-Key")),
        "max_body_bytes": sometimes(st.integers(1, 10**6)),
        "max_k": sometimes(st.integers(1, 100)),
        "max_query_chars": sometimes(st.integers(1, 100)),
        "max_concurrency": sometimes(st.integers(1, 8)),
        "request_timeout": sometimes(st.floats(0.1, 30)),
    },
)
_kwargs_door(
    "OpenAIGrader",
    lambda **options: OpenAIGrader(**{"base_url": "http://llm.test/v1", "model": "m", **options}),
    {
        "base_url": sometimes(st.just("http://u:p@llm.test/v1")),
        "model": sometimes(st.just("gpt")),
        "api_key": st.none() | junk,
        "prompt": sometimes(st.sampled_from(["binary", "graded", "nope"])),
        "mode": sometimes(st.sampled_from(["list", "chunk"])),
        "timeout": sometimes(st.floats(0.1, 30)),
        "max_retries": sometimes(st.integers(0, 3)),
        "max_concurrency": sometimes(st.integers(1, 4)),
        "temperature": sometimes(st.none() | st.floats(0, 2)),
        "max_passage_chars": sometimes(st.integers(1, 100)),
        "headers": sometimes(st.just({"X-A": "b"})),
    },
)


@door("RecordedGrader")
def _recorded_grader(draw: st.DrawFn) -> Callable[[], Any]:
    labels = draw(
        sometimes(st.just({"q1": {"a": 2.0, "b": 0.0}}))
        | st.dictionaries(st.text(max_size=3), junk, max_size=2)
    )
    options = kwargs_of(
        draw,
        {
            "queries": sometimes(st.none() | st.just({"solar": "q1"})),
            "relevant_min": sometimes(st.floats(0, 3)),
            "output": sometimes(st.sampled_from(["binary", "graded"])),
            "missing": sometimes(st.none() | st.floats(0, 1)),
        },
    )
    query, chunks = draw(queries), draw(valid_chunks())
    return lambda: RecordedGrader(labels, **options).grade(query, chunks)


@door("guaranteed_band")
def _guaranteed_band(draw: st.DrawFn) -> Callable[[], Any]:
    scores = draw(sometimes(st.lists(st.floats(0, 1), max_size=30)))
    good = draw(sometimes(st.lists(st.booleans(), max_size=30)))
    options = kwargs_of(
        draw,
        {
            "target": sometimes(st.sampled_from(["recall", "precision"])),
            "eps": sometimes(st.floats(0.01, 0.5)),
            "delta": sometimes(st.floats(0.01, 0.5)),
            "centre": sometimes(st.floats(0, 1)),
            "window": sometimes(st.none() | st.integers(1, 30)),
        },
    )
    return lambda: guaranteed_band(scores, good, **options)


@door("binomial bounds")
def _binomial(draw: st.DrawFn) -> Callable[[], Any]:
    k, n = draw(sometimes(st.integers(0, 50))), draw(sometimes(st.integers(0, 50)))
    delta = draw(sometimes(st.floats(0.001, 0.5)))
    return lambda: (binomial_lower(k, n, delta), binomial_upper(k, n, delta))


def test_every_door_is_counted() -> None:
    assert TESTS + len(DOORS) == UNITS


@pytest.mark.parametrize("name", sorted(DOORS))
@FUZZ
@given(data=st.data())
def test_public_doors(name: str, data: st.DataObject) -> None:
    outcome(DOORS[name](cast(st.DrawFn, data.draw)))
