"""Chunk analyses made at index time: each document's terms, counts and length, by id.

The corpus is known before any query: the retrievers wrapped by the router are
built from it, and so are its statistics. Each of its documents can then be
analysed once, when the statistics are built, like its vector. The evaluator
looks a chunk up here, by its id and the digest of its text, before it
tokenises it; a chunk the corpus never held, or whose text changed since (its
digest differs), is tokenised as before: a stale analysis is never served.

What is served equals :meth:`Analyzer.analyze` of the text field for field
(the term set, the stop words, the token count, the term counts, the content
length), so an evaluation is the same, bit for bit, whichever way its chunks
were analysed.

Layout (numpy arrays; rows sorted by the 64-bit BLAKE2b key of the id's UTF-8
bytes, ties in build order)::

    id_keys       uint64[n]        the ids' keys (binary search)
    digests       uint8[n, 16]     the first 16 bytes of the SHA-256 of the text's UTF-8
    term_offsets  int64[n + 1]     row i's content terms are term_ids[o[i]:o[i+1]]
    term_ids      uint32[]         positions in the statistics' TermTable
    term_counts   uint8/16/32[]    their counts (the smallest type that holds them)
    stop_offsets  int64[n + 1]     row i's distinct stop words are stop_ids[s[i]:s[i+1]]
    stop_ids      uint8/16[]       positions in the sorted stop-word list
    n_tokens      uint32[n]        word tokens, stop words included
    stop_words    str              the sorted stop words, one per line

The id only finds the row; the text's digest decides: two texts with one
digest are (to 2^-128) one text, and an analysis depends on the text alone.
Rows whose ids share a key (a repeated id, or a collision) are all tried. A
chunk whose id finds no row of its text (statistics built without the chunks'
ids, so keyed by position; or ids given otherwise) is then looked up by its
text's digest alone, in an index of the digests made on the first such miss
(16 bytes a row): the same text, whatever its id, is the same analysis.
Term strings are decoded from the TermTable on first use and kept in a
bounded cache (the vocabulary a service meets is far smaller than the
corpus's).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from .._exceptions import InputError
from .analyzer import TextStats
from .terms import keys64, utf8

try:  # the optional C extension (setup.py): the same counts as the numpy path, faster
    from ._native import row_counts as _native_row_counts
except ImportError:  # pragma: no cover - an install built without a C compiler
    _native_row_counts = None  # type: ignore[assignment]
_ROW_COUNTS: Callable[..., list[list[int]]] | None = _native_row_counts

if TYPE_CHECKING:
    from .terms import TermTable

_EMPTY: frozenset[str] = frozenset()
_STRINGS_LIMIT = 262_144  # decoded term strings kept (about 20 MB at most)
ARRAY_NAMES = (
    "id_keys",
    "digests",
    "term_offsets",
    "term_ids",
    "term_counts",
    "stop_offsets",
    "stop_ids",
    "n_tokens",
)


def id_keys(ids: Iterable[str]) -> npt.NDArray[np.uint64]:
    """The 64-bit key of each id (:func:`~crag_heuristic._text.terms.key64` of its UTF-8
    bytes), as an array."""
    return keys64(map(utf8, ids))


def text_digest16(text: str) -> bytes:
    """The first 16 bytes of the SHA-256 of a text's UTF-8 bytes (surrogates kept)."""
    return hashlib.sha256(utf8(text)).digest()[:16]


