"""What a query expander returns (the protocol the router calls,
:class:`~crag_heuristic._protocols.QueryExpander`, is with the other seams).

When the evaluator says PARTIAL, the router asks a query expander for
a few extra queries, retrieves with each and fuses the rankings (the original
one included) with Reciprocal Rank Fusion. Two expanders ship:

* :class:`~crag_heuristic._expansion.expander.SynonymExpander` adds synonyms
  from curated and WordNet synonym files (no corpus needed);
* :class:`~crag_heuristic._expansion.prf.PRFExpander` adds terms from the
  top chunks of the first retrieval (pseudo-relevance feedback, RM3 style).

Both return an :class:`Expansion`: the extra queries (never the original),
what was added and why, in a deterministic order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._exceptions import InputError, _short


def _text(value: Any) -> str:
    """A string of an expansion, as a plain ``str``.

    Raises:
        TypeError: ``value`` is not a string.
    """
    if not isinstance(value, str):
        raise TypeError(f"{_short(value)} is not a string")
    return str.__str__(value)


@dataclass(frozen=True, slots=True)
class Expansion:
    """The result of expanding one query.

    Attributes:
        original: the query as passed in.
        queries: the extra queries to retrieve with, best first, without the
            original and without duplicates; empty when nothing was found to
            add (the router then records that the expansion was a no-op).
        added: what was added, in query order: ``(matched term, synonyms
            used)`` pairs for ``"synonyms"``; one ``(original query, feedback
            terms)`` pair for ``"prf"``.
        method: ``"synonyms"`` or ``"prf"`` for the shipped expanders.
        weights: ``(term, weight)`` of each added term when the method weighs
            them (PRF), best first; empty otherwise.
    """

    original: str
    queries: tuple[str, ...] = ()
    added: tuple[tuple[str, tuple[str, ...]], ...] = ()
    method: str = "synonyms"
    weights: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.original, str):
            raise InputError(f"Expansion.original must be a string, got {_short(self.original)}")
        if not isinstance(self.method, str) or not self.method:
            raise InputError(
                f"Expansion.method must be a non-empty string, got {_short(self.method)}"
            )
        try:
            queries = tuple(_text(q) for q in self.queries)
            added = tuple((_text(term), tuple(map(_text, used))) for term, used in self.added)
            weights = tuple((_text(term), float(w)) for term, w in self.weights)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InputError(
                "Expansion.queries must hold strings, added (term, terms) pairs and weights "
                f"(term, number) pairs: {type(exc).__name__}: {exc}"
            ) from None
        object.__setattr__(self, "original", str.__str__(self.original))  # a plain str
        object.__setattr__(self, "queries", queries)
        object.__setattr__(self, "added", added)
        object.__setattr__(self, "weights", weights)

    @property
    def expanded(self) -> bool:
        """True when there is at least one extra query."""
        return bool(self.queries)

    @property
    def terms(self) -> tuple[str, ...]:
        """Every added term (synonym or feedback term), in order, without duplicates."""
        return tuple(dict.fromkeys(term for _, used in self.added for term in used))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reverses it."""
        return {
            "original": self.original,
            "queries": list(self.queries),
            "added": [{"term": term, "synonyms": list(used)} for term, used in self.added],
            "method": self.method,
            "weights": [{"term": term, "weight": weight} for term, weight in self.weights],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Expansion:
        """Build an expansion from a dict of :meth:`to_dict`'s shape."""
        try:
            return cls(
                original=data["original"],
                queries=tuple(data.get("queries", ())),
                added=tuple(
                    (item["term"], tuple(item["synonyms"])) for item in data.get("added", ())
                ),
                method=data.get("method", "synonyms"),
                weights=tuple((item["term"], item["weight"]) for item in data.get("weights", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not an Expansion dict: {exc!r}") from exc
