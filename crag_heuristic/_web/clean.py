"""Turn a web snippet into plain text: no tags, no entities, bounded length.

Engines hand back titles and snippets with markup (``<b>`` around the matched
words, ``&amp;``, sometimes whole paragraphs of HTML) and SearXNG passes them
through untouched and untruncated. :func:`clean_text`:

1. strips tags with the standard library's :class:`html.parser.HTMLParser`
   (which also decodes entities), dropping the content of ``<script>``,
   ``<style>`` and similar elements and putting a space where a block element
   or ``<br>`` would break the line, so words never glue together;
2. drops control characters and collapses every run of white space to one
   space;
3. caps the result to ``max_chars``, cutting at the last word boundary when one
   lies in the final fifth, and marks the cut with an ellipsis (``…``), which
   counts within the cap.

Text without ``<`` or ``&`` skips the parser (the common case).
"""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser

ELLIPSIS = "…"
_SKIP_CONTENT = frozenset({"script", "style", "noscript", "template", "head", "title", "svg"})
_BREAKING = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
        "figcaption", "figure", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "header",
        "hr", "li", "main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "tr",
        "ul",
    }
)  # fmt: skip
_WHITESPACE = re.compile(r"\s+")
# C0/C1 controls other than white space, and the zero-width format characters.
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff]")
_WORD_CUT_WINDOW = 0.2


class _TextExtractor(HTMLParser):
    """Collects the text of an HTML fragment (entities decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_CONTENT:
            self._skip_depth += 1
        elif tag in _BREAKING:
            self.parts.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BREAKING:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_CONTENT:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _BREAKING:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def _strip_markup(text: str) -> str:
    parser = _TextExtractor()
    parser.feed(text)
    parser.close()
    return "".join(parser.parts)


def _cap(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    room = max_chars - len(ELLIPSIS)
    if room <= 0:
        return text[:max_chars]
    cut = text[:room]
    if text[room] != " ":  # mid-word: back up to the last space if it is near
        space = cut.rfind(" ")
        if space >= room * (1 - _WORD_CUT_WINDOW):
            cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


def clean_text(text: str, max_chars: int | None = None) -> str:
    """Plain, single-spaced text from a snippet that may hold HTML.

    Args:
        text: the raw title or snippet.
        max_chars: the longest result allowed (ellipsis included); ``None``
            for no cap.

    >>> clean_text("  Solar <b>panels</b> &amp; wind<br>power ")
    'Solar panels & wind power'
    >>> clean_text("alpha beta gamma", max_chars=13)
    'alpha beta…'
    >>> clean_text("one two three four", max_chars=14)
    'one two three…'
    """
    if "<" in text or "&" in text:
        text = _strip_markup(text)
    text = unicodedata.normalize("NFC", text)
    text = _INVISIBLE.sub("", text)
    text = _WHITESPACE.sub(" ", text).strip()
    if max_chars is not None:
        text = _cap(text, max_chars)
    return text
