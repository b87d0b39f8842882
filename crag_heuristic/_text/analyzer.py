"""Text analysis shared by the evaluator, refinement and query rewriting.

One :class:`Analyzer` turns text into comparable *terms*:

1. Unicode NFKC normalisation and case folding (``"ﬁnance"`` -> ``"finance"``);
2. tokens are maximal runs of letters and digits (``[^\\W_]+``): punctuation,
   control characters and unpaired surrogates never become part of a token,
   so ``"cat"`` and ``"category"`` are different tokens;
3. stop words are flagged;
4. each token is reduced to its Snowball (Porter 2) stem (PyStemmer), so
   ``"cells"`` and ``"cell"`` match but ``"cat"`` never matches ``"category"``.

The analyzer is thread-safe: a stemmer object keeps state while it works, so
each thread gets its own; the word -> stem cache is a plain dict whose single
operations are atomic. Analyzers made with the same settings (language, stop
words, C extension or not, cache limit) share that cache in a process, as the
threads of one analyzer do: a new ``Analyzer()`` (and so a new ``Evaluator()``) starts with the
stems the process already knows. A cache never changes a result; a subclass,
which may stem otherwise, keeps its own.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import unicodedata
from collections import Counter, _count_elements  # type: ignore[attr-defined]
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import compress
from operator import not_
from typing import Any

import Stemmer

from .._exceptions import ConfigError, InputError

try:  # the optional C extension (setup.py): the same counts as the Python path, faster
    from ._native import TermCounter
except ImportError:  # pragma: no cover - an install built without a C compiler
    TermCounter = None  # type: ignore[assignment,misc]

# English function words. Removing them keeps keyword overlap about content.
DEFAULT_STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can cannot could couldn d did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just ll m ma me might mightn
    more most must mustn my myself needn no nor not now o of off on once only or other our ours
    ourselves out over own re s same shan she should shouldn so some such t than that the their
    theirs them themselves then there these they this those through to too under until up us ve
    very was wasn we were weren what when where which while who whom why will with won would
    wouldn y you your yours yourself yourselves also may shall whose whether
    """.split()
)

_TOKEN_RE = re.compile(r"[^\W_]+")
# ASCII fast path, equivalent to _TOKEN_RE on ASCII text and about 3x faster:
# every ASCII character that is not a letter or digit becomes a space.
_ASCII_SPLIT = str.maketrans(
    {chr(i): " " for i in range(128) if not (chr(i).isascii() and chr(i).isalnum())}
)
# The same on UTF-8 bytes, with case folding: ASCII capitals become small letters,
# other ASCII non-alphanumerics spaces, and every byte of a multi-byte character (all
# >= 0x80) is left alone, so the result is valid UTF-8.
_UTF8_FOLD = bytes(
    b if b >= 0x80 or chr(b).islower() or chr(b).isdigit() else b + 32 if chr(b).isupper() else 0x20
    for b in range(256)
)
_ASCII_BYTES = bytes(range(128))
# Up to this many distinct characters to replace, a text is scanned once per character
# (``str.replace``, a fast C scan); past it, once through a table (``str.translate``,
# slower per character but one pass whatever their number).
_REPLACE_LIMIT = 16
# The term cache's mark for a stop word. It can never be a term: tokens and their
# stems hold no spaces.
_STOP = " "
_EMPTY: frozenset[str] = frozenset()
_STEM_CACHE_LIMIT = 200_000
_CHAR_FOLDS_LIMIT = 65_536


class _TermCaches:
    """An analyzer's caches: token -> stem (or :data:`_STOP`), the same in C for
    :meth:`Analyzer.analyze` (``None`` without the extension) and character ->
    folding."""

    __slots__ = ("char_folds", "counter", "terms")

    def __init__(self, native: bool) -> None:
        self.terms: dict[str, str] = {}
        self.counter: TermCounter | None = TermCounter() if native else None
        self.char_folds: dict[str, str] = {}


@functools.lru_cache(maxsize=8)
def _shared_caches(fingerprint: str, native: bool, limit: int) -> _TermCaches:
    """The caches the analyzers of one fingerprint, C path or not and cache limit share
    in this process: a bounded map, so a process making analyzers of many settings
    keeps the last few."""
    return _TermCaches(native)


