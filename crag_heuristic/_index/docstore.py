"""An index directory's documents: one JSON line each, decoded when a search returns it.

Two files::

    docs.jsonl       line i = the chunk of FAISS id i: {"id", "text"} and, when set,
                     "source", "metadata", "parent_id" (Chunk.to_dict's keys)
    docs.index.npz   offsets  int64[n + 1]   line i is bytes offsets[i]:offsets[i + 1]
                     id_blob  uint8[]        the ids' UTF-8, one after another
                     id_ends  int64[n]       where each id ends in the blob

Opening reads the offsets (8 bytes a document) and maps the lines file; a
document is decoded (``json.loads``, ``Chunk.from_dict``) when it is asked for,
and the last few thousand decoded are kept, so a search over a million
documents decodes its ``k``, and opening costs the same at any size. The ids
are decoded on first use (``DocStore.ids``: a lookup by id needs them; a
search does not).
"""

from __future__ import annotations

import functools
import itertools
import json
import mmap
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .._exceptions import IndexDirectoryError, InputError
from .._text.corpus import write_npz
from .._text.npz import read_npz
from .._types import Chunk

LINES = "docs.jsonl"
INDEX = "docs.index.npz"
_DECODED = 4096  # decoded chunks kept


def _line(chunk: Chunk) -> bytes:
    """The JSON line of a chunk: its id and text, and the other fields it sets."""
    row: dict[str, Any] = {"id": chunk.id, "text": chunk.text}
    if chunk.source is not None:
        row["source"] = chunk.source
    if chunk.metadata:
        row["metadata"] = dict(chunk.metadata)
    if chunk.parent_id is not None:
        row["parent_id"] = chunk.parent_id
    try:
        text = json.dumps(row, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"document {chunk.id!r}: its metadata is not JSON ({exc})") from None
    return text.encode("utf-8", "surrogatepass") + b"\n"


def _integers(values: Any) -> npt.NDArray[np.int64]:
    """``values`` as int64, refused unless they are integers (no float cut to one)."""
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise TypeError(f"integers expected, got {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.int64)


def write_docstore(chunks: Iterable[Chunk], folder: Path) -> tuple[str, ...]:
    """Write the chunks (in FAISS id order) as the two files in ``folder``; returns
    their names."""
    offsets = [0]
    ids = bytearray()
    ends = []
    with open(folder / LINES, "wb") as out:
        for chunk in chunks:
            line = _line(chunk)
            out.write(line)
            offsets.append(offsets[-1] + len(line))
            ids += chunk.id.encode("utf-8", "surrogatepass")
            ends.append(len(ids))
    write_npz(
        folder / INDEX,
        {
            "offsets": np.asarray(offsets, dtype=np.int64),
            "id_blob": np.frombuffer(bytes(ids), dtype=np.uint8),
            "id_ends": np.asarray(ends, dtype=np.int64),
        },
    )
    return LINES, INDEX


class DocStore(Sequence[Chunk]):
    """The documents of an index directory, FAISS id -> :class:`Chunk` (read-only,
    thread-safe). Open one with :meth:`open`."""

    def __init__(self, lines: Path, offsets: npt.NDArray[np.int64], ids: Any) -> None:
        self.path = lines
        self._offsets = offsets
        self._bounds: list[int] = offsets.tolist()
        self._ids_source = ids  # (blob, ends), decoded on first use
        self._ids: list[str] | None = None
        size = lines.stat().st_size
        if self._bounds[0] != 0 or self._bounds[-1] != size or np.any(np.diff(offsets) <= 0):
            raise InputError(f"the offsets of {INDEX} do not cut {LINES}")
        with open(lines, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        self._decoded = functools.lru_cache(maxsize=_DECODED)(self._decode)

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> DocStore:
        """The docstore in ``folder`` (the files :func:`write_docstore` wrote).

        Raises:
            InputError: a file is missing or unreadable, or the two do not agree.
        """
        folder = Path(folder)
        try:
            data = read_npz(folder / INDEX)
            offsets = _integers(data["offsets"])
            blob = np.ascontiguousarray(data["id_blob"]).view(np.uint8).tobytes()
            ends = _integers(data["id_ends"])
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise InputError(f"cannot read {INDEX}: {exc}") from None
        if offsets.ndim != 1 or len(offsets) < 2 or ends.shape != (len(offsets) - 1,):
            raise InputError(f"{INDEX}: offsets and ids of mismatched lengths")
        if len(ends) and (ends[0] < 0 or np.any(np.diff(ends) < 0) or ends[-1] != len(blob)):
            raise InputError(f"{INDEX}: the ids' ends do not cut their blob")
        try:
            return cls(folder / LINES, offsets, (blob, ends))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {LINES}: {exc}") from None

    def __repr__(self) -> str:
        return f"DocStore({str(self.path)!r}, documents={len(self)})"

    def __len__(self) -> int:
        return len(self._bounds) - 1

    @overload
    def __getitem__(self, index: int) -> Chunk: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Chunk]: ...
    def __getitem__(self, index: int | slice) -> Chunk | Sequence[Chunk]:
        if isinstance(index, slice):
            return [self._decoded(i) for i in range(*index.indices(len(self)))]
        if not isinstance(index, int | np.integer):
            raise TypeError(f"docstore indices are integers, not {type(index).__name__}")
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"document {index} of {n}")
        return self._decoded(int(index) % n)

    def __iter__(self) -> Iterator[Chunk]:
        for i in range(len(self)):
            yield self._decode(i)  # a whole pass: not through the small cache

    def _decode(self, i: int) -> Chunk:
        raw = self._map[self._bounds[i] : self._bounds[i + 1]]
        try:
            return Chunk.from_dict(json.loads(raw))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            what = f"document {i}: not a chunk's JSON line ({type(exc).__name__})"
            raise self._damaged(what) from None

    def _damaged(self, what: str) -> IndexDirectoryError:
        """The error of a part of the docstore that is not what the build wrote."""
        return IndexDirectoryError(
            os.fspath(self.path.parent), "content", f"{LINES}: {what}", "what the build wrote"
        )

    @property
    def ids(self) -> list[str]:
        """The documents' ids in FAISS id order (decoded on first use)."""
        if self._ids is None:
            blob, ends = self._ids_source
            starts = [0, *ends.tolist()]
            try:
                text = blob.decode("utf-8", "surrogatepass")
                if text.isascii():
                    self._ids = [text[a:b] for a, b in itertools.pairwise(starts)]
                else:  # byte offsets: cut the bytes
                    self._ids = [
                        blob[a:b].decode("utf-8", "surrogatepass")
                        for a, b in itertools.pairwise(starts)
                    ]
            except UnicodeDecodeError:
                raise self._damaged(f"{INDEX}: ids that are not UTF-8") from None
        return self._ids

    def close(self) -> None:
        """Unmap the lines file (the docstore is unusable after)."""
        self._map.close()
