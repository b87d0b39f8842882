"""The shipped synonym files: they parse, have sane sizes and respect the selection rules."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from crag_heuristic._expansion.synonyms import BUNDLED_PACKAGE, SynonymSet, parse_rules
from crag_heuristic._text.analyzer import DEFAULT_STOP_WORDS, Analyzer

ROOT = Path(__file__).resolve().parents[2]
DOMAIN_SETS = ("biomedical", "finance", "programming")


def _text(name: str) -> str:
    return resources.files(BUNDLED_PACKAGE).joinpath(f"{name}.txt").read_text(encoding="utf-8")


def test_resources_are_found_through_importlib() -> None:
    folder = resources.files(BUNDLED_PACKAGE)
    names = {entry.name for entry in folder.iterdir()}
    for name in ("english", *DOMAIN_SETS):
        assert f"{name}.txt" in names
    assert {"README.md", "WORDNET_LICENSE.txt", "__init__.py"} <= names
    assert _text("biomedical") == (
        ROOT / "crag_heuristic" / "synonyms" / "biomedical.txt"
    ).read_text("utf-8")


@pytest.mark.parametrize("name", DOMAIN_SETS)
def test_domain_sets_parse_and_have_50_to_200_rules(name: str) -> None:
    rules = parse_rules(_text(name), source=name)
    assert 50 <= len(rules) <= 200
    assert len(SynonymSet(rules)) > len(rules)


@pytest.mark.parametrize("name", DOMAIN_SETS)
def test_no_domain_term_collapses_onto_a_shorter_one(name: str) -> None:
    # a multi-word term whose stop words fall away must not become a one-word key:
    # "t-bill" would read as "bill", "down payment" as "payment"
    analyzer = Analyzer()
    for rule in parse_rules(_text(name), source=name):
        for term in (*rule.terms, *(rule.mapped_to or ())):
            tokens, key = analyzer.tokens(term), analyzer.terms(term)
            assert key, f"{name}: {term!r} is only stop words"
            assert len(tokens) == 1 or len(key) > 1, f"{name}: {term!r} reads as {key}"


def test_domain_sets_do_not_share_keys() -> None:
    # every shipped set loads by default: a term of one domain must not be keyed in another
    seen: dict[tuple[str, ...], str] = {}
    analyzer = Analyzer()
    for name in DOMAIN_SETS:
        for rule in parse_rules(_text(name), source=name):
            for term in rule.terms:
                key = tuple(analyzer.terms(term))
                assert seen.setdefault(key, name) == name, f"{term!r} in {seen[key]} and {name}"


def test_english_set_size_and_caps() -> None:
    text = _text("english")
    size = len(text.encode("utf-8"))
    assert 100_000 < size < 2_000_000
    english = SynonymSet.bundled(["english"])
    assert 5_000 < len(english) < 60_000
    too_many = [(term, syns) for term, syns in english.items() if len(syns) > 3]
    assert too_many == []


def test_english_set_has_no_stop_words_or_proper_nouns() -> None:
    for rule in parse_rules(_text("english"), source="english"):
        assert rule.mapped_to is None
        for term in rule.terms:
            assert term == term.lower(), term
            assert not set(Analyzer.tokens(term)) & DEFAULT_STOP_WORDS, term
            assert len(term.split()) <= 3, term


def test_english_set_keeps_ambiguous_words_out(bundled_set: SynonymSet) -> None:
    english = SynonymSet.bundled(["english"])
    assert english.lookup("bank") == ()  # no dominant sense
    assert english.lookup("run") == ()
    assert english.lookup("flat") == ()  # "flatness" must not answer for it
    assert english.lookup("car") == ("automobile", "auto", "motorcar")
    assert "machine" not in english.lookup("car")  # the car sense is not machine's main one


def test_english_header_and_licence() -> None:
    header = _text("english").split("\n\n")[0]
    assert "WordNet 3.0" in header
    assert "python tools/build_wordnet_synonyms.py" in header
    assert "WORDNET_LICENSE.txt" in header
    licence = resources.files(BUNDLED_PACKAGE).joinpath("WORDNET_LICENSE.txt").read_text("utf-8")
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in licence
