"""The term table of corpus statistics: term -> count in compact arrays, and the
64-bit term keys it (and the chunk analyses) sort by.

Below both :mod:`crag_heuristic._text.corpus` (which builds and stores the table) and
:mod:`crag_heuristic._text.analyses` (whose term ids are positions in it).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import ItemsView, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .._exceptions import InputError

_LOOKUP_CACHE = 65_536


def utf8(text: str) -> bytes:
    """A string's UTF-8 bytes, unpaired surrogates kept (``"surrogatepass"``)."""
    return text.encode("utf-8", "surrogatepass")


def key64(data: bytes) -> int:
    """The 64-bit key of some bytes (BLAKE2b, stable across runs and processes): what
    the term table and the analyses sort by."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def keys64(items: Iterable[bytes]) -> npt.NDArray[np.uint64]:
    """:func:`key64` of each of ``items``, as an array: the 8-byte digests joined and
    read as little-endian integers, no Python ``int`` made in between."""
    blake2b = hashlib.blake2b
    joined = b"".join([blake2b(data, digest_size=8).digest() for data in items])
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64, copy=False)


class TermTable(Mapping[str, int]):
    """term -> count in compact arrays: an exact, read-only mapping.

    The terms are sorted by their 64-bit key (ties, vanishingly rare, by their
    bytes); a lookup hashes the term, binary-searches the keys and compares
    the bytes, so a key collision can cost a comparison, never a wrong count.
    Recent lookups are cached (a bounded dict). Build one with
    :meth:`from_counts`.
    """

    __slots__ = ("_blob", "_cache", "_counts", "_keys", "_offsets")

    def __init__(
        self,
        keys: npt.NDArray[np.uint64],
        offsets: npt.NDArray[np.int64],
        blob: bytes,
        counts: npt.NDArray[np.int64],
    ) -> None:
        self._keys = keys
        self._offsets = offsets
        self._blob = blob
        self._counts = counts
        self._cache: dict[str, int] = {}

    @classmethod
    def from_counts(cls, counts: Mapping[str, int]) -> TermTable:
        """The table of a mapping of term -> count (any order; the result is canonical)."""
        if isinstance(counts, TermTable):
            return counts
        try:
            values = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
        except (AttributeError, TypeError, ValueError, OverflowError) as exc:
            raise InputError(f"document frequencies must map str -> int: {exc}") from None
        return cls.of_terms(list(counts), values)[0]

    @classmethod
    def of_terms(
        cls, terms: list[str], counts: npt.NDArray[np.int64]
    ) -> tuple[TermTable, npt.NDArray[np.int64]]:
        """The table of distinct ``terms`` with their ``counts``, and the table
        position of each term (``positions[i]`` is where ``terms[i]`` went).

        Raises:
            InputError: a term that is not a string.
        """
        try:
            data = [utf8(term) for term in terms]
        except AttributeError as exc:
            raise InputError(f"document frequencies must map str -> int: {exc}") from None
        n = len(data)
        keys = np.fromiter(map(key64, data), dtype=np.uint64, count=n)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        if n > 1 and bool(np.any(sorted_keys[1:] == sorted_keys[:-1])):
            # equal keys: order those by their bytes too, so the table stays canonical
            order = np.asarray(sorted(range(n), key=lambda i: (int(keys[i]), data[i])))
            sorted_keys = keys[order]
        positions = np.empty(n, dtype=np.int64)
        positions[order] = np.arange(n, dtype=np.int64)
        table = cls.from_sorted(
            sorted_keys, [data[i] for i in order], np.asarray(counts, dtype=np.int64)[order]
        )
        return table, positions

    @classmethod
    def from_sorted(
        cls, keys: npt.NDArray[np.uint64], data: list[bytes], counts: npt.NDArray[np.int64]
    ) -> TermTable:
        """The table of terms already in table order: ``keys`` sorted (ties by bytes),
        ``data`` their UTF-8 bytes, ``counts`` theirs."""
        lengths = np.fromiter(map(len, data), dtype=np.int64, count=len(data))
        offsets = np.zeros(len(data) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(keys, offsets, b"".join(data), counts)

    # -- Mapping ------------------------------------------------------------------------------

    def get(self, term: object, default: Any = None) -> Any:
        if not isinstance(term, str):
            return default
        count = self._cache.get(term)
        if count is None:
            count = self._find(term)
            if len(self._cache) >= _LOOKUP_CACHE:
                self._cache.clear()
            self._cache[term] = count
        return default if count < 0 else count

    def _find(self, term: str) -> int:
        """The count of ``term``, or -1 when the table does not hold it."""
        i = self.position(term)
        return -1 if i < 0 else int(self._counts[i])

    def position(self, term: str) -> int:
        """The table position of ``term``, or -1 when the table does not hold it."""
        data = utf8(term)
        key = np.uint64(key64(data))
        keys, offsets, blob = self._keys, self._offsets, self._blob
        i = int(keys.searchsorted(key))
        while i < len(keys) and keys[i] == key:
            if blob[offsets[i] : offsets[i + 1]] == data:
                return i
            i += 1
        return -1

    def positions(self, terms: list[str]) -> npt.NDArray[np.int64]:
        """The table position of each of ``terms`` (all of which it must hold).

        Vectorised: a key found once in the table is its term's (the table holds
        every term asked for); only keys the table holds twice or more (a
        collision, vanishingly rare) are told apart by their bytes.

        Raises:
            InputError: a term the table does not hold.
        """
        data = [utf8(term) for term in terms]
        if not data:  # nothing asked (an empty table included)
            return np.zeros(0, dtype=np.int64)
        keys = np.fromiter(map(key64, data), dtype=np.uint64, count=len(data))
        table_keys, n = self._keys, len(self._keys)
        found = table_keys.searchsorted(keys)
        inside = np.minimum(found, max(n - 1, 0))
        if n == 0 or bool(np.any(table_keys[inside] != keys)):
            missing = next(
                i for i in range(len(keys)) if n == 0 or table_keys[inside[i]] != keys[i]
            )
            raise InputError(f"the term table does not hold {terms[missing]!r}")
        after = found + 1
        shared = np.flatnonzero((after < n) & (table_keys[np.minimum(after, n - 1)] == keys))
        for i in shared.tolist():  # the key is the table's twice: compare the bytes
            at = int(found[i])
            while at < n and table_keys[at] == keys[i] and self._bytes_at(at) != data[i]:
                at += 1
            if at == n or table_keys[at] != keys[i]:
                raise InputError(f"the term table does not hold {terms[i]!r}")
            found[i] = at
        return found.astype(np.int64)

    def _bytes_at(self, position: int) -> bytes:
        start, end = self._offsets[position : position + 2].tolist()
        return self._blob[start:end]

    def terms_at(self, positions: list[int]) -> list[str]:
        """The terms at these positions (one gather of the offsets for all of them)."""
        at = np.asarray(positions, dtype=np.int64)
        blob = self._blob
        return [
            blob[start:end].decode("utf-8", "surrogatepass")
            for start, end in zip(
                self._offsets[at].tolist(), self._offsets[at + 1].tolist(), strict=True
            )
        ]

    def term_at(self, position: int) -> str:
        """The term at a position of the table (``0 <= position < len(self)``)."""
        return self._bytes_at(position).decode("utf-8", "surrogatepass")

    def __getitem__(self, term: str) -> int:
        count: int | None = self.get(term)
        if count is None:
            raise KeyError(term)
        return count

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        blob, offsets = self._blob, self._offsets.tolist()
        for start, end in itertools.pairwise(offsets):
            yield blob[start:end].decode("utf-8", "surrogatepass")

    def items(self) -> ItemsView[str, int]:
        return _TableItems(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TermTable, (self._keys, self._offsets, self._blob, self._counts))

    def __repr__(self) -> str:
        return f"TermTable(terms={len(self)}, bytes={self.nbytes})"

    # -- arrays -------------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays and the blob (the lookup cache not counted)."""
        return int(self._keys.nbytes + self._offsets.nbytes + self._counts.nbytes) + len(self._blob)

    @property
    def counts(self) -> npt.NDArray[np.int64]:
        """The counts, in table order (read-only view)."""
        view: npt.NDArray[np.int64] = self._counts.view()
        view.flags.writeable = False
        return view

    def digest(self) -> bytes:
        """SHA-256 of the table's canonical arrays."""
        digest = hashlib.sha256()
        for array in (self._keys, self._offsets, self._counts):
            digest.update(np.ascontiguousarray(array).astype("<i8", copy=False).tobytes())
        digest.update(self._blob)
        return digest.digest()


class _TableItems(ItemsView[str, int]):
    _mapping: TermTable

    def __iter__(self) -> Iterator[tuple[str, int]]:
        table = self._mapping
        return zip(iter(table), table._counts.tolist(), strict=True)
