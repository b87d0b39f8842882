"""Synonym files in the Solr/Elasticsearch format, and the set they make.

The format (one rule a line, as Solr's ``SynonymGraphFilter`` reads it)::

    # a comment: a line whose first non-blank character is '#'
    heart attack, myocardial infarction, MI   <- equivalence: each term gets the others
    hypertension => high blood pressure        <- mapping: the left term gets the right ones
    acetaminophen, APAP => paracetamol         <- several left terms share the right side
    a\\, b, c                                  <- '\\' escapes the next character ("a, b")

Blank lines are ignored; spaces around terms are dropped and runs of spaces
inside a multi-word term count as one. Only whole-line comments exist, so
``c#`` is a term. For expansion (unlike Solr's index-time replacement) a
mapping never removes the left term: the query keeps it and gains the right
side. The rules are one-directional: ``a => b`` gives ``a`` the synonym ``b``,
not ``b`` the synonym ``a``.

A line that cannot be a rule raises :class:`SynonymFormatError` with the
file, the 1-based line number, the line and the reason: an empty side of
``=>``, an empty term between commas, more than one ``=>``, a single term and
nothing to map it to, a term with no letter or digit, a trailing lone ``\\``.

Terms are looked up by their *analyzed* form, the Snowball stems of their
content words (:class:`~crag_heuristic._text.analyzer.Analyzer`), so "heart attacks"
in a query matches the rule for "heart attack". A term made only of stop
words has no analyzed form: it is kept in the rules but can match nothing and
is never added. Several files merge in order: a term's synonyms are gathered
over all rules, earlier files and lines first; a synonym already gathered
(same analyzed form) or equal to the term itself is not repeated.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .._exceptions import InputError, SynonymFormatError, _short
from .._text.analyzer import Analyzer

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - exercised on Python 3.10 only
    from importlib.abc import Traversable

BUNDLED_PACKAGE = "crag_heuristic.synonyms"
_BUNDLED_NAME = re.compile(r"[a-z0-9_-]+")
_GENERAL_SET = "english"  # merged last by SynonymSet.bundled(): the domain sets rank first
_SPAN_RE = re.compile(r"[^\W_]+")

Key = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SynonymRule:
    """One parsed line.

    Attributes:
        source: the file it comes from (``"<string>"`` for text).
        line_number: its 1-based line number.
        terms: the terms of an equivalence line, or the left side of a mapping.
        mapped_to: the right side of a mapping; ``None`` for an equivalence.
    """

    source: str
    line_number: int
    terms: tuple[str, ...]
    mapped_to: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class SynonymMatch:
    """A term of a query that has synonyms.

    Attributes:
        start: offset of the term's first character in the query.
        end: offset just past its last character.
        text: ``query[start:end]``, as the user wrote it.
        key: its analyzed form (stems of its content words).
        synonyms: its synonyms, best first (surface forms from the files).
    """

    start: int
    end: int
    text: str
    key: Key
    synonyms: tuple[str, ...]


# -- parsing ----------------------------------------------------------------------------------


def _split_line(line: str, source: str, number: int) -> list[list[str]]:
    """Split a rule into its sides (one, or two around ``=>``), each a list of raw terms."""
    if "\\" not in line:  # the common case, without escapes: plain splits
        if line.count("=>") > 1:
            raise SynonymFormatError(source, number, line, "more than one '=>'")
        return [side.split(",") for side in line.split("=>")]
    sides: list[list[str]] = [[]]
    term: list[str] = []
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            if i + 1 == len(line):
                raise SynonymFormatError(source, number, line, "the line ends with a lone '\\'")
            term.append(line[i + 1])
            i += 2
            continue
        if line.startswith("=>", i):
            if len(sides) == 2:
                raise SynonymFormatError(source, number, line, "more than one '=>'")
            sides[-1].append("".join(term))
            sides.append([])
            term = []
            i += 2
            continue
        if char == ",":
            sides[-1].append("".join(term))
            term = []
        else:
            term.append(char)
        i += 1
    sides[-1].append("".join(term))
    return sides


def _clean_side(
    raw: list[str], side: str | None, source: str, number: int, line: str
) -> tuple[str, ...]:
    terms = [" ".join(term.split()) for term in raw]
    if all(not term for term in terms):
        reason = f"empty {side}" if side else "no terms, only commas"
        raise SynonymFormatError(source, number, line, reason)
    if any(not term for term in terms):
        raise SynonymFormatError(source, number, line, "empty term between commas")
    for term in terms:
        if not Analyzer.tokens(term):
            raise SynonymFormatError(source, number, line, f"term {term!r} has no letter or digit")
    # duplicates within one side (compared case-insensitively) count once
    unique: dict[str, str] = {}
    for term in terms:
        unique.setdefault(term.casefold(), term)
    return tuple(unique.values())


def parse_rules(text: str, *, source: str = "<string>") -> list[SynonymRule]:
    """Parse synonym-file text into rules (see the module doc for the format).

    Raises:
        SynonymFormatError: on the first line that is not a rule.
    """
    rules = []
    for number, line in enumerate(text.splitlines(), start=1):
        if number == 1:
            line = line.removeprefix("\ufeff")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        sides = _split_line(stripped, source, number)
        if len(sides) == 2:
            left = _clean_side(sides[0], "left side of '=>'", source, number, line)
            right = _clean_side(sides[1], "right side of '=>'", source, number, line)
            rules.append(SynonymRule(source, number, left, right))
            continue
        terms = _clean_side(sides[0], None, source, number, line)
        if len(terms) < 2:
            raise SynonymFormatError(
                source, number, line, "a single term with no synonyms (write 'a, b' or 'a => b')"
            )
        rules.append(SynonymRule(source, number, terms))
    return rules


# -- the set ----------------------------------------------------------------------------------


class SynonymSet:
    """Synonym rules from one or more files, indexed by analyzed term.

    Immutable once built, hence thread-safe. Build it once and reuse it: the
    bundled English set takes a fraction of a second to analyze.

    Args:
        rules: parsed rules, in priority order.
        analyzer: the analyzer whose stems key the lookups; it should be the
            one the retriever's queries go through. Defaults to ``Analyzer()``.
    """

    def __init__(self, rules: Iterable[SynonymRule] = (), *, analyzer: Analyzer | None = None):
        self.analyzer = analyzer or Analyzer()
        self._rules = tuple(rules)
        self._index: dict[Key, list[tuple[str, Key]]] = {}
        self._surface: dict[Key, str] = {}
        keys: dict[str, Key] = {}
        for rule in self._rules:
            left = [(term, self._key(term, keys)) for term in rule.terms]
            if rule.mapped_to is None:
                for term, key in left:
                    self._add(term, key, left)
            else:
                right = [(term, self._key(term, keys)) for term in rule.mapped_to]
                for term, key in left:
                    self._add(term, key, right)
        self._max_words = max((len(key) for key in self._index), default=0)

    def _key(self, term: str, cache: dict[str, Key]) -> Key:
        key = cache.get(term)
        if key is None:
            key = cache[term] = tuple(self.analyzer.terms(term))
        return key

    def _add(self, term: str, key: Key, synonyms: list[tuple[str, Key]]) -> None:
        if not key:
            return  # only stop words: it can never match
        entry = None
        for synonym, synonym_key in synonyms:
            if not synonym_key or synonym_key == key:
                continue
            if entry is None:
                entry = self._index.setdefault(key, [])
                self._surface.setdefault(key, term)
            if all(known != synonym_key for _, known in entry):
                entry.append((synonym, synonym_key))

    # -- construction ---------------------------------------------------------------------

    @staticmethod
    def bundled_names() -> tuple[str, ...]:
        """The names of the synonym sets shipped in ``crag_heuristic.synonyms``, sorted."""
        folder = _bundled_folder()
        names = (
            entry.name.removesuffix(".txt")
            for entry in folder.iterdir()
            if entry.name.endswith(".txt") and entry.is_file()
        )
        return tuple(sorted(name for name in names if _BUNDLED_NAME.fullmatch(name)))

    @classmethod
    def bundled(
        cls, names: Sequence[str] | None = None, *, analyzer: Analyzer | None = None
    ) -> SynonymSet:
        """The shipped sets ``names``, merged in that order.

        ``None`` means every shipped set, the domain sets (alphabetically)
        before the general English one, so that their precise synonyms rank
        first.

        Raises:
            InputError: a name that is not shipped (the message lists those that are).
        """
        available = cls.bundled_names()
        if names is None:
            names = sorted(available, key=lambda name: (name == _GENERAL_SET, name))
        elif isinstance(names, str):
            names = [names]
        rules: list[SynonymRule] = []
        for name in names:
            rules.extend(_bundled_rules(name, available))
        return cls(rules, analyzer=analyzer)

    def merge(self, *others: SynonymSet) -> SynonymSet:
        """A new set with this set's rules first, then each other set's, in order."""
        rules = list(self._rules)
        for other in others:
            rules.extend(other.rules)
        return SynonymSet(rules, analyzer=self.analyzer)

    def with_analyzer(self, analyzer: Analyzer) -> SynonymSet:
        """The same rules keyed by another analyzer (``self`` if it is equal)."""
        return self if analyzer == self.analyzer else SynonymSet(self._rules, analyzer=analyzer)

    # -- reading --------------------------------------------------------------------------

    @property
    def rules(self) -> tuple[SynonymRule, ...]:
        return self._rules

    @property
    def sources(self) -> tuple[str, ...]:
        """The files the rules come from, in order."""
        return tuple(dict.fromkeys(rule.source for rule in self._rules))

    def __len__(self) -> int:
        """Number of distinct (analyzed) terms that have synonyms."""
        return len(self._index)

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and tuple(self.analyzer.terms(term)) in self._index

    def __repr__(self) -> str:
        return f"SynonymSet(terms={len(self)}, rules={len(self._rules)}, sources={self.sources})"

    def lookup(self, term: str) -> tuple[str, ...]:
        """The synonyms of ``term`` (matched by its analyzed form), best first."""
        entry = self._index.get(tuple(self.analyzer.terms(term)), ())
        return tuple(synonym for synonym, _ in entry)

    def items(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """``(term, synonyms)`` for every term, in the order the rules first named them."""
        for key, entry in self._index.items():
            yield self._surface[key], tuple(synonym for synonym, _ in entry)

    def synonym_keys(self, key: Key) -> tuple[tuple[str, Key], ...]:
        """``(synonym, analyzed synonym)`` pairs of an analyzed term."""
        return tuple(self._index.get(key, ()))

    def match(self, text: str) -> tuple[SynonymMatch, ...]:
        """The terms of ``text`` that have synonyms, left to right, longest first.

        The content words of ``text`` (stop words skipped, as in the keys) are
        scanned left to right; at each word the longest run of words that is a
        term wins, and scanning resumes after it ("heart attack risk" matches
        "heart attack", not "heart" then "attack").
        """
        words = self._content_words(text)
        matches = []
        i = 0
        while i < len(words):
            for n in range(min(self._max_words, len(words) - i), 0, -1):
                key = tuple(stem for _, _, stem in words[i : i + n])
                entry = self._index.get(key)
                if entry:
                    start, end = words[i][0], words[i + n - 1][1]
                    synonyms = tuple(synonym for synonym, _ in entry)
                    matches.append(SynonymMatch(start, end, text[start:end], key, synonyms))
                    i += n
                    break
            else:
                i += 1
        return tuple(matches)

    def _content_words(self, text: str) -> list[tuple[int, int, str]]:
        """``(start, end, stem)`` of each content word of ``text``, in order."""
        words = []
        stop = self.analyzer.stop_words
        for span in _SPAN_RE.finditer(text):
            for token in Analyzer.tokens(span.group()):
                if token not in stop:
                    words.append((span.start(), span.end(), self.analyzer.stem(token)))
        return words


# -- loading ----------------------------------------------------------------------------------


def _bundled_folder() -> Traversable:
    """The data package ``crag_heuristic.synonyms`` that holds the shipped sets."""
    try:
        return resources.files(BUNDLED_PACKAGE)
    except ModuleNotFoundError:
        raise InputError(
            f"the shipped synonym sets are missing: no package {BUNDLED_PACKAGE}"
        ) from None


def _bundled_rules(name: str, available: Sequence[str]) -> list[SynonymRule]:
    if name not in available:
        raise InputError(
            f"no bundled synonym set {name!r}; shipped: {', '.join(available) or 'none'}"
        )
    data = _bundled_folder().joinpath(f"{name}.txt").read_bytes()
    return parse_rules(_decode(data, f"{BUNDLED_PACKAGE}/{name}.txt"), source=f"bundled:{name}")


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data.count(b"\n", 0, exc.start) + 1
        line = data.splitlines()[number - 1].decode("utf-8", "replace")
        raise SynonymFormatError(source, number, line, "not valid UTF-8") from exc


def parse_synonyms(
    text: str, *, source: str = "<string>", analyzer: Analyzer | None = None
) -> SynonymSet:
    """A :class:`SynonymSet` from synonym-file text.

    Raises:
        SynonymFormatError: on a line that is not a rule.
    """
    if not isinstance(text, str):
        raise InputError(f"synonym text must be a string, got {type(text).__name__}")
    return SynonymSet(parse_rules(text, source=source), analyzer=analyzer)


def load_synonyms(*sources: str | os.PathLike[str], analyzer: Analyzer | None = None) -> SynonymSet:
    """A :class:`SynonymSet` from files and shipped sets, merged in the order given.

    Each source is a path to a synonym file, or the name of a shipped set
    (see :meth:`SynonymSet.bundled_names`): a plain string without a path
    separator or a dot that names a shipped set is read as that set, anything
    else as a path. Files are read as UTF-8.

    Raises:
        SynonymFormatError: on a line that is not a rule, or bytes that are not UTF-8.
        InputError: a file that cannot be read.
    """
    available: tuple[str, ...] | None = None
    rules: list[SynonymRule] = []
    for source in sources:
        if isinstance(source, str) and not any(ch in source for ch in "./\\"):
            available = available if available is not None else SynonymSet.bundled_names()
            if source in available:
                rules.extend(_bundled_rules(source, available))
                continue
        if not isinstance(source, str | os.PathLike):
            raise InputError(f"a synonym source must be a path or a name, got {_short(source)}")
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read synonym file {str(path)!r}: {exc}") from exc
        rules.extend(parse_rules(_decode(data, str(path)), source=str(path)))
    return SynonymSet(rules, analyzer=analyzer)
