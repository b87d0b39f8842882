"""Cleaning web titles and snippets: tags, entities, white space, the cap."""

from __future__ import annotations

import pytest

from crag_heuristic._web.clean import clean_text


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain text", "plain text"),
        ("Solar <b>panels</b> convert", "Solar panels convert"),
        ("Tom &amp; Jerry &lt;3 &#8364;5 &eacute;t&eacute;", "Tom & Jerry <3 €5 été"),
        ("one<br>two<br/>three", "one two three"),
        ("<p>first</p><p>second</p>", "first second"),
        ("<ul><li>a</li><li>b</li></ul>", "a b"),
        ("keep<script>alert('x')</script> this", "keep this"),
        ("<style>p {color: red}</style>visible", "visible"),
        ("  lots \n\n of\t\twhite   space  ", "lots of white space"),
        ("zero\u200bwidth and\x00control\x07chars", "zerowidth andcontrolchars"),
        ("<div><span>nested <em>tags</em></span></div>", "nested tags"),
        ("a < b and c > d", "a < b and c > d"),
        ("unclosed <b>bold", "unclosed bold"),
        ("Cafe\u0301", "Café"),  # NFC: e + combining acute -> é
        ("", ""),
    ],
)
def test_clean_text(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


def test_cap_counts_the_ellipsis_and_cuts_at_a_near_word_boundary() -> None:
    # room = 13 - 1 = 12 -> "alpha beta g"; the space at 10 is within the last fifth.
    assert clean_text("alpha beta gamma", max_chars=13) == "alpha beta…"
    # the cut falls right before a space: no backing up.
    assert clean_text("one two three four", max_chars=14) == "one two three…"
    # no space near the cut: a hard cut.
    assert clean_text("abcdefghijklmnop", max_chars=6) == "abcde…"


def test_text_within_the_cap_is_untouched() -> None:
    assert clean_text("short", max_chars=5) == "short"


def test_cap_applies_after_cleaning() -> None:
    raw = "<b>" * 50 + "word " * 10_000
    cleaned = clean_text(raw, max_chars=100)
    assert len(cleaned) <= 100
    assert cleaned.endswith("…")
    assert "<" not in cleaned


def test_tiny_cap() -> None:
    assert clean_text("abcdef", max_chars=1) == "a"
