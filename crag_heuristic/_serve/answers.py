"""What the service answers: the JSON of a result, of an evaluation, and its bytes.

Two versions of the answers, each behind its own routes:

* ``/v1/...`` answers with everything the library's objects say:
  :meth:`CRAGResult.to_dict` (the final chunks, the first retrieval's, both
  evaluations with every chunk's grade, features and details) and
  :meth:`Evaluation.to_dict`. A chunk's text is there up to twice (final and
  retrieved), and so is the evaluation on the fast path: on SciFact (k = 10)
  about 48 KB, three times the chunks' texts.
* ``/v2/...`` answers with each chunk's text once (:func:`result_answer`): the
  final chunks, each with its grade (``{"score", "verdict"}``), its optional
  fields only when set and its document's own metadata (the retrievers'
  bookkeeping, :data:`BOOKKEEPING`, is v1's); the evaluation's summary
  (verdict, score, signals, reasoning, profile), the first one's (verdict,
  score); the first retrieval as ids; the refinement's context without its
  strips' texts; every flag, count, note and failure as v1 has them, a learning
  cascade's decision (``learning``) as v1 has it, the timings to the microsecond.
  ``"view": "grades"`` in the request leaves out every text and metadata (ids,
  scores and grades only). On SciFact (k = 10) a default answer is about 1.1
  times the chunks' texts.

The bytes (:func:`encode`): UTF-8 JSON, compact, by ``orjson`` where it is
installed (the ``serve`` extra installs it; several times faster than the
standard library on these answers), else by :mod:`json`; both give the same
JSON value (tests/serve/test_answers.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._evaluator.refine import Refinement
    from .._router.result import CRAGResult
    from .._types import Chunk, ChunkEvaluation, Evaluation

BOOKKEEPING = ("faiss_id", "raw_score", "metric", "rrf_score", "rrf_ranks")
"""The metadata keys the library's retrievers and fusion add to a chunk (its FAISS id, its
score before conversion and the metric, its fused score and ranks): in a v1 answer, not a
v2 one (whose chunks keep their documents' own metadata)."""

VIEWS = ("chunks", "grades")
"""What a v2 answer holds: ``chunks`` (the default: each chunk whole, its text once, with
its grade) or ``grades`` (ids, scores and grades only: no text, no metadata)."""


def _chunk(chunk: Chunk) -> dict[str, Any]:
    """A chunk as a v2 answer holds it: ``id``, ``text``, ``score``, ``score_kind``, and
    only when set ``source``, ``parent_id``, ``sentence_score`` and ``metadata`` (its
    document's own, without :data:`BOOKKEEPING`)."""
    entry: dict[str, Any] = {
        "id": chunk.id,
        "text": chunk.text,
        "score": chunk.score,
        "score_kind": chunk.score_kind.value,
    }
    for name in ("source", "parent_id", "sentence_score"):
        value = getattr(chunk, name)
        if value is not None:
            entry[name] = value
    metadata = {k: v for k, v in chunk.metadata.items() if k not in BOOKKEEPING}
    if metadata:
        entry["metadata"] = metadata
    return entry


def _grade(grade: ChunkEvaluation | None) -> dict[str, Any] | None:
    return None if grade is None else {"score": grade.score, "verdict": grade.verdict.value}


def _summary(evaluation: Evaluation, view: str) -> dict[str, Any]:
    """An evaluation without its per-chunk grades (on the chunks) and details."""
    out: dict[str, Any] = {"verdict": evaluation.verdict.value, "score": evaluation.score}
    if view == "chunks":
        out["signals"] = evaluation.signals.as_dict()
        out["reasoning"] = evaluation.reasoning
        out["profile"] = evaluation.profile
    return out


def refinement_answer(refinement: Refinement | None, view: str) -> dict[str, Any] | None:
    """The refinement's context and its strips, without the strips' texts (in the
    chunks already) or its chunks; ``None`` in the grades view."""
    if refinement is None or view != "chunks":
        return None
    return {
        "text": refinement.text,
        "tokens": refinement.tokens,
        "token_budget": refinement.token_budget,
        "threshold": refinement.threshold,
        "cut": refinement.cut,
        "strips": [
            {
                "chunk_id": strip.chunk_id,
                "index": strip.index,
                "score": strip.score,
                "tokens": strip.tokens,
                "kept": strip.kept,
            }
            for strip in refinement.strips
        ],
    }


def result_answer(result: CRAGResult, view: str = "chunks") -> dict[str, Any]:
    """The v2 answer of ``/v2/retrieve`` (and of ``/v2/stream``'s ``done`` event) for
    ``result``: each chunk's text once (see the module doc).

    Args:
        result: the router's result.
        view: ``"chunks"`` (each final chunk whole, with its grade) or
            ``"grades"`` (ids, scores and grades only).

    Raises:
        ValueError: an unknown ``view``.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {view!r}")
    grades = {grade.chunk_id: grade for grade in result.initial_evaluation.chunks}
    grades.update((grade.chunk_id, grade) for grade in result.evaluation.chunks)
    chunks = []
    for chunk in result.chunks:
        whole = view == "chunks"
        entry: dict[str, Any] = _chunk(chunk) if whole else {"id": chunk.id, "score": chunk.score}
        entry["grade"] = _grade(grades.get(chunk.id))
        chunks.append(entry)
    return {
        "query": result.query,
        "verdict": result.verdict.value,
        "strategy": result.strategy.value,
        "chunks": chunks,
        "evaluation": _summary(result.evaluation, view),
        "initial_evaluation": _summary(result.initial_evaluation, "grades"),
        "retrieved": [chunk.id for chunk in result.retrieved],
        "expanded_queries": list(result.expanded_queries),
        "web_query": result.web_query,
        "web_search_used": result.web_search_used,
        "web_error": result.web_error,
        "cache_hit": result.cache_hit,
        "web_cache_hit": result.web_cache_hit,
        "cache_error": result.cache_error,
        "parent_error": result.parent_error,
        "retries": result.retries,
        "corrected": result.corrected,
        "timings_ms": {stage: round(ms, 3) for stage, ms in result.timings_ms.items()},
        "counts": dict(result.counts),
        "notes": list(result.notes),
        "refinement": refinement_answer(result.refinement, view),
        "cascade": None if result.cascade is None else result.cascade.to_dict(),
        "grader_error": result.grader_error,
        "failures": [failure.to_dict() for failure in result.failures],
        "learning": None if result.learning is None else result.learning.to_dict(),
    }


def evaluation_answer(evaluation: Evaluation, view: str = "chunks") -> dict[str, Any]:
    """The v2 answer of ``/v2/evaluate``: the evaluation's summary (see
    :func:`result_answer`) and each chunk's grade by id.

    Raises:
        ValueError: an unknown ``view``.
    """
    if view not in VIEWS:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, got {view!r}")
    return {
        **_summary(evaluation, view),
        "chunks": [{"id": grade.chunk_id, "grade": _grade(grade)} for grade in evaluation.chunks],
    }


def _stdlib(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), check_circular=False).encode(
        "utf-8"
    )


@functools.cache
def _encoder() -> Callable[[Any], bytes]:
    """``orjson.dumps`` (keys that are not strings written as strings, as :mod:`json`
    does) falling back to :mod:`json` for what it refuses (an integer past 64 bits), or
    :mod:`json` alone without ``orjson``."""
    try:
        import orjson
    except ImportError:
        return _stdlib
    dumps, option = orjson.dumps, orjson.OPT_NON_STR_KEYS

    def fast(data: Any) -> bytes:
        try:
            return dumps(data, option=option)
        except TypeError:
            return _stdlib(data)

    return fast


def encode(data: Any) -> bytes:
    """``data`` as compact UTF-8 JSON bytes (``orjson`` where installed, see the module doc)."""
    return _encoder()(data)


def answer_of(version: int, view: str) -> Callable[[CRAGResult], Mapping[str, Any]]:
    """How a route of ``version`` writes a result: v1 ``to_dict``, v2 :func:`result_answer`."""
    if version == 1:
        return lambda result: result.to_dict()
    return lambda result: result_answer(result, view)
