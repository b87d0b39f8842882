from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crag_heuristic import ConfigError
from crag_heuristic._text.analyzer import DEFAULT_STOP_WORDS, TextStats, split_sentences
from crag_heuristic.text import Analyzer


@pytest.fixture(scope="module")
def analyzer() -> Analyzer:
    return Analyzer()


def test_whole_tokens_only_cat_is_not_category(analyzer: Analyzer) -> None:
    assert analyzer.terms("category") == ["categori"]
    assert "cat" not in analyzer.terms("category catalogue")
    assert analyzer.terms("Cats") == ["cat"]


def test_stemming_joins_inflections(analyzer: Analyzer) -> None:
    assert analyzer.terms("running runs") == ["run", "run"]
    assert analyzer.terms("cells cell") == ["cell", "cell"]


def test_stop_words_are_dropped_from_terms(analyzer: Analyzer) -> None:
    assert analyzer.terms("What is the capital of France?") == ["capit", "franc"]


def test_query_of_only_stop_words_falls_back_to_them(analyzer: Analyzer) -> None:
    terms = analyzer.query_terms("What is it?")
    assert terms.all_stop_words is True
    assert terms.terms == ("what", "is", "it")


def test_query_terms_are_distinct_in_order(analyzer: Analyzer) -> None:
    assert analyzer.query_terms("energy of solar energy").terms == ("energi", "solar")


def test_query_without_word_tokens_has_no_terms(analyzer: Analyzer) -> None:
    terms = analyzer.query_terms("?!  ...")
    assert terms.terms == () and terms.n_tokens == 0 and not terms.all_stop_words


def test_unicode_is_normalised_and_case_folded(analyzer: Analyzer) -> None:
    assert analyzer.tokens("ﬁnance STRASSE Straße") == ["finance", "strasse", "strasse"]


def test_control_characters_and_lone_surrogates_split_tokens(analyzer: Analyzer) -> None:
    assert analyzer.tokens("abc\x00def\udcffghi\x1bjkl") == ["abc", "def", "ghi", "jkl"]


def test_analyze_counts_all_tokens_but_keeps_content_terms(analyzer: Analyzer) -> None:
    stats = analyzer.analyze("The cats and the dogs.")
    assert stats.n_tokens == 5
    assert stats.term_set == frozenset({"cat", "dog"})
    assert stats.stop_set == frozenset({"the", "and"})


def test_custom_stop_words_change_the_fingerprint() -> None:
    default, custom = Analyzer(), Analyzer(stop_words=["foo"])
    assert custom.terms("foo the bar") == ["the", "bar"]
    assert default.fingerprint != custom.fingerprint
    assert default == Analyzer()


def test_the_stated_default_fingerprint_is_the_computed_one() -> None:
    """The default analyzer's settings are stated (the first Analyzer() of a process hashes
    nothing): they are what hashing the default stop words gives."""
    from crag_heuristic._text import analyzer as module

    assert module._settings("english", DEFAULT_STOP_WORDS) == (
        DEFAULT_STOP_WORDS,
        module._DEFAULT_FINGERPRINT,
    )
    assert Analyzer().fingerprint == module._DEFAULT_FINGERPRINT
    assert Analyzer(stop_words=sorted(DEFAULT_STOP_WORDS)).fingerprint == Analyzer().fingerprint


def test_unknown_language_fails_at_construction() -> None:
    with pytest.raises(ConfigError, match="not a Snowball language"):
        Analyzer(language="klingon")


def test_analyzer_is_thread_safe(analyzer: Analyzer) -> None:
    words = [f"running{i} jumping{i} categories{i}" for i in range(200)]
    expected = [analyzer.terms(w) for w in words]
    fresh = Analyzer()
    results: dict[int, list[list[str]]] = {}

    def work(n: int) -> None:
        results[n] = [fresh.terms(w) for w in words]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(result == expected for result in results.values())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Dr. Smith et al. found it. Next.", ["Dr. Smith et al. found it.", "Next."]),
        ("See Fig. 2 and e.g. this. Done.", ["See Fig. 2 and e.g. this.", "Done."]),
        ("J. Doe wrote 3.5 pages. End.", ["J. Doe wrote 3.5 pages.", "End."]),
        ("Lower case. after a stop stays.", ["Lower case. after a stop stays."]),
        ('He said "Stop." Then left.', ['He said "Stop."', "Then left."]),
        ("line one\nline two\n\n  line three  ", ["line one", "line two", "line three"]),
        ("", []),
        ("   \n  ", []),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_ascii_fast_path_matches_the_unicode_tokeniser() -> None:
    import re
    import string

    pattern = re.compile(r"[^\W_]+")
    text = string.printable * 3 + " snake_case x-ray C3PO tab\there \x00\x07\x7f end"
    assert Analyzer.tokens(text) == pattern.findall(text.casefold())
    assert Analyzer.tokens(text + "é") == pattern.findall((text + "é").casefold())


# -- the fast tokeniser and term cache against the plain definition --------------------------


