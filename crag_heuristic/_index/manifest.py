"""An index directory's manifest: what it holds, written last, checked first.

``manifest.json`` (UTF-8 JSON, one object)::

    kind               "crag_heuristic.IndexDirectory"
    format_version     FORMAT_VERSION: this library reads this version only
    library_version    the crag-heuristic that built it (recorded, not checked)
    created            UTC time, ISO 8601
    documents          the corpus's size (FAISS ntotal, docstore lines, statistics n_docs)
    analyzer           the analyzer's fingerprint (the statistics', the BM25 side's, LSA's)
    embedder           {"kind": "lsa", "file": ..., "name": "lsa-64", "dimension"} or
                       {"kind": "spec", "spec": "package.module:attribute", "name", "dimension"}
    faiss              {"metric": "ip" | "l2", "normalized": true, "dimension"}
    corpus_stats       {"fingerprint", "terms", "analyses"}: CorpusStats.fingerprint() ...
    bm25               {"variant", "k1", "b"}
    files              name -> {"bytes", "sha256"}: every other file of the directory
    build_seconds      stage -> seconds it took (how the index was made, for reports)
    gate               the directory's gate: {"status": "self-calibrated", "file": "gate.toml",
                       ...}, or "shipped" / "skipped" with notes (crag_heuristic._index.gate);
                       absent in a directory built before gates were recorded (the shipped
                       gate decides)

A directory is refused (:class:`~crag_heuristic.IndexDirectoryError`, an
``InputError``) when the manifest is missing or unreadable, names another kind or
format version, or a file it lists is missing, of another size or (unless the
check is asked to skip it) of another SHA-256: a file changed since the build.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._exceptions import IndexDirectoryError
from .._version import __version__

MANIFEST = "manifest.json"
KIND = "crag_heuristic.IndexDirectory"
FORMAT_VERSION = 1
_BLOCK = 1 << 20  # bytes read at a time when hashing


def file_digest(path: Path) -> str:
    """The SHA-256 hex digest of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


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
    gate: Mapping[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    library_version: str = __version__
    created: str = field(
        default_factory=lambda: (
            datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
        )
    )

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
            **({"gate": dict(self.gate)} if self.gate else {}),
        }

    def write(self, folder: Path) -> Path:
        """Write ``manifest.json`` into ``folder``."""
        path = folder / MANIFEST
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, folder: str | os.PathLike[str]) -> IndexManifest:
        """The manifest of ``folder``, its kind and format version checked.

        Raises:
            IndexDirectoryError: no directory, no manifest, an unreadable one, or one
                of another kind or format version.
        """
        where = os.fspath(folder)
        path = Path(folder) / MANIFEST
        if not Path(folder).is_dir():
            raise IndexDirectoryError(where, "manifest", "no such directory", "a directory")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise IndexDirectoryError(where, "manifest", "missing", MANIFEST) from None
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise IndexDirectoryError(
                where, "manifest", f"unreadable ({type(exc).__name__})", "JSON"
            ) from None
        if not isinstance(data, dict) or data.get("kind") != KIND:
            found = data.get("kind") if isinstance(data, dict) else type(data).__name__
            raise IndexDirectoryError(where, "kind", found, KIND)
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise IndexDirectoryError(where, "format_version", version, FORMAT_VERSION)
        try:
            manifest = cls(
                documents=_positive(data["documents"]),
                analyzer=str(data["analyzer"]),
                embedder=_mapping(data["embedder"]),
                faiss=_mapping(data["faiss"]),
                corpus_stats=_mapping(data["corpus_stats"]),
                bm25=_mapping(data["bm25"]),
                files={str(k): _mapping(v) for k, v in _mapping(data["files"]).items()},
                build_seconds=_mapping(data.get("build_seconds", {})),
                gate=_mapping(data.get("gate", {})),
                format_version=version,
                library_version=str(data.get("library_version", "")),
                created=str(data.get("created", "")),
            )
            manifest.dimension  # noqa: B018 - present and a number
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexDirectoryError(
                where, "manifest", f"incomplete ({type(exc).__name__}: {exc})", "every field"
            ) from None
        return manifest

    def check_files(self, folder: str | os.PathLike[str], *, digests: bool = True) -> None:
        """Refuse a directory whose files are not the ones the manifest lists: each
        present, of its size and (with ``digests``) of its SHA-256.

        Raises:
            IndexDirectoryError: ``field="file"``, naming the first file that differs.
        """
        where = os.fspath(folder)
        for name, entry in sorted(self.files.items()):
            path = Path(folder) / name
            try:
                size = path.stat().st_size
            except OSError:
                raise IndexDirectoryError(where, "file", f"{name} missing", name) from None
            if size != entry.get("bytes"):
                raise IndexDirectoryError(
                    where, "file", f"{name} of {size} bytes", f"{entry.get('bytes')} bytes"
                )
            if digests:
                digest = file_digest(path)
                if digest != entry.get("sha256"):
                    raise IndexDirectoryError(
                        where,
                        "file",
                        f"{name} with SHA-256 {digest[:16]}...",
                        f"{str(entry.get('sha256'))[:16]}...",
                    )


def _positive(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"a positive integer, got {value!r}")
    return value


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"an object, got {type(value).__name__}")
    return value
