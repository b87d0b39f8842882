"""An index directory's manifest: what it holds, written last, checked first.

``manifest.json`` (UTF-8 JSON, one object)::

    kind               "crag_heuristic.IndexDirectory"
    format_version     FORMAT_VERSION: this library reads this version only
    library_version    the crag-heuristic that built it (recorded, not checked)
    created            UTC time, ISO 8601
    documents          the corpus's size (FAISS ntotal, docstore lines, statistics n_docs)
    analyzer           the analyzer's fingerprint (the statistics', the BM25 side's, LSA's)
    embedder           {"kind": "lsa", "file": "embedder.npz", "dimension"} or
                       {"kind": "spec", "spec": "package.module:attribute", "dimension"}
    faiss              {"metric": "ip" | "l2", "normalized": true, "dimension"}
    corpus_stats       {"fingerprint", "terms", "analyses"}: CorpusStats.fingerprint() ...
    bm25               {"variant", "k1", "b"}
    files              name -> {"bytes", "sha256"}: every other file the loaders read
    build_seconds      stage -> seconds it took (how the index was made, for reports)

With a secret (``IndexDirectory.build(..., secret=...)``, ``index --secret-file``)
the manifest is written signed: ``{"mac", "exp": null, "v": <the manifest>}``,
HMAC-SHA256 over its exact text (:mod:`crag_heuristic._cache.signing`, the
key :data:`SIGNED_KEY`), so that whoever can write the directory cannot
rewrite the list of files and their digests without the secret.

A directory is refused (:class:`~crag_heuristic.IndexDirectoryError`, an
``InputError``) when the manifest is missing, unreadable or larger than
:data:`MAX_MANIFEST_BYTES`, names another kind or format version, has a field
of the wrong type or out of its bounds, is signed and read without the secret
(or unsigned, or signed otherwise, where a secret is given), or lists other
files than the parts its loaders read (:data:`PARTS`, and ``embedder.npz`` for
an LSA embedder: plain names, no path); and when a file it lists is not a
regular file of the directory (a symlink is refused, whatever it points to),
is missing, of another size, or (unless the check is asked to skip it) of
another SHA-256: a file changed since the build. No error shows a file's size
or digest.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._cache.signing import Signer, signer_of
from .._exceptions import IndexDirectoryError
from .._version import __version__
from .docstore import INDEX, LINES
from .embedders import LSA, LSA_FILE

MANIFEST = "manifest.json"
KIND = "crag_heuristic.IndexDirectory"
FORMAT_VERSION = 1
SIGNED_KEY = KIND + ":manifest"
"""What a manifest is signed for."""
VECTORS = "vectors.faiss"
STATS = "stats.npz"
BM25 = "bm25.npz"
METRICS = ("ip", "l2")
PARTS = (VECTORS, LINES, INDEX, STATS, BM25)
"""The files every index directory lists (``embedder.npz`` too, for an LSA embedder)."""
MAX_MANIFEST_BYTES = 1 << 20
MAX_DOCUMENTS = 1 << 40
MAX_DIMENSION = 1 << 16
_BLOCK = 1 << 20  # bytes read at a time when hashing
_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", re.ASCII)
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
_ENVELOPE = frozenset({"mac", "exp", "v"})
_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def file_digest(path: Path) -> str:
    """The SHA-256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def open_part(folder: Path, name: str) -> int:
    """A file descriptor of the regular file ``name`` in ``folder``, never through a
    symlink (``O_NOFOLLOW``) nor blocking on a FIFO.

    Raises:
        IndexDirectoryError: ``field="file"``: missing, a symlink, or not a regular file.
    """
    where = os.fspath(folder)
    try:
        fd = os.open(folder / name, _READ)
    except FileNotFoundError:
        raise IndexDirectoryError(where, "file", f"{name} missing", name) from None
    except OSError:  # ELOOP: a symlink; or unreadable
        raise IndexDirectoryError(
            where, "file", f"{name}: a symlink, or unreadable", "a regular file"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IndexDirectoryError(where, "file", f"{name}: not a regular file", "a regular file")
    return fd


def expected_files(embedder: Mapping[str, Any]) -> frozenset[str]:
    """The files a manifest with this embedder lists: :data:`PARTS`, and the LSA
    projection's for an LSA embedder."""
    return frozenset((*PARTS, LSA_FILE) if embedder.get("kind") == LSA else PARTS)


@dataclass(frozen=True)
class IndexManifest:
    """What an index directory holds (see the module doc); read with :meth:`read`."""

    documents: int
    analyzer: str
    embedder: Mapping[str, Any]
    faiss: Mapping[str, Any]
    corpus_stats: Mapping[str, Any]
    bm25: Mapping[str, Any]
    files: Mapping[str, Mapping[str, Any]]
    build_seconds: Mapping[str, float] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    library_version: str = __version__
    created: str = field(
        default_factory=lambda: (
            datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        )
    )
    signed: bool = False
    """Whether the manifest was read (or written) signed."""

    @property
    def dimension(self) -> int:
        """The vectors' dimension."""
        return int(self.faiss["dimension"])

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON object."""
        return {
            "kind": KIND,
            "format_version": self.format_version,
            "library_version": self.library_version,
            "created": self.created,
            "documents": self.documents,
            "analyzer": self.analyzer,
            "embedder": dict(self.embedder),
            "faiss": dict(self.faiss),
            "corpus_stats": dict(self.corpus_stats),
            "bm25": dict(self.bm25),
            "files": {name: dict(entry) for name, entry in sorted(self.files.items())},
            "build_seconds": dict(self.build_seconds),
        }

    def write(self, folder: Path, *, secret: str | bytes | Signer | None = None) -> Path:
        """Write ``manifest.json`` into ``folder`` (signed, with a ``secret``)."""
        path = folder / MANIFEST
        text = json.dumps(self.to_dict(), indent=2)
        signer = signer_of(secret, "secret")
        if signer is not None:
            text = signer.sign(SIGNED_KEY, text)
        path.write_text(text + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(
        cls, folder: str | os.PathLike[str], *, secret: str | bytes | Signer | None = None
    ) -> IndexManifest:
        """The manifest of ``folder``, checked (see the module doc): with a ``secret``,
        it must be signed with it; without one, it must not be signed.

        Raises:
            IndexDirectoryError: no directory, no manifest, an unreadable, oversized,
                unsigned or badly signed one, or one of another kind or format
                version, or with a field that does not fit.
            ConfigError: a secret shorter than 16 bytes (never shown).
        """
        where = os.fspath(folder)
        signer = signer_of(secret, "secret")
        if not Path(folder).is_dir():
            raise IndexDirectoryError(where, "manifest", "no such directory", "a directory")
        try:
            fd = open_part(Path(folder), MANIFEST)
        except IndexDirectoryError as exc:
            found = "missing" if str(exc.found).endswith(" missing") else exc.found
            raise IndexDirectoryError(where, "manifest", found, MANIFEST) from None
        try:
            with os.fdopen(fd, "rb") as handle:
                raw = handle.read(MAX_MANIFEST_BYTES + 1)
            if len(raw) > MAX_MANIFEST_BYTES:
                raise IndexDirectoryError(
                    where, "manifest", "larger than 1 MiB", "a manifest crag-heuristic wrote"
                )
            text = raw.decode("utf-8").strip()
            data = json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise IndexDirectoryError(
                where, "manifest", f"unreadable ({type(exc).__name__})", "JSON"
            ) from None
        signed = isinstance(data, dict) and set(data) == _ENVELOPE
        if signer is None and signed:
            raise IndexDirectoryError(
                where, "signature", "a signed manifest", "the secret it was signed with"
            )
        if signer is not None:
            if not signed:
                raise IndexDirectoryError(
                    where, "signature", "an unsigned manifest", "a manifest signed with the secret"
                )
            try:
                data = json.loads(signer.unseal(SIGNED_KEY, text))
            except ValueError:
                raise IndexDirectoryError(
                    where,
                    "signature",
                    "a signature that does not match",
                    "a manifest signed with the secret",
                ) from None
        return cls._checked(where, data, signed)

    @classmethod
    def _checked(cls, where: str, data: Any, signed: bool) -> IndexManifest:
        if not isinstance(data, dict) or data.get("kind") != KIND:
            found = data.get("kind") if isinstance(data, dict) else type(data).__name__
            raise IndexDirectoryError(where, "kind", found, KIND)
        version = data.get("format_version")
        if version != FORMAT_VERSION or type(version) is not int:
            raise IndexDirectoryError(where, "format_version", version, FORMAT_VERSION)
        try:
            faiss = _mapping(data["faiss"])
            dimension = _integer(faiss["dimension"], MAX_DIMENSION)
            if faiss["metric"] not in METRICS or not isinstance(faiss["normalized"], bool):
                raise ValueError(f"faiss: a metric of {list(METRICS)} and a bool 'normalized'")
            embedder = _embedder(_mapping(data["embedder"]), dimension)
            manifest = cls(
                documents=_integer(data["documents"], MAX_DOCUMENTS),
                analyzer=_string(data["analyzer"]),
                embedder=embedder,
                faiss=faiss,
                corpus_stats=_mapping(data["corpus_stats"]),
                bm25=_mapping(data["bm25"]),
                files=_files(_mapping(data["files"]), expected_files(embedder)),
                build_seconds=_mapping(data.get("build_seconds", {})),
                format_version=version,
                library_version=_string(data.get("library_version", "")),
                created=_string(data.get("created", "")),
                signed=signed,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexDirectoryError(
                where, "manifest", f"incomplete or invalid ({type(exc).__name__}: {exc})",
                "every field, of its type",
            ) from None  # fmt: skip
        return manifest

    def check_files(self, folder: str | os.PathLike[str], *, digests: bool = True) -> None:
        """Refuse a directory whose files are not the ones the manifest lists: each a
        regular file of the directory (no symlink), of its size and (with
        ``digests``) of its SHA-256. No error shows a size or a digest.

        Raises:
            IndexDirectoryError: ``field="file"``, naming the first file that differs.
        """
        where = os.fspath(folder)
        for name, entry in sorted(self.files.items()):
            fd = open_part(Path(folder), name)
            with os.fdopen(fd, "rb") as handle:
                if os.fstat(handle.fileno()).st_size != entry["bytes"]:
                    raise IndexDirectoryError(
                        where, "file", f"{name} of another size", "the size the build wrote"
                    )
                if digests:
                    digest = hashlib.sha256()
                    for block in iter(lambda: handle.read(_BLOCK), b""):
                        digest.update(block)
                    if digest.hexdigest() != entry["sha256"]:
                        raise IndexDirectoryError(
                            where, "file", f"{name} of another SHA-256", "the bytes the build wrote"
                        )


def _integer(value: Any, largest: int) -> int:
    if type(value) is not int or not 1 <= value <= largest:
        raise ValueError(f"an integer in [1, {largest}], got {str(value)[:20]!r}")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a string, got {type(value).__name__}")
    return value


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"an object, got {type(value).__name__}")
    return value


def _embedder(entry: dict[str, Any], dimension: int) -> dict[str, Any]:
    """The embedder's entry, checked: the LSA projection's file (its one name), or a
    spec of the form ``package.module:attribute`` (never imported here)."""
    if entry.get("dimension") != dimension or type(entry.get("dimension")) is not int:
        raise ValueError("embedder: a 'dimension', the vectors' dimension")
    if entry.get("kind") == LSA:
        if entry.get("file") != LSA_FILE:
            raise ValueError(f"embedder: an LSA projection's file is {LSA_FILE}")
    elif entry.get("kind") == "spec":
        spec = entry.get("spec")
        if not isinstance(spec, str) or len(spec) > 200 or not _SPEC.fullmatch(spec):
            raise ValueError("embedder: a spec 'package.module:attribute'")
    else:
        raise ValueError("embedder: of kind 'lsa' or 'spec'")
    return entry


def _files(files: dict[str, Any], expected: frozenset[str]) -> dict[str, dict[str, Any]]:
    """The files' entries, checked: exactly the parts the loaders read (plain names: no
    path, so nothing outside the directory), each with a size and a SHA-256."""
    if set(files) != expected:
        unknown = sorted(str(name)[:40] for name in set(files) - expected)
        missing = sorted(expected - set(files))
        raise ValueError(
            "files: the parts of an index directory"
            + (f"; it lists other files: {unknown[:3]}" if unknown else "")
            + (f"; it leaves out {missing}" if missing else "")
        )
    checked = {}
    for name, entry in files.items():
        entry = _mapping(entry)
        size, digest = entry.get("bytes"), entry.get("sha256")
        if type(size) is not int or size < 0 or not isinstance(digest, str):
            raise ValueError(f"files: {name}'s 'bytes' and 'sha256'")
        if not _SHA256.fullmatch(digest):
            raise ValueError(f"files: {name}'s 'sha256' of 64 hex digits")
        checked[name] = entry
    return checked
