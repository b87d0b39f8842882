"""Parent expansion: an ambiguous chunk is re-graded as its parent, which replaces it
when it grades better.

Small-to-big retrieval: a corpus is indexed in small chunks (they match a
query sharply) that know the larger section they come from
(:attr:`Chunk.parent_id`). Seed 000 of this project, after the CRAG paper's
"ambiguous" action (Yan et al., 2024), asks for the step between them: a chunk
the gate grades PARTIAL on its own may be a fragment of an answer, so it is
graded again as its parent, and the parent is kept only where it grades
better::

    candidates = the parents of final chunks graded PARTIAL on their own
                 (every graded chunk of that parent is one of its children)
    parents    = lookup.get(parent_id) for each distinct parent      (I/O: a flow request)
    trial      = the final list, each candidate replaced by its parent
    grade      = evaluator.evaluate(query, trial)                    (one evaluation)
    keep a parent where grade(parent) > grade(its best child),
        best gain first, while the extra tokens stay within parent_token_budget
    final      = the list with the kept parents (their other children removed),
                 evaluated again when not every parent was kept

A parent carries its best-ranked child's retrieval score and score kind: the
retriever never scored the parent, so the grade changes through the text's
evidence (keyword overlap, lexical contrast, length), not through a
similarity nobody measured. Tokens are estimated as the evaluator does
(words x ``length.tokens_per_word``).

Nothing here fails a query: a parent that is not found is a note and the chunk
stays; a lookup that raises (or returns something that is not a parent) is a
note and a failure on the result (``parent_error``; a
:class:`~crag_heuristic.ParentLookupError` when the lookup raised), and the
chunk stays.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._checks import CheckedQuery
from .._documents import to_chunk
from .._exceptions import CragError, ParentLookupError
from .._failures import FailureStage
from .._types import Chunk, Evaluation, Verdict

if TYPE_CHECKING:
    from .context import Context


@dataclass(frozen=True, slots=True)
class ParentGet:
    """Ask the parents ``lookup`` for the chunk ``parent_id`` names (``None``: not found)."""

    parent_id: str
    lookup: Any


def parent_chunk(value: Any, parent_id: str, children: Sequence[Chunk]) -> Chunk | None:
    """The lookup's answer for ``parent_id`` as a chunk, or ``None`` when it has none.

    The answer may be a :class:`Chunk`, a mapping or a string (as a docstore
    entry, see ``crag_heuristic._documents``). The parent takes the
    score and kind of its first child (the best ranked), the child's source when it has none of its
    own, and lists the children in ``metadata["children"]``.

    Raises:
        CragError: an answer of an unusable type, or one without text.
    """
    if value is None:
        return None
    best = children[0]
    parent = to_chunk(
        value,
        default_id=parent_id,
        score=best.score,
        score_kind=best.score_kind,
        extra_metadata={"children": [c.id for c in children]},
        retriever="parents",
    )
    if parent.source is None and best.source is not None:
        parent = parent.replace(source=best.source)
    return parent


def lookup_error(error: BaseException, parent_id: str) -> CragError:
    """What the parents lookup raised for ``parent_id``, as a :class:`CragError`: one
    of the library's own as it is, else a :class:`ParentLookupError` naming the
    parent, the lookup's exception its ``__cause__`` (and the name it shows under)."""
    if isinstance(error, CragError):
        return error
    name = type(error).__name__
    wrapped = ParentLookupError(str(error), parent_id=parent_id, cause_type=name)
    wrapped.__cause__ = error
    return wrapped


def _tokens(ctx: Context, text: str) -> float:
    per_word = ctx.evaluator.config.length.tokens_per_word
    return ctx.evaluator.analyzer.analyze(text).n_tokens * per_word


