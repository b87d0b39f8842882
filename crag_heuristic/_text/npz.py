"""Reading the library's ``.npz`` files: whole, without pickles, the file closed on
every path.

``numpy.load`` on a path opens the file itself; on some bytes that are no archive
it raises before closing it (a ``ResourceWarning`` later), and on a single
``.npy`` array it returns that array, which the ``with`` of an archive cannot
take (an untyped ``AttributeError``). :func:`read_npz` opens the file, hands
numpy the handle, refuses anything but an archive, reads every array while the
file is open, and closes it.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

import numpy as np

_READ_ERRORS = (ValueError, EOFError, OSError, KeyError, zipfile.BadZipFile, RuntimeError)


def read_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray[Any, Any]]:
    """Every array of the ``.npz`` archive at ``path``, by name.

    Raises:
        OSError: the file cannot be opened (``FileNotFoundError`` when missing).
        ValueError: the file is no ``.npz`` archive, or an array of it cannot be
            read (the cause kept as ``__cause__``).
    """
    with open(path, "rb") as handle:
        try:
            loaded = np.load(handle, allow_pickle=False)
        except _READ_ERRORS as exc:
            raise ValueError(f"not an .npz archive ({type(exc).__name__}: {exc})") from exc
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive (a single array)")
        with loaded as data:
            try:
                return {name: data[name] for name in data.files}
            except _READ_ERRORS as exc:
                raise ValueError(f"an array is unreadable ({type(exc).__name__}: {exc})") from exc