def _smallest_uint(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    top = int(values.max()) if len(values) else 0
    kind = np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.uint32
    return values.astype(kind)


class AnalysesPart:
    """The analyses of one partition of a corpus, with term ids of its own.

    Its terms are numbered in order of first occurrence (:attr:`vocab`); the
    merge renumbers them as positions in the whole corpus's TermTable. An id
    may be left to the merge as an ``int`` (the document's position within
    the partition) where the input gave none.
    """

    def __init__(self, stop_words: Iterable[str]) -> None:
        self.stop_list = tuple(sorted(stop_words))
        self._stop_position = {word: i for i, word in enumerate(self.stop_list)}
        self.ids: list[str | int] = []
        self.digests = bytearray()
        self.vocab: dict[str, int] = {}
        self.term_ids = array("I")
        self.term_counts = array("I")
        self.term_lengths = array("I")
        self.stop_ids = array("H")
        self.stop_lengths = array("I")
        self.n_tokens = array("I")
        self.keys: npt.NDArray[np.uint64] | None = None  # the ids' keys, when ids are gone

    @classmethod
    def from_analyses(cls, analyses: ChunkAnalyses, vocab: list[str]) -> AnalysesPart:
        """Stored analyses as a partition (to merge statistics): its local term ids
        are the positions in its table, whose terms in order are ``vocab``; its
        rows keep their id keys (the ids themselves are not stored)."""
        part = cls(analyses.stop_words)
        a = analyses.arrays()
        part.vocab = {term: i for i, term in enumerate(vocab)}
        part.keys = np.array(a["id_keys"], dtype=np.uint64)
        part.ids = [""] * len(part.keys)
        part.digests = bytearray(np.ascontiguousarray(a["digests"]).tobytes())
        for name, values in (
            ("term_ids", a["term_ids"]),
            ("term_counts", a["term_counts"]),
            ("term_lengths", np.diff(a["term_offsets"])),
            ("stop_ids", a["stop_ids"]),
            ("stop_lengths", np.diff(a["stop_offsets"])),
            ("n_tokens", a["n_tokens"]),
        ):
            target: array[int] = getattr(part, name)
            target.frombytes(np.asarray(values).astype(target.typecode).tobytes())
        return part

    def __len__(self) -> int:
        return len(self.n_tokens)

    def id_keys(self, first: int) -> npt.NDArray[np.uint64]:
        """The rows' id keys; an id left to the merge is ``str(first + position)``."""
        if self.keys is not None:
            return self.keys
        return id_keys(str(first + i) if isinstance(i, int) else i for i in self.ids)

    def add(self, doc_id: str | int, text: str, stats: TextStats) -> None:
        """One document's analysis (what :meth:`Analyzer.analyze` gave for ``text``)."""
        vocab = self.vocab
        counts = stats.term_counts
        new = set(counts).difference(vocab)
        if new:
            for term in counts:  # numbered in order of first occurrence
                if term in new:
                    vocab[term] = len(vocab)
        self.ids.append(doc_id)
        self.digests += text_digest16(text)
        self.term_ids.extend(map(vocab.__getitem__, counts))
        self.term_counts.extend(counts.values())
        self.term_lengths.append(len(counts))
        self.stop_ids.extend(sorted(map(self._stop_position.__getitem__, stats.stop_set)))
        self.stop_lengths.append(len(stats.stop_set))
        self.n_tokens.append(stats.n_tokens)

    def doc_freq(self) -> npt.NDArray[np.int64]:
        """Documents per local term id (each document lists a term once)."""
        ids = np.frombuffer(self.term_ids, dtype=np.uint32)
        return np.bincount(ids, minlength=len(self.vocab)).astype(np.int64)


def _stop_set(words: tuple[str, ...], ids: list[int]) -> frozenset[str]:
    """A row's stop words (made when first asked for: see :class:`TextStats`)."""
    return frozenset(map(words.__getitem__, ids))


_T = TypeVar("_T")

_TERM_COUNTS = TextStats.__dict__["term_counts"]  # the slot StoredStats fills on first use


class StoredStats(TextStats):
    """A stored row's analysis, served without decoding its terms.

    The token and content-term counts are read when it is made, and with them
    the counts of the terms of the query it was looked up for (:attr:`query`:
    the terms and their counts, what :meth:`TextStats.count` gives). The term
    set and the term counts (strings) are decoded from the arrays on first use
    (:meth:`ChunkAnalyses.decode` decodes many at once): the evaluator does so
    when it meets the chunk again for another query. It equals
    :meth:`Analyzer.analyze` of the row's text field for field, as every
    :class:`TextStats` the analyses serve.
    """

    __slots__ = ("analyses", "decoded", "query", "row")

    analyses: ChunkAnalyses
    row: int
    query: tuple[tuple[str, ...], list[int]] | None
    decoded: bool

    def __init__(
        self,
        analyses: ChunkAnalyses,
        row: int,
        n_tokens: int,
        n_terms: int,
        has_stops: bool,
        query: tuple[tuple[str, ...], list[int]] | None = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "analyses", analyses)
        setter(self, "row", row)
        setter(self, "query", query)
        setter(self, "decoded", False)  # whether the term set and counts were decoded
        setter(self, "_term_set", None)  # made from the counts (decoded) on first use
        setter(self, "n_tokens", n_tokens)
        setter(self, "n_terms", n_terms)
        setter(self, "_stop_set", partial(analyses.stop_set_of, row) if has_stops else _EMPTY)

    def remember(self, terms: tuple[str, ...], counts: list[int]) -> None:
        """Keep the counts of ``terms`` as :attr:`query` (replacing any before it: one
        assignment, so a reader sees either whole)."""
        object.__setattr__(self, "query", (terms, counts))

    def _decode(self) -> None:
        self.analyses.decode([self])

    def _fill(self, term_counts: dict[str, int]) -> None:
        _TERM_COUNTS.__set__(self, term_counts)
        object.__setattr__(self, "decoded", True)

    @property
    def term_counts(self) -> Mapping[str, int]:  # type: ignore[override]  # TextStats's slot
        if not self.decoded:
            self._decode()
        return _TERM_COUNTS.__get__(self, TextStats)  # type: ignore[no-any-return]


def _segments(
    offsets: npt.NDArray[np.int64], rows: npt.NDArray[np.int64], *arrays: npt.NDArray[Any]
) -> tuple[list[int], list[list[int]]]:
    """The lengths of ``rows``' segments and, for each of ``arrays``, their values
    one after another (Python lists: one gather and one ``tolist`` per array)."""
    low, high = offsets[rows], offsets[rows + 1]
    lengths = high - low
    index = _index(low, lengths)
    return lengths.tolist(), [values[index].tolist() for values in arrays]


def _split(values: list[_T], lengths: list[int]) -> list[list[_T]]:
    """``values`` cut into consecutive segments of ``lengths`` (what :func:`_segments`
    gathered, one list per row)."""
    out = []
    t = 0
    for n in lengths:
        out.append(values[t : t + n])
        t += n
    return out


def _index(low: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The positions of the segments ``[low[i], low[i] + lengths[i])``, one after another."""
    index = np.repeat(low - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    index += np.arange(len(index), dtype=np.int64)
    return index


def _offsets(lengths: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def _gather(
    values: npt.NDArray[Any], offsets: npt.NDArray[np.int64], order: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    """The rows' segments of ``values`` in the row order ``order``, and their offsets."""
    lengths = np.diff(offsets)[order]
    new_offsets = _offsets(lengths)
    starts = np.repeat(offsets[:-1][order] - new_offsets[:-1], lengths)
    return values[starts + np.arange(int(new_offsets[-1]), dtype=np.int64)], new_offsets


class ChunkAnalyses:
    """The analyses of a corpus's documents, looked up by chunk id and text digest.

    Built with the statistics (:meth:`CorpusStats.build` with
    ``analyses=True``), saved in the same file, and read by the evaluator
    through ``corpus_stats.analyses`` (see the module doc). Read-only and
    thread-safe.
    """

    __slots__ = (
        "_arrays",
        "_by_digest",
        "_digests",
        "_positions",
        "_strings",
        "_table",
        "stop_words",
        "terms",
    )

    def __init__(
        self, arrays: Mapping[str, npt.NDArray[Any]], stop_words: Sequence[str], terms: TermTable
    ) -> None:
        self._arrays = {name: np.ascontiguousarray(values) for name, values in arrays.items()}
        self._digests = np.ascontiguousarray(arrays["digests"], dtype=np.uint8).tobytes()
        self.stop_words = tuple(stop_words)
        self.terms = terms  # the statistics' table: term ids are its positions
        self._strings: dict[int, str] = {}
        self._positions: dict[str, int] = {}
        self._table: npt.NDArray[np.int64] | None = None
        # the rows in order of their digest's first 8 bytes, and those 8 bytes (made on
        # the first chunk its id does not find)
        self._by_digest: tuple[npt.NDArray[np.intp], npt.NDArray[np.uint64]] | None = None

    @classmethod
    def assemble(
        cls,
        parts: Sequence[tuple[AnalysesPart, npt.NDArray[np.int64], int]],
        terms: TermTable,
    ) -> ChunkAnalyses:
        """The corpus's analyses from its partitions' (in corpus order).

        Args:
            parts: each partition's analyses, the table position of each of
                its local term ids, and the corpus position of its first
                document (for the ids left to the merge).
            terms: the statistics' term table.

        Raises:
            InputError: no parts, or parts with different stop-word lists.
        """
        if not parts:
            raise InputError("no analyses to assemble")
        stop_lists = {part.stop_list for part, _, _ in parts}
        if len(stop_lists) > 1:
            raise InputError("cannot assemble analyses made with different stop words")
        keys = np.concatenate([part.id_keys(first) for part, _, first in parts])
        order = np.argsort(keys, kind="stable")

        def joined(name: str, dtype: Any) -> npt.NDArray[Any]:
            return np.concatenate(
                [np.frombuffer(getattr(part, name), dtype=dtype) for part, _, _ in parts]
            )

        term_ids = np.concatenate(
            [
                positions[np.frombuffer(part.term_ids, dtype=np.uint32)]
                for part, positions, _ in parts
            ]
        ).astype(np.uint32)
        term_offsets = _offsets(joined("term_lengths", np.uint32))
        stop_offsets = _offsets(joined("stop_lengths", np.uint32))
        term_ids, new_term_offsets = _gather(term_ids, term_offsets, order)
        term_counts, _ = _gather(joined("term_counts", np.uint32), term_offsets, order)
        stop_ids, new_stop_offsets = _gather(joined("stop_ids", np.uint16), stop_offsets, order)
        digests = np.frombuffer(b"".join(part.digests for part, _, _ in parts), dtype=np.uint8)
        arrays = {
            "id_keys": keys[order],
            "digests": digests.reshape(-1, 16)[order],
            "term_offsets": new_term_offsets,
            "term_ids": term_ids,
            "term_counts": _smallest_uint(term_counts),
            "stop_offsets": new_stop_offsets,
            "stop_ids": _smallest_uint(stop_ids),
            "n_tokens": joined("n_tokens", np.uint32)[order],
        }
        return cls(arrays, parts[0][0].stop_list, terms)

    # -- looking up -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._arrays["id_keys"])

    def __repr__(self) -> str:
        return f"ChunkAnalyses(documents={len(self)}, bytes={self.nbytes})"

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (the decoded-term cache not counted)."""
        return sum(int(a.nbytes) for a in self._arrays.values())

    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The arrays (see the module doc), read-only views."""
        views = {}
        for name, array_ in self._arrays.items():
            view = array_.view()
            view.flags.writeable = False
            views[name] = view
        return views

    def digest(self) -> str:
        """A SHA-256 hex digest of the arrays and the stop words (checked on load)."""
        digest = hashlib.sha256("\n".join(self.stop_words).encode("utf-8", "surrogatepass"))
        for name in ARRAY_NAMES:
            values = np.ascontiguousarray(self._arrays[name])
            digest.update(f"{name}:{values.dtype.str}:{values.shape}".encode())
            digest.update(values.tobytes())
        return digest.hexdigest()

    def problems(self, n_docs: int) -> list[str]:
        """What does not fit in the arrays (empty when they are consistent)."""
        a = self._arrays
        n = len(a["id_keys"])
        found = []
        if n != n_docs:
            found.append(f"{n} analyses for {n_docs} documents")
        for name in ARRAY_NAMES:
            dtype = a[name].dtype
            # the types the builder writes, in this machine's byte order: what the C
            # extension's row_counts and the numpy path read alike
            if not dtype.isnative or (
                dtype.kind != "u" and name not in ("term_offsets", "stop_offsets")
            ):
                found.append(f"{name} of type {dtype.str}")
        if a["term_ids"].dtype != np.uint32 or a["term_counts"].dtype.itemsize > 4:
            found.append(
                f"term ids of type {a['term_ids'].dtype.str} or counts of type "
                f"{a['term_counts'].dtype.str} (uint32 ids; counts of at most 4 bytes)"
            )
        if a["digests"].shape != (n, 16) or a["n_tokens"].shape != (n,):
            found.append("digests or token counts of the wrong shape")
        if n > 1 and bool(np.any(a["id_keys"][1:] < a["id_keys"][:-1])):
            found.append("unsorted id keys")
        for offsets, values in (("term_offsets", "term_ids"), ("stop_offsets", "stop_ids")):
            o = a[offsets]
            if o.shape != (n + 1,) or (
                n + 1 and (o[0] != 0 or o[-1] != len(a[values]) or bool(np.any(np.diff(o) < 0)))
            ):
                found.append(f"{offsets} that do not cut {values}")
        if a["term_counts"].shape != a["term_ids"].shape:
            found.append("term counts and term ids of different lengths")
        if len(a["term_ids"]) and int(a["term_ids"].max()) >= len(self.terms):
            found.append("a term id outside the table")
        if len(a["stop_ids"]) and int(a["stop_ids"].max()) >= len(self.stop_words):
            found.append("a stop-word id outside the list")
        return found

    def get(self, chunk_id: str, text: str) -> TextStats | None:
        """The analysis of ``text`` stored under ``chunk_id``, or ``None``."""
        return self.get_many([(chunk_id, text)])[0]

    def get_many(
        self, chunks: Sequence[tuple[str, str]], terms: Sequence[str] = ()
    ) -> list[TextStats | None]:
        """:meth:`get` for each ``(id, text)``: the ids searched together, and the rows
        found served as :class:`StoredStats`, their terms decoded only when something
        asks for them. With ``terms`` (a query's stemmed content terms), each also
        carries their counts (:attr:`StoredStats.query`), read for all the rows at once
        (:meth:`query_counts`)."""
        found: list[TextStats | None] = [None] * len(chunks)
        stored = self._arrays["id_keys"]
        n = len(stored)
        if not chunks or not n:
            return found
        keys = id_keys(i for i, _ in chunks)
        at = stored.searchsorted(keys)
        starts = at.tolist()
        np.minimum(at, n - 1, out=at)
        held = set(np.flatnonzero(stored[at] == keys).tolist())  # the others: ids never held
        positions, rows = [], []
        digests = self._digests
        unplaced: list[tuple[int, bytes]] = []  # found by no id: looked up by their digest
        for position, (_, text) in enumerate(chunks):
            digest = text_digest16(text)
            if position in held:
                start = starts[position]
                row: int | None = start
                if digests[16 * start : 16 * start + 16] != digest:  # another text, same key?
                    row = self._row(start + 1, int(keys[position]), digest)
                if row is not None:
                    positions.append(position)
                    rows.append(row)
                    continue
            unplaced.append((position, digest))
        if unplaced:
            for (position, _), row in zip(
                unplaced, self._rows_of_digests([d for _, d in unplaced]), strict=True
            ):
                if row is not None:
                    positions.append(position)
                    rows.append(row)
        if rows:
            for position, stats in zip(positions, self._stored(rows, tuple(terms)), strict=True):
                found[position] = stats
        return found

    def _rows_of_digests(self, wanted: Sequence[bytes]) -> list[int | None]:
        """The row holding each text digest of ``wanted`` (``None``: no row does), by the
        digest index (made on first use)."""
        index = self._by_digest
        if index is None:
            firsts = np.frombuffer(self._digests, dtype=np.uint64)[::2]  # bytes 0-7 of each
            order = np.argsort(firsts, kind="stable")
            index = self._by_digest = (order, firsts[order])
        order, sorted_firsts = index
        firsts = np.frombuffer(b"".join(d[:8] for d in wanted), dtype=np.uint64)
        at = sorted_firsts.searchsorted(firsts).tolist()
        digests, n = self._digests, len(order)
        out: list[int | None] = []
        for i, digest in enumerate(wanted):
            first, j, row = int(firsts[i]), at[i], None
            while j < n and int(sorted_firsts[j]) == first:  # rows sharing the first bytes
                candidate = int(order[j])
                if digests[16 * candidate : 16 * candidate + 16] == digest:
                    row = candidate
                    break
                j += 1
            out.append(row)
        return out

    def _row(self, row: int, key: int, digest: bytes) -> int | None:
        """The row of the text with ``digest`` among the rows from ``row`` on whose id
        key is ``key``."""
        id_keys, digests, n = self._arrays["id_keys"], self._digests, len(self._digests) // 16
        while row < n and int(id_keys[row]) == key:
            if digests[16 * row : 16 * row + 16] == digest:
                return row
            row += 1
        return None

    def _row_table(self) -> npt.NDArray[np.int64]:
        """Per row: its tokens, content terms, distinct stop words, and where its terms
        start and how many there are (made on first use, one pass over the arrays; 40
        bytes a row, not counted in :attr:`nbytes`)."""
        table = self._table
        if table is None:
            a = self._arrays
            offsets = a["term_offsets"]
            lengths = np.diff(offsets)
            n_terms = np.zeros(len(lengths), dtype=np.int64)
            full = lengths > 0
            if len(a["term_counts"]):
                n_terms[full] = np.add.reduceat(
                    a["term_counts"], offsets[:-1][full], dtype=np.int64
                )
            columns = (a["n_tokens"], n_terms, np.diff(a["stop_offsets"]), offsets[:-1], lengths)
            table = self._table = np.ascontiguousarray(np.stack(columns, axis=1, dtype=np.int64))
        return table

    def _stored(self, rows: list[int], terms: tuple[str, ...]) -> list[StoredStats]:
        """The analyses of ``rows``, with the counts of ``terms`` in each."""
        table = self._row_table()[np.array(rows, dtype=np.int64)]
        counts = self._query_counts(table, terms) if terms else None
        return [
            StoredStats(
                self,
                row,
                n_tokens,
                n_terms,
                n_stops > 0,
                None if counts is None else (terms, counts[i]),
            )
            for i, (row, (n_tokens, n_terms, n_stops, _, _)) in enumerate(
                zip(rows, table.tolist(), strict=True)
            )
        ]

    def query_counts(self, rows: Sequence[int], terms: Sequence[str]) -> list[list[int]]:
        """How often each of ``terms`` (stemmed content terms) occurs in each of ``rows``:
        ``counts[i][j]`` for ``rows[i]`` and ``terms[j]``, what the rows' ``term_counts``
        would give, read from the arrays for all the rows at once (by the C extension when
        it is built, else by a few numpy calls)."""
        return self._query_counts(self._row_table()[np.array(rows, dtype=np.int64)], terms)

    def _query_counts(self, table: npt.NDArray[np.int64], terms: Sequence[str]) -> list[list[int]]:
        """:meth:`query_counts` of the rows whose :meth:`_row_table` rows are ``table``:
        by the C extension's ``row_counts`` (one loop over the rows' terms) when it is
        built, else by :meth:`_counts_numpy` (the same counts)."""
        wanted = [self._position(term) for term in terms]
        if _ROW_COUNTS is not None:
            a = self._arrays
            return _ROW_COUNTS(a["term_ids"], a["term_counts"], table, wanted)
        return self._counts_numpy(table, wanted)

    def _counts_numpy(self, table: npt.NDArray[np.int64], wanted: list[int]) -> list[list[int]]:
        """The counts of the table positions ``wanted`` (-1: a term the corpus never
        held) in the rows whose :meth:`_row_table` rows are ``table``, by numpy."""
        counts = [[0] * len(wanted) for _ in range(len(table))]
        present = [j for j, p in enumerate(wanted) if p >= 0]
        if not present or not len(table):
            return counts
        a = self._arrays
        low, lengths = table[:, 3], table[:, 4]
        index = _index(low, lengths)
        ends = np.cumsum(lengths)
        query = np.array([wanted[j] for j in present], dtype=np.int64)
        hit_at, hit_term = (a["term_ids"][index][:, None] == query).nonzero()
        owner = ends.searchsorted(hit_at, side="right").tolist()
        values = a["term_counts"][index[hit_at]].tolist()
        for i, j, value in zip(owner, hit_term.tolist(), values, strict=True):
            counts[i][present[j]] = value
        return counts

    def _position(self, term: str) -> int:
        """The table position of a term (-1: the corpus never held it), cached."""
        position = self._positions.get(term)
        if position is None:
            position = self.terms.position(term)
            if len(self._positions) >= _STRINGS_LIMIT:
                self._positions.clear()
            self._positions[term] = position
        return position

    def _term_counts(self, rows: list[int]) -> list[dict[str, int]]:
        """The term counts of ``rows`` (terms decoded): the term arrays gathered once."""
        a = self._arrays
        at = np.asarray(rows, dtype=np.int64)
        lengths, (positions, counts) = _segments(
            a["term_offsets"], at, a["term_ids"], a["term_counts"]
        )
        strings = self._strings
        cached = list(map(strings.get, positions))
        # all(): a C-level truth test per term (only None fails it), unlike `None in`
        terms: list[str] = cached if all(cached) else self._decode(positions)  # type: ignore[assignment]
        return [
            dict(zip(row_terms, row_counts, strict=True))
            for row_terms, row_counts in zip(
                _split(terms, lengths), _split(counts, lengths), strict=True
            )
        ]

    def term_ids(self, rows: list[int]) -> list[list[int]]:
        """The distinct content terms of ``rows`` as their ids in these analyses (no
        string decoded): equal ids, equal terms, within one :class:`ChunkAnalyses`."""
        a = self._arrays
        lengths, (ids,) = _segments(
            a["term_offsets"], np.asarray(rows, dtype=np.int64), a["term_ids"]
        )
        return _split(ids, lengths)

    def decode(self, stored: Sequence[StoredStats]) -> None:
        """Decode the term counts of ``stored`` (rows of these analyses; their term
        sets follow from the counts on first use), the arrays gathered once for all."""
        for stats, term_counts in zip(
            stored, self._term_counts([s.row for s in stored]), strict=True
        ):
            stats._fill(term_counts)

    def stop_set_of(self, row: int) -> frozenset[str]:
        """The distinct stop words of ``row``."""
        stop_offsets = self._arrays["stop_offsets"]
        start, end = stop_offsets[row : row + 2].tolist()
        return _stop_set(self.stop_words, self._arrays["stop_ids"][start:end].tolist())

    def _decode(self, positions: list[int]) -> list[str]:
        strings = self._strings
        missing = list({p for p in positions if p not in strings})
        if len(strings) + len(missing) > _STRINGS_LIMIT:
            strings.clear()
        fresh = dict(zip(missing, self.terms.terms_at(missing), strict=True))
        strings.update(fresh)
        # another thread may have emptied the cache meanwhile: then read the table
        return [fresh.get(p) or strings.get(p) or self.terms.term_at(p) for p in positions]
