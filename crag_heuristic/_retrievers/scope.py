"""A retriever's scope: the filter it searches within, part of what it is.

A retriever that searches only part of what it holds (one tenant's documents:
a Qdrant filter, a FAISS ID selector, a ``filter`` in a LangChain store's
search keywords, :meth:`BM25Retriever.with_filter`) says so with a string
``scope`` attribute that names the filter; ``None`` (or no attribute) means
everything it holds. The router reads it (:func:`scope_of`) at construction
and again on every call (a part replaced later is checked too): nothing may
bring in documents outside the filter, so a filtered retriever beside a
lexical retriever or a parents lookup that searches everything is refused
(:class:`~crag_heuristic.ScopeError`), the error naming the fix (the part
filtered the same way: :meth:`BM25Retriever.with_filter`,
:class:`ScopedParents`). A user's own retriever or lookup declares ``scope``
the same way.

The check proves that every part is filtered, not that the filters agree: a
lexical retriever filtered to another tenant passes it. Give every part the
same filter (one mapping, used for the store, the lexical retriever and the
parents).

:func:`metadata_filter` reads a LangChain metadata filter (the form
LangChain's FAISS store takes: ``{"tenant": "a"}``, a list for "one of",
operators ``$eq``, ``$neq``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``,
``$nin``, ``$and``, ``$or``, ``$not``) as a predicate over a chunk's metadata,
so that the same filter restricts a store and :class:`BM25Retriever` alike.
A mapping that puts ``$and``, ``$or`` or ``$not`` beside another key
(``{"tenant": "a", "$or": [...]}``) is refused (:func:`check_filter`): LangChain's
FAISS store, like most, reads the logical operator alone and drops the rest,
the tenant's condition with it; write ``{"$and": [{"tenant": "a"}, {"$or": [...]}]}``.
:func:`and_filters` narrows one filter by another that way.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._documents import to_chunk
from .._exceptions import InputError, ScopeError
from .._types import Chunk, ScoreKind

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


def check_scopes(retriever: object, lexical: object, parents: object = None) -> None:
    """Refuse a filtered ``retriever`` beside a ``lexical`` retriever or a ``parents``
    lookup that searches everything it holds: a lexical ranking fused into the
    retrieval, or a parent looked up by the id a chunk names, would bring in
    documents outside the filter.

    Raises:
        ScopeError: that combination, naming the fix.
    """
    scope = scope_of(retriever)
    if scope is None:
        return
    if lexical is not None and scope_of(lexical) is None:
        raise ScopeError(
            f"{type(retriever).__name__} searches within a filter ({scope}), but the lexical "
            f"retriever {type(lexical).__name__} searches everything it holds: its corrections "
            "would bring in documents outside the filter (another tenant's). Give the router "
            "a lexical retriever filtered the same way (lexical=BM25Retriever(documents)"
            ".with_filter(...), or any retriever whose scope names its filter), or none"
        )
    if parents is not None and scope_of(parents) is None:
        raise ScopeError(
            f"{type(retriever).__name__} searches within a filter ({scope}), but the parents "
            f"lookup {type(parents).__name__} answers for any id: a chunk whose parent_id names "
            "a parent outside the filter (another tenant's) would be replaced by it. Give the "
            "router parents filtered the same way (parents=ScopedParents(lookup, where), "
            "BM25Retriever(parents).with_filter(where), or any lookup whose scope names its "
            "filter), or none"
        )


def check_search_filters(search_kwargs: Mapping[str, Any]) -> None:
    """Refuse search keywords whose scoping filter (a mapping under one of
    :data:`SCOPE_KEYS`) cannot be proven safe (:func:`check_filter`).

    Raises:
        ScopeError: such a filter.
    """
    for key in SCOPE_KEYS:
        value = search_kwargs.get(key)
        if isinstance(value, Mapping):
            check_filter(value)


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


_LOGICAL = ("$and", "$or", "$not")


def check_filter(where: Mapping[str, Any]) -> None:
    """Refuse a metadata filter the scope check cannot prove safe: a mapping, at any
    depth, that puts ``$and``, ``$or`` or ``$not`` beside another key (see the
    module doc).

    Raises:
        ScopeError: such a mapping, with the way to write it.
    """
    stack: list[Any] = [where]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            logical = [key for key in _LOGICAL if key in item]
            if logical and len(item) > 1:
                others = sorted(str(key) for key in item if key != logical[0])
                raise ScopeError(
                    f"a metadata filter puts {logical[0]} beside {', '.join(others)}: stores "
                    f"read {logical[0]} alone and drop the rest (a tenant's condition with it), "
                    "so it is refused; write each condition as one item of an $and list "
                    '({"$and": [{"tenant": ...}, {"$or": [...]}]})'
                )
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def and_filters(scope: Mapping[str, Any], narrower: Mapping[str, Any]) -> dict[str, Any]:
    """The filter that admits what both admit: ``{"$and": [scope, narrower]}``.

    Raises:
        ScopeError: either cannot be proven safe (:func:`check_filter`).
    """
    check_filter(scope)
    check_filter(narrower)
    return {"$and": [dict(scope), dict(narrower)]}


def metadata_filter(where: Mapping[str, Any]) -> MetadataPredicate:
    """A LangChain metadata filter (see the module doc) as a predicate over metadata.

    A document whose metadata lacks a field compares as ``None``; a comparison
    that cannot be made (``None > 3``) is no match.

    Raises:
        InputError: not a mapping, or an unknown operator.
        ScopeError: ``$and`` / ``$or`` / ``$not`` beside another key
            (:func:`check_filter`).
    """
    if not isinstance(where, Mapping):
        raise InputError(f"a metadata filter is a mapping, got {type(where).__name__}")
    check_filter(where)
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


class ScopedParents:
    """A parents lookup restricted to a filter: ``get(parent_id)`` answers only a
    parent the filter admits, ``None`` for any other (as a parent not found), so a
    chunk whose ``parent_id`` names another tenant's parent keeps its own text.

    Args:
        lookup: the parents (anything with ``get`` and/or ``aget``: a ``dict`` of
            parent id -> chunk, mapping or text works).
        where: a LangChain metadata filter over the parent's metadata
            (:func:`metadata_filter`: the same mapping as the store's filter), or
            a predicate over the parent as a :class:`Chunk`. A parent without
            metadata fails a metadata filter.

    Attributes:
        scope: the filter, named (see the module doc): the router accepts it
            beside a filtered retriever.

    Raises:
        InputError: a lookup without ``get``/``aget``, a filter that is neither
            a mapping nor a callable, an unknown operator.
        ScopeError: a filter that mixes ``$and`` / ``$or`` / ``$not`` with another key.
    """

    def __init__(self, lookup: Any, where: Mapping[str, Any] | Callable[[Chunk], bool]) -> None:
        if not (hasattr(lookup, "get") or hasattr(lookup, "aget")):
            raise InputError("lookup must have get(parent_id) or aget(parent_id) (a dict works)")
        if isinstance(where, Mapping):
            matches = metadata_filter(where)
            self._admit: Callable[[Chunk], bool] = lambda parent: matches(parent.metadata)
        elif callable(where):
            self._admit = where
        else:
            raise InputError(
                "where must be a metadata filter (a mapping) or a predicate over a Chunk, "
                f"got {type(where).__name__}"
            )
        self.lookup = lookup
        inner = scope_of(lookup)
        own = f"filter {describe(where)}"
        self.scope: str = own if inner is None else f"{inner} and {own}"
        self.bounded = bool(getattr(lookup, "bounded", False)) or isinstance(lookup, dict)
        if not hasattr(lookup, "get"):
            self.get = None  # type: ignore[assignment]
        if not hasattr(lookup, "aget"):
            self.aget = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ScopedParents({type(self.lookup).__name__}, scope={self.scope!r})"

    def with_filter(self, where: Mapping[str, Any] | Callable[[Chunk], bool]) -> ScopedParents:
        """These parents narrowed by ``where`` too (both filters admit the parent)."""
        return ScopedParents(self, where)

    def _admitted(self, value: Any, parent_id: str) -> Any:
        if value is None:
            return None
        kind = ScoreKind.UNKNOWN
        parent = to_chunk(value, default_id=parent_id, score=None, score_kind=kind, retriever="p")
        return value if self._admit(parent) else None

    def get(self, parent_id: str) -> Any:
        """The parent ``parent_id`` names if the filter admits it, else ``None``."""
        return self._admitted(self.lookup.get(parent_id), parent_id)

    async def aget(self, parent_id: str) -> Any:
        """The async :meth:`get` (the lookup's ``aget``)."""
        return self._admitted(await self.lookup.aget(parent_id), parent_id)
