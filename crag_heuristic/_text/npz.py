"""Reading the library's ``.npz`` files: whole, without pickles, bounded by the file's
size, the file closed on every path.

``numpy.load`` on a path opens the file itself; on some bytes that are no archive
it raises before closing it (a ``ResourceWarning`` later), and on a single
``.npy`` array it returns that array, which the ``with`` of an archive cannot
take (an untyped ``AttributeError``). Worse, it trusts each array's header: an
array whose header declares a shape of a trillion elements makes it allocate
them before it reads a byte (a ``MemoryError``, or the machine's memory), and
the file is data anyone who can write it chose (an index directory, a
statistics file).

:func:`read_npz` opens the file, refuses anything but an archive of ``.npy``
arrays stored uncompressed (what :func:`numpy.savez` writes), reads each
array's header first and refuses one whose shape and type do not account for
exactly the bytes the archive holds for it (so no array is larger than the
file), or that holds Python objects (pickles are never read), then reads the
arrays while the file is open, and closes it. Every refusal is a
``ValueError`` saying what is wrong.
"""

from __future__ import annotations

import math
import os
import struct
import zipfile
from typing import IO, Any

import numpy as np
from numpy.lib import format as npy

_READ_ERRORS = (
    ValueError,
    EOFError,
    OSError,
    KeyError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    RuntimeError,
    NotImplementedError,
    OverflowError,
    struct.error,
)
_MAX_HEADER = 10_000  # bytes of an array's header (numpy's own default bound)


def _header(member: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any], int]:
    """An array's shape, type and header length, read from its ``.npy`` bytes."""
    version = npy.read_magic(member)
    if version == (1, 0):
        shape, _, dtype = npy.read_array_header_1_0(member, max_header_size=_MAX_HEADER)
    elif version == (2, 0):
        shape, _, dtype = npy.read_array_header_2_0(member, max_header_size=_MAX_HEADER)
    else:
        raise ValueError(f"an array of .npy format {version}")
    return shape, dtype, member.tell()


def read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray[Any, Any]]:
    """Every array of the ``.npz`` archive at ``path``, by name (see the module doc).

    Raises:
        OSError: the file cannot be opened (``FileNotFoundError`` when missing).
        ValueError: the file is no ``.npz`` archive of stored arrays, an array's
            header does not fit the bytes it has, or an array cannot be read (the
            cause kept as ``__cause__``).
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            archive = zipfile.ZipFile(handle)
        except _READ_ERRORS as exc:
            raise ValueError(f"not an .npz archive ({type(exc).__name__}: {exc})") from exc
        with archive:
            try:
                return _arrays(archive, size)
            except _READ_ERRORS as exc:
                raise ValueError(f"an array is unreadable ({type(exc).__name__}: {exc})") from exc


def _arrays(archive: zipfile.ZipFile, size: int) -> dict[str, np.ndarray[Any, Any]]:
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    members = archive.infolist()
    if not members:
        raise ValueError("not an .npz archive (no array)")
    for info in members:
        name = info.filename
        if not name.endswith(".npy") or name[:-4] in arrays:
            raise ValueError(f"not an .npz archive of arrays (a member {name[:40]!r})")
        if info.compress_type != zipfile.ZIP_STORED or info.file_size > size:
            raise ValueError(f"the array {name[:40]!r} is compressed or larger than the file")
        with archive.open(info) as member:
            shape, dtype, start = _header(member)
            if dtype.hasobject:
                raise ValueError(f"the array {name[:40]!r} holds objects (pickles are never read)")
            declared = math.prod(shape) * dtype.itemsize
            if declared != info.file_size - start:
                raise ValueError(
                    f"the array {name[:40]!r} declares {declared:,} bytes; the archive holds "
                    f"{info.file_size - start:,}"
                )
        with archive.open(info) as member:
            arrays[name[:-4]] = npy.read_array(
                member, allow_pickle=False, max_header_size=_MAX_HEADER
            )
    return arrays