# The default analyzer's fingerprint (English, the default stop words): stated, so that the
# first Analyzer() of a process hashes nothing (tests/test_text.py checks it is _settings's).
_DEFAULT_FINGERPRINT = "english:2b7df730808eb377"


@functools.lru_cache(maxsize=8)
def _default_settings(language: str) -> tuple[frozenset[str], str]:
    """The default stop words and the fingerprint of an analyzer of ``language`` with
    them (the language checked), made once per language."""
    if language == "english":  # the default: known, its words case-folded already
        return DEFAULT_STOP_WORDS, _DEFAULT_FINGERPRINT
    return _settings(language, DEFAULT_STOP_WORDS)


def _settings(language: str, words: Iterable[str]) -> tuple[frozenset[str], str]:
    """The case-folded stop words and the analyzer's fingerprint; a bad language
    name fails here, not in a worker thread.

    Raises:
        ConfigError: a language Snowball does not know, or stop words that are
            not an iterable of strings.
    """
    try:
        Stemmer.Stemmer(language)
    except (KeyError, UnicodeError):  # an unknown name, one not even ASCII
        raise ConfigError(
            "language", language, "is not a Snowball language (english, german ...)"
        ) from None
    if isinstance(words, str) or not isinstance(words, Iterable):
        raise ConfigError("stop_words", words, "must be an iterable of words or None")
    words = list(words)
    if not all(isinstance(w, str) for w in words):
        raise ConfigError("stop_words", words, "every stop word must be a string")
    stop_words = frozenset(w.casefold() for w in words)
    digest = hashlib.sha256("\n".join([language, *sorted(stop_words)]).encode("utf-8")).hexdigest()
    return stop_words, f"{language}:{digest[:16]}"


class TextStats:
    """What the evaluator needs to know about one text (immutable).

    Attributes:
        term_set: the distinct stemmed content terms (stop words removed). It
            may be given as ``None``: it is then made from ``term_counts`` on
            first use (the evaluator's features read the counts).
        stop_set: the distinct stop words it contains (case-folded, not
            stemmed), to match a query made only of stop words. It may be
            given as a function that makes it, called on first use: the
            corpus's stored analyses do (a query of only stop words is rare,
            and the set costs as much to make as the rest of the analysis).
        n_tokens: number of word tokens, stop words included.
        term_counts: stemmed content term -> occurrences (for BM25); read-only.
        n_terms: number of content-term occurrences (the BM25 document length).
    """

    __slots__ = ("_stop_set", "_term_set", "n_terms", "n_tokens", "term_counts")

    _term_set: frozenset[str] | None
    n_tokens: int
    term_counts: Mapping[str, int]
    n_terms: int
    _stop_set: frozenset[str] | Callable[[], frozenset[str]]

    def __init__(
        self,
        term_set: frozenset[str] | None,
        stop_set: frozenset[str] | Callable[[], frozenset[str]],
        n_tokens: int,
        term_counts: Mapping[str, int] | None = None,
        n_terms: int = 0,
    ) -> None:
        setter = object.__setattr__
        setter(self, "_term_set", term_set)
        setter(self, "_stop_set", stop_set)
        setter(self, "n_tokens", n_tokens)
        setter(self, "term_counts", {} if term_counts is None else term_counts)
        setter(self, "n_terms", n_terms)

    @property
    def term_set(self) -> frozenset[str]:
        terms = self._term_set
        if terms is None:  # made on first use
            terms = frozenset(self.term_counts)
            object.__setattr__(self, "_term_set", terms)
        return terms

    @property
    def stop_set(self) -> frozenset[str]:
        stop = self._stop_set
        if not isinstance(stop, frozenset):  # made on first use
            stop = stop()
            object.__setattr__(self, "_stop_set", stop)
        return stop

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TextStats is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"TextStats is immutable: cannot delete {name!r}")

    def _fields(self) -> tuple[Any, ...]:
        return (self.term_set, self.stop_set, self.n_tokens, self.term_counts, self.n_terms)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TextStats):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # term_counts is a dict

    def __repr__(self) -> str:
        term_set, stop_set, n_tokens, term_counts, n_terms = self._fields()
        return (
            f"TextStats(term_set={term_set!r}, stop_set={stop_set!r}, n_tokens={n_tokens!r}, "
            f"term_counts={term_counts!r}, n_terms={n_terms!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            TextStats,
            (self.term_set, self.stop_set, self.n_tokens, dict(self.term_counts), self.n_terms),
        )

    def match_set(self, query: QueryTerms) -> frozenset[str]:
        """The terms ``query`` is matched against (see :class:`QueryTerms`)."""
        return self.stop_set if query.all_stop_words else self.term_set

    def count(self, term: str, query: QueryTerms) -> int:
        """Occurrences of a query term (a stop word when the query has only those)."""
        if query.all_stop_words:
            return 1 if term in self.stop_set else 0
        return self.term_counts.get(term, 0)


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """The terms a query is matched on.

    Attributes:
        terms: distinct terms in query order: stemmed content terms normally;
            when the query is made only of stop words, those stop words
            (case-folded, not stemmed), so that such a query can still be
            matched against :attr:`TextStats.stop_set`.
        all_stop_words: True when the fallback to stop words was used.
        n_tokens: number of word tokens in the query.
    """

    terms: tuple[str, ...]
    all_stop_words: bool
    n_tokens: int


