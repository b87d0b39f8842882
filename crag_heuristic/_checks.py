"""Input checks at the library's doors: the query, ``k`` and numbers.

They sit beside the data model (``_types.py`` checks chunks) so that every
part that takes a query (retrievers, expanders, the router, the evaluator)
can check it without importing the evaluator: dependencies point down.

A query is checked once, where it comes in: :func:`check_query` returns a
:class:`CheckedQuery`, and a part handed one trusts it (``check_query`` gives
it back as it is). Code behind a door takes ``CheckedQuery``, so ``mypy``
proves that every path to it went through the check.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, final

from ._exceptions import InputError, InvalidQueryError, _short

MAX_K = 10_000
"""The most chunks one search may ask for. A list that long is no longer a
retrieval to grade, and a FAISS search allocates ``k`` slots whatever the
index holds: ``k = 10**9`` would ask for gigabytes."""


@final
class CheckedQuery(str):
    """A query that passed the check: a string that is not blank.

    The only way to make one is the check itself (its constructor), so holding
    one is proof. It is a plain string in every other way: equal to, hashed,
    compared and JSON-encoded as its text (cache keys are unchanged), and its
    methods return plain strings. It carries nothing else. What a user gets
    back (``CRAGResult.query``, events) is a plain ``str``; a user's
    collaborators (retriever, grader) are handed this one, a ``str``.

    Raises:
        InvalidQueryError: ``query`` is not a string, or is blank.
    """

    __slots__ = ()

    def __new__(cls, query: object) -> CheckedQuery:
        if not isinstance(query, str):
            raise InvalidQueryError(query, f"must be a string, got {type(query).__name__}")
        if not query.strip():
            raise InvalidQueryError(query, "must not be empty or whitespace")
        return super().__new__(cls, query)


def check_query(query: object) -> CheckedQuery:
    """``query`` as a :class:`CheckedQuery`: one already checked as it is (trusted),
    anything else checked now.

    Raises:
        InvalidQueryError: ``query`` is not a string, or is blank.
    """
    return query if type(query) is CheckedQuery else CheckedQuery(query)


def check_k(k: Any) -> int:
    """Return ``k`` if it is an integer in [1, :data:`MAX_K`], else raise InputError."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {_short(k)}")
    if k > MAX_K:
        raise InputError(f"k must be at most {MAX_K}, got {_short(k)}")
    return k


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is an ``int`` or ``float`` (not a bool) with a finite float
    value: NaN, infinities and integers beyond the float range are not."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    real = as_real(value)
    return real is not None and math.isfinite(real)


def real_number(value: Any) -> float | None:
    """A number of any real kind as a float (``int``, ``float``, NumPy's ``float32``,
    ``int64`` ... : what frameworks hand over as scores), ``None`` for anything
    else (booleans, NumPy's too, strings, ``None``). It may be NaN or infinite:
    the caller's range check decides."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return as_real(value)


def as_real(value: Any) -> float | None:
    """``value`` as a float, ``None`` when it is not a real number.

    Booleans, strings, bytes and complex numbers are not real numbers here.
    An integer (or a ``Fraction``) beyond the float range is ``inf``, so the
    caller's "must be finite" check refuses it instead of an ``OverflowError``
    escaping.
    """
    if isinstance(value, bool | str | bytes | bytearray | complex):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf
    except (TypeError, ValueError):
        return None


def as_text(value: Any) -> str | None:
    """``str(value)`` (an id or a source given as a number, a UUID ...), or ``None``
    when the value cannot be written as text: an integer of more than 4,300
    digits (Python refuses to print it), or an object whose ``__str__`` raises."""
    if type(value) is str:
        return value
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - any failure to print is "not text"
        return None
