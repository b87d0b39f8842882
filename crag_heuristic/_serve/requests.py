"""The gate service's request bodies: JSON objects read within their limits and checked.

Every body is one JSON object (UTF-8, at most ``max_body_bytes``, nested at most
64 deep, no lone surrogate in any string). Anything else is an
:class:`~crag_heuristic.InputError` (400) saying what, before any work: a query
that is not a non-blank string of at most ``max_query_chars`` characters, a
``k`` that is not an integer in ``[1, max_k]``, an unknown key or option, a
chunk that is not a chunk.

A lone surrogate (``"\\ud800"`` escaped in the JSON: valid JSON, not valid
Unicode) cannot be written back as UTF-8, and the answer echoes the query and
the chunks' ids: it is refused at the door, typed by where it is
(:class:`~crag_heuristic.InvalidQueryError` in the query,
:class:`~crag_heuristic.InvalidChunkError` in a chunk's field, else
:class:`~crag_heuristic.InputError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from .._checks import check_query
from .._exceptions import (
    InputError,
    InvalidChunkError,
    InvalidQueryError,
    RequestTooLargeError,
    _short,
)
from .._types import Chunk
from .settings import REQUEST_OPTIONS, ServeSettings

MAX_NESTING = 64
# a JSON escape of a surrogate code point (a pair is fine, a lone one is not Unicode)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


async def read_body(chunks: AsyncIterator[bytes], content_length: str | None, limit: int) -> bytes:
    """The body, refused past ``limit`` bytes: by its declared length at once, else
    as it arrives (a chunked body is read no further than the limit).

    Raises:
        RequestTooLargeError: a body past the limit.
        InputError: a declared length that is not a number.
    """
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise InputError(f"Content-Length {_short(content_length)} is not a number") from None
        if declared > limit:
            raise RequestTooLargeError(
                f"a body of {declared:,} bytes; this service takes {limit:,} at most", limit=limit
            )
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise RequestTooLargeError(
                f"a body past {limit:,} bytes; this service takes {limit:,} at most", limit=limit
            )
    return bytes(body)


def parse_object(body: bytes) -> dict[str, Any]:
    """A body as a JSON object.

    Raises:
        InputError: not UTF-8, not JSON, not an object, or nested too deep.
    """
    try:
        data = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"the body is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"the body is not JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"the body nests deeper than {MAX_NESTING} levels") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"the body is unreadable JSON: {exc}") from None
    if isinstance(data, dict | list) and _depth(data) > MAX_NESTING:
        raise InputError(f"the body nests deeper than {MAX_NESTING} levels")
    if not isinstance(data, dict):
        raise InputError(f"the body must be a JSON object, got {type(data).__name__}")
    if _SURROGATE_ESCAPE.search(body) is not None:  # rare: only then every string is read
        _refuse_surrogates(data)
    return data


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refuse_surrogates(data: dict[str, Any]) -> None:
    """Refuse the first string (key or value) holding a lone surrogate, typed by where.

    Raises:
        InvalidQueryError: in the query.
        InvalidChunkError: in a field of ``chunks[i]`` (the field named).
        InputError: anywhere else (the key path named).
    """
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        item, path = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, value in pairs:
            here = (*path, key)
            if (isinstance(key, str) and not _is_unicode(key)) or (
                isinstance(value, str) and not _is_unicode(value)
            ):
                _surrogate_error(here)
            if isinstance(value, dict | list):
                stack.append((value, here))


def _surrogate_error(path: tuple[Any, ...]) -> None:
    reason = "holds a lone surrogate (an escaped \\ud800-\\udfff alone): not valid Unicode"
    shown = [str(part) if _is_unicode(str(part)) else "?" for part in path]
    if path == ("query",):
        raise InvalidQueryError("<not shown>", reason)
    if len(path) >= 3 and path[0] == "chunks" and isinstance(path[1], int):
        raise InvalidChunkError(shown[2], "<not shown>", reason, index=path[1])
    raise InputError(f"the body's {'.'.join(shown)} {reason}")


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return deepest


def _keys(data: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise InputError(
            f"unknown {where} {', '.join(map(repr, unknown))}; known: {', '.join(allowed)}"
        )


def _query(data: dict[str, Any], settings: ServeSettings) -> str:
    if "query" not in data:
        raise InputError("the body needs a 'query' (a non-blank string)")
    query = check_query(data["query"])
    if len(query) > settings.max_query_chars:
        raise InputError(
            f"the query has {len(query):,} characters; this service takes "
            f"{settings.max_query_chars:,} at most"
        )
    return query


@dataclass(frozen=True, slots=True)
class RetrieveRequest:
    """A /v1/retrieve or /v1/stream body: ``query``, ``k`` (optional) and ``options``
    (router settings for this request: :data:`REQUEST_OPTIONS`)."""

    query: str
    k: int | None
    options: dict[str, Any]

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> RetrieveRequest:
        _keys(data, ("query", "k", "options"), "key")
        query = _query(data, settings)
        k = data.get("k")
        if k is not None and (
            isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= settings.max_k
        ):
            raise InputError(f"k must be an integer in [1, {settings.max_k}], got {_short(k)}")
        options = data.get("options")
        options = {} if options is None else options
        if not isinstance(options, dict):
            raise InputError(f"options must be an object, got {type(options).__name__}")
        _keys(options, REQUEST_OPTIONS, "option")
        for name in ("gate_k", "fetch_k"):
            value = options.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value > settings.max_k:
                raise InputError(f"{name} must be at most {settings.max_k}, got {value}")
        return cls(query, k, options)


@dataclass(frozen=True, slots=True)
class EvaluateRequest:
    """A /v1/evaluate body: ``query``, the caller's ``chunks`` (:meth:`Chunk.to_dict`'s
    keys) and ``options`` (``refine``: also run knowledge refinement, with
    ``token_budget``)."""

    query: str
    chunks: list[Chunk]
    refine: bool
    token_budget: int | None

    @classmethod
    def parse(cls, data: dict[str, Any], settings: ServeSettings) -> EvaluateRequest:
        _keys(data, ("query", "chunks", "options"), "key")
        query = _query(data, settings)
        rows = data.get("chunks")
        if not isinstance(rows, list):
            raise InputError("the body needs 'chunks': a list of chunk objects")
        if len(rows) > settings.max_chunks:
            raise InputError(
                f"{len(rows):,} chunks; this service grades {settings.max_chunks:,} at most"
            )
        chunks = []
        for index, row in enumerate(rows):
            try:
                chunks.append(Chunk.from_dict(row))
            except InvalidChunkError as exc:  # said with its position in the list
                raise InvalidChunkError(
                    exc.field, exc.value, exc.reason, chunk_id=exc.chunk_id, index=index
                ) from None
        options = data.get("options")
        options = {} if options is None else options
        if not isinstance(options, dict):
            raise InputError(f"options must be an object, got {type(options).__name__}")
        _keys(options, ("refine", "token_budget"), "option")
        refine = options.get("refine", False)
        budget = options.get("token_budget")
        if not isinstance(refine, bool):
            raise InputError(f"options.refine must be true or false, got {_short(refine)}")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
        ):
            raise InputError(
                f"options.token_budget must be a positive integer, got {_short(budget)}"
            )
        return cls(query, chunks, refine, budget)