def _reference_tokens(text: str) -> list[str]:
    import re
    import unicodedata

    return re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", text).casefold())


def _reference_terms(text: str, stop_words: frozenset[str]) -> list[str]:
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    return [stemmer.stemWord(t) for t in _reference_tokens(text) if t not in stop_words]


def _reference_stats(text: str, stop_words: frozenset[str]) -> TextStats:
    from collections import Counter

    tokens = _reference_tokens(text)
    terms = _reference_terms(text, stop_words)
    counts = Counter(terms)
    return TextStats(
        term_set=frozenset(counts),
        stop_set=frozenset(t for t in tokens if t in stop_words),
        n_tokens=len(tokens),
        term_counts=dict(counts),
        n_terms=len(terms),
    )


TRICKY_TEXTS = [
    "",
    "   \t\n ",
    "ﬁnance ﬂow Ⅻ ① x² H₂O ½ ｆｕｌｌｗｉｄｔｈ",  # NFKC compatibility forms
    "İstanbul ΣΊΣΥΦΟΣ ὈΔΥΣΣΕΎΣ Straße ǅemal ﬀ",  # case folding beyond lower()
    "e\u0301te\u0301 cafe\u0301 A\u030a",  # combining marks (NFKC composes them)
    "10–20 ± 3.5 µm ≥ 5 % — “quoted” ‘single’ «guillemets» …",  # non-ASCII punctuation
    "東京都 の 人口 はいくら ですか 한국어 العربية ١٢٣ हिन्दी ๑๒๓",  # scripts and digits
    "abc\x00def\x01ghi\x1b[0mjkl\x7fmno\x85pqr\u2028stu\u200bvwx\ufeffyz",  # controls, format
    "lone \ud800 high \udfff low a\udcffb surrogates \ud83d\ude00",
    "snake_case x-ray C3PO e-mail U.S.A. 3.14159 #hashtag @user",
    "emoji 😀🚀 flags 🇫🇷 ZWJ 👩‍💻 keycap 1️⃣",
    "\u1680ogham\u3000ideographic\u00a0nbsp\u2003em\u180emongolian",
    "The the THE tHe and AND running runs ran cells cell",
]


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_fast_tokens_equal_the_reference(text: str) -> None:
    assert Analyzer.tokens(text) == _reference_tokens(text)


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_fast_analysis_equals_the_reference(text: str) -> None:
    for analyzer in (Analyzer(), Analyzer()):  # a fresh cache, then a warm one
        analyzer.analyze(text)
        assert analyzer.analyze(text) == _reference_stats(text, analyzer.stop_words)
        assert analyzer.terms(text) == _reference_terms(text, analyzer.stop_words)


@pytest.mark.slow
def test_every_code_point_tokenises_as_the_reference() -> None:
    every = "".join(map(chr, range(0x110000)))  # surrogates, controls, unassigned: all of it
    assert Analyzer.tokens(every) == _reference_tokens(every)
    spaced = " ".join(every[i : i + 3] for i in range(0, len(every), 3))
    assert Analyzer.tokens(spaced) == _reference_tokens(spaced)


def test_one_megabyte_text_analyses_as_the_reference() -> None:
    import random

    rng = random.Random(3)
    pieces = [*TRICKY_TEXTS, "Cells divide; running water.", "word"] * 5
    words = []
    size = 0
    while size < 1_000_000:
        piece = rng.choice(pieces) + rng.choice([" ", "\n", "-", "\u2013", ""])
        words.append(piece)
        size += len(piece)
    text = "".join(words)
    analyzer = Analyzer()
    assert analyzer.analyze(text) == _reference_stats(text, analyzer.stop_words)
    assert analyzer.terms(text) == _reference_terms(text, analyzer.stop_words)


def test_term_cache_overflow_keeps_results_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    import crag_heuristic._text.analyzer as text_module

    monkeypatch.setattr(text_module, "_STEM_CACHE_LIMIT", 3)
    analyzer = Analyzer()
    texts = ["running cells of the category", "cats and dogs ran", *TRICKY_TEXTS]
    for text in texts:
        assert analyzer.analyze(text) == _reference_stats(text, analyzer.stop_words)
        assert analyzer.terms(text) == _reference_terms(text, analyzer.stop_words)
    # the cache is emptied when a text would push it past the limit
    assert len(analyzer._terms) <= max(len(set(_reference_tokens(t))) for t in texts)


def test_stem_of_a_stop_word_is_its_snowball_stem(analyzer: Analyzer) -> None:
    import Stemmer

    analyzer.analyze("was being")  # cached as stop words
    assert analyzer.stem("being") == Stemmer.Stemmer("english").stemWord("being")
    assert analyzer.stem("cells") == "cell"