class Analyzer:
    """Tokeniser + stop words + Snowball stemmer, with a bounded term cache.

    Every distinct token is looked up once in a cache of token -> stem (or
    "stop word"); a text is then analysed by C-level passes over its tokens
    (``map`` of the cache lookup, ``collections.Counter``), and the tokens the
    cache lacks are stemmed together in one ``Stemmer.stemWords`` call. The
    result is the same, term for term, as stemming each token on its own.

    Args:
        language: a Snowball algorithm name (see ``Stemmer.algorithms()``).
        stop_words: the stop-word list (unstemmed, lower case); defaults to
            :data:`DEFAULT_STOP_WORDS`.
        native: whether :meth:`analyze` counts in the optional C extension
            (``crag_heuristic._text._native``, built by an install that has a C
            compiler): ``None`` (the default) when it is built, ``False`` never
            (the Python path, what an install without it runs), ``True``
            always (a :class:`~crag_heuristic.ConfigError` when it is not
            built). Both give the same analyses.

    Attributes:
        cache_limit: the term cache is emptied when it would grow past this
            many tokens (200,000 by default: about 30 MB). Analyzers of the same
            settings and limit share the cache in a process (see the module doc).
    """

    def __init__(
        self,
        *,
        language: str = "english",
        stop_words: Iterable[str] | None = None,
        native: bool | None = None,
    ) -> None:
        if native is not None and not isinstance(native, bool):  # 0 and 1 are not choices
            raise ConfigError("native", native, "must be None, True or False")
        if native and TermCounter is None:
            raise ConfigError(
                "native", native, "the C extension crag_heuristic._text._native is not built"
            )
        if not isinstance(language, str):
            raise ConfigError("language", language, "must be a Snowball language name")
        self.language = language
        self._native_option = native  # as asked (pickled so): None, True or False
        self.stop_words: frozenset[str]
        if stop_words is None:
            self.stop_words, self.fingerprint = _default_settings(language)
        else:
            self.stop_words, self.fingerprint = _settings(language, stop_words)
        self._local = threading.local()
        self._native_path = TermCounter is not None and native is not False
        self._shares = type(self) is Analyzer  # a subclass may stem otherwise: its own caches
        if not self._shares:
            self._use(_TermCaches(self._native_path))
        self.cache_limit = _STEM_CACHE_LIMIT

    @property
    def cache_limit(self) -> int:
        """The term cache is emptied when it would grow past this many tokens. Analyzers
        of the same settings and the same limit share their cache; setting another
        limit gives this analyzer the cache of that limit."""
        return self._cache_limit

    @cache_limit.setter
    def cache_limit(self, limit: int) -> None:
        self._cache_limit = limit
        if self._shares:
            self._use(_shared_caches(self.fingerprint, self._native_path, limit))

    def _own_caches(self) -> None:
        """New, empty caches of this analyzer's alone (shared with no other)."""
        self._shares = False
        self._use(_TermCaches(self._native_path))

    def _use(self, caches: _TermCaches) -> None:
        # token -> its stem, or _STOP for a stop word
        self._terms: dict[str, str] = caches.terms
        # the same cache in C, for analyze(): None without the extension
        self._counter: TermCounter | None = caches.counter
        self._char_folds: dict[str, str] = caches.char_folds  # character -> _fold_of

    @property
    def shares_caches(self) -> bool:
        """Whether its caches are the ones every analyzer of its settings shares in this
        process (a plain ``Analyzer``; a subclass, which may stem otherwise, keeps its
        own): what it computes for a text, any of them computes."""
        return self._shares

    @property
    def native(self) -> bool:
        """Whether :meth:`analyze` counts in the C extension (see the class doc)."""
        return self._counter is not None

    def __repr__(self) -> str:
        return f"Analyzer(language={self.language!r}, stop_words={len(self.stop_words)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Analyzer) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "language": self.language,
            "stop_words": self.stop_words,
            "native": self._native_option,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            language=state["language"],
            stop_words=state["stop_words"],
            native=state.get("native"),  # absent from an analyzer pickled before the option
        )

    # -- tokens ---------------------------------------------------------------------------

    @staticmethod
    def tokens(text: str) -> list[str]:
        """Case-folded word tokens, in order (stop words included, not stemmed).

        The same as ``re.findall(r"[^\\W_]+", unicodedata.normalize("NFKC",
        text).casefold())``, computed without the regular expression and
        without a per-word loop. ASCII text goes through a translation table
        (punctuation to spaces) and a split. Other text is normalised (NFKC);
        its UTF-8 bytes go through a byte table that folds ASCII capitals and
        turns ASCII punctuation into spaces, and each *distinct* non-ASCII
        character is replaced by its case folding with every character that is
        not a letter or digit made a space (a dash, a sign, a lone surrogate,
        the dot ``"İ"`` folds to): one ``str.replace`` each when they are few,
        one ``str.translate`` when they are many; then one split. Case
        folding is per character (``str.casefold`` takes no context), so the
        result is the definition's, token for token.
        """
        if not text.isascii():
            text, data, wide = _normal(text)
            if wide:
                folded = data.translate(_UTF8_FOLD).decode("utf-8", "surrogatepass")
                folds = {c: fold for c in set(wide) if (fold := _fold_of(c))}
                if len(folds) <= _REPLACE_LIMIT:  # a few: one fast C scan each
                    for char, fold in folds.items():
                        folded = folded.replace(char, fold)
                else:  # many (an alphabet soup): one pass of a table
                    folded = folded.translate({ord(c): fold for c, fold in folds.items()})
                return folded.split()
        return text.lower().translate(_ASCII_SPLIT).split()

    def stem(self, word: str) -> str:
        """The Snowball stem of one case-folded token (cached)."""
        term = self._terms.get(word)
        if term is None or term == _STOP:
            if word in self.stop_words:
                return str(self._stemmer().stemWord(word))
            term = self._lookup([word])[0]
        return term

    def _stemmer(self) -> Any:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            # PyStemmer's own word cache (10,000 words by default) makes a miss two to
            # three times slower; this class keeps the cache, so it is turned off.
            stemmer = Stemmer.Stemmer(self.language, 0)
            self._local.stemmer = stemmer
        return stemmer

    def _learn(self, tokens: Iterable[str]) -> None:
        """Add the tokens the cache lacks, their stems computed in one call."""
        cache = self._terms
        missing = (tokens if isinstance(tokens, set) else set(tokens)).difference(cache)
        if not missing:
            return
        words = list(missing - self.stop_words)
        fresh = dict(zip(words, self._stemmer().stemWords(words), strict=True))
        fresh.update(dict.fromkeys(missing & self.stop_words, _STOP))
        if len(cache) + len(fresh) > self.cache_limit:
            cache.clear()
        cache.update(fresh)

    def _counts(self, tokens: list[str]) -> Counter[str]:
        """How often each term (or :data:`_STOP`) occurs among ``tokens``."""
        return Counter(self._lookup(tokens))

    def _lookup(self, tokens: list[str]) -> list[str]:
        """The term (or :data:`_STOP`) of each token, in order.

        One C-level pass of cache reads; when some miss, only those tokens
        (picked out by ``itertools.compress``, in C too) are stemmed, and the
        reads are done again.
        """
        get = self._terms.get
        terms = list(map(get, tokens))
        # all(): a C-level truth test per item, far cheaper than `None in terms` (an
        # equality test per item); terms are non-empty strings, so only None fails it
        if not all(terms):
            self._learn(set(compress(tokens, map(not_, terms))))
            terms = list(map(get, tokens))
            if not all(terms):  # the cache was cleared meanwhile (full, or another thread)
                terms = list(map(self._table(tokens).__getitem__, tokens))
        return terms  # type: ignore[return-value]

    def _table(self, tokens: list[str]) -> dict[str, str]:
        """token -> term for each distinct token, whatever the cache holds.

        The slow, always-right path: this call's own table, so a concurrent
        clear of the cache cannot empty it.
        """
        cache = self._terms
        table: dict[str, str] = {}
        missing: list[str] = []
        for token in dict.fromkeys(tokens):
            term = cache.get(token)
            if term is None:
                missing.append(token)
            else:
                table[token] = term
        stop = self.stop_words
        words = [token for token in missing if token not in stop]
        table.update(zip(words, self._stemmer().stemWords(words), strict=True))
        table.update((token, _STOP) for token in missing if token in stop)
        return table

    # -- terms ----------------------------------------------------------------------------

    def terms(self, text: str) -> list[str]:
        """Stemmed content terms of ``text`` in order (stop words removed)."""
        return list(filter(_STOP.__ne__, self._lookup(self.tokens(text))))

    def distinct_terms(self, text: str) -> tuple[set[str], int]:
        """The distinct content terms of ``text`` and how many content terms it has.

        What document frequencies need (the set) and the BM25 document length
        (the count), without the per-term counts of :meth:`analyze`: the cache
        is read once per distinct token, not once per token.
        """
        tokens = self.tokens(text)
        distinct = set(tokens)
        get = self._terms.get
        terms = set(map(get, distinct))
        if None in terms:
            self._learn(distinct)
            terms = set(map(get, distinct))
            if None in terms:  # the cache was cleared meanwhile (full, or another thread)
                terms = set(self._table(list(distinct)).values())
        if _STOP in terms:
            terms.discard(_STOP)
            n_stop = sum(map(self.stop_words.__contains__, tokens))
        else:
            n_stop = 0
        return terms, len(tokens) - n_stop  # type: ignore[return-value]

    def term_counts(self, text: str) -> dict[str, int]:
        """Content term -> occurrences in ``text`` (``analyze(text).term_counts``, alone)."""
        counts = self._counts(self.tokens(text))
        counts.pop(_STOP, None)
        return counts

    def analyze(self, text: str) -> TextStats:
        """Distinct terms with their counts, distinct stop words and token counts.

        This is the evaluator's hot path: one cache lookup per token and one
        count of the looked-up terms, both in C; the Python work is per text,
        not per token.

        Raises:
            InputError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InputError(f"text must be a string, got {type(text).__name__}")
        return self._analyze(text, on_demand=False)

    def analyze_lazily(self, text: str) -> TextStats:
        """:meth:`analyze`, with the stop-word set made from the text again and the term
        set from the counts when first asked for: what the evaluator uses (it keeps the
        text anyway; only a query of stop words reads the one, and the gate's features
        read the counts, not the other)."""
        return self._analyze(text, on_demand=True)

    def _analyze(self, text: str, *, on_demand: bool) -> TextStats:
        counter = self._counter
        if counter is not None:
            stats = self._analyze_native(counter, text, on_demand=on_demand)
            if stats is not None:
                return stats
        return self._analyze_python(text, on_demand=on_demand)

    def _analyze_native(
        self, counter: TermCounter, text: str, *, on_demand: bool
    ) -> TextStats | None:
        """:meth:`_analyze` by the C extension: the text's NFKC form and the foldings of
        its non-ASCII characters made in Python (:func:`_normal`, :meth:`_folds`), then
        one C pass over it that folds, splits, looks up and counts
        (``crag_heuristic/_text/_native.c``). ``None`` when its table lost the tokens it was
        just given (emptied by another thread) or is busy with a count this call runs
        inside (a finalizer the garbage collector ran during it): the Python path then
        does the work."""
        prepared, folds = self._native_input(text)
        out = counter.count(prepared, folds, not on_demand)
        if out is None:  # the table is busy with a count that this one runs inside
            return None
        if isinstance(out, list):  # tokens the table lacks: their terms added, count again
            # full (distinct tokens, as the Python path counts): emptied, then all lack
            if len(counter) + len(set(out)) > self.cache_limit:
                counter.clear()
                out = counter.count(prepared, folds)
            if isinstance(out, list):
                counter.update(self._table(out))
            out = counter.count(prepared, folds, not on_demand)
            if out is None or isinstance(out, list):
                return None
        term_counts, n_tokens, n_stop, stop_tokens = out
        stop_set: frozenset[str] | Callable[[], frozenset[str]] = _EMPTY
        if n_stop:
            stop_set = partial(self._stop_set, text) if on_demand else frozenset(stop_tokens or ())
        return _text_stats(term_counts, n_tokens, n_stop, stop_set, on_demand=on_demand)

    def _native_input(self, text: str) -> tuple[str, dict[int, str]]:
        """What the extension's ``count`` reads for ``text``: its NFKC form and the
        foldings of its non-ASCII characters (none for ASCII text)."""
        if text.isascii():
            return text, {}
        prepared, _, wide = _normal(text)
        return prepared, self._folds(wide)

    def _folds(self, wide: str) -> dict[int, str]:
        """code point -> :func:`_fold_of` for each character of ``wide`` that does not
        stay itself (remembered per character, in a bounded dict)."""
        known = self._char_folds
        folds: dict[int, str] = {}
        for char in set(wide):
            fold = known.get(char)
            if fold is None:
                fold = _fold_of(char)
                if len(known) >= _CHAR_FOLDS_LIMIT:
                    known.clear()
                known[char] = fold
            if fold:
                folds[ord(char)] = fold
        return folds

    def _analyze_python(self, text: str, *, on_demand: bool) -> TextStats:
        """:meth:`_analyze` in Python (the C extension's fallback; the same results)."""
        tokens = self.tokens(text)
        # the terms counted straight into a dict as they are read from the cache (the
        # C helper Counter itself uses): no list of terms, no Counter to copy
        counted: dict[Any, int] = {}
        _count_elements(counted, map(self._terms.get, tokens))
        if None in counted:  # tokens the cache lacks: learn them, count again
            counted = dict(self._counts(tokens))
        term_counts: dict[str, int] = counted
        n_stop = term_counts.pop(_STOP, 0)
        stop_set: frozenset[str] | Callable[[], frozenset[str]] = _EMPTY
        if n_stop:
            stop_set = (
                partial(self._stop_set, text) if on_demand else self.stop_words.intersection(tokens)
            )
        return _text_stats(term_counts, len(tokens), n_stop, stop_set, on_demand=on_demand)

    def _stop_set(self, text: str) -> frozenset[str]:
        return self.stop_words.intersection(self.tokens(text))

    def query_terms(self, query: str) -> QueryTerms:
        """The distinct terms a query is matched on (see :class:`QueryTerms`)."""
        tokens = self.tokens(query)
        content = [t for t in self._lookup(tokens) if t != _STOP]
        fallback = not content and bool(tokens)
        chosen = tokens if fallback else content
        return QueryTerms(
            terms=tuple(dict.fromkeys(chosen)), all_stop_words=fallback, n_tokens=len(tokens)
        )

    def is_stop_word(self, token: str) -> bool:
        return token.casefold() in self.stop_words


def _text_stats(
    term_counts: dict[str, int],
    n_tokens: int,
    n_stop: int,
    stop_set: frozenset[str] | Callable[[], frozenset[str]],
    *,
    on_demand: bool,
) -> TextStats:
    """The analysis of a text from its counts (the term set made now, or on first use)."""
    return TextStats(
        term_set=None if on_demand else frozenset(term_counts),
        stop_set=stop_set,
        n_tokens=n_tokens,
        term_counts=term_counts,
        n_terms=n_tokens - n_stop,
    )


def _normal(text: str) -> tuple[str, bytes, str]:
    """The NFKC form of a text that is not ASCII, its UTF-8 bytes and its characters
    that are not ASCII (``""``, and no bytes, when the form is ASCII)."""
    data = text.encode("utf-8", "surrogatepass")
    wide = data.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
    normal = _nfkc(text, wide)
    if normal is not text:
        text = normal
        if text.isascii():
            return text, b"", ""
        data = text.encode("utf-8", "surrogatepass")
        wide = data.translate(None, _ASCII_BYTES).decode("utf-8", "surrogatepass")
    return text, data, wide


def _nfkc(text: str, wide: str) -> str:
    """``unicodedata.normalize("NFKC", text)``, ``wide`` being its non-ASCII characters.

    Each distinct character that is not NFKC on its own is first replaced by its
    NFKC form (one ``str.replace`` each): that keeps the text's compatibility
    decomposition (NFKD) as it was, so its NFKC too. What is left is then most
    often NFKC already, which ``normalize`` sees in one quick check instead of
    decomposing and recomposing the whole text; where it is not (combining
    marks, Hangul jamo), ``normalize`` does the full work, as before.
    """
    for char in set(wide):
        if not unicodedata.is_normalized("NFKC", char):
            text = text.replace(char, unicodedata.normalize("NFKC", char))
    return unicodedata.normalize("NFKC", text)


def _fold_of(char: str) -> str:
    """What a character becomes among tokens when that is not itself: its case folding,
    with each character that is not a letter or digit made a space; ``""`` for a
    letter or digit that folds to itself (a folding is never empty)."""
    if char.isalnum() and char.casefold() == char:
        return ""
    return "".join(c if c.isalnum() else " " for c in char.casefold())


# -- sentences ------------------------------------------------------------------------------

# A sentence ends at . ! ? (optionally followed by closing quotes or brackets) and
# whitespace, or at a line break. The next sentence must not start in lower case.
_BOUNDARY_RE = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))[ \t\f\v]+|[ \t\f\v]*\n\s*"
)
_ABBREVIATIONS = frozenset(
    """
    al approx ca cf co corp dept dr e.g eg esp etc fig figs gen gov i.e ie inc jr lt ltd mr mrs ms
    no nos p pp prof rev sr st vol vols vs
    """.split()
)
_LAST_WORD_RE = re.compile(r"([\w.]+)\.\W*$")


def split_sentences(text: str) -> list[str]:
    """Split text into sentence strips, keeping every non-blank character.

    Boundaries are sentence-final punctuation followed by whitespace, and line
    breaks. A full stop after a common abbreviation (``e.g.``, ``Dr.``,
    ``et al.``, ``Fig.``), after a single capital initial, or before a
    lower-case letter does not end a sentence. Strips are stripped of
    surrounding whitespace; blank strips are dropped.
    """
    strips: list[str] = []
    start = 0
    for match in _BOUNDARY_RE.finditer(text):
        end = match.start()
        piece = text[start:end]
        if "\n" not in match.group() and not _is_sentence_end(piece, text, match.end()):
            continue
        if piece.strip():
            strips.append(piece.strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        strips.append(tail)
    return strips


def _is_sentence_end(piece: str, text: str, next_start: int) -> bool:
    if next_start < len(text) and text[next_start].islower():
        return False
    last = _LAST_WORD_RE.search(piece[-40:])
    if last is None:
        return True
    word = last.group(1)
    if len(word) == 1 and word.isupper():
        return False  # an initial: "J. Smith"
    return word.casefold().rstrip(".") not in _ABBREVIATIONS
