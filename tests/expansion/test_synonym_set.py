"""SynonymSet: lookup by stems, multi-word matching, merging, loading by path and name."""

from __future__ import annotations

import pytest

from crag_heuristic._exceptions import InputError
from crag_heuristic._expansion import synonyms as synonyms_module
from crag_heuristic._expansion.synonyms import (
    SynonymMatch,
    SynonymSet,
    load_synonyms,
    parse_synonyms,
)
from crag_heuristic._text.analyzer import Analyzer


def test_lookup_goes_by_stems_and_case(small_set: SynonymSet) -> None:
    assert small_set.lookup("heart attacks") == ("myocardial infarction",)
    assert small_set.lookup("Myocardial Infarctions") == ("heart attack",)
    assert small_set.lookup("CARS") == ("automobile", "auto", "motorcar")
    assert small_set.lookup("automobiles") == ("car", "auto", "motorcar")
    assert small_set.lookup("bicycle") == ()
    assert "Heart Attack" in small_set
    assert "bicycle" not in small_set
    assert 3 not in small_set


def test_mapping_is_one_way(small_set: SynonymSet) -> None:
    assert small_set.lookup("big") == ("large", "huge")
    assert small_set.lookup("large") == ()
    assert small_set.lookup("cardiac") == ()


def test_stop_word_terms_never_match_nor_get_added(small_set: SynonymSet) -> None:
    # "it" is a stop word: it has no analyzed form, so it matches nothing and
    # "information technology" has no synonym left
    assert small_set.lookup("it") == ()
    assert small_set.lookup("information technology") == ()
    assert "it" not in small_set


def test_items_len_sources_in_rule_order(small_set: SynonymSet) -> None:
    items = list(small_set.items())
    assert [term for term, _ in items] == [
        "car",
        "automobile",
        "auto",
        "motorcar",
        "big",
        "heart attack",
        "myocardial infarction",
        "heart",
    ]
    assert len(small_set) == 8
    assert small_set.sources == ("small.txt",)
    assert "terms=8" in repr(small_set)


def test_a_term_merges_its_lines_and_drops_duplicates() -> None:
    synonyms = parse_synonyms("car, automobile\ncar => motorcar, automobiles, cars\n")
    # "automobiles" is "automobile" after stemming; "cars" is the term itself
    assert synonyms.lookup("car") == ("automobile", "motorcar")
    assert synonyms.lookup("automobile") == ("car",)


def test_merge_keeps_order_and_dedupes() -> None:
    first = parse_synonyms("car, automobile\n", source="first.txt")
    second = parse_synonyms("car, auto, automobile\n", source="second.txt")
    assert first.merge(second).lookup("car") == ("automobile", "auto")
    assert second.merge(first).lookup("car") == ("auto", "automobile")
    assert first.merge(second).sources == ("first.txt", "second.txt")
    assert first.lookup("car") == ("automobile",)  # merge built a new set


def test_match_is_leftmost_longest_with_spans(small_set: SynonymSet) -> None:
    query = "Heart attacks: is my heart OK after the big car crash?"
    matches = small_set.match(query)
    assert matches == (
        SynonymMatch(0, 13, "Heart attacks", ("heart", "attack"), ("myocardial infarction",)),
        SynonymMatch(21, 26, "heart", ("heart",), ("cardiac",)),
        SynonymMatch(40, 43, "big", ("big",), ("large", "huge")),
        SynonymMatch(44, 47, "car", ("car",), ("automobile", "auto", "motorcar")),
    )
    for match in matches:
        assert query[match.start : match.end] == match.text


def test_multi_word_terms_skip_stop_words_inside() -> None:
    synonyms = parse_synonyms("shortness of breath, dyspnea\n")
    (match,) = synonyms.match("sudden shortness of the breath")
    assert match.text == "shortness of the breath"
    assert match.synonyms == ("dyspnea",)
    assert synonyms.match("shortness in patients") == ()


def test_another_analyzer_rekeys_the_set(small_set: SynonymSet) -> None:
    no_stop = Analyzer(stop_words=[])
    rekeyed = small_set.with_analyzer(no_stop)
    assert rekeyed.lookup("it") == ("information technology",)
    assert small_set.with_analyzer(Analyzer()) is small_set


def test_bundled_names_and_default_order() -> None:
    assert SynonymSet.bundled_names() == ("biomedical", "english", "finance", "programming")
    synonyms = SynonymSet.bundled(["finance", "biomedical"])
    assert synonyms.sources == ("bundled:finance", "bundled:biomedical")
    assert SynonymSet.bundled("finance").sources == ("bundled:finance",)


def test_all_bundled_sets_put_the_general_one_last(bundled_set: SynonymSet) -> None:
    assert bundled_set.sources == (
        "bundled:biomedical",
        "bundled:finance",
        "bundled:programming",
        "bundled:english",
    )
    # the curated biomedical synonyms come before WordNet's for the same term
    assert bundled_set.lookup("tumor")[:2] == ("tumour", "neoplasm")
    assert bundled_set.lookup("heart attack")[0] == "myocardial infarction"


def test_a_missing_data_package_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(synonyms_module, "BUNDLED_PACKAGE", "crag_heuristic.no_such_package")
    with pytest.raises(InputError, match="shipped synonym sets are missing"):
        SynonymSet.bundled_names()


def test_unknown_bundled_name_lists_the_shipped_ones() -> None:
    with pytest.raises(InputError, match="shipped: biomedical, english, finance, programming"):
        SynonymSet.bundled(["klingon"])


def test_load_synonyms_takes_paths_and_set_names(tmp_path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("heart attack, coronary\n", encoding="utf-8")
    synonyms = load_synonyms(mine, "biomedical")
    assert synonyms.sources == (str(mine), "bundled:biomedical")
    assert synonyms.lookup("heart attack")[:2] == ("coronary", "myocardial infarction")
    # a str with a dot or a slash is always a path, even if it looks like a name
    with pytest.raises(InputError, match="cannot read"):
        load_synonyms("./biomedical")
    # a plain name that is not shipped is a path too
    with pytest.raises(InputError, match="cannot read"):
        load_synonyms("klingon")
    assert len(load_synonyms()) == 0