def expand_parents(
    ctx: Context, query: CheckedQuery, chunks: list[Chunk], evaluation: Evaluation
) -> Generator[list[Any], list[Any], tuple[list[Chunk], Evaluation]]:
    """Replace the chunks graded PARTIAL by their parents where the parents grade
    better (see the module doc); returns the final chunks and their evaluation."""
    grades = {grade.chunk_id: grade for grade in evaluation.chunks}
    siblings: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        if chunk.parent_id is not None and chunk.id in grades:
            siblings.setdefault(chunk.parent_id, []).append(chunk)
    present = {chunk.id for chunk in chunks}
    children = {
        parent_id: group
        for parent_id, group in siblings.items()
        if parent_id not in present  # the parent is in the list already
        and any(grades[c.id].verdict is Verdict.PARTIAL for c in group)
    }
    if not children:
        return chunks, evaluation

    started = time.perf_counter()
    outcomes = yield [ParentGet(parent_id, ctx.parents) for parent_id in children]
    ctx.timed("parents", started)
    parents: dict[str, Chunk] = {}
    for parent_id, outcome in zip(children, outcomes, strict=True):
        ids = ", ".join(c.id for c in children[parent_id])
        if isinstance(outcome, BaseException):
            failure = ctx.failed(FailureStage.PARENTS, lookup_error(outcome, parent_id))
            ctx.notes.append(
                f"the parents lookup failed for {parent_id!r} ({failure.text}): chunk {ids} stays"
            )
            continue
        try:
            parent = parent_chunk(outcome, parent_id, children[parent_id])
        except CragError as exc:
            failure = ctx.failed(FailureStage.PARENTS, exc)
            ctx.notes.append(f"unusable parent {parent_id!r} ({failure.text}): chunk {ids} stays")
            continue
        if parent is None:
            ctx.counts["parents_missing"] = ctx.counts.get("parents_missing", 0) + 1
            ctx.notes.append(f"parent {parent_id!r} not found: chunk {ids} stays")
            continue
        if parent.id in present:
            continue
        parents[parent_id] = parent
    ctx.counts["parents_fetched"] = len(parents)
    if not parents:
        return chunks, evaluation

    trial = _replace(chunks, parents)
    trial_eval = ctx.evaluate(query, trial, "parent_evaluate")
    trial_grades = {grade.chunk_id: grade for grade in trial_eval.chunks}
    gains = []
    for parent_id, parent in parents.items():
        before = max(grades[c.id].score for c in children[parent_id])
        after_grade = trial_grades.get(parent.id)
        if after_grade is None:  # beyond gate_k: not graded
            continue
        if after_grade.score > before:
            extra = _tokens(ctx, parent.text) - sum(
                _tokens(ctx, c.text) for c in chunks if c.parent_id == parent_id
            )
            gains.append((after_grade.score - before, parent_id, before, after_grade.score, extra))
        else:
            ctx.notes.append(
                f"parent {parent_id!r} graded no better ({after_grade.score:.2f} <= "
                f"{before:.2f}): its chunk stays"
            )
    budget = float(ctx.config.parent_token_budget)
    used = 0.0
    kept: dict[str, Chunk] = {}
    for _, parent_id, before, after, extra in sorted(gains, key=lambda g: (-g[0], g[1])):
        if used + max(extra, 0.0) > budget:
            ctx.counts["parents_over_budget"] = ctx.counts.get("parents_over_budget", 0) + 1
            ctx.notes.append(
                f"parent {parent_id!r} grades better ({before:.2f} -> {after:.2f}) but its "
                f"{extra:.0f} more tokens exceed the parent budget ({budget - used:.0f} left): "
                "its chunk stays"
            )
            continue
        used += max(extra, 0.0)
        kept[parent_id] = parents[parent_id]
        ids = ", ".join(c.id for c in children[parent_id])
        ctx.notes.append(
            f"chunk {ids} replaced by its parent {parent_id!r} (grade {before:.2f} -> {after:.2f})"
        )
    ctx.counts["parents_used"] = len(kept)
    if not kept:
        return chunks, evaluation
    if len(kept) == len(parents):
        return trial, trial_eval
    final = _replace(chunks, kept)
    return final, ctx.evaluate(query, final, "parent_evaluate")


def _replace(chunks: Sequence[Chunk], parents: Mapping[str, Chunk]) -> list[Chunk]:
    """``chunks`` with each parent in place of its first child, its other children removed."""
    out: list[Chunk] = []
    placed: set[str] = set()
    for chunk in chunks:
        parent_id = chunk.parent_id
        if parent_id is not None and parent_id in parents:
            if parent_id not in placed:
                placed.add(parent_id)
                out.append(parents[parent_id])
            continue
        out.append(chunk)
    return out
