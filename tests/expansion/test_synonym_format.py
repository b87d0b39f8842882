"""The synonym file format: good lines parse to the right rules, bad ones name their line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crag_heuristic._exceptions import InputError, SynonymFormatError
from crag_heuristic._expansion.synonyms import SynonymRule, _split_line, load_synonyms, parse_rules

GOOD = """\ufeff# a comment
   # an indented comment

heart attack,   myocardial   infarction
big => large, huge
x, y => z
a\\, b, c
\\=> arrow, arrow
c#, c sharp
path\\\\name, backslash
Car, car, automobile\r
"""


def test_good_file_parses_to_rules_with_line_numbers() -> None:
    rules = parse_rules(GOOD, source="good.txt")
    assert rules == [
        SynonymRule("good.txt", 4, ("heart attack", "myocardial infarction")),
        SynonymRule("good.txt", 5, ("big",), ("large", "huge")),
        SynonymRule("good.txt", 6, ("x", "y"), ("z",)),
        SynonymRule("good.txt", 7, ("a, b", "c")),
        SynonymRule("good.txt", 8, ("=> arrow", "arrow")),
        SynonymRule("good.txt", 9, ("c#", "c sharp")),
        SynonymRule("good.txt", 10, ("path\\name", "backslash")),
        # case-insensitive duplicates in one line count once, the first spelling kept
        SynonymRule("good.txt", 11, ("Car", "automobile")),
    ]


def test_comments_and_blank_lines_only_give_no_rules() -> None:
    assert parse_rules("# nothing\n\n   \n#x, y\n") == []
    assert parse_rules("") == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("a =>", "empty right side of '=>'"),
        ("a => ,", "empty right side of '=>'"),
        ("=> b", "empty left side of '=>'"),
        ("a,,b", "empty term between commas"),
        ("a, b,", "empty term between commas"),
        (", a, b", "empty term between commas"),
        ("a, => b", "empty term between commas"),
        ("lonely", "a single term with no synonyms"),
        ("Same, same", "a single term with no synonyms"),
        ("a => b => c", "more than one '=>'"),
        ("a, ++", "term '++' has no letter or digit"),
        ("a, b\\", "the line ends with a lone '\\'"),
        (",", "no terms, only commas"),
    ],
)
def test_each_bad_line_is_reported_with_its_number(line: str, reason: str) -> None:
    text = f"# header\ngood, fine\n\n{line}\nnever, reached\n"
    with pytest.raises(SynonymFormatError) as info:
        parse_rules(text, source="bad.txt")
    error = info.value
    assert error.path == "bad.txt"
    assert error.line_number == 4
    assert error.line == line
    assert error.reason.startswith(reason)
    assert str(error).startswith("bad.txt:4: ")
    assert isinstance(error, InputError) and isinstance(error, ValueError)


def test_file_errors_carry_the_path(tmp_path) -> None:
    path = tmp_path / "mine.txt"
    path.write_text("ok, fine\nbroken =>\n", encoding="utf-8")
    with pytest.raises(SynonymFormatError) as info:
        load_synonyms(path)
    assert info.value.path == str(path)
    assert info.value.line_number == 2


def test_invalid_utf8_is_reported_on_its_line(tmp_path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"a, b\nc, d\ncaf\xe9, coffee\n")
    with pytest.raises(SynonymFormatError) as info:
        load_synonyms(path)
    assert info.value.line_number == 3
    assert info.value.reason == "not valid UTF-8"


def test_unreadable_sources_raise_input_error(tmp_path) -> None:
    with pytest.raises(InputError, match="cannot read synonym file"):
        load_synonyms(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="cannot read synonym file"):
        load_synonyms(tmp_path)  # a directory
    with pytest.raises(InputError, match="must be a path or a name"):
        load_synonyms(42)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(line=st.text(alphabet="ab ,=>", max_size=12))
def test_the_escape_free_fast_path_splits_like_the_escaping_scanner(line: str) -> None:
    # "\a" is just "a" to the scanner; a line with a backslash never takes the fast path
    def split(text: str) -> object:
        try:
            return _split_line(text, "s", 1)
        except SynonymFormatError as error:
            return error.reason

    assert split(line) == split(line.replace("a", "\\a"))