_ANY_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=200)
_WORDY_TEXT = st.lists(
    st.one_of(
        st.sampled_from(["The", "cells", "cell", "running", "ran", "and", "ﬁnance", "Straße"]),
        st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=4),
    ),
    max_size=40,
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(_ANY_TEXT, _WORDY_TEXT))
def test_fast_path_equals_the_reference_on_any_text(text: str) -> None:
    analyzer = _PROPERTY_ANALYZER  # shared: its cache warms up across examples
    assert Analyzer.tokens(text) == _reference_tokens(text)
    assert analyzer.analyze(text) == _reference_stats(text, analyzer.stop_words)
    assert analyzer.terms(text) == _reference_terms(text, analyzer.stop_words)


_PROPERTY_ANALYZER = Analyzer()


# Words of ASCII letters glued by non-ASCII characters of every kind (letters with and
# without a case folding, punctuation, symbols, marks, spaces, surrogates), so that
# most generated texts take the per-character replacement path, a few the table path.
_GLUE = st.characters(codec=None, min_codepoint=0x80, exclude_categories=())
_GLUED_TEXT = st.lists(
    st.one_of(st.sampled_from(["Cells", "the", "DNA", "x", "Straße", "ΣΊΣΥΦΟΣ", "10"]), _GLUE),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_GLUED_TEXT, many=st.lists(_GLUE, min_size=17, max_size=40, unique=True))
def test_non_ascii_tokens_equal_the_reference(text: str, many: list[str]) -> None:
    assert Analyzer.tokens(text) == _reference_tokens(text)
    soup = text + " a".join(many)  # more distinct characters than str.replace is used for
    assert Analyzer.tokens(soup) == _reference_tokens(soup)


def test_text_stats_are_immutable_and_compare_by_value() -> None:
    import pickle

    stats = Analyzer().analyze("The cats and the dogs.")
    with pytest.raises(AttributeError, match="immutable"):
        stats.n_tokens = 3
    made: list[int] = []

    def stop_words() -> frozenset[str]:
        made.append(1)
        return frozenset({"the", "and"})

    lazy = TextStats(stats.term_set, stop_words, stats.n_tokens, dict(stats.term_counts), 2)
    assert made == []  # not made until asked for
    assert lazy == stats and made == [1]
    assert lazy.stop_set == frozenset({"the", "and"}) and made == [1]  # made once
    assert pickle.loads(pickle.dumps(lazy)) == stats
    assert "stop_set=frozenset" in repr(lazy)
    with pytest.raises(TypeError):
        hash(stats)  # term_counts is a dict, as with the dataclass it was


# Compatibility characters (NFKC maps them), combining marks that compose with what
# precedes them, Hangul jamo that compose with each other, and plain letters: the mix
# where replacing a character by its own NFKC first could go wrong, if anywhere.
_NFKC_MIX = st.lists(
    st.sampled_from(
        [
            *("ﬁ", "µ", "²", "½", "Ⅻ", "ｆ", "㎏", "ſ", "ǆ", "\u212b", "Å", "e", "o", "A", " "),
            *("\u0301", "\u0308", "\u0323", "\u0327", "\u0345"),  # combining marks
            *("\u1100", "\u1161", "\u11a8", "\uac00"),  # Hangul jamo and a syllable
        ]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=_NFKC_MIX)
def test_nfkc_by_characters_first_equals_nfkc(text: str) -> None:
    import unicodedata

    from crag_heuristic._text.analyzer import _nfkc

    wide = "".join(c for c in text if not c.isascii())
    assert _nfkc(text, wide) == unicodedata.normalize("NFKC", text)


def test_an_analyzer_asked_for_the_c_extension_says_when_it_is_not_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from crag_heuristic._exceptions import ConfigError
    from crag_heuristic._text import analyzer as _text

    monkeypatch.setattr(_text, "TermCounter", None)  # an install without a C compiler
    with pytest.raises(ConfigError, match="not built"):
        Analyzer(native=True)
    assert not Analyzer().native
    assert Analyzer().analyze("Running cats") == Analyzer(native=False).analyze("Running cats")


def test_analyzers_of_the_same_settings_share_their_term_cache() -> None:
    """A new ``Analyzer()`` (a new ``Evaluator()``) starts with the stems the process
    knows: analyzers of the same settings share the cache; other settings, a subclass
    (it may stem otherwise) and a build's counting copy have their own."""
    from crag_heuristic._text.counting import counting_copy

    first, second = Analyzer(), Analyzer()
    assert first._terms is second._terms and first._counter is second._counter
    first.terms("photovoltaic efficiency")
    assert second._terms["photovoltaic"] == "photovolta"
    assert Analyzer(stop_words=["the"])._terms is not first._terms
    assert Analyzer(native=False)._terms is not first._terms  # another path, another cache

    class Sub(Analyzer):
        pass

    assert Sub()._terms is not first._terms
    copy = counting_copy(first)
    assert copy._terms is not first._terms and copy._terms == {}
    assert copy.fingerprint == first.fingerprint and copy.analyze("bees") == first.analyze("bees")
    # another cache limit, another cache (the limit bounds the cache it is given)
    small = Analyzer()
    small.cache_limit = 5
    assert small._terms is not first._terms and first._terms is Analyzer()._terms
