"""Deterministic cache keys: the same inputs give the same key in every process.

Keys are built with :mod:`hashlib` (SHA-256) over a canonical JSON payload,
never with Python's ``hash()``, which is salted per process. Layout::

    <namespace>:v<version>:<kind>:<sha256 hex of the payload>

    crag:v0.1.0:eval:3f1c...e9      an evaluation of (query, chunks, config)
    crag:v0.1.0:web:a07b...12       web results of (query, max_results, engine)
    crag:v0.1.0:grade:5d2e...40     a cascade grader's answer for (grader, query, one chunk)

``namespace`` separates applications sharing one Redis (default ``"crag"``);
``version`` is the library version, so an upgrade that changes the evaluator
never reads an older release's entries; ``kind`` says what the value holds.

The canonical payload is ``json.dumps(payload, sort_keys=True,
separators=(",", ":"), ensure_ascii=True, allow_nan=False)`` encoded as ASCII;
``ensure_ascii`` writes unpaired surrogates in a query as ``\\udXXX`` escapes,
so any string hashes. An evaluation's key is the SHA-256 of a header, a NUL
byte, then one 32-byte digest per chunk (:func:`chunk_digest`), in input order::

    header = {"analyzer": <analyzer fingerprint or null>, "chunks": <how many>,
              "config": <config fingerprint>, "corpus": <corpus fingerprint or null>,
              "evidence": "all" or "gate", "query": <query>, "schema": 4, "type": "eval"}
    chunk  = SHA-256(canonical [id, kind, parent, score, sentence, source] + NUL + text)

A chunk's digest depends on it alone, so the router computes it once per chunk
(:class:`ChunkDigests`, a bounded memo keyed by every field it reads, the text
among them) and a repeated list costs a look-up per chunk, not a hash of every
text (issue 27: the key was a third of a cache hit). The score, its kind, the
source, the parent id and the sentence score are part of the key because they
change the evaluation (semantic coherence and source diversity); ``metadata``
is not, since the evaluator never reads it. Chunk order is kept: it changes
which chunk is ``top``. ``evidence`` is ``"all"`` for an evaluator with
``all_evidence=True`` (its evaluations record every feature) and ``"gate"``
otherwise: every setting that changes an evaluation is in its key. A web
payload is ``{"max_results": n, "query": q, "schema": 4, "searcher":
fingerprint, "type": "web"}``. A grade payload is ``{"chunk": <id>, "grader":
<grader fingerprint>, "query": q, "schema": 4, "text": <sha256 hex of the text>,
"type": "grade"}``: one chunk per key, so a later query's list that shares
chunks reuses their answers (the score, kind and source are not part of it: a
grader reads only the query and the text). ``schema`` changes whenever this
layout, or the layout of the values stored under the keys, does (schema 2:
evaluations keyed by their evidence, and every value sealed with its key, see
``crag_heuristic._router.cached``; 4: evaluation keys from per-chunk digests).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._checks import check_query
from .._exceptions import ConfigError, InputError
from .._types import Chunk, check_chunks
from .._version import __version__

KEY_SCHEMA = 4
"""Version of the payload layout; part of every payload."""

_PART = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")
_KIND = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def canonical_json(payload: Any) -> bytes:
    """The canonical ASCII JSON bytes of ``payload`` (sorted keys, compact, no NaN).

    Raises:
        InputError: when ``payload`` is not JSON-serialisable.
    """
    try:
        text = json.dumps(
            payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise InputError(f"cache key payload is not JSON-serialisable: {exc}") from exc
    return text.encode("ascii")


def text_digest(text: str) -> str:
    """SHA-256 hex digest of ``text`` as UTF-8 (unpaired surrogates kept as-is)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _check_part(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _PART.match(value):
        raise ConfigError(
            name, value, "must be 1-200 characters without whitespace or control characters"
        )
    return value


def cache_key(
    kind: str,
    payload: Mapping[str, Any],
    *,
    namespace: str = "crag",
    version: str = __version__,
) -> str:
    """``<namespace>:v<version>:<kind>:<sha256 of the canonical payload>``.

    The building block of :func:`evaluation_key` and :func:`web_key`, for other
    kinds of cached values. ``schema`` and ``type`` are added to the payload.

    Raises:
        ConfigError: a bad ``namespace``, ``version`` or ``kind``.
        InputError: the payload is not JSON-serialisable.
    """
    _check_part("namespace", namespace)
    _check_part("version", version)
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise ConfigError("kind", kind, "must be a short lower-case identifier, e.g. 'eval'")
    body = {**payload, "schema": KEY_SCHEMA, "type": kind}
    digest = hashlib.sha256(canonical_json(body)).hexdigest()
    return f"{namespace}:v{version}:{kind}:{digest}"


def _check_fingerprint(name: str, value: Any, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(name, value, "must be a non-empty string" + (" or None" * optional))
    return value


def _fingerprint(name: str, value: Any) -> str:
    checked = _check_fingerprint(name, value, optional=False)
    assert checked is not None
    return checked


def chunk_digest(chunk: Chunk) -> bytes:
    """The 32-byte SHA-256 of one chunk's part of an evaluation key: the canonical JSON
    of ``[id, kind, parent_id, score, sentence_score, source]`` (a score of -0.0 as
    0.0), a NUL byte, then the text's UTF-8 (unpaired surrogates kept as-is)."""
    score = None if chunk.score is None else chunk.score + 0.0  # -0.0 -> 0.0
    fields = [
        chunk.id,
        chunk.score_kind.value,
        chunk.parent_id,
        score,
        chunk.sentence_score,
        chunk.source,
    ]
    digest = hashlib.sha256(canonical_json(fields))
    digest.update(b"\x00")
    digest.update(chunk.text.encode("utf-8", "surrogatepass"))
    return digest.digest()


class ChunkDigests:
    """:func:`chunk_digest`, computed once per chunk: a bounded memo keyed by every
    field the digest reads (the text among them, compared in full: a chunk whose
    text changed is another entry, never a stale digest).

    A text the retriever hands out again is the same string object, whose hash
    Python keeps, so a lookup costs a tuple's hash and an identity test; a digest
    costs a SHA-256 over the text. The memo is emptied when it holds ``size``
    entries (bounded memory, no bookkeeping per lookup).

    Args:
        size: the most chunks remembered.
    """

    def __init__(self, size: int = 8192) -> None:
        self._size = size
        self._memo: dict[tuple[Any, ...], bytes] = {}

    def __call__(self, chunk: Chunk) -> bytes:
        entry = (
            chunk.id,
            chunk.text,
            chunk.score,
            chunk.score_kind,
            chunk.source,
            chunk.parent_id,
            chunk.sentence_score,
        )
        digest = self._memo.get(entry)
        if digest is None:
            digest = chunk_digest(chunk)
            if len(self._memo) >= self._size:
                self._memo.clear()
            self._memo[entry] = digest
        return digest


def evaluation_key(
    query: str,
    chunks: Sequence[Chunk],
    *,
    config_fingerprint: str,
    corpus_fingerprint: str | None = None,
    analyzer_fingerprint: str | None = None,
    all_evidence: bool = False,
    namespace: str = "crag",
    version: str = __version__,
) -> str:
    """The cache key of an evaluation: ``crag:v<version>:eval:<hex>``.

    Args:
        query: the query, exactly as evaluated.
        chunks: the chunks, in the order evaluated.
        config_fingerprint: ``EvaluatorConfig.fingerprint()``.
        corpus_fingerprint: ``CorpusStats.fingerprint()`` when IDF weights are used.
        analyzer_fingerprint: ``Analyzer.fingerprint`` when the evaluator's
            analyzer is not the default one.
        all_evidence: the evaluator's ``all_evidence``.
        namespace: the first part of the key.
        version: the library version part of the key.

    Raises:
        InvalidQueryError: ``query`` is not a string, or is blank.
        InvalidChunkError: a chunk is not a :class:`Chunk` or ids repeat.
        ConfigError: a bad fingerprint, ``namespace`` or ``version``.
    """
    _check_part("namespace", namespace)
    _check_part("version", version)
    return checked_evaluation_key(
        check_query(query),
        check_chunks(chunks),
        config_fingerprint=_fingerprint("config_fingerprint", config_fingerprint),
        corpus_fingerprint=_check_fingerprint(
            "corpus_fingerprint", corpus_fingerprint, optional=True
        ),
        analyzer_fingerprint=_check_fingerprint(
            "analyzer_fingerprint", analyzer_fingerprint, optional=True
        ),
        all_evidence=all_evidence,
        namespace=namespace,
        version=version,
    )


def checked_evaluation_key(
    query: str,
    chunks: Sequence[Chunk],
    *,
    config_fingerprint: str,
    corpus_fingerprint: str | None,
    analyzer_fingerprint: str | None,
    all_evidence: bool,
    namespace: str = "crag",
    version: str = __version__,
    digest: Callable[[Chunk], bytes] = chunk_digest,
) -> str:
    """:func:`evaluation_key` of inputs checked already (the router's: its query was
    checked at the door, its chunks where the retriever answered), each chunk's
    digest from ``digest`` (a :class:`ChunkDigests`, to compute each once)."""
    header = {
        "analyzer": analyzer_fingerprint,
        "chunks": len(chunks),
        "config": config_fingerprint,
        "corpus": corpus_fingerprint,
        "evidence": "all" if all_evidence else "gate",
        "query": query,
        "schema": KEY_SCHEMA,
        "type": "eval",
    }
    hashed = hashlib.sha256(canonical_json(header))
    hashed.update(b"\x00")
    hashed.update(b"".join(map(digest, chunks)))
    return f"{namespace}:v{version}:eval:{hashed.hexdigest()}"


def searcher_fingerprint(searcher: Any) -> str:
    """What identifies a web searcher in :func:`web_key`: its ``fingerprint`` (an
    attribute or a method: its instance and settings, as
    ``SearxngClient.fingerprint`` gives them), else its class's full name (give a
    searcher of your own a fingerprint when two of them answer differently)."""
    value = getattr(searcher, "fingerprint", None)
    if callable(value):
        value = value()
    if value:
        return str(value)
    kind = type(searcher)
    return f"{kind.__module__}.{kind.__qualname__}"


def web_key(
    query: str,
    max_results: int,
    *,
    searcher_fingerprint: str,
    namespace: str = "crag",
    version: str = __version__,
) -> str:
    """The cache key of web search results: ``crag:v<version>:web:<hex>``.

    Args:
        query: the web query, exactly as sent.
        max_results: how many results were asked for.
        searcher_fingerprint: what identifies the engine and its settings
            (endpoint, language, categories ...), from the searcher.
        namespace: the first part of the key.
        version: the library version part of the key.

    Raises:
        InvalidQueryError: ``query`` is not a string, or is blank.
        ConfigError: a bad ``max_results``, fingerprint, ``namespace`` or ``version``.
    """
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise ConfigError("max_results", max_results, "must be an integer >= 1")
    payload = {
        "max_results": max_results,
        "query": check_query(query),
        "searcher": _check_fingerprint(
            "searcher_fingerprint", searcher_fingerprint, optional=False
        ),
    }
    return cache_key("web", payload, namespace=namespace, version=version)


def grade_key(
    query: str,
    chunk: Chunk,
    *,
    grader_fingerprint: str,
    namespace: str = "crag",
    version: str = __version__,
) -> str:
    """The cache key of a cascade grader's answer for one chunk: ``crag:v<version>:grade:<hex>``.

    Args:
        query: the query, exactly as graded.
        chunk: the chunk (its id and the digest of its text enter the key).
        grader_fingerprint: the grader's ``fingerprint``.
        namespace: the first part of the key.
        version: the library version part of the key.

    Raises:
        InvalidQueryError: ``query`` is not a string, or is blank.
        InvalidChunkError: ``chunk`` is not a :class:`Chunk`.
        ConfigError: a bad fingerprint, ``namespace`` or ``version``.
    """
    [chunk] = check_chunks([chunk])
    payload = {
        "chunk": chunk.id,
        "grader": _check_fingerprint("grader_fingerprint", grader_fingerprint, optional=False),
        "query": check_query(query),
        "text": text_digest(chunk.text),
    }
    return cache_key("grade", payload, namespace=namespace, version=version)
