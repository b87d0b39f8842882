"""A retriever's scope: the filter it searches within, part of what it is.

A retriever that searches only part of what it holds (one tenant's documents:
a Qdrant filter, a FAISS ID selector, a ``filter`` in a LangChain store's
search keywords, :meth:`BM25Retriever.with_filter`) says so with a string
``scope`` attribute that names the filter; ``None`` (or no attribute) means
everything it holds. The router reads it at construction (:func:`scope_of`):
a correction must never bring in documents outside the filter, so a filtered
retriever beside a lexical retriever that searches everything is refused, the
error naming the fix (a lexical retriever filtered the same way). A user's
own retriever declares ``scope`` the same way.

:func:`metadata_filter` reads a LangChain metadata filter (the form
LangChain's FAISS store takes: ``{"tenant": "a"}``, a list for "one of",
operators ``$eq``, ``$neq``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``,
``$nin``, ``$and``, ``$or``, ``$not``) as a predicate over a chunk's metadata,
so that the same filter restricts a store and :class:`BM25Retriever` alike.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._exceptions import InputError

SCOPE_KEYS = ("filter", "where", "where_document", "namespace", "expr", "pre_filter")
"""The search keywords of LangChain stores that restrict a search to part of the
store (FAISS, Chroma, Qdrant, PGVector: ``filter``; Chroma ``where`` and
``where_document``; Pinecone ``namespace``; Milvus ``expr``; MongoDB Atlas
``pre_filter``)."""

MetadataPredicate = Callable[[Mapping[str, Any]], bool]

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$neq": operator.ne,
    "$gt": operator.gt,
    "$lt": operator.lt,
    "$gte": operator.ge,
    "$lte": operator.le,
    "$in": lambda value, allowed: value in allowed,
    "$nin": lambda value, allowed: value not in allowed,
}


def scope_of(retriever: object) -> str | None:
    """What ``retriever`` searches within (its ``scope``), or ``None``: everything it holds."""
    value = getattr(retriever, "scope", None)
    return value if isinstance(value, str) and value else None


def check_scopes(retriever: object, lexical: object) -> None:
    """Refuse a filtered ``retriever`` beside a ``lexical`` retriever that searches
    everything it holds: its rankings, fused into the retrieval, would bring in
    documents outside the filter.

    Raises:
        InputError: that combination, naming the fix.
    """
    scope = scope_of(retriever)
    if lexical is None or scope is None or scope_of(lexical) is not None:
        return
    raise InputError(
        f"{type(retriever).__name__} searches within a filter ({scope}), but the lexical "
        f"retriever {type(lexical).__name__} searches everything it holds: its corrections "
        "would bring in documents outside the filter (another tenant's). Give the router a "
        "lexical retriever filtered the same way (lexical=BM25Retriever(documents)"
        ".with_filter(...), or any retriever whose scope names its filter), or none"
    )


def search_scope(search_kwargs: Mapping[str, Any]) -> str | None:
    """The scope a LangChain store's search keywords give its searches (see
    :data:`SCOPE_KEYS`), or ``None``."""
    keys = [key for key in SCOPE_KEYS if search_kwargs.get(key) is not None]
    if not keys:
        return None
    return "search_kwargs " + ", ".join(f"{key}={describe(search_kwargs[key])}" for key in keys)


def describe(where: object) -> str:
    """A filter in a few characters: a digest of its JSON (a mapping), a callable's
    name; never its values (a tenant's name may be one)."""
    if callable(where):
        return f"<{getattr(where, '__qualname__', type(where).__name__)}>"
    try:
        text = json.dumps(where, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(where)
    return "#" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def metadata_filter(where: Mapping[str, Any]) -> MetadataPredicate:
    """A LangChain metadata filter (see the module doc) as a predicate over metadata.

    A document whose metadata lacks a field compares as ``None``; a comparison
    that cannot be made (``None > 3``) is no match.

    Raises:
        InputError: not a mapping, or an unknown operator.
    """
    if not isinstance(where, Mapping):
        raise InputError(f"a metadata filter is a mapping, got {type(where).__name__}")
    if "$and" in where or "$or" in where:
        quantifier = all if "$and" in where else any
        parts = [
            metadata_filter(part) for part in _parts(where, "$and" if "$and" in where else "$or")
        ]
        return lambda metadata: quantifier(part(metadata) for part in parts)
    if "$not" in where:
        inner = metadata_filter(where["$not"])
        return lambda metadata: not inner(metadata)
    unknown = [key for key in where if isinstance(key, str) and key.startswith("$")]
    if unknown:
        raise InputError(f"unknown filter operator {unknown[0]!r}")
    conditions = [_condition(str(field), value) for field, value in where.items()]
    return lambda metadata: all(condition(metadata) for condition in conditions)


def _parts(where: Mapping[str, Any], key: str) -> Sequence[Mapping[str, Any]]:
    parts = where[key]
    if isinstance(parts, str | bytes) or not isinstance(parts, Sequence):
        raise InputError(f"{key} takes a list of filters, got {type(parts).__name__}")
    return parts


def _condition(field: str, value: Any) -> MetadataPredicate:
    """One field's condition: operators, a list (one of), or a value (equal)."""
    if isinstance(value, Mapping):
        checks = []
        for name, operand in value.items():
            if name not in _COMPARE:
                raise InputError(f"unknown filter operator {name!r} for field {field!r}")
            checks.append((_COMPARE[name], operand))

        def holds(metadata: Mapping[str, Any]) -> bool:
            found = metadata.get(field)
            try:
                return all(compare(found, operand) for compare, operand in checks)
            except TypeError:  # None > 3, "a" < 1: no match
                return False

        return holds
    if isinstance(value, list | tuple | set | frozenset):
        allowed = list(value)
        return lambda metadata: metadata.get(field) in allowed
    return lambda metadata: bool(metadata.get(field) == value)
