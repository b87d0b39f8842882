from __future__ import annotations

import threading

import pytest

from crag_heuristic._text import split_sentences
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


def test_unknown_language_fails_at_construction() -> None:
    with pytest.raises(KeyError):
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
