"""What grading cost: requests, retries, tokens and time, reported by the grader itself.

A grader answers one P(relevant) per chunk; that is all the cascade needs. A
grader that knows what an answer cost (an LLM behind an HTTP API: requests,
tokens from the response's ``usage``) may say so, with nothing asked of the
others:

* on success it returns a :class:`Graded` (a sequence of the grades, as
  before, with a :class:`GraderUsage` attached) instead of a plain list;
* on failure the :class:`~crag_heuristic.grading.GraderError` it raises
  carries the same in its ``usage`` attribute (a malformed answer still cost
  its tokens).

The cascade reads it with :func:`usage_of` and shows it on its report
(:attr:`CascadeReport.usage <crag_heuristic.grading.CascadeReport>`);
``None`` there means the grader did not say (or was not asked: every answer
came from the cache). The module imports nothing of the package: the errors
(:mod:`crag_heuristic._exceptions`, below everything) name its type.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload


@dataclass(frozen=True, slots=True)
class GraderUsage:
    """What one grading call cost (or, added up, many).

    Attributes:
        requests: requests sent (HTTP requests for an API; retries included).
        retries: how many of them were retries.
        prompt_tokens: input tokens, as the server counted them (its
            ``usage``; 0 when it does not say).
        completion_tokens: output tokens, likewise.
        ms: milliseconds the call took, from the grader's own clock (waits for
            a free slot and between retries included).
    """

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ms: float = 0.0

    @property
    def tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: GraderUsage) -> GraderUsage:
        if not isinstance(other, GraderUsage):
            return NotImplemented
        return GraderUsage(
            requests=self.requests + other.requests,
            retries=self.retries + other.retries,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            ms=self.ms + other.ms,
        )

    @classmethod
    def total(cls, usages: Iterable[GraderUsage | None]) -> GraderUsage:
        """The sum of ``usages`` (``None`` entries skipped), e.g. over many reports'
        ``usage``."""
        out = cls()
        for usage in usages:
            if usage is not None:
                out = out + usage
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``tokens`` included)."""
        return {
            "requests": self.requests,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens": self.tokens,
            "ms": self.ms,
        }


class Graded(Sequence[float]):
    """A grader's answer with its cost: the grades (a read-only sequence of
    floats, what :meth:`Grader.grade` returns) and :attr:`usage`.

    >>> answer = Graded([1.0, 0.0], GraderUsage(requests=1, prompt_tokens=90))
    >>> list(answer), answer.usage.tokens
    ([1.0, 0.0], 90)
    """

    __slots__ = ("_grades", "usage")

    def __init__(self, grades: Iterable[float], usage: GraderUsage) -> None:
        self._grades = tuple(grades)
        self.usage = usage

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...

    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        return self._grades[index]

    def __len__(self) -> int:
        return len(self._grades)

    def __iter__(self) -> Iterator[float]:
        return iter(self._grades)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Graded):
            return self._grades == other._grades and self.usage == other.usage
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self._grades) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Graded({list(self._grades)!r}, {self.usage!r})"


def usage_of(outcome: Any) -> GraderUsage | None:
    """The usage a grader reported with ``outcome`` (its answer, or the error it
    raised), else ``None``."""
    usage = getattr(outcome, "usage", None)
    return usage if isinstance(usage, GraderUsage) else None
