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
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crag_heuristic import (
    CRAG,
    Chunk,
    CragError,
    Evaluator,
    EvaluatorConfig,
    MemoryCache,
    RouterConfig,
    ScoreKind,
    load_config,
)
from crag_heuristic import config as sections
from crag_heuristic._cli import main
from crag_heuristic._cli.common import EXIT_INTERNAL, read_chunks, read_docs, read_records
from crag_heuristic._text.corpus import CorpusStats
from crag_heuristic.testing import ListRetriever, RecordingWebSearcher, StaticExpander

TESTS = 7  # the tests below, which share the examples
TOTAL = int(os.environ.get("CRAG_FUZZ_EXAMPLES", "280"))
FUZZ = settings(
    max_examples=max(1, -(-TOTAL // TESTS)),  # at least TOTAL in all
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
