"""Input checks at the library's doors: the query and ``k``.

They sit beside the data model (``_types.py`` checks chunks) so that every
part that takes a query (retrievers, expanders, the router, the evaluator)
can check it without importing the evaluator: dependencies point down.
"""

from __future__ import annotations

from typing import Any

from ._exceptions import InputError, InvalidQueryError

__all__ = ["check_k", "check_query"]


def check_query(query: Any) -> str:
    """Return ``query`` if it is a non-blank string, else raise InvalidQueryError."""
    if not isinstance(query, str):
        raise InvalidQueryError(query, f"must be a string, got {type(query).__name__}")
    if not query.strip():
        raise InvalidQueryError(query, "must not be empty or whitespace")
    return query


def check_k(k: Any) -> int:
    """Return ``k`` if it is a positive integer, else raise InputError."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return k
