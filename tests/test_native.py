"""The optional C extension (``crag_heuristic._text._native``) against the Python path it
replaces: the same tokens, counts (in the same order), stop words and lengths on ASCII,
web and adversarial Unicode text, and the same statistics and evaluations built on them.

The Python path is selected by an analyzer without the extension's table
(``Analyzer(native=False)``: what an install without a C compiler runs).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crag_heuristic import Chunk, ConfigError, Evaluator, ScoreKind
from crag_heuristic._text.analyzer import TextStats
from crag_heuristic.text import Analyzer, CorpusStats

if importlib.util.find_spec("crag_heuristic._text._native") is None:
    # CI builds it (a C compiler is there): a build that silently failed must not pass
    if os.environ.get("CI"):
        pytest.fail("the C extension crag_heuristic._text._native was not built", pytrace=False)
    pytest.skip("the C extension is not built", allow_module_level=True)
from crag_heuristic._text._native import TermCounter  # after the check

# characters that test the token rules: combining marks, astral letters and symbols,
# digits of other scripts, underscores, apostrophes, NFKC-sensitive forms, case-folding
# expansions, Unicode spaces, control characters and lone surrogates
_HARD = (
    "e\u0301 \u0307 \u0338 İ ß ẞ ς Σ Ǆ ǅ \u212a \u2126 ﬁ ﬃ ① ½ ℃ Ⅻ ｶﾞ \u1100\u1161 가 "
    "𝐀 𝔷 😀 𠀀 ٣ ३ １２ ᠐ _ __a_b_ ' ’ l'été o’clock \u00a0 \u2003 \u3000 \u1680 \u200b "
    "\u200d \x00 \x1c \x1f \t \n \ud800 \udcff µ ° × ± – — “ ” … ‿ ⁀ Ⅰ ⅰ ǈ ῼ ᾳ ﬅ ㎏ ㍻"
).split(" ")
_WORDS = "the cells of a cell and running runs The CATS dogs bees honey what is".split()


def python_analyzer() -> Analyzer:
    analyzer = Analyzer(native=False)  # the Python path, as without the extension
    assert not analyzer.native
    return analyzer


def test_the_native_option() -> None:
    assert Analyzer().native and Analyzer(native=True).native
    assert Analyzer(native=False) == Analyzer()  # the same analyses: the same fingerprint
    for option in (None, True, False):  # a pickled analyzer (a Dask worker's) keeps the choice
        copy = pickle.loads(pickle.dumps(Analyzer(native=option)))
        assert copy.native is (option is not False)
    for wrong in ("yes", 0, 1):  # 0 == False and 1 == True, but neither is a choice
        with pytest.raises(ConfigError, match="native"):
            Analyzer(native=wrong)  # type: ignore[arg-type]


def _fields(stats: TextStats) -> tuple[object, ...]:
    # term_counts as a list: the order of the terms counts too (stored analyses keep it)
    return (
        list(stats.term_counts.items()),
        stats.term_set,
        stats.stop_set,
        stats.n_tokens,
        stats.n_terms,
    )


def _native_tokens(text: str) -> list[str]:
    """The tokens the extension reads from ``text``: a fresh table lacks them all, so
    ``count`` returns every one, in order."""
    out = TermCounter().count(*Analyzer()._native_input(text))
    return out if isinstance(out, list) else []


def _soup(rng: random.Random, n: int) -> str:
    pool = _HARD + _WORDS
    return "".join(rng.choice(pool) + rng.choice(["", " ", "-", "", "."]) for _ in range(n))


def _assert_same(text: str, fast: Analyzer, slow: Analyzer) -> None:
    assert _native_tokens(text) == Analyzer.tokens(text), repr(text)
    counter = fast._counter
    assert counter is not None
    for on_demand in (False, True):
        stats = fast._analyze_native(counter, text, on_demand=on_demand)
        assert stats is not None, text  # served by the extension, not the fallback
        assert _fields(stats) == _fields(slow._analyze_python(text, on_demand=on_demand)), text


def test_native_tokens_and_counts_equal_the_python_path_on_generated_text() -> None:
    rng = random.Random(5)
    fast, slow = Analyzer(), python_analyzer()
    assert fast._counter is not None
    texts = [" ".join(rng.choices(_WORDS, k=rng.randint(0, 60))) for _ in range(100)]
    texts += [_soup(rng, rng.randint(0, 80)) for _ in range(300)]
    texts += ["", " ", "...", "a", "A" * 5000, "é" * 3000, "the the the", "x" + "\u0301" * 50]
    for text in texts:
        _assert_same(text, fast, slow)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=80))
def test_native_equals_python_on_any_text(text: str) -> None:
    _assert_same(text, Analyzer(), python_analyzer())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_HARD + _WORDS), max_size=40).map(" ".join))
def test_native_equals_python_on_adversarial_words(text: str) -> None:
    _assert_same(text, Analyzer(), python_analyzer())


def test_a_full_table_is_emptied_and_the_counts_stay_right() -> None:
    rng = random.Random(9)
    fast, slow = Analyzer(), python_analyzer()
    fast.cache_limit = 50
    assert fast._counter is not None
    for _ in range(200):
        _assert_same(_soup(rng, 40), fast, slow)
    assert len(fast._counter) <= 50 + 80  # the limit, and one text's tokens past it


def test_the_table_is_emptied_by_distinct_tokens_like_the_python_path() -> None:
    fast, slow = Analyzer(), python_analyzer()
    fast.cache_limit = slow.cache_limit = 5
    assert fast._counter is not None
    _assert_same("alpha beta", fast, slow)
    _assert_same("q q q q", fast, slow)  # one new token, four times: 3 <= 5, kept
    assert len(fast._counter) == len(slow._terms) == 3


def test_threads_sharing_one_analyzer_get_the_python_results() -> None:
    rng = random.Random(3)
    texts = [_soup(rng, 50) for _ in range(200)]
    slow = python_analyzer()
    expected = [_fields(slow.analyze(t)) for t in texts]
    shared = Analyzer()
    shared.cache_limit = 40  # the table is emptied often, under the other threads
    wrong: list[int] = []

    def work(offset: int) -> None:
        for i in range(len(texts)):
            j = (i + offset) % len(texts)
            if _fields(shared.analyze(texts[j])) != expected[j]:
                wrong.append(j)

    threads = [threading.Thread(target=work, args=(k * 50,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_statistics_and_evaluations_are_the_same_with_either_path() -> None:
    rng = random.Random(1)
    texts = [
        _soup(rng, 30) if i % 4 == 0 else " ".join(rng.choices(_WORDS, k=40)) for i in range(80)
    ]
    ids = [f"d{i}" for i in range(len(texts))]
    fast = CorpusStats.build(texts, ids=ids, analyses=True)
    slow = CorpusStats.build(texts, ids=ids, analyses=True, analyzer=python_analyzer())
    assert fast.analyses is not None and slow.analyses is not None
    assert fast.analyses.digest() == slow.analyses.digest()
    assert fast.fingerprint() == slow.fingerprint()
    chunks = [
        Chunk(id=f"new{i}", text=t, score=0.5, score_kind=ScoreKind.COSINE)
        for i, t in enumerate(texts[:10])
    ]
    query = "how do honey bees dance café"
    expected = Evaluator(all_evidence=True, analyzer=python_analyzer()).evaluate(
        query, chunks, slow
    )
    got = Evaluator(all_evidence=True).evaluate(query, chunks, fast)
    assert json.dumps(got.to_dict(), sort_keys=True) == json.dumps(
        expected.to_dict(), sort_keys=True
    )


def test_bad_input_to_the_table_is_a_typed_error() -> None:
    table = TermCounter()
    with pytest.raises(TypeError):
        table.update({"token": 3})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        table.update([("token", "term")])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        table.count("café", {ord("a"): "a"})  # an ASCII code point in the folds
    with pytest.raises(ValueError):
        table.count("café", {0x110000: "x"})
    with pytest.raises(TypeError):
        table.count(b"bytes", {})  # type: ignore[arg-type]
    table.update({"caf": "caf", "the": " "})
    assert table.count("The CAF", {}, True) == ({"caf": 1}, 2, 1, ["the"])
    table.clear()
    assert len(table) == 0 and table.count("the", {}) == ["the"]


def test_row_counts_equal_the_numpy_path() -> None:
    import numpy as np

    from crag_heuristic._text._native import row_counts

    rng = random.Random(2)
    for repeat in (1, 300, 70_000):  # counts stored in 1, 2 and 4 bytes
        texts = [" ".join(rng.choices(_WORDS, k=30)) for _ in range(40)]
        texts.append("zebra " * repeat)
        stats = CorpusStats.build(texts, analyses=True)
        analyses = stats.analyses
        assert analyses is not None
        a = analyses.arrays()
        terms = ["cell", "zebra", "bee", "never-held", "dog", "run"]
        wanted = [analyses._position(t) for t in terms]
        for rows in ([], [0], list(range(len(texts))), [40, 3, 3, 40]):
            table = analyses._row_table()[np.array(rows, dtype=np.int64)]
            got = row_counts(a["term_ids"], a["term_counts"], table, wanted)
            assert got == analyses._counts_numpy(table, wanted)
            assert row_counts(a["term_ids"], a["term_counts"], table, []) == [[] for _ in rows]
        assert a["term_counts"].itemsize == {1: 1, 300: 2, 70_000: 4}[repeat]


def test_row_counts_refuse_arrays_of_the_wrong_shape() -> None:
    import numpy as np

    from crag_heuristic._text._native import row_counts

    ids = np.array([1, 2, 3], dtype=np.uint32)
    counts = np.array([1, 1, 2], dtype=np.uint8)
    table = np.array([[0, 0, 0, 0, 3]], dtype=np.int64)
    assert row_counts(ids, counts, table, [3, 9, -1]) == [[2, 0, 0]]
    with pytest.raises(ValueError):
        row_counts(ids.astype(np.int64), counts, table, [1])
    with pytest.raises(ValueError):
        row_counts(ids, counts[:2], table, [1])
    with pytest.raises(ValueError):
        row_counts(ids, counts, table[:, :4].copy(), [1])
    with pytest.raises(ValueError):
        row_counts(ids, counts, np.array([[0, 0, 0, 2, 5]], dtype=np.int64), [1])
    with pytest.raises(TypeError):
        row_counts(ids, counts, table, (1,))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        row_counts(ids, counts, table, ["x"])  # type: ignore[list-item]


def test_a_call_made_inside_a_count_changes_nothing() -> None:
    """An allocation inside a count may start the garbage collector, whose finalizers run
    any Python code (and may let another thread in). Here a term whose ``__hash__`` runs
    Python code stands in for one: inside the count, another count answers None (the
    analyzer then takes the Python path), and update and clear change nothing."""
    counter = TermCounter()
    inside: list[object] = []

    class Hook(str):
        def __hash__(self) -> int:
            inside.append(counter.count("alpha beta", {}))
            counter.clear()
            counter.update({"gamma": "gamma"})
            inside.append(len(counter))
            return str.__hash__(self)

    counter.update({"alpha": Hook("alpha"), "beta": "beta"})
    assert counter.count("alpha beta alpha", {}) == ({"alpha": 2, "beta": 1}, 3, 0, None)
    assert inside[:2] == [None, 2]  # refused inside; the table kept its two tokens
    assert len(counter) == 2


def test_an_analyzer_asked_from_inside_its_own_count_takes_the_python_path() -> None:
    analyzer = Analyzer()
    analyzer._own_caches()  # its table is tampered with below: not the one it shares
    counter = analyzer._counter
    assert counter is not None
    nested: list[TextStats] = []

    class Hook(str):
        def __hash__(self) -> int:
            if not nested:
                nested.append(analyzer.analyze("nested texts of running cats"))
            return str.__hash__(self)

    analyzer.analyze("cats")  # the table learns the token
    counter.update({"cats": Hook("cat")})
    outer = analyzer.analyze("cats and dogs cats")
    assert _fields(outer) == _fields(python_analyzer().analyze("cats and dogs cats"))
    assert _fields(nested[0]) == _fields(python_analyzer().analyze("nested texts of running cats"))
