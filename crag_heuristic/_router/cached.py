"""Cache values are untrusted input: sealed on the way in, checked on the way out.

A cache shared over the network holds whatever was written to it: an entry
of another release or profile, a hand edit, a value cut short. So what the
flow stores is sealed with the key it was made for (:func:`seal`:
``{"key": <key>, "value": <value>}``), and what it reads back is opened
against what the reader expects before any of it is used:

* an evaluation (:func:`open_evaluation`): the fields of
  :meth:`Evaluation.to_dict` and no others, each of its type; scores,
  signals and similarities finite and in [0, 1]; features finite numbers
  named as the evidence registry names them; one grade per chunk, with the
  chunks' ids in their order; the evaluator's profile name; verdict bands
  that are the configuration's (or one of its fallbacks'), and verdicts
  that follow from the scores and those bands;
* web results (:func:`open_web_results`): a non-empty list of the dicts of
  :meth:`Chunk.to_dict`, each a valid chunk whose source is an http(s) URL,
  and no more of them than the key's ``max_results`` asked for;
* a cascade grader's answer (:func:`open_grade`): a number in [0, 1].

The key a value was sealed with must be the key it is read under: an entry
copied from another query, chunk list, profile or setting is refused even
when it is well formed. A well-formed lie (an IRRELEVANT evaluation rewritten
as RELEVANT 0.99, sealed with the right key) passes those checks: with a
secret (``CRAG(cache_secret=...)``) every value is also signed with
HMAC-SHA256 over its key, its expiry (its time to live from when it was
written) and its text (:mod:`crag_heuristic._cache.signing`), and one unsigned,
badly signed or expired (written back after its time to live) is refused before
it is read; an evaluation read again as the same text is not opened again, but
its expiry is checked again. Anything refused
raises :class:`CacheError` with ``kind="invalid"`` (``"payload"`` for text
that is not JSON, ``"signature"`` for a bad signature) and a message saying
what is wrong; the flow counts it as a miss (``cache_hit`` false,
``cache_error`` set), recomputes the value and overwrites the entry.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from .._cache.codec import dumps, loads, refusal
from .._cache.signing import Signer
from .._config import EvaluatorConfig, Thresholds
from .._evaluator.evaluator import verdict_for
from .._evidence import CHUNK_FEATURES
from .._exceptions import CacheError, InvalidChunkError, _short
from .._types import CHUNK_FIELDS, Chunk, ChunkEvaluation, Evaluation, Signals, Verdict
from .._web.urls import is_http_url

_BACKEND = "cache"
_SEAL_KEYS = frozenset({"key", "value"})
_EVALUATION_KEYS = frozenset(
    {"verdict", "score", "signals", "chunks", "reasoning", "profile", "details"}
)
_GRADE_KEYS = frozenset({"chunk_id", "score", "verdict", "signals", "similarity", "features"})
_SIGNAL_KEYS = frozenset(Signals.NAMES)
_CHUNK_KEYS = frozenset(CHUNK_FIELDS)
_FEATURES = frozenset(CHUNK_FEATURES)
_VERDICTS = {verdict.value: verdict for verdict in Verdict}
_INT_LIMIT = 2**1023  # an integer a float holds (JSON may hold any)


class _Invalid(Exception):
    """What is wrong with a cached value (becomes a CacheError)."""


def seal(key: str, value: Any, signer: Signer | None = None, ttl: float | None = None) -> str:
    """``value`` as the JSON text to store under ``key``, sealed with that key (and
    signed, with a ``signer``, to expire in ``ttl`` seconds: its time to live in the
    cache; ``None``: never).

    Raises:
        CacheError: ``kind="payload"`` when ``value`` is not JSON-serialisable
            (a web result's metadata holding a date, say): it is not stored.
    """
    text = dumps({"key": key, "value": value}, backend=_BACKEND, sort_keys=False)
    return text if signer is None else signer.sign(key, text, ttl)


def is_bad_value(outcome: Any) -> TypeGuard[CacheError]:
    """Whether a cache read's outcome is a refused value (not JSON, or invalid):
    the backend works, so the entry is recomputed and overwritten."""
    return (
        isinstance(outcome, CacheError)
        and outcome.kind in ("payload", "invalid", "signature")
        and outcome.operation in ("get", "decode")
    )


def _opened(text: Any, key: str, what: str, signer: Signer | None) -> Any:
    """The value sealed (and signed, with a ``signer``) in ``text`` for ``key``."""
    if not isinstance(text, str):
        raise _refused(what, f"the cache returned {type(text).__name__}, not JSON text")
    if signer is not None:
        text = signer.open(key, text)  # CacheError(kind="signature")
    data = loads(text, backend=_BACKEND)  # CacheError(kind="payload") if it is not JSON
    if not isinstance(data, dict) or data.keys() != _SEAL_KEYS:
        raise _refused(what, "not a sealed value {key, value}")
    if data["key"] != key:
        raise _refused(what, "made for another entry (another query, chunks or settings)")
    return data["value"]


def _refused(what: str, reason: str) -> CacheError:
    return refusal(f"the cached {what} was refused: {reason}", backend=_BACKEND, kind="invalid")


def open_evaluation(
    text: Any,
    key: str,
    chunks: Sequence[Chunk],
    config: EvaluatorConfig,
    signer: Signer | None = None,
) -> Evaluation:
    """The evaluation sealed in ``text`` for ``key``, checked against ``chunks`` (the
    chunks it must grade, in order) and ``config`` (the evaluator's).

    Raises:
        CacheError: ``kind="invalid"``, ``"payload"`` or ``"signature"``, saying
            what is wrong.
    """
    value = _opened(text, key, "evaluation", signer)
    try:
        return _evaluation(value, chunks, config)
    except _Invalid as exc:
        raise _refused("evaluation", str(exc)) from None


def _evaluation(data: Any, chunks: Sequence[Chunk], config: EvaluatorConfig) -> Evaluation:
    if type(data) is not dict or data.keys() != _EVALUATION_KEYS:
        raise _Invalid("not the fields of an evaluation")
    profile, reasoning, details = data["profile"], data["reasoning"], data["details"]
    if profile != config.name:
        raise _Invalid(f"made by profile {_short(profile)}, not {config.name!r}")
    if type(reasoning) is not str or type(details) is not dict:
        raise _Invalid("reasoning must be text and details an object")
    score = _unit(data["score"], "score")
    verdict = _verdict(data["verdict"], "verdict")
    bands = _bands(details.get("bands"), _set_bands(config), "bands")
    if verdict is not verdict_for(score, bands):
        raise _Invalid(f"verdict {verdict.value} does not follow from score {score}")
    grades = data["chunks"]
    if type(grades) is not list or len(grades) != len(chunks):
        found = len(grades) if isinstance(grades, list) else "no list of"
        raise _Invalid(f"{found} grade(s) for {len(chunks)} chunk(s)")
    checked = []
    if chunks:
        chunk_bands = _bands(details.get("chunk_bands"), _chunk_bands(config), "chunk_bands")
        for position, (grade, chunk) in enumerate(zip(grades, chunks, strict=True)):
            try:
                checked.append(_grade(grade, chunk.id, chunk_bands))
            except _Invalid as exc:
                raise _Invalid(f"grade {position}: {exc}") from None
    return Evaluation(
        verdict=verdict,
        score=score,
        signals=_signals(data["signals"]),
        chunks=tuple(checked),
        reasoning=reasoning,
        profile=profile,
        details=details,
    )


class OpenedEvaluations:
    """Evaluations this router opened or stored, by key, with the text they were read
    from or written as: a value read again as the same text is not parsed, checked
    nor verified again (the same text holds the same, already checked, content).

    Parsing and checking a cached evaluation cost as much as the evaluation it
    saved (issue 27); with the text compared whole (an identity test for a
    ``MemoryCache``, which hands back the string it was given; a comparison of
    bytes for Redis), a repeated hit is a copy of the evaluation. Each hit gets a
    copy of its own (its ``details`` and each grade's ``features`` are fresh,
    to their leaves), so what one caller does to its result never reaches
    another's. Bounded: emptied when it holds ``size`` entries.

    Args:
        size: the most evaluations remembered.
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._entries: dict[str, tuple[str, _Copier]] = {}

    def get(self, key: str, text: Any) -> Evaluation | None:
        """A copy of the evaluation remembered for ``key`` if it was read from or
        stored as ``text``, else ``None``."""
        entry = self._entries.get(key)
        if entry is None or (entry[0] is not text and entry[0] != text):
            return None
        return entry[1].copy()

    def put(self, key: str, text: str, evaluation: Evaluation) -> None:
        """Remember ``evaluation`` (a copy) as what ``text`` under ``key`` holds."""
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[key] = (text, _Copier(evaluation))


class _Copier:
    """Fresh copies of one evaluation: its mutable parts (the details and each grade's
    features) kept as one ``marshal`` blob, read back in C (a third of a copy in
    Python); signals and verdicts are immutable and shared. ``marshal`` reads
    only what was written here, in this process, never a stored value."""

    __slots__ = ("_blob", "_evaluation")

    def __init__(self, evaluation: Evaluation) -> None:
        self._evaluation = evaluation
        parts = (dict(evaluation.details), [dict(g.features) for g in evaluation.chunks])
        try:
            self._blob: bytes | None = marshal.dumps(parts)
        except ValueError:  # a value marshal does not write: copied in Python
            self._blob = None
        if self._blob is None:
            self._evaluation = copied(evaluation)

    def copy(self) -> Evaluation:
        if self._blob is None:
            return copied(self._evaluation)
        details, features = marshal.loads(self._blob)
        return _with_parts(self._evaluation, details, features)


def copied(evaluation: Evaluation) -> Evaluation:
    """``evaluation`` with fresh mutable parts: the details (copied to their leaves)
    and each grade's features. Signals and verdicts are immutable: shared."""
    features = [dict(grade.features) for grade in evaluation.chunks]
    return _with_parts(evaluation, _json_copy(evaluation.details), features)


def _with_parts(
    evaluation: Evaluation, details: dict[str, Any], features: Sequence[dict[str, Any]]
) -> Evaluation:
    """``evaluation`` with these details and these features, grade by grade."""
    return Evaluation(
        verdict=evaluation.verdict,
        score=evaluation.score,
        signals=evaluation.signals,
        chunks=tuple(
            ChunkEvaluation(
                chunk_id=grade.chunk_id,
                score=grade.score,
                verdict=grade.verdict,
                signals=grade.signals,
                similarity=grade.similarity,
                features=own,
            )
            for grade, own in zip(evaluation.chunks, features, strict=True)
        ),
        reasoning=evaluation.reasoning,
        profile=evaluation.profile,
        details=details,
    )


def _json_copy(value: Any) -> Any:
    """A copy of JSON-like data: new dicts and lists, the same scalars."""
    kind = type(value)
    if kind is dict or isinstance(value, Mapping):
        return {key: _json_copy(item) for key, item in value.items()}
    if kind is list:
        return [_json_copy(item) for item in value]
    return value


def _grade(data: Any, chunk_id: str, bands: Thresholds) -> ChunkEvaluation:
    if type(data) is not dict or data.keys() != _GRADE_KEYS:
        raise _Invalid("not the fields of a chunk grade")
    if data["chunk_id"] != chunk_id:
        raise _Invalid(f"for chunk {_short(data['chunk_id'])}, not {chunk_id!r}")
    score = _unit(data["score"], "score")
    verdict = _verdict(data["verdict"], "verdict")
    if verdict is not verdict_for(score, bands):
        raise _Invalid(f"verdict {verdict.value} does not follow from score {score}")
    similarity = data["similarity"]
    features = data["features"]  # a dict of its own (just parsed): checked in place
    if type(features) is not dict or not features.keys() <= _FEATURES:
        unknown = sorted(set(features) - _FEATURES) if type(features) is dict else None
        raise _Invalid(f"unknown features {unknown}" if unknown else "features are not an object")
    for name, value in features.items():
        if value is not None and (type(value) is not float or value - value != 0.0):
            if type(value) is not int or not -_INT_LIMIT < value < _INT_LIMIT:  # nor NaN, inf
                raise _Invalid(f"feature {name} is {_short(value)}, not a finite number")
            features[name] = float(value)
    return ChunkEvaluation(
        chunk_id=chunk_id,
        score=score,
        verdict=verdict,
        signals=_signals(data["signals"]),
        similarity=None if similarity is None else _unit(similarity, "similarity"),
        features=features,
    )


def _signals(data: Any) -> Signals:
    if type(data) is not dict or data.keys() != _SIGNAL_KEYS:
        raise _Invalid("signals are not the four named signals")
    values = [data[name] for name in Signals.NAMES]
    for value in values:  # the common case, cheaply: floats in [0, 1] or None
        if value is not None and not (type(value) is float and 0.0 <= value <= 1.0):
            values = [_optional_unit(data[name], name) for name in Signals.NAMES]
            break
    return Signals(*values)


def _optional_unit(value: Any, name: str) -> float | None:
    return None if value is None else _unit(value, name)


def _unit(value: Any, name: str) -> float:
    """``value`` as a float in [0, 1] (NaN and infinities fail the comparisons)."""
    if type(value) is float and 0.0 <= value <= 1.0:
        return value
    if type(value) is int and 0 <= value <= 1:
        return float(value)
    raise _Invalid(f"{name} is {_short(value)}, not a number in [0, 1]")


def _verdict(value: Any, where: str) -> Verdict:
    verdict = _VERDICTS.get(value) if isinstance(value, str) else None
    if verdict is None:
        raise _Invalid(f"{where} is {_short(value)}, not a verdict")
    return verdict


def _bands(value: Any, allowed: Sequence[Thresholds], where: str) -> Thresholds:
    """The verdict bands an evaluation records, if they are ones its configuration uses."""
    if isinstance(value, dict) and value.keys() >= {"relevant", "partial"}:
        for bands in allowed:
            if value["relevant"] == bands.relevant and value["partial"] == bands.partial:
                return bands
    raise _Invalid(f"{where} {_short(value, 60)} are not this configuration's")


def _set_bands(config: EvaluatorConfig) -> list[Thresholds]:
    """The set verdict bands ``config`` may use: its own, or a fallback gate's."""
    found = [config.thresholds]
    if config.model is not None:
        found += [fallback.thresholds or config.thresholds for fallback in config.model.fallbacks]
    return found


def _chunk_bands(config: EvaluatorConfig) -> list[Thresholds]:
    """The chunk verdict bands ``config`` may use (as the evaluator picks them)."""
    own = config.effective_chunk_thresholds
    found = [own]
    if config.model is not None:
        found += [
            fallback.chunk_thresholds or fallback.thresholds or own
            for fallback in config.model.fallbacks
        ]
    return found


def open_web_results(
    text: Any, key: str, max_results: int, signer: Signer | None = None
) -> list[Chunk]:
    """The web results sealed in ``text`` for ``key``: a non-empty list of at most
    ``max_results`` chunks (what the key asked for), each from an http(s) URL.

    Raises:
        CacheError: ``kind="invalid"``, ``"payload"`` or ``"signature"``, saying
            what is wrong.
    """
    value = _opened(text, key, "web results", signer)
    if not isinstance(value, list) or not value:
        raise _refused("web results", "not a non-empty list of results")
    if len(value) > max_results:
        raise _refused("web results", f"{len(value)} results under a key of {max_results}")
    chunks = []
    for position, item in enumerate(value):
        if not isinstance(item, dict) or item.keys() != _CHUNK_KEYS:
            raise _refused("web results", f"result {position} is not the fields of a chunk")
        try:
            chunk = Chunk.from_dict(item)
        except InvalidChunkError as exc:
            raise _refused("web results", f"result {position}: {exc}") from None
        if not is_http_url(chunk.source):
            raise _refused(
                "web results", f"result {position}'s source is not an http(s) URL with a host"
            )
        chunks.append(chunk)
    return chunks


def open_grade(text: Any, key: str, signer: Signer | None = None) -> float:
    """The grader's answer sealed in ``text`` for ``key``: P(relevant) in [0, 1].

    Raises:
        CacheError: ``kind="invalid"``, ``"payload"`` or ``"signature"``, saying
            what is wrong.
    """
    value = _opened(text, key, "grade", signer)
    try:
        return _unit(value, "the grade")
    except _Invalid as exc:
        raise _refused("grade", str(exc)) from None
